"""The benchmark scripts are run by hand (and on a lent GPU, where a script that does not parse wastes the session's
device minutes): each must at least parse, the Python programs they hand to child processes as strings included, and
the shell scripts must pass `bash -n`."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))
SHELL = sorted(BENCHMARKS.glob("*.sh"))


def child_programs(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = r\"\"\"...\"\"\" strings that hold Python run with `python -c` (they import something)."""
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                and node.targets[0].id.isupper() and "\nimport " in "\n" + node.value.value):
            found[node.targets[0].id] = node.value.value
    return found


def test_there_are_scripts():
    assert len(SCRIPTS) > 10 and SHELL


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_and_its_child_programs_parse(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for name, code in child_programs(tree).items():
        ast.parse(code, filename=f"{path.name}:{name}")


def test_child_programs_are_found():
    tree = ast.parse((BENCHMARKS / "gpu_infer.py").read_text(encoding="utf-8"))
    assert "CHILD" in child_programs(tree)


@pytest.mark.parametrize("path", SHELL, ids=lambda p: p.name)
def test_shell_script_parses(path):
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
