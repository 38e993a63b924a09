"""The training loop's options at their edges: --eval-every K/epoch's cadence, the logged throughput, what
--dry-run claims, and --metric-for-best changed on a resume."""

from __future__ import annotations

import types

import pytest
from conftest import fast_options

import tuneloop
from tuneloop import TrainConfig
from tuneloop.training import dry_run, progress, timeline
from tuneloop.training.progress import TrainLog, read_metrics
from tuneloop.training.state import Plan, TrainState
from tuneloop.training.timeline import Timeline


def due(plan: Plan) -> list[int]:
    return [s for s in range(1, plan.total_steps + 1) if plan.eval_due(s)]


def test_eval_every_k_per_epoch_evaluates_k_times_in_every_epoch():
    # 13 steps per epoch, 4/epoch: a global interval of 13 // 4 = 3 evaluated 5 times in epoch 1 (3, 6, 9, 12 and 13,
    # one step apart) and drifted in epoch 2 (15, 18, ...)
    plan = Plan.make(13, TrainConfig(eval_every="4/epoch", epochs=2), 1)
    assert due(plan) == [4, 7, 10, 13, 17, 20, 23, 26]
    # a real epoch: never two evaluations one step apart before its end
    assert due(Plan.make(1377, TrainConfig(eval_every="4/epoch", epochs=1), 1)) == [345, 689, 1033, 1377]
    assert due(Plan.make(100, TrainConfig(eval_every="4/epoch", epochs=2), 1)) == [25, 50, 75, 100, 125, 150, 175,
                                                                                    200]
    assert due(Plan.make(3, TrainConfig(eval_every="4/epoch", epochs=2), 1)) == [1, 2, 3, 4, 5, 6]   # more than steps
    # many short epochs (no evaluation at each epoch's end by itself): still K per epoch, as asked
    assert due(Plan.make(5, TrainConfig(eval_every="2/epoch", epochs=40), 1))[:6] == [3, 5, 8, 10, 13, 15]
    # --eval-every N (steps) is unchanged
    assert due(Plan.make(10, TrainConfig(eval_every=4, epochs=2), 1)) == [4, 8, 10, 12, 16, 20]


class FakeAccelerator:
    is_main_process, num_processes, device = True, 1, types.SimpleNamespace(type="cpu")

    def __init__(self):
        self.logged = []

    def reduce(self, tensor, reduction="mean"):
        return tensor

    def log(self, values, step=None):
        self.logged.append({"step": step, **values})


def test_logged_samples_per_second_leaves_out_evaluations_and_counts_the_rows_seen(monkeypatch):
    now = [0.0]
    clock = types.SimpleNamespace(perf_counter=lambda: now[0], time=lambda: now[0])
    monkeypatch.setattr(progress, "time", clock)
    monkeypatch.setattr(timeline, "time", clock)
    import torch

    line = Timeline()
    acc = FakeAccelerator()
    # batch 8 × accumulation 3 = 24 a step; the epoch's last step holds one short batch of 4 rows
    log = TrainLog(acc, 4, 0, 2, True, line, samples=0)
    for step, samples in ((1, 24), (2, 48)):
        now[0] += 1.0
        log.add_loss(torch.tensor(0.5))
        log.step(step, step / 4, 1e-3, samples)
    with line.phase("evaluations"):            # a 10 s evaluation between two logged windows
        now[0] += 10.0
    for step, samples in ((3, 72), (4, 76)):
        now[0] += 1.0
        log.add_loss(torch.tensor(0.5))
        log.step(step, step / 4, 1e-3, samples)
    log.close()
    sps = [r["train/samples_per_second"] for r in acc.logged]
    assert sps == [24.0, 14.0]                 # was [24.0, 4.0]: 2 steps × 24 over 12 s, the evaluation included
    assert log.training_s == pytest.approx(4.0)     # 14 s of loop less the evaluation's 10 s
    with line.phase("results"):                # after the loop (the timeline's count starts again): not training
        now[0] += 5.0
    line.mark("training steps")
    assert log.training_s == pytest.approx(9.0)     # runtime goes on (results.json's runtime_s), aside stays fixed


def test_dry_run_claims_the_epochs_the_run_trains(tiny_model, mrpc_dir, tmp_path, capsys):
    plan = Plan.make(7, TrainConfig(max_steps=17, epochs=3), 1)
    assert dry_run.epochs(plan) == pytest.approx(2.4286)       # was 3 (rounded up), results.json says 2.4286
    assert dry_run.epochs(Plan.make(7, TrainConfig(epochs=3), 1)) == 3
    common = {"task": "mrpc", "data_dir": str(mrpc_dir), "max_steps": 33, **fast_options(tiny_model)}
    info = tuneloop.train(TrainConfig(output_dir=str(tmp_path / "dry"), dry_run=True, **common))
    real = tuneloop.train(TrainConfig(output_dir=str(tmp_path / "run"), **common))
    assert info["epochs"] == real["train"]["epochs"] == 1.32 and info["total_steps"] == real["train"]["steps"] == 33
    assert not (tmp_path / "dry").exists()


def evaluation(accuracy: float, loss: float) -> dict:
    return {"validation": {"accuracy": accuracy, "loss": loss}}


def test_a_resume_that_changes_metric_for_best_compares_like_with_like(caplog):
    state = TrainState()
    for step, (acc, loss) in enumerate([(0.2, 0.95), (0.3, 0.80), (0.25, 0.85)], 1):
        state.step = step
        state.record_evaluation(evaluation(acc, loss), "accuracy", 10)
    assert state.best["step"] == 2
    # resumed with --metric-for-best loss: each loss was compared with accuracy 0.3 (-0.88 < -0.3: "no better"), so
    # OUT/best/ never moved again and early stopping counted every evaluation as one without improvement
    moved = TrainState.from_dict(state.to_dict(), 10, 1)
    moved.history[2]["results"] = evaluation(0.25, 0.70)      # the best loss (step 3) is not what OUT/best/ holds
    moved.step = 4
    assert moved.record_evaluation(evaluation(0.2, 0.88), "loss", 10)       # counted afresh: OUT/best/ is step 4
    assert "--metric-for-best loss" in caplog.text and "step 2" in caplog.text
    moved.step = 5
    assert moved.record_evaluation(evaluation(0.2, 0.75), "loss", 10)
    assert moved.best == {"metric": "loss", "value": 0.75, "step": 5, "epoch": 0.5}
    assert moved.evals_without_improvement == 0
    # where the other metric's best is the same evaluation (step 2), its best and patience carry on, silently
    same = TrainState.from_dict(state.to_dict(), 10, 1)
    same.step = 4
    caplog.clear()
    assert not same.record_evaluation(evaluation(0.2, 0.90), "loss", 10)
    assert same.best == {"metric": "loss", "value": 0.80, "step": 2, "epoch": 0.2}
    assert same.evals_without_improvement == 2 and not caplog.text


def test_metrics_jsonl_evaluates_k_per_epoch_in_a_real_run(tiny_model, mrpc_dir, tmp_path):
    # 200 rows / batch 8 = 25 steps an epoch; 4/epoch: 7, 13, 19, 25 (was 6, 12, 18, 24 and 25)
    out = tmp_path / "run"
    tuneloop.train(TrainConfig(task="mrpc", data_dir=str(mrpc_dir), output_dir=str(out), eval_every="4/epoch",
                               **fast_options(tiny_model, epochs=1)))
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl") if "eval/accuracy" in r] == [7, 13, 19, 25]


def test_a_stopped_run_says_in_train_log_where_its_checkpoint_is_and_how_to_resume(tiny_model, mrpc_dir, tmp_path):
    import os
    import signal

    from tuneloop.exceptions import Interrupted

    out = tmp_path / "run"

    def stop_at_three(state):
        if state.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)         # as a scheduler's stop: noted, acted on at the next step

    with pytest.raises(Interrupted):
        tuneloop.train(TrainConfig(task="mrpc", data_dir=str(mrpc_dir), output_dir=str(out),
                                   **fast_options(tiny_model, epochs=1)), on_step=stop_at_three)
    last = (out / "train.log").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert "interrupted at step 4; checkpoint saved in" in last and "step-0000004" in last and "--resume" in last


def test_no_checkpoint_is_saved_of_weights_a_nonfinite_loss_made(tiny_model, mrpc_dir, tmp_path, monkeypatch):
    # the loss is read every --log-every (10) steps; --save-every 5 saved step 5's NaN weights first, and the error
    # then said "checkpoints already saved are intact" while --resume would continue from them
    import torch
    from test_checkpoint import poison_classifier

    from tuneloop import TuneloopError
    from tuneloop.training.checkpoint import list_checkpoints

    poison_classifier(monkeypatch, (3,))
    good = tmp_path / "good"
    with pytest.raises(TuneloopError, match=r"loss became nan by step 5"):
        tuneloop.train(TrainConfig(task="mrpc", data_dir=str(mrpc_dir), output_dir=str(good), max_steps=12,
                                   save_every="5", log_every=10, **fast_options(tiny_model)))
    for folder in list_checkpoints(good):
        from safetensors.torch import load_file

        assert all(torch.isfinite(t).all() for t in load_file(str(folder / "model.safetensors")).values())
    assert not list_checkpoints(good)                 # step 5's weights were already NaN: nothing to resume from


def test_dry_run_says_what_the_real_run_would_refuse_and_where_a_resume_goes_on(tiny_model, mrpc_dir, tmp_path,
                                                                                 capsys):
    out = tmp_path / "run"
    common = {"task": "mrpc", "data_dir": str(mrpc_dir), "output_dir": str(out), "max_steps": 10,
              **fast_options(tiny_model)}
    tuneloop.train(TrainConfig(save_every="4", **common))
    info = tuneloop.train(TrainConfig(dry_run=True, **common))           # the real run: "already holds a run"
    assert "already holds an earlier tuneloop run" in info["refused"]
    assert "--dry-run: the run itself would stop here" in capsys.readouterr().err
    with pytest.raises(tuneloop.TuneloopError, match="already holds an earlier tuneloop run"):
        tuneloop.train(TrainConfig(**common))
    assert "refused" not in tuneloop.train(TrainConfig(dry_run=True, overwrite=True, **common))
    resumed = tuneloop.train(TrainConfig(dry_run=True, resume="latest", save_every="4", **common))
    assert "refused" not in resumed
    assert resumed["resume"]["step"] == 8 and resumed["resume"]["steps_left"] == 2
    assert resumed["resume"]["checkpoint"].endswith("step-0000008")


def test_a_dry_run_resume_leaves_metrics_jsonl_as_it_was(tiny_model, mrpc_dir, tmp_path):
    """It cut metrics.jsonl back to the checkpoint's step (the steps after it lost), though a dry run writes nothing."""
    out = tmp_path / "run"
    common = {"task": "mrpc", "data_dir": str(mrpc_dir), "output_dir": str(out), "max_steps": 10, "save_every": "4",
              **fast_options(tiny_model)}
    tuneloop.train(TrainConfig(**common))
    before = (out / "metrics.jsonl").read_text()
    tuneloop.train(TrainConfig(dry_run=True, resume=str(out / "checkpoints" / "step-0000004"), **common))
    assert (out / "metrics.jsonl").read_text() == before


def test_cosine_with_restarts_restarts_at_every_epoch():
    """With transformers' one cycle it was `cosine` step for step: the option changed nothing."""
    import torch

    from tuneloop.model.optim import build_scheduler

    def rates(name, cycles):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        scheduler = build_scheduler(optimizer, name, 30, 0, 0.0, cycles=cycles)
        out = []
        for _ in range(30):
            out.append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
        return out

    restarts, cosine = rates("cosine_with_restarts", 3), rates("cosine", 3)
    assert restarts[0] == restarts[10] == restarts[20] == 1.0 and restarts[9] < 0.05       # up again each epoch
    assert cosine[10] < 0.8 and restarts != cosine


def test_max_steps_beside_a_given_epochs_is_said(tiny_model, mrpc_dir, tmp_path):
    """--epochs 5 --max-steps 7 trained 7 steps without a word of the epochs asked for."""
    common = {"task": "mrpc", "data_dir": str(mrpc_dir), **fast_options(tiny_model)}
    out = tmp_path / "a"
    tuneloop.train(TrainConfig(output_dir=str(out), max_steps=7, chosen=["epochs", "max_steps"],
                               **{**common, "epochs": 5}))
    said = (out / "train.log").read_text()
    assert "--max-steps 7 sets the run's length (0.28 epochs of 25 steps): --epochs 5 is not used" in said
    tuneloop.train(TrainConfig(output_dir=str(tmp_path / "b"), max_steps=7, chosen=["max_steps"], **common))
    assert "sets the run's length" not in (tmp_path / "b" / "train.log").read_text()      # --epochs not given


def test_an_early_stopped_run_resumed_with_more_patience_trains_on(tiny_model, mrpc_dir, tmp_path):
    """The checkpoint's `stopped_early` ended the resumed loop at once: no step was trained, whatever the patience."""
    out = tmp_path / "run"
    common = {"task": "mrpc", "data_dir": str(mrpc_dir), "output_dir": str(out), "eval_every": "2",
              "save_every": "2", **fast_options(tiny_model, lr=1e-7, epochs=2)}       # nothing improves
    first = tuneloop.train(TrainConfig(early_stopping_patience=1, **common))
    assert first["stopped_early"] and first["train"]["steps"] == 4
    again = tuneloop.train(TrainConfig(early_stopping_patience=3, resume="latest", **common))
    assert again["stopped_early"] and again["train"]["steps"] == 8      # two more evaluations without improvement
    assert '"steps": 8' in (out / "results.json").read_text()
