"""Shipping the model: ONNX export (fp32 equal to PyTorch, int8 behind an accuracy gate), predict/evaluate on the
exported folder, and `tuneloop serve` (a real uvicorn server on 127.0.0.1) with dynamic batching, 4xx for bad
requests, and draining on SIGTERM."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import fast_options, write_mrpc_folder

import tuneloop
from tuneloop.cli.main import main
from tuneloop.deploy import export as export_module
from tuneloop.model.onnx_model import OnnxModel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tiny_model, tmp_path_factory):
    data = write_mrpc_folder(tmp_path_factory.mktemp("ship") / "MRPC")
    out = tmp_path_factory.mktemp("ship-run") / "run"
    tuneloop.train(**fast_options(tiny_model), task="mrpc", data_dir=str(data), output_dir=str(out))
    return out


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory):
    target = tmp_path_factory.mktemp("onnx") / "fp32"
    assert main(["export", str(run_dir), "--output", str(target), "--quiet"]) == 0
    return target


def test_fp32_export_gives_pytorchs_logits(run_dir, exported):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(run_dir / "model")
    model = AutoModelForSequenceClassification.from_pretrained(run_dir / "model").eval()
    batch = tok(["alpha cat dog", "beta", "red green blue bird fish"], ["the alpha", "cat beta dog", "x"],
                padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).logits.numpy()
    got = OnnxModel(exported)(**batch).logits.numpy()
    assert np.abs(got - expected).max() < 1e-4
    report = json.loads((exported / "export_report.json").read_text())
    assert report["gate"]["verdict"] == "pass" and report["gate"]["max_logit_difference"] < 1e-4
    assert report["gate"]["pytorch"]["accuracy"] == pytest.approx(report["gate"]["exported"]["accuracy"])
    meta = json.loads((exported / "tuneloop.json").read_text())
    assert meta["export"]["format"] == "onnx" and "decision" in meta and "labels" in meta


def test_evaluate_and_predict_take_the_exported_folder(run_dir, exported, tmp_path):
    a, b = tmp_path / "torch.json", tmp_path / "onnx.json"
    assert main(["evaluate", "--model", str(run_dir / "model"), "--output", str(a), "--quiet"]) == 0
    assert main(["evaluate", "--model", str(exported), "--output", str(b), "--quiet"]) == 0
    ours, theirs = json.loads(a.read_text()), json.loads(b.read_text())
    for key in ("accuracy", "f1", "loss"):
        assert theirs["eval"][key] == pytest.approx(ours["eval"][key], abs=1e-4)
    assert theirs["decision_rule"] == ours["decision_rule"]
    for precision in ("bf16", "int8"):                  # an exported folder computes as exported: was ignored
        with pytest.raises(tuneloop.TuneloopError, match=rf"--precision {precision}: .* is an exported ONNX model"):
            tuneloop.load(exported, precision=precision)


def test_int8_quantization_leaves_the_callers_logging_unconfigured(run_dir, tmp_path):
    """ONNX Runtime's quantizer logs through logging.info(), which runs logging.basicConfig() on a root logger
    with no handler: after an export, the caller's own basicConfig(level=INFO) did nothing. A fresh process (pytest
    gives the root handlers of its own)."""
    script = (
        "import logging\n"
        "from tuneloop.deploy.export import export_model\n"
        f"export_model({str(run_dir)!r}, {str(tmp_path / 'int8')!r}, 'int8', 0.5, False, True)\n"
        "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n"
        "logging.basicConfig(level=logging.INFO, format='mine %(message)s')\n"
        "logging.getLogger('app').info('configured')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mine configured" in done.stderr and (tmp_path / "int8" / "model.onnx").is_file()


def test_int8_export_and_the_gate(run_dir, tmp_path, monkeypatch, capsys):
    target = tmp_path / "int8"
    assert main(["export", str(run_dir), "--output", str(target), "--quantize", "int8", "--quiet"]) == 0
    report = json.loads((target / "export_report.json").read_text())
    assert report["quantize"] == "int8" and report["gate"]["rows"] == 60
    assert "gate on 60 validation rows" in capsys.readouterr().out
    real = export_module.evaluation

    main_metric = report["gate"]["main_metric"]

    def worse(clf, overrides, output=None, raw=False):     # the exported model scores 2 points lower
        results, evaluation = real(clf, overrides, output, raw)
        if clf.backend == "onnx":
            split = next(iter(evaluation.metrics))
            evaluation.metrics[split] = {**evaluation.metrics[split],
                                         main_metric: evaluation.metrics[split][main_metric] - 0.02}
        return results, evaluation

    monkeypatch.setattr(export_module, "evaluation", worse)
    refused = tmp_path / "refused"
    assert main(["export", str(run_dir), "--output", str(refused), "--quantize", "int8", "--quiet"]) == 2
    assert f"export refused: {main_metric}" in capsys.readouterr().err and not refused.exists()
    assert main(["export", str(run_dir), "--output", str(refused), "--quantize", "int8", "--quiet",
                 "--allow-drop", "0.001"]) == 2                         # a tiny allowed drop, exceeded
    assert not refused.exists()
    assert main(["export", str(run_dir), "--output", str(refused), "--quiet", "--allow-drop", "3"]) == 0
    assert json.loads((refused / "export_report.json").read_text())["gate"]["verdict"] == "warn"


def test_export_and_predict_never_replace_the_model_or_the_users_files(run_dir, tmp_path, capsys):
    """--overwrite replaced the model folder with its export, a folder of the user's files with an export, and
    predict's input file with predictions (its texts gone)."""
    weights = (run_dir / "model" / "model.safetensors").read_bytes()
    for target in (run_dir / "model", run_dir):
        assert main(["export", str(run_dir), "--output", str(target), "--overwrite", "--quiet"]) == 2
        assert "holds the model being exported" in capsys.readouterr().err
    for inside, said in ((run_dir / "model" / "onnx", "is in the saved model folder"),
                         (run_dir / "predictions" / "onnx", "is in the run's own predictions/ folder")):
        assert main(["export", str(run_dir), "--output", str(inside), "--quiet"]) == 2
        assert said in capsys.readouterr().err and not inside.exists()
    for drop in ("-1", "nan", "inf"):                                  # nan passed every gate
        assert main(["export", str(run_dir), "--output", str(tmp_path / "x"), "--allow-drop", drop]) == 2
        assert f"--allow-drop: a number of points, at least 0 (0.5 is the default), got {float(drop)}" in \
            capsys.readouterr().err
    assert (run_dir / "model" / "model.safetensors").read_bytes() == weights
    notes = tmp_path / "mine" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("precious")
    assert main(["export", str(run_dir), "--output", str(notes.parent), "--overwrite", "--quiet"]) == 2
    assert "is not one (it holds notes.txt)" in capsys.readouterr().err and notes.read_text() == "precious"
    again = tmp_path / "again"
    for _ in range(2):                                                 # an earlier export is replaced
        assert main(["export", str(run_dir), "--output", str(again), "--overwrite", "--quiet"]) == 0
    data = tmp_path / "rows.csv"
    data.write_text("sentence1,sentence2\nthe cat,the dog\n")
    for output in (data, tmp_path / "." / "rows.csv"):
        assert main(["predict", "--model", str(run_dir), "--input", str(data), "--output", str(output),
                     "--overwrite", "--quiet"]) == 2
        assert "is the --input file" in capsys.readouterr().err
    assert data.read_text() == "sentence1,sentence2\nthe cat,the dog\n"
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("sentence1,sentence2,label\nthe cat,the dog,1\n")
    assert main(["evaluate", "--model", str(run_dir), "--validation-file", str(labelled), "--output",
                 str(labelled), "--quiet"]) == 2                     # the metrics JSON replaced the rows
    assert "is the --validation-file whose rows are evaluated" in capsys.readouterr().err
    assert labelled.read_text() == "sentence1,sentence2,label\nthe cat,the dog,1\n"
    assert main(["evaluate", str(run_dir), "--output", str(tmp_path / "first.json"), "--quiet"]) == 0   # as export
    assert json.loads((tmp_path / "first.json").read_text())["eval"]["num_samples"] > 0             # takes it
    assert main(["predict", "--model", str(run_dir), "the cat", " "]) == 2            # said as "texts[0], row 1"
    assert "the second text is empty; quote the example's text(s)" in capsys.readouterr().err
    assert main(["predict", "--model", str(run_dir), "--input", str(tmp_path)]) == 2   # said "no such file"
    assert f"--input {tmp_path}: is a folder; give the file to label" in capsys.readouterr().err
    for name, glue, said in (("p.txt", [], "use a .csv, .tsv, .jsonl or .xlsx file name"),      # said after predicting
                             ("p.csv", ["--glue"], "--glue writes GLUE's tab-separated submission file; name it")):
        assert main(["predict", "--model", str(run_dir), "--input", str(data), "--output", str(tmp_path / name),
                     *glue, "--quiet"]) == 2                              # a .csv name got tabs with --glue
        assert said in capsys.readouterr().err and not (tmp_path / name).exists()
    assert main(["evaluate", "--quiet"]) == 2
    assert "give the model folder once, as RUN_OR_MODEL or --model DIR" in capsys.readouterr().err
    assert main(["predict", "--model", str(run_dir), "--input", str(data), "--batch-size", "0"]) == 2
    assert "--batch-size: must be at least 1, got 0" in capsys.readouterr().err
    blocker = tmp_path / "afile"                 # a file where a folder of the output goes: a traceback each
    blocker.write_text("mine")
    for argv in (["predict", "--model", str(run_dir), "--input", str(data)], ["evaluate", "--model", str(run_dir)],
                 ["export", str(run_dir)]):
        assert main([*argv, "--output", str(blocker / "out" / "x.tsv"), "--quiet"]) == 2
        assert f"{blocker} is a file, not a folder" in capsys.readouterr().err
    from tuneloop.predict import evaluate as evaluate_module

    classifier = tuneloop.load(run_dir)
    read = []
    original = classifier.run
    classifier.run = lambda *a, **k: read.append(1) or original(*a, **k)
    for call in (lambda out: classifier.evaluate(output=out),                     # from Python: a FileExistsError
                 lambda out: evaluate_module.predict_file(classifier, str(data), out)):   # after every row
        with pytest.raises(tuneloop.TuneloopError, match=f"--output .*: {re.escape(str(blocker))} is a file, not a "
                                                         "folder; choose another place"):
            call(str(blocker / "out" / "x.tsv"))
    assert read == [] and blocker.read_text() == "mine"
    results, config = (run_dir / "results.json").read_bytes(), (run_dir / "model" / "config.json").read_bytes()
    for output, said in ((run_dir / "results.json", "is the run's own results.json"),   # the training results lost
                         (run_dir / "predictions" / "mine.tsv", "is in the run's own predictions/ folder"),
                         (run_dir / "model" / "config.json", "is in the saved model folder")):   # unloadable after
        for argv in (["predict", "--model", str(run_dir), "--input", str(data), "--overwrite"],
                     ["evaluate", "--model", str(run_dir)]):
            assert main([*argv, "--output", str(output), "--quiet"]) == 2
            assert said in capsys.readouterr().err
    assert (run_dir / "results.json").read_bytes() == results
    assert (run_dir / "model" / "config.json").read_bytes() == config
    assert main(["evaluate", "--model", str(run_dir), "--output", str(run_dir / "eval.json"), "--quiet"]) == 0


# ---------------------------------------------------------------------------------------------- serve
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, model: Path, *flags: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "tuneloop", "serve", str(model), "--port",
                                      str(self.port), *flags], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 90
        while True:
            try:
                self.get("/health")
                return
            except OSError:
                assert self.proc.poll() is None, self.proc.stderr.read()[-2000:]
                assert time.monotonic() < end, "the server did not start in time"
                time.sleep(0.2)

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def post(self, body) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + "/predict", data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def test_serve_says_in_one_line_where_it_cannot_listen_before_loading_the_model(run_dir, capsys, monkeypatch):
    from tuneloop.predict.classifier import Classifier

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(Classifier, "load", never)
    with socket.socket() as held:                                    # uvicorn said so after the model's load
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        for args, said in ((["--port", str(busy)], "Address already in use); another process holds the port"),
                           (["--port", "99999"], "--port 99999: must be in 1..65535"),      # an OverflowError
                           (["--host", "no such host"], "--host 'no such host': not a name or address"),
                           (["--threads", "0"], "--threads: must be at least 1"),
                           (["--max-wait-ms", "nan"], "--max-wait-ms: must be a finite number >= 0, got nan")):
            assert main(["serve", str(run_dir), *args]) == 2
            err = capsys.readouterr().err.strip()
            assert said in err and len(err.splitlines()) == 1, err
    from tuneloop.deploy.serve import create_app, serve
    from tuneloop.exceptions import TuneloopError

    for options, said in (({"max_wait_ms": float("nan")}, "--max-wait-ms: must be a finite number >= 0, got nan"),
                          ({"max_wait_ms": float("inf")}, "--max-wait-ms: must be a finite number >= 0, got inf"),
                          ({"max_batch_size": 0}, "--max-batch-size: must be a whole number, at least 1, got 0"),
                          ({"max_rows": 2.5}, "--max-rows: must be a whole number, at least 1, got 2.5"),
                          ({"max_body_kb": -1}, "--max-body-kb: must be a whole number, at least 1, got -1"),
                          ({"threads": 0}, "--threads: must be at least 1, got 0")):
        with pytest.raises(TuneloopError, match="^" + re.escape(said) + "$"):   # from Python: the CLI's line,
            serve(str(run_dir), port=free_port(), **options)                     # before the model's load
        if "max_body_kb" not in options and "threads" not in options:
            with pytest.raises(TuneloopError, match=re.escape(said)):            # the app on its own too
                create_app(object(), **options)
    assert main(["serve", "--model", str(run_dir), "--port", "99999"]) == 2     # --model, as predict takes it
    assert "--port 99999: must be in 1..65535" in capsys.readouterr().err
    assert main(["serve", "--port", "8000"]) == 2
    assert "give the model folder once, as MODEL_DIR or --model DIR" in capsys.readouterr().err


@pytest.fixture(scope="module")
def server(exported):
    s = Server(exported, "--max-wait-ms", "150", "--max-rows", "4", "--max-body-kb", "1")
    yield s
    s.stop()


def test_serve_from_python_gives_the_callers_thread_count_back(run_dir, monkeypatch, caplog):
    import logging

    import torch
    import uvicorn

    from tuneloop.deploy.serve import serve

    seen = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        serve(str(run_dir), port=port, threads=before + 1, precision="fp32")
    assert seen == [before + 1] and torch.get_num_threads() == before
    # the folder served, as the guide shows it (`serving runs/x/model`): a run folder was said as the run's
    assert f"serving {run_dir / 'model'} (pytorch, fp32) on http://127.0.0.1:{port}" in caplog.text


def test_serve_answers_like_predict(server, exported, capsys):
    assert server.get("/health") == {"status": "ok"}
    meta = server.get("/metadata")
    assert meta["labels"] == ["not_equivalent", "equivalent"] and meta["backend"] == "onnx"
    assert meta["text_columns"] == ["sentence1", "sentence2"] and meta["decision_rule"]["temperature"] > 0
    status, body = server.post({"texts": [["the cat sat", "a alpha cat sat"], ["dog red", "beta dog"]]})
    assert status == 200 and len(body["predictions"]) == 2 and body["decision_rule"].startswith("temperature")
    capsys.readouterr()
    assert main(["predict", "--model", str(exported), "the cat sat", "a alpha cat sat"]) == 0
    single = json.loads(capsys.readouterr().out)
    first = body["predictions"][0]
    assert first["label"] == single["label"]
    assert first["probabilities"]["equivalent"] == pytest.approx(single["prob_equivalent"], abs=1e-5)


@pytest.mark.parametrize("body, status, message", [
    ({"text": "x"}, 400, '"texts"'),
    ({"texts": []}, 400, "non-empty"),
    ({"texts": ["only one text"]}, 400, "reads pairs"),
    ({"texts": ["first", "second"]}, 400, 'give a list of [first, second] pairs (["first", "second"] is two texts: '
                                          'one pair is [["first", "second"]])'),
    ({"texts": [["a", "b", "c"]]}, 400, "row 1: give a text or a [first, second] pair"),
    ({"texts": [["a", "  "]]}, 400, "row 1: empty text"),
    ({"texts": [["a", "b"]] * 5}, 413, "at most 4"),
    ({"texts": [["a" * 2000, "b"]]}, 413, "bytes; at most 1024"),
    (b"{not json", 400, "not JSON"),
    (b'{"texts": [["\\ud800", "b"]]}', 400, "row 1: the text holds half of a character ('\\ud800' at character 1"),
])
def test_bad_requests_get_4xx_and_the_server_keeps_serving(server, body, status, message):
    got, answer = server.post(body)
    assert got == status and message in answer["error"]
    assert server.get("/health") == {"status": "ok"}


def test_concurrent_requests_are_batched(server):
    before = server.get("/stats")
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda i: server.post({"texts": [[f"cat {i}", "alpha dog"]]}), range(12)))
    assert all(status == 200 and len(body["predictions"]) == 1 for status, body in answers)
    after = server.get("/stats")
    assert after["requests"] - before["requests"] == 12
    assert max(int(k) for k in after["rows_per_batch"]) > 1            # several requests shared a batch
    assert after["batches"] - before["batches"] < 12


def test_a_lone_client_is_answered_at_once_and_concurrent_requests_still_wait_for_each_other(monkeypatch):
    import asyncio

    from tuneloop.deploy import serve

    batches = []
    monkeypatch.setattr(serve, "predict_rows", lambda clf, items: batches.append(list(items)) or list(items))

    async def go():
        batcher = serve.Batcher(None, max_batch_size=3, max_wait_ms=600_000)   # a window no test would wait out
        batcher.queue = asyncio.Queue()
        worker = asyncio.create_task(batcher.run())
        for text in ("a", "b"):                    # one client, one request at a time: no wait for the window
            assert await asyncio.wait_for(batcher.submit([text]), 30) == [text]
        answers = await asyncio.wait_for(asyncio.gather(*(batcher.submit([t]) for t in "cde")), 30)
        assert answers == [["c"], ["d"], ["e"]]
        await batcher.queue.put(None)
        await asyncio.wait_for(worker, 30)

    asyncio.run(go())
    assert batches == [["a"], ["b"], ["c", "d", "e"]]    # the three sent together share one batch


def test_a_request_the_model_fails_on_fails_alone_not_the_requests_batched_with_it(monkeypatch):
    import asyncio

    from tuneloop.deploy import serve

    def predict_rows(clf, items):
        if "boom" in items:
            raise TypeError("TextInputSequence must be str")
        return [f"<{item}>" for item in items]

    monkeypatch.setattr(serve, "predict_rows", predict_rows)

    async def go():
        batcher = serve.Batcher(None, max_batch_size=8, max_wait_ms=600_000)
        batcher.queue = asyncio.Queue()
        worker = asyncio.create_task(batcher.run())
        answers = await asyncio.wait_for(asyncio.gather(*(batcher.submit(r) for r in (["a"], ["boom", "b"], ["c"],
                                                                                       ["d", "e", "f", "g"])),
                                                        return_exceptions=True), 30)
        await batcher.queue.put(None)
        await asyncio.wait_for(worker, 30)
        return answers, batcher.stats()

    answers, stats = asyncio.run(go())
    assert answers[0] == ["<a>"] and answers[2] == ["<c>"] and answers[3] == ["<d>", "<e>", "<f>", "<g>"]
    assert isinstance(answers[1], TypeError)                  # every request of the batch failed with it
    assert stats["failed_requests"] == 1 and stats["requests"] == 3 and stats["rows"] == 6


def test_sigterm_finishes_the_requests_in_flight(exported):
    s = Server(exported, "--max-wait-ms", "1500", "--max-batch-size", "64")
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(s.post, {"texts": [[f"red {i}", "beta"]]}) for i in range(6)]
        time.sleep(0.5)                                   # all six are waiting for their batch
        s.proc.send_signal(signal.SIGTERM)
        answers = [f.result(timeout=60) for f in futures]
    assert [status for status, _ in answers] == [200] * 6
    # uvicorn exits by re-raising the signal it handled (so the exit status tells how it ended)
    assert s.proc.wait(timeout=60) in (0, -signal.SIGTERM)
    said = s.proc.stderr.read()
    assert "Traceback" not in said
    assert f"on http://127.0.0.1:{s.port} (POST /predict; Ctrl+C stops)" in said       # said nothing on start


@pytest.mark.skipif(not __import__("tuneloop.predict.routes", fromlist=["supported"]).supported("bf16", "cpu"),
                    reason="this CPU has no bf16 units")
def test_pytorch_classifier_in_bf16_agrees_with_fp32_and_leaves_the_process_as_it_was(run_dir, capsys):
    """--precision bf16 casts a copy of the weights (nothing process-wide is set); the fp32 model stays exact."""
    items = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("red green blue bird", "the alpha")]
    matmul = torch.backends.mkldnn.matmul
    before = (matmul.fp32_precision, torch.get_num_threads())
    with tuneloop.load(run_dir / "model", precision="fp32") as fp32:
        assert fp32.describe()["precision"] == "fp32"
        expected = fp32.predict(items)
    with tuneloop.load(run_dir / "model", precision="bf16") as bf16:
        assert bf16.describe()["precision"] == "bf16" and next(bf16.model.parameters()).dtype == torch.bfloat16
        got = bf16.predict(items)
    assert (matmul.fp32_precision, torch.get_num_threads()) == before
    for a, b in zip(expected, got, strict=True):
        assert a["label"] == b["label"]
        assert a["probabilities"]["equivalent"] == pytest.approx(b["probabilities"]["equivalent"], abs=0.02)
    for flags, answers in (([], expected), (["--precision", "bf16"], got), (["--precision", "fp32"], expected)):
        capsys.readouterr()
        assert main(["predict", "--model", str(run_dir), *flags, *items[0]]) == 0
        row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert row["label"] == answers[0]["label"]          # auto: no route recorded (60 validation rows): fp32
        assert row["prob_equivalent"] == pytest.approx(answers[0]["probabilities"]["equivalent"], abs=1e-5)


@pytest.mark.parametrize("backend", ["pytorch", "onnx"])
def test_load_predict_equals_the_predict_command(run_dir, exported, tmp_path, backend):
    """`tuneloop.load(dir).predict([...])` gives the rows `tuneloop predict --input` writes, for both backends."""
    folder = run_dir / "model" if backend == "pytorch" else exported
    pairs = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("red green blue bird", "the alpha"),
             ("one two", "beta beta alpha")]
    source = tmp_path / "new.csv"
    source.write_text("sentence1,sentence2\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    written = tmp_path / "new.predictions.jsonl"
    assert main(["predict", "--model", str(folder), "--input", str(source), "--output", str(written), "--quiet"]) == 0
    expected = [json.loads(line) for line in written.read_text().splitlines()]
    with tuneloop.load(folder) as clf:
        assert clf.backend == backend
        got = clf.predict(pairs)
        proba = clf.predict_proba(pairs)
        single = clf.predict(pairs[0])
    assert [r["label"] for r in got] == [r["label"] for r in expected]
    for row, file_row, p in zip(got, expected, proba, strict=True):
        for i, name in enumerate(clf.labels):
            assert row["probabilities"][name] == pytest.approx(file_row[f"prob_{name}"], abs=1e-5)
            assert p[i] == pytest.approx(file_row[f"prob_{name}"], abs=1e-5)
    assert single == got[0]


def test_a_classifier_loads_its_model_once_for_many_texts(run_dir, monkeypatch):
    from transformers import AutoModelForSequenceClassification

    calls = []
    real = AutoModelForSequenceClassification.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        calls.append(args[0])
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModelForSequenceClassification, "from_pretrained", classmethod(counting))
    texts = [(f"the cat {'alpha' if i % 2 else 'beta'} sat", "a dog") for i in range(1000)]
    with tuneloop.load(run_dir) as clf:          # a run folder: its model/
        rows = clf.predict(texts)
        clf.predict(texts[:3])
    assert len(rows) == 1000 and len(calls) == 1


def test_a_classifier_refuses_texts_it_cannot_read_in_one_line(run_dir):
    with tuneloop.load(run_dir / "model") as clf:
        with pytest.raises(tuneloop.TuneloopError, match="reads pairs of texts"):
            clf.predict(["one text"])
        with pytest.raises(tuneloop.TuneloopError, match=r"texts\[1\]"):
            clf.predict([("a", "b"), None])      # (a number is read as its text)
        with pytest.raises(tuneloop.TuneloopError, match="empty list"):
            clf.predict([])


# ---------------------------------------------------------------------------------------------- one loop, one check
def test_every_use_of_a_model_runs_the_one_inference_loop(run_dir, tiny_model, tmp_path, monkeypatch):
    """predict, predict_proba, logits, a DataFrame, evaluate, predict_file, serve's batches, the precision gate, the
    export's gate and a run's test predictions all reach evaluation.inference.run_inference through Classifier.run,
    and the model is never called outside it."""
    import pandas as pd

    from tuneloop.deploy.serve import predict_rows
    from tuneloop.evaluation import inference
    from tuneloop.predict.evaluate import predict_file

    calls, inside, outside = [], [False], []
    real = inference.run_inference

    def counting(model, loader, accelerator, accumulator, desc, quiet):
        calls.append(desc)
        inside[0] = True
        try:
            return real(model, loader, accelerator, accumulator, desc, quiet)
        finally:
            inside[0] = False

    monkeypatch.setattr(inference, "run_inference", counting)
    pairs = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("red green blue bird", "the alpha")]
    source = tmp_path / "new.csv"
    source.write_text("sentence1,sentence2\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    with tuneloop.load(run_dir / "model") as clf:
        forward = clf.model.forward
        monkeypatch.setattr(clf.model, "forward", lambda *a, **k: outside.append(not inside[0]) or forward(*a, **k))
        uses = {"predict": lambda: clf.predict(pairs), "predict one": lambda: clf.predict(pairs[0]),
                "predict_proba": lambda: clf.predict_proba(pairs), "logits": lambda: clf.logits(pairs),
                "DataFrame": lambda: clf.predict(pd.DataFrame(pairs, columns=["sentence1", "sentence2"])),
                "evaluate": lambda: clf.evaluate(),
                "predict_file": lambda: predict_file(clf, str(source), str(tmp_path / "out.jsonl"), quiet=True),
                "serve": lambda: predict_rows(clf, pairs)}
        for use, call in uses.items():
            before = len(calls)
            call()
            assert len(calls) > before, f"{use} did not go through the one loop"
    assert outside and not any(outside)                       # every forward pass ran inside run_inference
    calls.clear()
    import shutil

    from tuneloop.predict.classifier import gate_folder

    shutil.copytree(run_dir / "model", tmp_path / "gated")
    gate_folder(tmp_path / "gated")                           # the precision gate: fp32 and each route it checks
    assert len(calls) >= 2 * (1 + len(json.loads((tmp_path / "gated" / "tuneloop.json").read_text())
                                       ["precision_routes"]["cpu"]["checks"]))
    calls.clear()
    assert main(["export", str(run_dir), "--output", str(tmp_path / "onnx"), "--quiet"]) == 0
    assert calls == ["Evaluating validation"] * 2             # the gate: the PyTorch model, then the exported one
    calls.clear()
    data = write_mrpc_folder(tmp_path / "MRPC", n_train=40, n_dev=12, n_test=6)
    tuneloop.train(**fast_options(tiny_model, epochs=1), task="mrpc", data_dir=str(data), predict_test=True,
                   output_dir=str(tmp_path / "run"))
    assert "Predicting test" in calls and (tmp_path / "run" / "predictions" / "test.tsv").is_file()


@pytest.mark.parametrize("texts", [[], ["only one text"], [["a", "b", "c"]], [["a", "  "]], "  ", 5,
                                   [["a", "b"], "c"], {"a": "b"}])
def test_serve_and_predict_check_texts_with_the_same_words(run_dir, server, texts):
    """One check of texts given in memory (predict/inputs.py): a request's texts fail as predict's do."""
    with tuneloop.load(run_dir / "model") as clf:
        with pytest.raises(tuneloop.TuneloopError) as refused:
            clf.predict(texts)
    status, answer = server.post({"texts": texts})
    assert status == 400 and answer["error"] == str(refused.value)


def test_an_export_does_not_carry_the_sources_precision_routes(run_dir, tmp_path):
    """The gate's record is of the PyTorch folder's routes (int8, bf16, its ONNX copy): the exported folder kept it."""
    source = tmp_path / "model"
    shutil.copytree(run_dir / "model", source)
    meta = json.loads((source / "tuneloop.json").read_text())
    meta["precision_routes"] = {"cpu": {"chosen": "int8", "checks": {}}}
    (source / "tuneloop.json").write_text(json.dumps(meta))
    assert main(["export", str(source), "--output", str(tmp_path / "onnx"), "--quiet"]) == 0
    exported = json.loads((tmp_path / "onnx" / "tuneloop.json").read_text())
    assert "precision_routes" not in exported and exported["labels"] == meta["labels"]


# ---------------------------------------------------------------------------------------------- found by use
def test_export_refuses_a_quantization_it_does_not_do_and_the_current_folder(run_dir, tmp_path, monkeypatch,
                                                                              capsys):
    """quantize="int4" (or "INT8") from Python wrote an fp32 model whose report said int4; `--output .` in an empty
    folder was a ValueError traceback (and replaced whole, it would leave the shell in a deleted folder)."""
    for quantize in ("int4", "INT8"):
        with pytest.raises(tuneloop.TuneloopError, match=f"--quantize: int8 \\(or none\\), got '{quantize}'"):
            export_module.export_model(str(run_dir), str(tmp_path / "q"), quantize=quantize, quiet=True)
    assert not (tmp_path / "q").exists()
    here = tmp_path / "empty" / "inner"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    for output in (".", "./", ".."):
        assert main(["export", str(run_dir), "--output", output, "--quiet", "--overwrite"]) == 2
        assert "is (or holds) the current folder, which the export would replace whole" in capsys.readouterr().err
    assert here.is_dir() and list(here.iterdir()) == []


def test_a_refused_fp32_export_is_not_told_to_drop_quantize(run_dir, tmp_path, monkeypatch, capsys):
    """The refusal of an fp32 export said "Export without --quantize", which it already was."""
    real = export_module.evaluation

    def worse(clf, overrides, output=None, raw=False):
        results, evaluation = real(clf, overrides, output, raw)
        if clf.backend == "onnx":
            split = next(iter(evaluation.metrics))
            evaluation.metrics[split] = {k: v - 0.05 if k == "f1" else v for k, v in evaluation.metrics[split].items()}
        return results, evaluation

    monkeypatch.setattr(export_module, "evaluation", worse)
    assert main(["export", str(run_dir), "--output", str(tmp_path / "x"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "export refused: f1" in err and "--quantize" not in err and "--allow-drop X" in err
    assert not (tmp_path / "x").exists()


def raw_post(server: Server, head: bytes, parts, wait: float = 20.0) -> bytes:
    """What the server answers to a POST /predict whose headers are `head` and whose body is `parts`, sent without
    ever finishing it (a client still sending)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as s:
        s.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + head + b"\r\n")
        for part in parts:
            s.sendall(part)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            got = s.recv(65536)
            if not got:
                break
            answer += got
        return answer


def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(server):
    """The body was read whole into memory before --max-body-kb was checked (a 300 MB body took 1 GB of the
    server's memory): a client announcing a gigabyte, or streaming past the limit, is answered 413 at once."""
    answer = raw_post(server, b"Content-Length: 1000000000\r\n", [b'{"texts": "'])
    assert answer.startswith(b"HTTP/1.1 413") and b"the body has 1000000000 bytes; at most 1024" in answer
    chunk = b"a" * 600
    answer = raw_post(server, b"Transfer-Encoding: chunked\r\n", [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 3)
    assert answer.startswith(b"HTTP/1.1 413") and b"more than 1024 bytes; at most 1024 (--max-body-kb)" in answer
    assert server.get("/health") == {"status": "ok"}
    assert server.post({"texts": [["a cat", "the dog"]]})[0] == 200


def test_a_request_the_model_fails_on_is_answered_in_json(monkeypatch):
    """A request the model failed on got uvicorn's plain-text "Internal Server Error"; every other answer is JSON
    with "error"."""
    import threading

    import uvicorn

    from tuneloop.deploy import serve

    class Failing:
        def describe(self):
            return {"decision_rule_text": "raw scores"}

        def items(self, texts):
            return [(t, None) for t in texts], False

    monkeypatch.setattr(serve, "predict_rows", lambda clf, items: (_ for _ in ()).throw(ValueError("no such op")))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(serve.create_app(Failing()), host="127.0.0.1", port=port,
                                           log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        client = Server.__new__(Server)
        client.port, client.url = port, f"http://127.0.0.1:{port}"
        end = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < end
            time.sleep(0.05)
        assert client.post({"texts": ["a"]}) == (500, {"error": "the model failed on this request: ValueError: "
                                                                 "no such op"})
        assert client.get("/health") == {"status": "ok"}
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_the_export_report_names_the_rows_its_gate_ran_on(run_dir, exported, tmp_path):
    """With --validation-file the report said nothing of the file the gate read: only the run's recorded data
    (in the exported tuneloop.json) named any, and those were not the rows gated."""
    other = write_mrpc_folder(tmp_path / "other", n_train=0, n_dev=25, seed=3) / "dev.tsv"
    target = tmp_path / "onnx"
    assert main(["export", str(run_dir), "--output", str(target), "--validation-file", str(other), "--quiet"]) == 0
    gate = json.loads((target / "export_report.json").read_text())["gate"]
    assert gate["data"] == {"validation_file": str(other.resolve())} and gate["rows"] == 25
    recorded = json.loads((exported / "export_report.json").read_text())["gate"]
    source = json.loads((run_dir / "model" / "tuneloop.json").read_text())["data"]
    assert recorded["data"] == {k: v for k, v in source.items() if v is not None} and recorded["rows"] == 60


def test_a_request_is_never_split_across_batches(monkeypatch):
    """--max-batch-size closes a batch once it holds that many rows; a request is taken whole: one larger than the
    limit is one batch, and the request that crosses the limit brings all its rows."""
    import asyncio

    from tuneloop.deploy import serve

    batches = []
    monkeypatch.setattr(serve, "predict_rows", lambda clf, items: batches.append(list(items)) or list(items))

    async def go():
        batcher = serve.Batcher(None, max_batch_size=3, max_wait_ms=600_000)
        batcher.queue = asyncio.Queue()
        worker = asyncio.create_task(batcher.run())
        assert await asyncio.wait_for(batcher.submit(list("abcde")), 30) == list("abcde")    # alone, 5 > 3
        sent = [["f"], list("ghij"), ["k"], ["l"], ["m"]]
        answers = await asyncio.wait_for(asyncio.gather(*(batcher.submit(rows) for rows in sent)), 30)
        assert answers == sent
        await batcher.queue.put(None)
        await asyncio.wait_for(worker, 30)

    asyncio.run(go())
    assert batches == [list("abcde"), list("fghij"), list("klm")]     # f + ghij: 5 rows, past the 3
