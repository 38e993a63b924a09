"""The house rules of ARCHITECTURE.md, checked: imports point down the layers and never form a cycle, no module
is longer than 400 lines, importing tuneloop changes nothing in the process, and the training loop shows each
decision that writes a file or ends the run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tuneloop"

# the layers of ARCHITECTURE.md, bottom first; a module imports only from its own layer or those below
LAYERS = [
    ["version", "errors", "atomic", "system", "tasks", "values", "config", "flags", "resolve", "sample_data"],
    ["data", "data.readers", "data.sources", "data.labels", "data.split", "data.balance", "data.long_texts",
     "data.tokenize", "data.batching", "data.prepare", "model", "onnx_backend", "losses", "metrics", "decision",
     "speed", "tracking"],
    ["evaluation", "calibrate", "predictions", "failures", "label_issues", "state", "checkpoint", "runfolder",
     "signals", "scope", "report", "report.run", "report.fmt", "report.figures", "report.prediction_plots",
     "report.decision_plots", "report.sections", "report.summary", "report.search_page",
     "report.page", "report.card"],
    ["setup", "outputs"],
    ["loop"],
    ["predict", "launch", "envinfo", "experiments", "folds", "search", "export", "serve", "cli", "__main__",
     "__init__"],
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def internal_imports(path: Path) -> set[str]:
    """The tuneloop modules a file imports anywhere (module level and inside functions)."""
    name = module_name(path)
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    if name == "__init__":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1] if node.level > 1 else package
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                candidate = f"{target}.{alias.name}" if target else alias.name
                found.add(candidate if candidate in LAYER else target)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tuneloop"):
            found.add(node.module.removeprefix("tuneloop").lstrip(".") or "__init__")
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("tuneloop.") for a in node.names if a.name.startswith("tuneloop.")}
    return {m for m in found if m and m != name}


def graph() -> dict[str, set[str]]:
    return {module_name(p): internal_imports(p) for p in PACKAGE.rglob("*.py")}


def test_every_module_has_a_layer():
    assert set(graph()) == set(LAYER), "add new modules to LAYERS here and to ARCHITECTURE.md"


def test_imports_point_down_the_layers():
    wrong = [f"{m} (layer {LAYER[m]}) imports {t} (layer {LAYER[t]})"
             for m, targets in graph().items() for t in targets if t in LAYER and LAYER[t] > LAYER[m]]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in edges.get(node, ()):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            if nxt in edges and not state.get(nxt):
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in edges:
        if not state.get(node):
            visit(node)


def test_the_cycle_check_finds_a_cycle(tmp_path, monkeypatch):
    """The check itself can fail: a planted mutual import is reported."""
    (tmp_path / "tasks.py").write_text("from .errors import TuneloopError\n")
    (tmp_path / "errors.py").write_text("def f():\n    from .tasks import TASKS\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="import cycle"):
        test_no_import_cycle()


def test_no_module_is_longer_than_400_lines():
    long = {module_name(p): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert not long


def test_importing_tuneloop_changes_nothing_in_the_process():
    script = """
import csv, logging, os, pkgutil, importlib
os.umask(0o027)
env, limit, handlers = dict(os.environ), csv.field_size_limit(), list(logging.getLogger().handlers)
import tuneloop
for info in pkgutil.walk_packages(tuneloop.__path__, "tuneloop."):
    if info.name != "tuneloop.__main__":
        importlib.import_module(info.name)
assert os.umask(0o027) == 0o027, "umask"
assert csv.field_size_limit() == limit, "csv field size limit"
assert dict(os.environ) == env, "environment"
assert list(logging.getLogger().handlers) == handlers, "root logging"
print("unchanged")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "unchanged" in out.stdout, out.stderr[-2000:]


def test_the_loop_shows_each_decision_that_writes_a_file_or_ends_the_run():
    tree = ast.parse((PACKAGE / "loop.py").read_text())
    decisions = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            body = ast.unparse(ast.Module(body=node.body, type_ignores=[]))
            decisions.append((ast.unparse(node.test), body))

    def decided(test_part: str, action: str) -> bool:
        return any(test_part in test and action in body for test, body in decisions)

    assert decided("eval_due", "evaluate(")
    assert decided("record_evaluation", "save_model_folder(r, 'best')")
    assert decided("patience_exhausted", "early_stopping")
    assert decided("checkpoint_due", "save_checkpoint(")
    assert decided("signal_number", "raise Interrupted")
    assert decided("isfinite", "raise NonFiniteLoss")
    assert decided("stopping", "break")
    assert len((PACKAGE / "loop.py").read_text().splitlines()) <= 120
