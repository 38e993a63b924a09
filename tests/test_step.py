"""The step seam: the Objective's loss with soft targets and row weights, a training step on them, and the loop
running a plugged-in step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import fast_options

import tuneloop
from tuneloop import TrainConfig
from tuneloop.data.batch import Batch, BatchCollator
from tuneloop.objective import objective_for
from tuneloop.tasks import MULTI_LABEL, REGRESSION, SINGLE_LABEL
from tuneloop.training.step import AccelerateStep, StepOutput
from tuneloop.training.step import make_step as default_step


@pytest.fixture
def logits():
    torch.manual_seed(0)
    return torch.randn(6, 3)


LABELS = torch.tensor([0, 2, 1, 1, 0, 2])


def test_soft_one_hot_targets_give_cross_entropy_and_soft_ones_differ(logits):
    objective = objective_for(SINGLE_LABEL)
    hard = objective.loss(logits, LABELS)
    assert torch.allclose(objective.loss(logits, LABELS, soft=F.one_hot(LABELS, 3).float()), hard)
    smoothed = F.one_hot(LABELS, 3).float() * 0.8 + 0.2 / 3
    soft = objective.loss(logits, LABELS, soft=smoothed)
    assert not torch.allclose(soft, hard)
    expected = -(smoothed * logits.log_softmax(-1)).sum(-1).mean()      # cross entropy with target distributions
    assert torch.allclose(soft, expected)


@pytest.mark.parametrize("kind", [SINGLE_LABEL, MULTI_LABEL, REGRESSION])
def test_row_weights_give_a_weighted_mean(kind, logits):
    torch.manual_seed(1)
    targets = {SINGLE_LABEL: LABELS, MULTI_LABEL: (torch.rand(6, 3) > 0.5).float(),
               REGRESSION: torch.randn(6)}[kind]
    outputs = logits[:, :1] if kind == REGRESSION else logits
    objective = objective_for(kind)
    plain = objective.loss(outputs, targets)
    assert torch.allclose(objective.loss(outputs, targets, weights=torch.ones(6)), plain)
    kept = torch.tensor([1.0, 0, 1, 0, 0, 1])                      # zero weight: as if the row were not there
    subset = kept.bool()
    assert torch.allclose(objective.loss(outputs, targets, weights=kept), objective.loss(outputs[subset], targets[subset]))
    uneven = objective.loss(outputs, targets, weights=torch.tensor([5.0, 1, 1, 1, 1, 1]))
    assert not torch.allclose(uneven, plain)


def test_row_weights_combine_with_class_weights(logits):
    objective = objective_for(SINGLE_LABEL, [1.0, 2.0, 5.0])
    assert torch.allclose(objective.loss(logits, LABELS, weights=torch.ones(6)), objective.loss(logits, LABELS))
    kept = torch.tensor([1.0, 1, 0, 1, 1, 0])
    assert torch.allclose(objective.loss(logits, LABELS, weights=kept),
                          objective.loss(logits[kept.bool()], LABELS[kept.bool()]))


def test_eval_loss_is_unweighted():
    logits, labels = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32), np.array([0, 1, 2, 2, 1])
    weighted = objective_for(SINGLE_LABEL, [1.0, 9.0, 1.0])
    assert weighted.eval_loss(logits, labels) == pytest.approx(float(F.cross_entropy(torch.from_numpy(logits),
                                                                                        torch.from_numpy(labels))))


def _steps(tiny_model, batches: list[Batch]) -> dict:
    """The tiny model's weights after one AccelerateStep per batch (same seed, same start)."""
    from accelerate import Accelerator
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    accelerator = Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    step = AccelerateStep(accelerator, model, optimizer, objective_for(SINGLE_LABEL), max_grad_norm=1.0)
    for batch in batches:
        out = step(batch)
        assert isinstance(out, StepOutput) and out.update and out.applied and not out.skipped
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_a_step_trains_on_soft_targets_and_row_weights(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    rows = [dict(tokenizer(text), labels=label) for text, label in
            [("the cat is good", 1), ("a dog is bad", 0), ("great movie", 1), ("awful film and plot", 0)]]
    hard = BatchCollator(tokenizer)(rows)
    labels = hard.labels
    one_hot = Batch(hard.inputs, labels, soft=F.one_hot(labels, 2).float())
    smoothed = Batch(hard.inputs, labels, soft=F.one_hot(labels, 2).float() * 0.6 + 0.2)
    weighted = Batch(hard.inputs, labels, weights=torch.tensor([1.0, 0.0, 3.0, 1.0]))
    after_hard = _steps(tiny_model, [hard] * 3)
    assert all(torch.equal(after_hard[k], v) for k, v in _steps(tiny_model, [one_hot] * 3).items())
    for other in (smoothed, weighted):
        after = _steps(tiny_model, [other] * 3)
        assert not torch.allclose(after["classifier.weight"], after_hard["classifier.weight"])


class CountingStep:
    """A plugged-in step: the default one, counted."""

    name = "counting"

    def __init__(self, inner):
        self.inner, self.calls, self.rows = inner, 0, 0

    def __call__(self, batch):
        self.calls += 1
        self.rows += len(batch)
        return self.inner(batch)


def test_the_loop_runs_a_plugged_in_step(tiny_model, shared_mrpc_dir, tmp_path):
    options = dict(task="mrpc", data_dir=str(shared_mrpc_dir), **fast_options(tiny_model, epochs=2))
    plain = tuneloop.train(TrainConfig(output_dir=str(tmp_path / "plain"), **options))
    made = []

    def make(run):
        made.append(CountingStep(default_step(run)))
        return made[0]

    from tuneloop.training.loop import run_training

    plugged = run_training(TrainConfig(output_dir=str(tmp_path / "plugged"), **options).validate(), make_step=make)
    assert len(made) == 1 and made[0].calls == plain["train"]["steps"] == 2 * 25     # 200 rows, batch 8
    assert made[0].rows == 2 * 200
    assert plugged["eval"] == pytest.approx(plain["eval"], abs=1e-6)      # the same step, the same run


class OneOfTwo:
    """A one-process Accelerator seen as one of two processes: the other one's loss is non-finite when `other_bad`
    (its share of the sum `reduce` takes across the processes)."""

    num_processes = 2

    def __init__(self, accelerator, other_bad: bool):
        self.accelerator, self.other_bad = accelerator, other_bad

    def __getattr__(self, name):
        return getattr(self.accelerator, name)

    def reduce(self, tensor, reduction="sum"):
        assert reduction == "sum"
        return tensor + float(self.other_bad)


def test_a_non_finite_loss_on_another_process_skips_the_batch_on_every_process(tiny_model):
    """--skip-nonfinite-batches under several processes: a batch is skipped on all of them when any one's loss is
    non-finite (a process that ran backward alone would wait in the gradients' all-reduce forever); in one process,
    as before. The distillation step shares the decision."""
    from accelerate import Accelerator
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from tuneloop.training.step import DistillStep

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    batch = BatchCollator(tokenizer)([dict(tokenizer(text), labels=label) for text, label in
                                      [("the cat is good", 1), ("a dog is bad", 0)]])
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    accelerator = Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    before = model.classifier.weight.detach().clone()
    outcomes = {}
    for name, acc in (("other bad", OneOfTwo(accelerator, True)), ("both fine", OneOfTwo(accelerator, False)),
                      ("one process", accelerator)):
        step = AccelerateStep(acc, model, optimizer, objective_for(SINGLE_LABEL), skip_nonfinite=True)
        weights = model.classifier.weight.detach().clone()
        out = step(batch)
        outcomes[name] = (out.skipped, not torch.equal(model.classifier.weight, weights))
    assert outcomes == {"other bad": (True, False), "both fine": (False, True), "one process": (False, True)}
    assert not torch.equal(model.classifier.weight, before)
    assert DistillStep.__call__ is AccelerateStep.__call__ and DistillStep.nonfinite is AccelerateStep.nonfinite
