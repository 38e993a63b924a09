"""`pip install tuneloop` without extras: the core trains, evaluates, predicts and loads a model; a command that
needs an extra stops with one line naming the `pip install "tuneloop[...]"` command. The optional packages are
made unimportable in a fresh interpreter (`sys.modules[name] = None`: `import` fails, `find_spec` says absent),
as they are in a venv without the extras."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import fast_options

OPTIONAL = ["onnx", "onnxruntime", "fastapi", "uvicorn", "starlette", "optuna", "psycopg", "peft", "openpyxl"]

SCRIPT = """
import json, sys
for name in {optional!r}:
    sys.modules[name] = None
from tuneloop.cli import main
codes = {{}}
codes["train"] = main({train!r})
codes["evaluate"] = main(["evaluate", "--model", {model!r}, "--quiet"])
codes["predict"] = main(["predict", "--model", {model!r}, "the cat sat", "a alpha cat"])
import tuneloop
with tuneloop.load({run!r}) as clf:
    codes["load"] = clf.predict(("the cat sat", "a alpha cat"))["label"]
codes["serve"] = main(["serve", {model!r}])
codes["export"] = main(["export", {run!r}, "--output", {export!r}])
codes["search"] = main(["search", "--space", "space.yaml", "--output-dir", {search!r}])
codes["lora"] = main({train!r}[:-2] + ["--output-dir", {lora!r}, "--lora"])
codes["excel"] = main(["train", "--train-file", {xlsx!r}, "--model", {tiny!r}, "--output-dir", {lora!r}])
loaded = sorted(name for name in {optional!r} if sys.modules.get(name) is not None)
print("RESULT " + json.dumps({{"codes": codes, "loaded": loaded}}))
"""


def test_the_core_works_without_extras_and_commands_name_their_extra(tiny_model, shared_mrpc_dir, tmp_path):
    run = tmp_path / "run"
    options = fast_options(tiny_model, data_dir=str(shared_mrpc_dir), task="mrpc", epochs=1, output_dir=str(run))
    train = ["train"] + [part for key, value in options.items() for part in
                         ([f"--{key.replace('_', '-')}"] if value is True else
                          [f"--no-{key.replace('_', '-')}"] if value is False else
                          [f"--{key.replace('_', '-')}", str(value)])]
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["text", "label"])
    book.active.append(["the cat", "a"])
    book.save(tmp_path / "rows.xlsx")
    script = SCRIPT.format(optional=OPTIONAL, train=train, model=str(run / "model"), run=str(run),
                           export=str(tmp_path / "onnx"), search=str(tmp_path / "search"),
                           lora=str(tmp_path / "lora"), xlsx=str(tmp_path / "rows.xlsx"), tiny=tiny_model)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    codes = result["codes"]
    assert codes["train"] == codes["evaluate"] == codes["predict"] == 0
    assert codes["load"] in ("equivalent", "not_equivalent")
    assert codes["serve"] == codes["export"] == codes["search"] == codes["lora"] == codes["excel"] == 2
    assert result["loaded"] == []
    for extra in ("serve", "export", "search", "lora", "excel"):
        assert f'pip install "tuneloop[{extra}]"' in out.stderr
    assert "Traceback" not in out.stderr
    assert not any((tmp_path / name).exists() for name in ("onnx", "search", "lora"))
