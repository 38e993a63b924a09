"""The declared floor of the libraries tuneloop stands on is what CI tests: pyproject.toml's lower bounds for
transformers, datasets and accelerate are the versions constraints.txt pins for the README's set-up command, and
the installed ones are not below them."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PINNED = ("transformers", "datasets", "accelerate")


def floors() -> dict[str, Version]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return {name: Version(re.search(rf'"{name}>=([0-9.]+)"', text).group(1)) for name in PINNED}


def pins() -> dict[str, Version]:
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    found = dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))
    return {name: Version(found[name]) for name in PINNED}


def test_the_declared_floor_is_the_tested_version():
    assert floors() == pins()


def test_the_set_up_command_uses_the_pins_and_they_are_installed():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = next(line for line in readme.splitlines() if "pip install" in line and "[test]" in line)
    assert "-c constraints.txt" in setup
    assert all(Version(version(name)) >= floor for name, floor in floors().items())
