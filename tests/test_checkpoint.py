"""Never lose training: kill and resume equals an uninterrupted run; damaged checkpoints; signals; best model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import build_tiny_model, fast_options, write_mrpc_folder
from safetensors.torch import load_file

import tuneloop
from tuneloop import TrainConfig, TuneloopError
from tuneloop.training.checkpoint import list_checkpoints
from tuneloop.training.progress import read_metrics

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dropout_model(tmp_path_factory):
    """With dropout, an exact resume also needs the random streams restored."""
    return str(build_tiny_model(tmp_path_factory.mktemp("dropout-bert"), dropout=0.1))


def options(model, data, out, **extra):
    return {"task": "mrpc", "data_dir": str(data), "output_dir": str(out),
            **fast_options(model, **{"epochs": 2, "save_every": "10", "log_every": 1, **extra})}


def cli_args(opts: dict) -> list[str]:
    args = []
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        elif value is not None:
            args += [flag, str(value)]
    return args


# `tuneloop train`, slowed down by an on_step hook so that a test can interrupt it at a chosen point
SLOW_CLI = ("import sys, time; from tuneloop.cli import main; "
            "sys.exit(main(sys.argv[2:], on_step=lambda state: time.sleep(float(sys.argv[1]))))")


def start_training(opts: dict, delay: float = 0.05) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", SLOW_CLI, str(delay), "train", *cli_args(opts)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, proc, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"training ended early ({proc.returncode}): {proc.stderr.read()[-2000:]}")
        time.sleep(0.02)
    raise AssertionError("timed out")


def weights(run_dir: Path) -> dict:
    return load_file(str(run_dir / "model" / "model.safetensors"))


def assert_same_weights(a: Path, b: Path):
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.allclose(wa[key], wb[key], atol=1e-6, rtol=0), key


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_mrpc_folder(tmp_path_factory.mktemp("ckpt-data") / "MRPC")


@pytest.fixture(scope="module")
def reference(dropout_model, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "run"
    results = tuneloop.train(TrainConfig(**options(dropout_model, data_dir, out)))
    return out, results


def test_sigkill_mid_epoch_then_resume_equals_uninterrupted(dropout_model, data_dir, reference, tmp_path):
    ref_dir, ref_results = reference
    out = tmp_path / "run"
    opts = options(dropout_model, data_dir, out)
    proc = start_training(opts)
    # step 30 is mid-way through epoch 2 (25 steps per epoch)
    wait_for(lambda: any(p.name == "step-0000030" for p in list_checkpoints(out)), proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "results.json").exists()
    logged_before = [r["step"] for r in read_metrics(out / "metrics.jsonl") if "train/loss" in r]
    assert max(logged_before) >= 30

    results = tuneloop.train(TrainConfig(**opts, resume="latest"))
    assert results["resumed_from"].endswith("step-0000030")
    assert_same_weights(ref_dir, out)
    for key in ("accuracy", "f1", "loss"):
        assert results["eval"][key] == pytest.approx(ref_results["eval"][key], abs=1e-6)
    records = read_metrics(out / "metrics.jsonl")
    steps = [r["step"] for r in records if "train/loss" in r]
    assert steps == list(range(1, 51))                            # every step once, none twice
    ref_losses = {r["step"]: r["train/loss"] for r in read_metrics(ref_dir / "metrics.jsonl") if "train/loss" in r}
    for r in records:
        if "train/loss" in r:
            assert r["train/loss"] == pytest.approx(ref_losses[r["step"]], abs=1e-6)
            assert r["train/lr"] == pytest.approx(next(x["train/lr"] for x in read_metrics(
                ref_dir / "metrics.jsonl") if x.get("step") == r["step"] and "train/lr" in x))
    assert [r["step"] for r in records if "eval/accuracy" in r] == [25, 50]
    # the label-issue ranking's probabilities continue across the kill: the same as the uninterrupted run's
    with np.load(out / "predictions" / "train_dynamics.npz") as a, \
            np.load(ref_dir / "predictions" / "train_dynamics.npz") as b:
        assert (a["counts"] == b["counts"]).all() and a["counts"].sum() == 2 * 200
        assert np.abs(a["sums"] - b["sums"]).max() < 1e-5
    assert (out / "label_issues.csv").read_text() == (ref_dir / "label_issues.csv").read_text()


def test_damaged_newest_checkpoint_falls_back_with_a_warning(dropout_model, data_dir, reference, tmp_path, capsys):
    ref_dir, ref_results = reference
    out = tmp_path / "run"
    opts = options(dropout_model, data_dir, out)
    tuneloop.train(TrainConfig(**opts))
    kept = [p.name for p in list_checkpoints(out)]
    assert kept == ["step-0000050", "step-0000040", "step-0000030"]          # --keep-last 3
    newest = out / "checkpoints" / "step-0000050" / "model.safetensors"
    newest.write_bytes(newest.read_bytes()[:100])                            # a torn write
    capsys.readouterr()
    results = tuneloop.train(TrainConfig(**opts, resume="latest"))
    warning = capsys.readouterr().err
    assert "step-0000050 is damaged" in warning and "falling back to step-0000040" in warning
    assert results["resumed_from"].endswith("step-0000040")
    assert results["train"]["steps"] == 50
    assert_same_weights(ref_dir, out)


def test_sigterm_saves_and_the_run_resumes(dropout_model, data_dir, reference, tmp_path):
    ref_dir, _ = reference
    out = tmp_path / "run"
    opts = options(dropout_model, data_dir, out, save_every="epoch")
    proc = start_training(opts)
    wait_for(lambda: len([r for r in read_metrics(out / "metrics.jsonl") if "train/loss" in r]) >= 12, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "--resume" in err and "Traceback" not in err
    saved = list_checkpoints(out)
    assert len(saved) == 1 and int(saved[0].name.split("-")[1]) >= 12
    results = tuneloop.train(TrainConfig(**opts, resume="latest"))
    assert results["train"]["steps"] == 50
    assert_same_weights(ref_dir, out)


def test_resume_refuses_an_incompatible_config_but_allows_harmless_changes(dropout_model, data_dir, tmp_path):
    out = tmp_path / "run"
    opts = options(dropout_model, data_dir, out, max_steps=20)
    tuneloop.train(TrainConfig(**opts))
    saved = (out / "config.yaml").read_bytes()
    with pytest.raises(TuneloopError, match=r"other settings .*--batch-size 8 → 16"):
        tuneloop.train(TrainConfig(**{**opts, "batch_size": 16}, resume="latest"))
    assert (out / "config.yaml").read_bytes() == saved           # a refused resume writes nothing
    with pytest.raises(TuneloopError, match=r"--lr"):
        tuneloop.train(TrainConfig(**{**opts, "lr": 1e-4}, resume="latest"))
    results = tuneloop.train(TrainConfig(**{**opts, "eval_every": 5, "log_every": 2}, resume="latest"))
    assert results["train"]["steps"] == 20


def test_resume_without_checkpoints_is_a_clear_error(tiny_model, data_dir, tmp_path):
    with pytest.raises(TuneloopError, match="no complete checkpoint"):
        tuneloop.train(TrainConfig(**options(tiny_model, data_dir, tmp_path / "empty", save_every=None),
                                   resume="latest"))


def test_cli_resume_needs_only_the_output_dir(tiny_model, data_dir, tmp_path, capsys):
    from tuneloop.cli.main import main

    out = tmp_path / "run"
    opts = options(tiny_model, data_dir, out, max_steps=20)
    tuneloop.train(TrainConfig(**opts))
    capsys.readouterr()
    assert main(["train", "--output-dir", str(out), "--resume", "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["resumed_from"].endswith("step-0000020")
    # its checkpoint is the last step's: no step trained here, so no throughput (was "0.0 samples/s", with the
    # end's seconds as training time)
    assert results["train"]["steps"] == 20 and results["train"]["samples_per_second"] is None
    assert results["train"]["training_s"] == 0.0
    assert "train: 20 steps, 0.8 epochs, every one before the resume" in capsys.readouterr().out


def test_best_model_is_kept_and_reported(tiny_model, data_dir, tmp_path):
    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(**options(tiny_model, data_dir, out, eval_every=5, save_every=None,
                                                   metric_for_best="loss")))
    evals = [r for r in read_metrics(out / "metrics.jsonl") if "eval/loss" in r]
    best = min(evals, key=lambda r: r["eval/loss"])
    assert results["best"]["metric"] == "loss"
    assert results["best"]["step"] == best["step"] and results["best"]["value"] == pytest.approx(best["eval/loss"])
    from transformers import AutoModelForSequenceClassification
    model = AutoModelForSequenceClassification.from_pretrained(out / "best")
    assert model.config.id2label == {0: "not_equivalent", 1: "equivalent"}


def test_early_stopping(tiny_model, tmp_path):
    # validation labels are the opposite of training labels: the better the model learns, the worse it scores
    data = write_mrpc_folder(tmp_path / "MRPC")
    dev = data / "dev.tsv"
    lines = dev.read_text(encoding="utf-8-sig").splitlines()
    flipped = [lines[0]] + [("1" if row[0] == "0" else "0") + row[1:] for row in lines[1:]]
    dev.write_bytes(b"\xef\xbb\xbf" + ("\n".join(flipped) + "\n").encode())
    results = tuneloop.train(TrainConfig(**options(tiny_model, data, tmp_path / "run", eval_every=3,
                                                   save_every=None, early_stopping_patience=2, epochs=3)))
    assert results["stopped_early"] is True
    assert results["train"]["steps"] < 75
    assert results["train"]["steps"] == results["best"]["step"] + 2 * 3


def poison_classifier(monkeypatch, at_calls: tuple[int, ...]) -> None:
    """Every model a run loads gives NaN outputs at these training forward passes (counted from 1): a loss that
    becomes non-finite there."""
    from tuneloop.training import setup_steps as setup

    real_load = setup.load_starting_model

    def poisoned_load(*args, **kwargs):
        loaded = real_load(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        calls = {"n": 0}

        def hook(module, inputs, output):
            calls["n"] += 1
            return output * float("nan") if calls["n"] in at_calls and module.training else output

        model.classifier.register_forward_hook(hook)
        return loaded

    monkeypatch.setattr(setup, "load_starting_model", poisoned_load)


def test_nonfinite_loss_stops_or_is_skipped(tiny_model, data_dir, tmp_path, monkeypatch):
    poison_classifier(monkeypatch, (3, 4))
    with pytest.raises(TuneloopError, match=r"loss became nan .*--skip-nonfinite-batches"):
        tuneloop.train(TrainConfig(**options(tiny_model, data_dir, tmp_path / "a", max_steps=10, save_every=None)))
    with pytest.raises(TuneloopError, match=r"loss became nan by step 4"):   # a run shorter than --log-every: the
        tuneloop.train(TrainConfig(**options(tiny_model, data_dir, tmp_path / "short", max_steps=4,   # loss was
                                             save_every=None, log_every=10)))                   # never checked
    results = tuneloop.train(TrainConfig(**options(tiny_model, data_dir, tmp_path / "b", max_steps=10,
                                                   save_every=None, skip_nonfinite_batches=True)))
    assert results["train"]["skipped_nonfinite_batches"] == 2
    assert results["eval"]["loss"] == pytest.approx(results["eval"]["loss"])          # finite, not NaN
    assert all(torch.isfinite(t).all() for t in weights(tmp_path / "b").values())


def test_options_newer_than_a_checkpoint_count_as_their_defaults():
    from tuneloop.training.checkpoint import incompatible_changes

    current = TrainConfig(lr=1e-4).to_dict()
    older = {k: v for k, v in current.items() if k not in ("class_weights", "truncation", "windows")}
    assert incompatible_changes(older, current) == []
    assert incompatible_changes(older, {**current, "class_weights": "balanced"}) == \
        ["--class-weights 'none' → 'balanced'"]


def test_a_full_disk_while_checkpointing_is_one_line_and_spares_earlier_checkpoints(tiny_model, data_dir, tmp_path,
                                                                                    monkeypatch, capsys):
    import errno

    import accelerate.accelerator

    from tuneloop.cli import main

    real, calls = accelerate.accelerator.save_accelerator_state, []

    def filling_the_disk(output_dir, *args, **kwargs):
        calls.append(output_dir)
        if len(calls) == 2:                          # the second checkpoint finds the disk full half-way
            Path(output_dir, "model.safetensors").write_bytes(b"x" * 1000)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(output_dir, *args, **kwargs)

    monkeypatch.setattr(accelerate.accelerator, "save_accelerator_state", filling_the_disk)
    out = tmp_path / "run"
    assert main(["train", *cli_args(options(tiny_model, data_dir, out))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no space left on device while saving checkpoint" in err[0], err
    assert "MB needed; earlier files are intact" in err[0] and "Traceback" not in err[0]
    kept = list_checkpoints(out)
    assert [p.name for p in kept] == ["step-0000010"]                # the first one, complete and loadable
    assert not any(p.name.endswith(".tmp") for p in (out / "checkpoints").iterdir())
    assert main(["train", "--output-dir", str(out), "--resume", "--quiet"]) == 0      # space back: it resumes


def test_a_resume_may_change_exactly_the_options_declared_resumable():
    from tuneloop.config.options import with_trait
    from tuneloop.training.checkpoint import incompatible_changes

    resumable = set(with_trait("resumable"))
    assert {"eval_every", "attention", "validation_file", "chosen"} <= resumable and "lr" not in resumable
    saved = TrainConfig(small_data="off", setfit_pooling="mean").to_dict()   # decided, as a checkpoint's are
    for name in saved:
        refused = incompatible_changes(saved, {**saved, name: "changed"})
        assert bool(refused) == (name not in resumable), name
    undecided = {**saved, **{n: "changed" for n in with_trait("small_data")}, "small_data": "auto"}
    assert incompatible_changes(saved, undecided) == []     # auto's options are decided from the data, then checked


def test_a_second_run_into_a_folder_being_written_is_refused(tiny_model, data_dir, tmp_path, capsys):
    """A --resume (or --overwrite) typed while the run still trained wrote the same checkpoints, metrics and model
    beside it, both exiting 0; the lock is the run's for its life only (a run after it ends works)."""
    from tuneloop.cli import main

    out = tmp_path / "run"
    opts = options(tiny_model, data_dir, out, max_steps=6, save_every="2")
    first = start_training(opts, delay=0.5)
    try:
        wait_for(lambda: (out / "checkpoints" / "step-0000002").is_dir(), first)
        for flag in ("--resume", "--overwrite"):
            code, err = main(["train", *cli_args({**opts, "max_steps": 8}), flag]), capsys.readouterr().err
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert f"--output-dir {out}: another tuneloop run (process {first.pid} on " in err
        assert first.wait(timeout=120) == 0, first.stderr.read()[-2000:]
    finally:
        first.kill()
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()
            if "train/loss" in line] == list(range(1, 7))                       # the first run's steps alone
    assert tuneloop.train(TrainConfig(**{**opts, "overwrite": True}))["train"]["steps"] == 6      # released


def test_a_file_system_without_locks_runs_unlocked(tmp_path, monkeypatch):
    """flock on some network mounts fails with ENOLCK: the run goes on unlocked instead of ending in a traceback."""
    import errno

    from tuneloop.runtime import folder_lock

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(folder_lock.fcntl, "flock", no_locks)
    with folder_lock.holding():
        folder_lock.take(tmp_path)
        assert folder_lock.holder(tmp_path) is None


class OneProcess:
    """What save_checkpoint asks of an Accelerator, for one process: save_state writes a file of the step."""

    is_main_process = True

    def wait_for_everyone(self):
        pass

    def save_state(self, folder):
        Path(folder).mkdir(parents=True)
        Path(folder, "model.safetensors").write_text(folder)


def test_keep_last_never_prunes_the_checkpoint_just_saved_and_orders_by_step(tmp_path):
    """A run resumed from an older checkpoint (--resume PATH) counted the newer ones left by the run it went back
    from as the newest: --keep-last 1 removed the checkpoint just saved (the stop's message named a folder that was
    gone) and a later --resume went on with that other run."""
    from tuneloop.training.checkpoint import save_checkpoint

    acc = OneProcess()
    for step in (2, 4, 6, 8):
        save_checkpoint(acc, tmp_path, step, {"step": step}, keep_last=5)
    saved = save_checkpoint(acc, tmp_path, 4, {"step": 4}, keep_last=1)       # resumed from step 2
    assert saved.is_dir() and [p.name for p in list_checkpoints(tmp_path)] == ["step-0000004"]
    for step in (9_999_999, 10_000_000):                                     # names wider than 7 digits
        save_checkpoint(acc, tmp_path, step, {"step": step}, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-10000000", "step-9999999"]


@pytest.mark.parametrize("content", ["[]", '{"step": 10}', '{"step": 10, "config": "x"}', "3"])
def test_a_state_file_that_holds_no_run_state_counts_as_damaged(tmp_path, content):
    """Valid JSON that is not a checkpoint's state (a list, no config) ended --resume in a TypeError/KeyError."""
    from tuneloop.training.checkpoint import check_resumable

    current = TrainConfig().to_dict()
    newest = tmp_path / "checkpoints" / "step-0000010"
    newest.mkdir(parents=True)
    (newest / "tuneloop_state.json").write_text(content)
    with pytest.raises(TuneloopError, match=r"no loadable checkpoint .*step-0000010 is damaged .*holds no run state"):
        check_resumable(tmp_path, "latest", current, 1)
    older = tmp_path / "checkpoints" / "step-0000005"
    older.mkdir()
    (older / "tuneloop_state.json").write_text(json.dumps({"step": 5, "config": current, "num_processes": 1}))
    check_resumable(tmp_path, "latest", current, 1)                          # the older one is used
