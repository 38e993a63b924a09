"""Edges of `tuneloop export` and `tuneloop serve` a user meets: exporting (or predicting with) a run whose model
an experiment or a search did not keep, an empty --output, a server's answers to unknown paths and methods, and a body that is not
UTF-8. Fast: no model is trained or loaded (a stand-in classifier serves)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from test_export_serve import free_port

from tuneloop.cli.main import main


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_export_of_a_run_whose_model_was_not_kept_names_the_folder_to_export(tmp_path, capsys):
    """A seed or trial folder (its model removed: only the chosen one is kept) was said to be "neither a run folder
    (with model/) nor a model folder", though it is a run folder."""
    experiment = tmp_path / "seeds"
    (experiment / "seed-1").mkdir(parents=True)
    (experiment / "summary.json").write_text("{}")
    (experiment / "seed-1" / "tuneloop-run.json").write_text('{"kind": "train"}')
    assert main(["export", str(experiment / "seed-1"), "--output", str(tmp_path / "onnx")]) == 2
    err = one_line_error(capsys)
    assert "a run folder without its model/" in err and f"kept only the model it chose: give {experiment}" in err
    assert main(["predict", "--model", str(experiment / "seed-1"), "a text"]) == 2     # predict and serve load so
    err = one_line_error(capsys)                                # was: "(this run has not saved one yet)"
    assert f"kept only the model it chose: give {experiment}" in err and "not saved" not in err, err

    search = tmp_path / "search"
    trial = search / "trials" / "trial-000"
    (trial / "best").mkdir(parents=True)
    (search / "search.json").write_text("{}")
    (trial / "tuneloop-run.json").write_text('{"kind": "train"}')
    (trial / "best" / "config.json").write_text("{}")
    assert main(["export", str(trial), "--output", str(tmp_path / "onnx")]) == 2
    err = one_line_error(capsys)
    assert f"give {search}" in err and f"this run's best evaluation, {trial / 'best'}" in err, err
    assert not (tmp_path / "onnx").exists()


def test_an_empty_output_is_said_to_be_empty(tmp_path, capsys, monkeypatch):
    """--output "" was read as "." and refused as "holds the model being exported" (or as the current folder)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    for output in ("", " "):
        assert main(["export", str(model), "--output", output]) == 2
        assert "--output: empty; name the folder" in one_line_error(capsys)


class Standin:
    """What create_app asks of a classifier, without a model."""

    def describe(self):
        return {"decision_rule_text": "raw scores"}

    def items(self, texts):
        return [(t, None) for t in ([texts] if isinstance(texts, str) else texts)], isinstance(texts, str)


@pytest.fixture()
def app_url(monkeypatch):
    import uvicorn

    from tuneloop.deploy import serve

    monkeypatch.setattr(serve, "predict_rows", lambda clf, items: [{"score": float(len(t))} for t, _ in items])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(serve.create_app(Standin()), host="127.0.0.1", port=port,
                                           log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < end and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def call(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_unknown_paths_and_methods_are_answered_with_error_as_every_other_refusal(app_url):
    """A 404 or 405 came as FastAPI's {"detail": ...}; every other refusal is {"error": ...}."""
    for method, path, data, status in (("GET", "/predict", None, 405), ("GET", "/nope", None, 404),
                                       ("POST", "/health", b"{}", 405), ("POST", "/predicts", b"{}", 404)):
        code, body = call(app_url + path, method, data)
        assert code == status and set(body) == {"error"}, (path, code, body)
        assert body["error"].startswith(f"{method} {path}: ") and "POST /predict" in body["error"], body
    assert call(app_url + "/predict", "POST", b'{"texts": ["ab"]}') == (200, {
        "predictions": [{"score": 2.0}], "decision_rule": "raw scores", "ms": pytest.approx(0, abs=5000)})


def test_a_body_not_in_utf8_is_said_to_be_so(app_url):
    """Latin-1 text was answered "the body is not JSON ('utf-8' codec can't decode byte 0xe9 ...)"."""
    code, body = call(app_url + "/predict", "POST", '{"texts": "café"}'.encode("latin-1"))
    assert code == 400 and body == {"error": "the body is not UTF-8 (byte 14: b'\\xe9'); send the JSON encoded as "
                                             "UTF-8"}, body
    assert call(app_url + "/predict", "POST", '{"texts": "café"}'.encode())[0] == 200
    assert call(app_url + "/predict", "POST", b"{not json")[1]["error"].startswith("the body is not JSON (")


def test_a_missing_validation_file_is_said_in_one_line_before_the_export(tmp_path, capsys, monkeypatch):
    """`--validation-file nope.csv` ended in a FileNotFoundError traceback, after the model was exported."""
    from tuneloop.deploy import export

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setattr(export, "export_file", lambda *a, **k: pytest.fail("exported before the data was checked"))
    for given, said in ((tmp_path / "nope.csv", "no such file"), (tmp_path, "a folder, not a file")):
        assert main(["export", str(model), "--output", str(tmp_path / "onnx"), "--validation-file", str(given)]) == 2
        err = one_line_error(capsys)
        assert err.endswith(f"--validation-file {given}: {said}; give the labelled file for the accuracy gate (or "
                            "leave it out to use the run's recorded validation data)"), err
    assert not (tmp_path / "onnx").exists()


def test_the_export_gate_refuses_regression_scores_shifted_where_pearson_cannot_see_it():
    """An int8 regression export kept 85% of fp32's score variance (R² 0.853) and passed: Pearson had not moved."""
    from types import SimpleNamespace

    import numpy as np

    from tuneloop.deploy.export import gate
    from tuneloop.objective import Regression

    scores = np.linspace(0.0, 3.0, 40, dtype=np.float32)[:, None]
    def evaluated(logits):
        return SimpleNamespace(outputs={"validation": (logits, scores[:, 0])},
                               main_split={"pearson": 0.9, "mse": 0.1})

    shifted = gate(evaluated(scores), evaluated(scores + 0.5), "pearson", None, Regression())
    assert shifted["verdict"] == "fail" and shifted["score_agreement"] < 0.99 and shifted["drop_points"] == 0
    assert gate(evaluated(scores), evaluated(scores + 1e-4), "pearson", None, Regression())["verdict"] == "pass"
