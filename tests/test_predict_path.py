"""The inference path of a trained model: token-budget batches (every row once, padded as the tokenizer pads,
logits equal to one row at a time), precision routes behind the one gate (decision logic, what is recorded, what
`auto` takes), no datasets import to predict, and memory that does not grow over repeated calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import fast_options, write_mrpc_folder

import tuneloop
from tuneloop.cli.main import main
from tuneloop.predict import routes
from tuneloop.predict.batches import BudgetBatches, Tokenized
from tuneloop.predict.classifier import gate_folder

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model_dir(tiny_model, tmp_path_factory):
    data = write_mrpc_folder(tmp_path_factory.mktemp("path") / "MRPC", n_train=80, n_dev=200, n_test=10)
    out = tmp_path_factory.mktemp("path-run") / "run"
    tuneloop.train(**fast_options(tiny_model, epochs=2), task="mrpc", data_dir=str(data), output_dir=str(out))
    return out / "model"


def test_budget_batches_hold_every_row_once_within_the_budget_padded_as_the_tokenizer_pads():
    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.integers(1, 40, size=57)] + [70]          # one row longer than the budget
    rows = Tokenized({"input_ids": [list(range(1, n + 1)) for n in lengths], "doc": list(range(len(lengths)))})
    for side in ("right", "left"):
        batches = list(BudgetBatches(rows, max_rows=8, pad_id=0, padding_side=side, budget=64))
        seen = np.concatenate([b.rows.numpy() for b in batches])
        assert sorted(seen.tolist()) == list(range(len(lengths)))
        widths = [b.inputs["input_ids"].shape[1] for b in batches]
        assert widths == sorted(widths, reverse=True)                         # longest first
        for b in batches:
            ids, mask = b.inputs["input_ids"], b.inputs["attention_mask"]
            assert len(b) <= 8 and (len(b) == 1 or ids.numel() <= 64)
            for r, row in enumerate(b.rows.tolist()):
                n = lengths[row]
                real = ids[r, -n:] if side == "left" else ids[r, :n]
                assert real.tolist() == list(range(1, n + 1)) and int(mask[r].sum()) == n
                assert int((ids[r] == 0).sum()) == ids.shape[1] - n             # the rest is padding


def test_predicting_in_budget_batches_equals_one_row_at_a_time(model_dir):
    texts = [(" ".join(["the cat"] * (i % 9 + 1)), "a dog " * (i % 4 + 1)) for i in range(40)]
    with tuneloop.load(model_dir) as clf:
        got = clf.logits(texts)
        tok = clf.tokenizer
        with torch.no_grad():
            one = np.concatenate([clf.model(**tok(a, b, return_tensors="pt")).logits.numpy() for a, b in texts])
    assert np.abs(got - one).max() < 1e-5


def test_the_gate_passes_and_fails_on_the_metric_and_on_decision_agreement():
    from tuneloop.data.labels import LabelSchema
    from tuneloop.objective import objective_for

    objective = objective_for(LabelSchema("single_label_classification", ["no", "yes"]))
    rng = np.random.default_rng(1)
    a = rng.normal(size=(200, 2)).astype(np.float32)
    flipped = a.copy()
    flipped[:4] = flipped[:4, ::-1]                                           # 4 of 200 decisions change: 98%
    ref = {"metrics": {"f1": 0.80}, "logits": a}
    same = routes.compare(ref, {"metrics": {"f1": 0.80}, "logits": a + 1e-4}, "f1", objective,
                          min_agreement=0.99)
    assert same["verdict"] == "pass" and same["decision_agreement"] == 1.0
    assert same["max_probability_difference"] < 1e-3 and same["drop_points"] == 0
    assert routes.compare(ref, {"metrics": {"f1": 0.80}, "logits": flipped}, "f1", objective,
                          min_agreement=0.99)["verdict"] == "fail"            # the agreement floor
    assert routes.compare(ref, {"metrics": {"f1": 0.80}, "logits": flipped}, "f1", objective)["verdict"] == "pass"
    worse = routes.compare(ref, {"metrics": {"f1": 0.79}, "logits": a}, "f1", objective)
    assert worse["verdict"] == "fail" and worse["drop_points"] == pytest.approx(1.0)
    assert routes.compare(ref, {"metrics": {"f1": 0.79}, "logits": a}, "f1", objective, allow_drop=2)["verdict"] \
        == "warn"


def test_the_gate_fails_scores_a_route_cannot_hold_and_regression_scores_that_move():
    """fp16 past 65,504 gives inf and a NaN Pearson, whose NaN drop passed every limit; a regression route's scores
    must keep 99% of fp32's variance where decisions must agree on 99% (Pearson does not see a shift)."""
    from tuneloop.data.labels import LabelSchema
    from tuneloop.objective import objective_for

    regression = objective_for(LabelSchema("regression", []))
    rng = np.random.default_rng(0)
    scores = (40_000 + 2_000 * rng.normal(size=(220, 1))).astype(np.float32)
    ref = {"metrics": {"pearson": 0.90, "mse": 400_000.0}, "logits": scores}
    held = routes.compare(ref, {"metrics": {"pearson": 0.90, "mse": 400_100.0}, "logits": scores + 1}, "pearson",
                          regression, min_agreement=0.99)
    assert held["verdict"] == "pass" and held["score_agreement"] > 0.9999 and held["min_score_agreement"] == 0.99
    assert "decision_agreement" not in held and "min_decision_agreement" not in held
    overflowed = np.full_like(scores, np.inf)
    broken = routes.compare(ref, {"metrics": {"pearson": float("nan"), "mse": float("inf")}, "logits": overflowed},
                            "pearson", regression, min_agreement=0.99)
    assert broken["verdict"] == "fail" and broken["non_finite"] and "min_decision_agreement" not in broken
    stepped = np.round(scores / 256) * 256 + 68         # a bf16 head over 40,000: steps of 256, a little bias
    coarse = routes.compare(ref, {"metrics": {"pearson": 0.90, "mse": 404_000.0}, "logits": stepped}, "pearson",
                            regression, min_agreement=0.99)
    assert coarse["verdict"] == "pass" and 0.99 < coarse["score_agreement"] < 0.999     # within the model's spread
    shifted = routes.compare(ref, {"metrics": {"pearson": 0.90, "mse": 1_400_000.0}, "logits": scores + 1_000},
                             "pearson", regression, min_agreement=0.99)
    assert shifted["verdict"] == "fail" and shifted["drop_points"] == 0 and shifted["score_agreement"] < 0.8
    assert routes.compare(ref, {"metrics": {"pearson": 0.90, "mse": 1_400_000.0}, "logits": scores + 1_000},
                          "pearson", regression)["verdict"] == "pass"      # the export's gate: the metric only
    classes = objective_for(LabelSchema("single_label_classification", ["no", "yes"]))
    logits = rng.normal(size=(200, 2)).astype(np.float32)
    nan_metric = routes.compare({"metrics": {"f1": 0.8}, "logits": logits},
                                {"metrics": {"f1": float("nan")}, "logits": logits}, "f1", classes)
    assert nan_metric["verdict"] == "fail" and nan_metric["non_finite"]


def test_the_export_reports_how_many_decisions_are_the_same_not_argmax_for_label_sets_or_scores():
    """A multi-label export's "same predictions" compared the argmax of its label columns (100% where 3% of the
    label sets differed); a regression's compared argmax over one column (always 100%)."""
    from types import SimpleNamespace

    from tuneloop.data.labels import LabelSchema
    from tuneloop.deploy.export import gate
    from tuneloop.objective import objective_for

    rng = np.random.default_rng(2)
    logits = rng.normal(size=(100, 3)).astype(np.float32) * 3
    changed = logits.copy()
    changed[:, 2] = np.where(np.arange(100) < 5, -logits[:, 2], logits[:, 2])   # 5 rows' third label flips
    labels = (rng.random((100, 3)) > 0.5).astype(np.float32)

    def evaluated(x, metric):
        return SimpleNamespace(outputs={"validation": (x, labels)}, main_split={"f1_micro": metric})

    multi = objective_for(LabelSchema("multi_label_classification", ["a", "b", "c"], ","))
    report = gate(evaluated(logits, 0.7), evaluated(changed, 0.7), "f1_micro", None, multi)
    flipped = np.mean(np.sign(logits[:5, 2]) != 0)                              # each of the 5 changes sign
    assert report["prediction_agreement"] == pytest.approx(1 - 0.05 * flipped)
    scores = rng.normal(size=(100, 1)).astype(np.float32)
    regression = SimpleNamespace(outputs={"validation": (scores, scores[:, 0])}, main_split={"pearson": 1.0,
                                                                                         "mse": 0.1})
    report = gate(regression, regression, "pearson", None, objective_for(LabelSchema("regression", [])))
    assert report["prediction_agreement"] is None and report["verdict"] == "pass"


def test_the_route_kept_is_the_fastest_passing_one_or_the_onnx_copy_close_to_it():
    def checks(**speedups):
        return {r: {"verdict": "fail" if s < 0 else "pass", "speedup": abs(s)} for r, s in speedups.items()}

    assert routes.choose(checks(int8=2.0, bf16=2.5)) == "bf16"
    assert routes.choose(checks(int8=1.05, bf16=-3.0)) == "fp32"          # too slow, or failing: exact
    assert routes.choose(checks(int8=3.0, **{routes.ONNX: 2.8})) == routes.ONNX      # starts 2 s sooner
    assert routes.choose(checks(int8=3.0, **{routes.ONNX: 2.6})) == "int8"           # under 0.9x
    assert routes.choose(checks(int8=3.0, **{routes.ONNX: -4.0})) == "int8"


def test_a_gpu_with_native_bf16_gates_bf16_alone_and_one_without_it_gates_fp16(monkeypatch):
    for native, expected in ((True, ["bf16"]), (False, ["fp16"])):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True, n=native: n)
        assert routes.candidates("cuda") == expected
    assert "fp16" not in routes.candidates("cpu")


def test_the_gate_computes_fp32_in_full_fp32_even_inside_a_runs_tf32_or_bf16_matmuls(model_dir, tmp_path, monkeypatch):
    from tuneloop.runtime import speed

    seen, measure = [], routes._measure
    matmuls = (torch.backends.cuda.matmul, torch.backends.mkldnn.matmul)

    def spy(*args, **kwargs):
        seen.append(tuple(m.fp32_precision for m in matmuls))
        return measure(*args, **kwargs)

    monkeypatch.setattr(routes, "_measure", spy)
    shutil.copytree(model_dir, tmp_path / "model")
    with speed._tf32(), speed._bf16_matmuls():    # as gate_precision runs: inside the run's levers (GPU, AMX CPU)
        gate_folder(tmp_path / "model")
        assert tuple(m.fp32_precision for m in matmuls) == ("tf32", "bf16")     # the run's settings given back
    assert seen and set(seen) == {("ieee", "ieee")}


def test_a_stop_during_the_gate_records_nothing_and_leaves_no_staging_folder(model_dir, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(model_dir, folder)
    meta = json.loads((folder / "tuneloop.json").read_text())
    del meta[routes.RECORD]
    (folder / "tuneloop.json").write_text(json.dumps(meta))
    shutil.rmtree(routes.onnx_file(folder).parent, ignore_errors=True)     # as a run's fresh folder: no copy yet
    for after in (0, 1, len(routes.candidates("cpu"))):      # before fp32, before the first route, before the last
        asked = []
        with pytest.raises(routes.GateStopped):
            gate_folder(folder, stop=lambda: asked.append(1) or len(asked) > after)
        assert len(asked) == after + 1
        assert routes.RECORD not in json.loads((folder / "tuneloop.json").read_text())
        assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []
        assert not routes.onnx_file(folder).exists()


def test_a_sigterm_after_the_loop_skips_the_gate_and_the_run_still_writes_its_files(tiny_model, tmp_path,
                                                                                     monkeypatch, capsys):
    import signal

    from tuneloop.training import finish

    data = write_mrpc_folder(tmp_path / "MRPC", n_train=40, n_dev=200, n_test=10)
    fit = finish.fit_decision_rule

    def fit_then_sigterm(*args, **kwargs):            # the signal lands between the loop's end and the gate
        os.kill(os.getpid(), signal.SIGTERM)
        return fit(*args, **kwargs)

    monkeypatch.setattr(finish, "fit_decision_rule", fit_then_sigterm)
    out, before = tmp_path / "run", signal.getsignal(signal.SIGTERM)
    results = tuneloop.train(**fast_options(tiny_model, epochs=1), task="mrpc", data_dir=str(data),
                             output_dir=str(out))
    assert "precision gate: skipped, a stop signal arrived after training" in capsys.readouterr().err
    assert routes.RECORD not in json.loads((out / "model" / "tuneloop.json").read_text())
    assert results["train"]["steps"] > 0 and (out / "results.json").is_file()
    assert signal.getsignal(signal.SIGTERM) is before          # the handler the run set is taken back


def test_a_route_is_timed_on_a_cpu_over_the_first_rows_and_on_a_gpu_at_volume():
    rows = Tokenized({"input_ids": [[1] * (i % 7 + 1) for i in range(700)], "doc": [i // 2 for i in range(700)],
                      "labels": [i % 2 for i in range(700)]})
    cpu = routes.timed_rows(rows, "cpu")
    assert len(cpu) == routes.TIMED_ROWS and cpu.columns["doc"] == rows.columns["doc"][:routes.TIMED_ROWS]
    gpu = routes.timed_rows(rows, "cuda")            # 700 rows repeated; no doc column: windows are not pooled
    assert len(gpu) == routes.TIMED_ROWS_GPU and set(gpu.columns) == {"input_ids"}
    assert gpu.columns["input_ids"][700:707] == rows.columns["input_ids"][:7]
    batches = BudgetBatches(gpu, max_rows=256, pad_id=0)
    assert sorted(np.concatenate([b.rows.numpy() for b in batches]).tolist()) == list(range(len(gpu)))


def test_routes_are_gated_recorded_and_taken_by_auto_with_fp32_always_exact(model_dir, tmp_path, monkeypatch,
                                                                            capsys):
    meta = json.loads((model_dir / "tuneloop.json").read_text())
    assert meta[routes.RECORD]["cpu"]["rows"] == 200              # the end of training gated the model
    folder = tmp_path / "model"
    shutil.copytree(model_dir, folder)
    del meta[routes.RECORD]
    (folder / "tuneloop.json").write_text(json.dumps(meta))
    items = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("red green blue bird", "the alpha")]
    with tuneloop.load(folder) as fp32, tuneloop.load(folder, precision="auto") as auto:
        assert fp32.precision == auto.precision == "fp32"                     # nothing recorded yet: exact
        expected = fp32.predict_proba(items)
        int8 = fp32.with_route("int8")
        assert int8.precision == "int8" and fp32.model is not int8.model      # the fp32 model is left as it is
        assert np.abs(int8.predict_proba(items) - expected).max() < 0.1
    record = gate_folder(folder)
    saved = json.loads((folder / "tuneloop.json").read_text())[routes.RECORD]["cpu"]
    assert saved == record and record["rows"] == 200 and record["fp32_rows_per_s"] > 0
    for route, check in record["checks"].items():
        assert routes.supported(route, "cpu") and check["rows"] == 200
        assert {"decision_agreement", "max_probability_difference", "drop_points", "speedup"} <= set(check)
    assert record["route"] == routes.choose(record["checks"])
    with tuneloop.load(folder, precision="auto") as auto:
        assert auto.precision == record["route"]
    # a recorded route is taken where it is computed natively, fp32 elsewhere; fp32 stays exact
    routes.write_record(folder, "cpu", {**record, "route": "int8"})
    with tuneloop.load(folder, precision="auto") as auto:
        assert auto.precision == "int8" and auto.describe()["precision"] == "int8"
    monkeypatch.setattr(routes, "supported", lambda route, device: route == "fp32")
    with tuneloop.load(folder, precision="auto") as auto:
        assert auto.precision == "fp32"
    with pytest.raises(tuneloop.TuneloopError, match="--precision int8"):
        tuneloop.load(folder, precision="int8")
    monkeypatch.undo()
    capsys.readouterr()
    assert main(["predict", "--model", str(folder), "--precision", "fp32", *items[0]]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["prob_equivalent"] == pytest.approx(float(expected[0, 1]), abs=1e-5)


def test_the_onnx_route_is_written_only_when_chosen_and_auto_runs_it_without_the_model_code(model_dir, tmp_path,
                                                                                          monkeypatch):
    folder = tmp_path / "model"
    shutil.copytree(model_dir, folder)
    shutil.rmtree(routes.onnx_file(folder).parent, ignore_errors=True)
    items = [("the cat sat", "a alpha cat sat"), ("dog red", "beta dog"), ("red green blue bird", "the alpha")]
    with tuneloop.load(folder) as fp32:
        expected = fp32.predict_proba(items)
        with pytest.raises(tuneloop.TuneloopError, match="no int8 ONNX copy"):
            fp32.with_route(routes.ONNX)
    # the ONNX copy as the only candidate, and no speed asked of it: the gate keeps it where decisions agree
    monkeypatch.setattr(routes, "CANDIDATES", {"cpu": (routes.ONNX,)})
    monkeypatch.setattr(routes, "MIN_GAIN", 0.0)
    record = gate_folder(folder)
    check = record["checks"][routes.ONNX]
    assert check["rows"] == 200 and check["max_logit_difference"] < 0.5
    assert record["route"] == (routes.ONNX if check["verdict"] == "pass" else "fp32")
    assert routes.onnx_file(folder).is_file() == (record["route"] == routes.ONNX)
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []      # no staging folder left
    routes.write_record(folder, "cpu", {**record, "route": routes.ONNX})
    if not routes.onnx_file(folder).is_file():       # not kept: nothing to take, auto stays exact
        with tuneloop.load(folder, precision="auto") as auto:
            assert auto.precision == "fp32"
        pytest.fail(f"the ONNX copy of the tiny model did not pass the gate: {check}")
    with tuneloop.load(folder, precision="auto") as auto:
        assert auto.precision == routes.ONNX and auto.backend == "onnx"
        assert np.abs(auto.predict_proba(items) - expected).max() < 0.05
    # auto in a fresh process: the transformers model code is never imported
    script = (f"import sys, tuneloop\nwith tuneloop.load({str(folder)!r}, precision='auto') as c:\n"
              f"    c.predict([('the cat', 'a dog')])\n    print(c.precision)\n"
              "print(sorted(m for m in sys.modules if m.startswith('transformers.models.') and '.modeling_' in m "
              "and '.auto.' not in m))")                 # a model family's code (bert's: two seconds to import)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [routes.ONNX, "[]"]
    # gated where the copy is no candidate (as a GPU's gate): the copy stays for the CPU's record
    monkeypatch.setattr(routes, "CANDIDATES", {"cpu": ()})
    assert gate_folder(folder)["route"] == "fp32" and routes.onnx_file(folder).is_file()
    # gated again with the copy a candidate but not chosen (nothing is fast enough): the earlier copy goes
    monkeypatch.setattr(routes, "CANDIDATES", {"cpu": (routes.ONNX,)})
    monkeypatch.setattr(routes, "MIN_GAIN", 1e9)
    assert gate_folder(folder)["route"] == "fp32" and not routes.onnx_file(folder).parent.exists()
    with tuneloop.load(folder, precision="auto") as auto:
        assert auto.precision == "fp32"


def test_predicting_imports_no_data_libraries(model_dir, tmp_path):
    """datasets, pandas, scikit-learn, matplotlib: none is needed to predict from Python or a file (accelerate is:
    transformers imports it to load a model)."""
    source = tmp_path / "new.csv"
    source.write_text("sentence1,sentence2\nthe cat sat,a alpha cat\ndog red,beta dog\n")
    script = f"""
import sys, tuneloop
from tuneloop.cli.main import main
with tuneloop.load({str(model_dir)!r}) as clf:
    clf.predict([("the cat", "a dog")])
assert main(["predict", "--model", {str(model_dir)!r}, "--input", {str(source)!r}, "--output",
             {str(tmp_path / "out.tsv")!r}, "--quiet"]) == 0
print(sorted(m for m in ("datasets", "pandas", "sklearn", "matplotlib") if m in sys.modules))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "out.tsv").read_text().count("\n") == 3


def test_memory_does_not_grow_over_repeated_predict_calls(model_dir):
    """Python memory after 200 more calls (garbage collected): within 128 KB, about 640 bytes a call (measured
    here: ~25 KB, most of it inside transformers' forward); a batch's tensors or rows kept per call would pass it."""
    import gc

    texts = [(f"the cat {'alpha' if i % 2 else 'beta'} sat " * (i % 5 + 1), "a dog") for i in range(24)]
    with tuneloop.load(model_dir) as clf:
        for _ in range(20):                                                   # warm: caches and pools filled
            clf.predict(texts)
        tracemalloc.start()
        try:
            clf.predict(texts)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(200):
                clf.predict(texts)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert grown < 128 * 1024, f"{grown} bytes more after 200 calls"


def test_predicting_texts_the_tokenizer_cannot_read_says_so_and_still_writes(tiny_model, tmp_path, capsys):
    """Rows of words outside the vocabulary are [UNK] to the model: the predictions are written, with a warning."""
    texts = ["the cat sees a dog", "a red car is fast"] * 10
    model_dir = tuneloop.train(**fast_options(tiny_model, epochs=1), train=(texts, ["cat", "car"] * 10),
                               output_dir=str(tmp_path / "run")).output_dir
    rows = tmp_path / "in.csv"
    rows.write_text("text\nzebra quokka tapir\nthe cat sees a dog\n")
    capsys.readouterr()
    assert main(["predict", "--model", model_dir, "--input", str(rows), "--output", str(tmp_path / "o.csv")]) == 0
    said = capsys.readouterr().err.splitlines()
    assert any(m.startswith(f"{rows}: 38% of the texts' tokens are the tokenizer's unknown token [UNK]")   # 3 of 8
               for m in said), said
    assert len((tmp_path / "o.csv").read_text().splitlines()) == 3
    rows.write_text("text\nthe cat sees a dog\n")
    assert main(["predict", "--model", model_dir, "--input", str(rows), "--output", str(tmp_path / "p.csv")]) == 0
    assert "unknown token" not in capsys.readouterr().err


def test_predict_evaluate_and_export_say_how_a_file_was_read_and_quiet_keeps_only_warnings(model_dir, tmp_path,
                                                                                           capsys):
    """Their notes reach the console as a run's do: here the separator guessed from a header without a comma,
    said from the file's first read (predict's column check, before the model loads); --quiet keeps warnings."""
    dev = tmp_path / "dev.csv"
    dev.write_text("label;sentence1;sentence2\n" + "".join(f"{i % 2};alpha one {i};two {'alpha' if i % 2 else 'beta'}\n"
                                                           for i in range(30)))
    rows = tmp_path / "new.csv"
    rows.write_text("sentence1;sentence2\nalpha one;two alpha\n")
    note = "its header has no comma but ';': read with ';' as the separator"
    capsys.readouterr()
    assert main(["predict", "--model", str(model_dir), "--input", str(rows), "--output", str(tmp_path / "o.tsv")]) == 0
    assert f"{rows}: {note}" in capsys.readouterr().err
    rows.write_text("sentence1;sentence2\nalpha two;one alpha\n")        # another file (the note is said once a file)
    assert main(["predict", "--model", str(model_dir), "--input", str(rows), "--output", str(tmp_path / "q.tsv"),
                 "--quiet"]) == 0
    assert note not in capsys.readouterr().err
    assert main(["evaluate", str(model_dir), "--validation-file", str(dev)]) == 0
    err = capsys.readouterr().err
    assert f"{dev}: {note}" in err and "data validation: 30 rows" in err
    assert main(["export", str(model_dir), "--output", str(tmp_path / "onnx")]) == 0
    err = capsys.readouterr().err
    assert err.count("data validation: ") == 1, err         # the exported model reads the same rows: said once


def test_predict_from_python_says_once_per_model_when_its_texts_are_unreadable(tiny_model, caplog):
    """Classifier.predict (and serve, through the same logits) warns the first time its texts are 5% or more
    [UNK], once for the loaded model; readable texts say nothing."""
    import logging

    clf = tuneloop.load(tiny_model)
    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        clf.predict(["the cat sees a dog"])
        assert not any("unknown token" in r.getMessage() for r in caplog.records)
        clf.predict(["zebra quokka tapir", "the cat sees a dog"])
        clf.predict_proba(["zebra quokka tapir"])
    said = [r.getMessage() for r in caplog.records if "unknown token" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("texts to predict (said once for this model): 38% of the texts'")


def test_an_experiment_gates_the_model_it_keeps_once_and_off_gates_nothing(tiny_model, tmp_path, monkeypatch):
    """Each seed's run gated a model that --keep best then deleted (on a CPU an ONNX export each, ~20 s for
    MiniLM): the runs skip it and OUT/model is gated once; --precision-gate off skips it everywhere."""
    data = write_mrpc_folder(tmp_path / "MRPC", n_train=40, n_dev=200, n_test=10)
    gated = []
    real = routes.gate

    def counted(clf, *args, **kwargs):
        gated.append(Path(clf.path).resolve())
        return real(clf, *args, **kwargs)

    monkeypatch.setattr(routes, "gate", counted)
    options = {**fast_options(tiny_model, epochs=1), "task": "mrpc", "data_dir": str(data)}
    summary = tuneloop.train(**options, seeds=[1, 2], output_dir=str(tmp_path / "seeds"))
    assert gated == [(tmp_path / "seeds" / "model").resolve()]
    meta = json.loads((tmp_path / "seeds" / "model" / "tuneloop.json").read_text())
    assert meta[routes.RECORD]["cpu"]["rows"] == 200
    kept = tmp_path / "seeds" / summary["kept"] / "model"
    assert routes.RECORD not in json.loads((kept / "tuneloop.json").read_text())
    tuneloop.train(**options, precision_gate="off", output_dir=str(tmp_path / "off"))
    assert len(gated) == 1
    assert routes.RECORD not in json.loads((tmp_path / "off" / "model" / "tuneloop.json").read_text())


def test_a_stop_before_training_began_ends_the_run_at_once(tiny_model, tmp_path, monkeypatch):
    """Ctrl-C while 200,000 rows were tokenized was noted for 'the end of this step': the run read on, loaded the
    model, trained a step and saved a checkpoint of it (40 s). Before the run is set up, a stop is a stop."""
    import signal

    from tuneloop.exceptions import Interrupted
    from tuneloop.training import setup_steps

    data = write_mrpc_folder(tmp_path / "MRPC", n_train=40, n_dev=20, n_test=10)
    read = setup_steps.setup_data

    def read_then_sigterm(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return read(*args, **kwargs)

    monkeypatch.setattr(setup_steps, "setup_data", read_then_sigterm)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted, match="interrupted before training began: nothing was saved") as stopped:
        tuneloop.train(**fast_options(tiny_model, epochs=1), task="mrpc", data_dir=str(data),
                       output_dir=str(tmp_path / "run"))
    assert stopped.value.signal_number == signal.SIGTERM and not (tmp_path / "run").exists()
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_gate_reads_only_the_validation_rows_the_run_was_told_to_evaluate(tiny_model, tmp_path):
    data = write_mrpc_folder(tmp_path / "MRPC", n_train=40, n_dev=260, n_test=4)
    out = tmp_path / "run"
    tuneloop.train(**fast_options(tiny_model, epochs=1), task="mrpc", data_dir=str(data), output_dir=str(out),
                   max_eval_samples=230)
    results = json.loads((out / "results.json").read_text())
    record = json.loads((out / "model" / "tuneloop.json").read_text())[routes.RECORD]["cpu"]
    assert results["eval"]["num_samples"] == 230 and record["rows"] == 230      # not all 260 the file holds
    assert all(check["rows"] == 230 for check in record["checks"].values())


@pytest.mark.parametrize("route", ["bf16", "fp16"])
def test_a_half_precision_route_keeps_the_heads_resolution_for_scores_far_from_zero(tiny_model, route):
    """A regression head with a target scale folded in (prices near 40,000) answered in steps of 256 in bf16: the
    route's head computes in fp32, so every text gets its own score and the scores follow fp32's."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(tiny_model, num_labels=1, ignore_mismatched_sizes=True).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(10_000)
        model.classifier.bias.fill_(40_000)
    words = "alpha beta gamma delta the a cat dog sees red car is fast".split()
    texts = [" ".join(words[(i * 7 + j) % len(words)] for j in range(3 + i % 5)) for i in range(40)]
    inputs = AutoTokenizer.from_pretrained(tiny_model)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        exact = model(**inputs).logits.view(-1)
        half = routes.applied(model, route)(**inputs).logits.view(-1)
    assert half.dtype == torch.float32 and model.classifier.weight.dtype == torch.float32   # the fp32 model as it was
    assert len(set(half.tolist())) == len(set(exact.tolist())) > 30
    assert np.corrcoef(half.numpy(), exact.numpy())[0, 1] > 0.99


def test_the_gate_counts_and_takes_whole_texts_not_windows(tiny_model, tmp_path):
    """--windows: 80 validation texts cut into ~270 windows were gated though the gate needs GATE_MIN_ROWS texts,
    and the gate's first rows could hold part of a text's windows."""
    import datasets

    windows = datasets.Dataset.from_dict({"doc": [0, 0, 1, 1, 1, 2, 3, 3], "input_ids": [[1]] * 8})
    assert routes.first_texts(windows, 2) == [0, 1, 2, 3, 4] and routes.first_texts(windows, 9) == list(range(8))
    assert Tokenized.of(windows.select(routes.first_texts(windows, 3))).texts() == 3
    rng = __import__("random").Random(0)
    for name, n in (("train.csv", 120), ("dev.csv", 80)):
        with open(tmp_path / name, "w", encoding="utf-8") as f:
            f.write("text,label\n")
            for _ in range(n):
                label = rng.randint(0, 1)
                words = [rng.choice(["the", "a", "cat", "dog", "red", "car"]) for _ in range(30)]
                words.insert(rng.randint(0, 30), "alpha" if label else "beta")
                f.write(f"{' '.join(words)},{label}\n")
    out = tmp_path / "run"
    tuneloop.train(**fast_options(tiny_model, epochs=1), train_file=str(tmp_path / "train.csv"),
                   validation_file=str(tmp_path / "dev.csv"), max_length=16, windows=4, output_dir=str(out))
    assert "windows of 80 texts" in (out / "train.log").read_text()
    assert "precision_routes" not in json.loads((out / "model" / "tuneloop.json").read_text())    # 80 < 200 texts
