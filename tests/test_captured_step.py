"""The captured step's CPU side: its static-buffer step (eagerly, as on a CPU) trains like the Accelerate step on
length-bucketed batches, the schedule reaching the optimizer through device tensors; when a run may capture its
step and why (step_choice.decide). The recording itself needs a GPU: benchmarks/check_captured_step.py there."""

from __future__ import annotations

import pytest
import torch
from conftest import fast_options

from tuneloop import TrainConfig
from tuneloop.data.batch import BatchCollator
from tuneloop.exceptions import ConfigError
from tuneloop.objective import objective_for
from tuneloop.tasks import SINGLE_LABEL
from tuneloop.training import step_choice
from tuneloop.training.step import AccelerateStep, CapturedStep

TEXTS = [("the cat is good", 1), ("a dog is bad and the plot is thin", 0), ("great movie", 1),
         ("awful film, awful plot, awful acting all the way through", 0), ("fine", 1), ("not fine at all", 0),
         ("a long and winding sentence about nothing much at all really", 1), ("short one", 0),
         ("the best thing i saw this year", 1), ("dull", 0)]


def _batches(tokenizer, multiple):
    """Batches of 4, 4 and a short last one of 2, padded to each batch's longest or up to a multiple."""
    collate = BatchCollator(tokenizer, pad_to_multiple_of=multiple)
    rows = [dict(tokenizer(text), labels=label) for text, label in TEXTS]
    return [collate(rows[i:i + 4]) for i in range(0, len(rows), 4)] * 2          # two "epochs"


def _train(tiny_model, batches, captured: bool):
    """Losses and final weights after one step per batch, a linear schedule stepped after each."""
    from accelerate import Accelerator
    from transformers import AutoModelForSequenceClassification, get_scheduler

    from tuneloop.model.optim import build_optimizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model)
    optimizer = build_optimizer(model, 1e-2, 0.01, "cpu", capturable=captured)
    accelerator = Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=2, num_training_steps=len(batches))
    objective = objective_for(SINGLE_LABEL)
    step = CapturedStep(model, optimizer, objective, max_grad_norm=0.5, capture=False) if captured else \
        AccelerateStep(accelerator, model, optimizer, objective, max_grad_norm=0.5)
    model.train()
    losses = []
    for batch in batches:
        losses.append(float(step(batch).loss))
        scheduler.step()
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}, step


def test_the_static_step_on_bucketed_batches_trains_like_the_accelerate_step(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    plain, bucketed = _batches(tokenizer, None), _batches(tokenizer, 16)
    assert {b.inputs["input_ids"].shape[1] for b in bucketed} == {16}          # padded to the bucket ...
    assert len({b.inputs["input_ids"].shape[1] for b in plain}) > 1            # ... where plain batches vary
    assert [len(b) for b in bucketed] == [4, 4, 2] * 2                           # the short batch kept
    eager_losses, eager_weights, _ = _train(tiny_model, plain, captured=False)
    static_losses, static_weights, step = _train(tiny_model, bucketed, captured=True)
    assert step.shapes == 2                                                      # (4, 16) and (2, 16)
    assert static_losses == pytest.approx(eager_losses, abs=1e-5)
    assert len(set(eager_losses)) == len(eager_losses)                           # it trained: losses move
    for name, value in eager_weights.items():
        if name.endswith("attention.self.key.bias"):   # its gradient is 0 exactly (softmax ignores a shift): AdamW
            continue                                     # turns each way's rounding noise into steps of lr's size
        assert torch.allclose(static_weights[name], value, atol=1e-5), name
    # the schedule reached the optimizer: a run whose tensors were never refilled would differ
    frozen_losses, _, _ = _train_with_frozen_lr(tiny_model, bucketed)
    assert frozen_losses != pytest.approx(eager_losses, abs=1e-5)


def _train_with_frozen_lr(tiny_model, batches):
    original = CapturedStep._fill_lrs
    try:
        CapturedStep._fill_lrs = lambda self: None                              # the schedule never reaches it
        return _train(tiny_model, batches, captured=True)
    finally:
        CapturedStep._fill_lrs = original


def _config(**options) -> TrainConfig:
    return TrainConfig(**{"model": "minilm", "mixed_precision": "no", "compile": "no", **options})


def test_a_run_captures_its_step_only_where_it_can():
    cuda = dict(device_type="cuda", num_processes=1, precision="no")
    assert step_choice.decide(_config(), "cpu", 1, "no") == (False, "auto: it runs on cpu, not a CUDA GPU")
    with pytest.raises(ConfigError, match="--captured-step on: .*runs on cpu"):
        step_choice.decide(_config(captured_step="on"), "cpu", 1, "no")
    assert step_choice.decide(_config(captured_step="off"), **cuda) == (False, "--captured-step off")
    assert step_choice.decide(_config(captured_step="on"), **cuda)[0] is True
    capture, why = step_choice.decide(_config(), **cuda)
    assert capture is step_choice.PROVEN_ON_GPU and ("not yet proven" in why) != step_choice.PROVEN_ON_GPU
    for options, precision, processes, targets, reason in [
            ({"gradient_accumulation_steps": 2}, "no", 1, False, "accumulation"),
            ({}, "bf16", 1, False, "bf16 mixed precision"),
            ({"compile": "default"}, "no", 1, False, "--compile default"),
            ({"skip_nonfinite_batches": True}, "no", 1, False, "--skip-nonfinite-batches"),
            ({"method": "setfit"}, "no", 1, False, "--method setfit"),
            ({}, "no", 2, False, "2 processes"),
            ({}, "no", 1, True, "row weights or soft targets")]:
        capture, why = step_choice.decide(_config(**options), "cuda", processes, precision, targets)
        assert not capture and reason in why
        with pytest.raises(ConfigError, match=reason):
            step_choice.decide(_config(captured_step="on", **options), "cuda", processes, precision, targets)


def test_captured_step_on_is_refused_on_a_cpu_before_anything_is_written(tiny_model, shared_mrpc_dir, tmp_path):
    import tuneloop

    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="--captured-step on"):
        tuneloop.train(TrainConfig(output_dir=str(out), task="mrpc", data_dir=str(shared_mrpc_dir),
                                   captured_step="on", **fast_options(tiny_model)))
    assert not out.exists()


def test_the_loop_trains_with_the_static_step(tiny_model, shared_mrpc_dir, tmp_path):
    """The static step in the real loop (schedule, evaluations, dynamics, saving): the run the default step makes."""
    import tuneloop
    from tuneloop.training.loop import run_training

    options = dict(task="mrpc", data_dir=str(shared_mrpc_dir), **fast_options(tiny_model, epochs=2))
    plain = tuneloop.train(TrainConfig(output_dir=str(tmp_path / "plain"), **options))
    static = run_training(TrainConfig(output_dir=str(tmp_path / "static"), **options).validate(),
                          make_step=lambda run: CapturedStep(run.model, run.optimizer, run.objective, capture=False))
    assert static["train"]["step"]["name"] == "captured" and plain["train"]["step"]["name"] == "accelerate"
    assert static["eval"] == pytest.approx(plain["eval"], abs=1e-4)
