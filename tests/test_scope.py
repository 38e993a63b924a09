"""A run changes nothing process-wide that outlives it: training twice in one process with different precision
and attention settings, and a run that raises, leave the process as they found it."""

from __future__ import annotations

import logging
import os
import signal

import pytest
import torch
from conftest import fast_options

import tuneloop
from tuneloop import TrainConfig


def process_state() -> dict:
    """What a training run could change in the process that called it."""
    import datasets
    import transformers
    from accelerate.state import AcceleratorState
    from transformers import modeling_utils

    log = logging.getLogger("tuneloop")
    return {
        "matmul precision": torch.backends.mkldnn.matmul.fp32_precision,
        "sdpa function": modeling_utils.ALL_ATTENTION_FUNCTIONS["sdpa"],
        "attention functions": sorted(modeling_utils.ALL_ATTENTION_FUNCTIONS),
        "transformers verbosity": transformers.logging.get_verbosity(),
        "transformers bars": transformers.logging.is_progress_bar_enabled(),
        "datasets verbosity": datasets.logging.get_verbosity(),
        "datasets bars disabled": datasets.are_progress_bars_disabled(),
        "tuneloop logger": (list(log.handlers), log.level, log.propagate),
        "accelerate logger": logging.getLogger("accelerate").level,
        "signal handlers": (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)),
        "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM"),
        "accelerator state": AcceleratorState._shared_state.get("mixed_precision"),
        "torch random": torch.random.get_rng_state(),
    }


def assert_same(before: dict, after: dict):
    for key in before:
        same = torch.equal(before[key], after[key]) if isinstance(before[key], torch.Tensor) else \
            before[key] == after[key]
        assert same, f"{key}: {before[key]!r} → {after[key]!r}"


def stock_logits(folder: str) -> torch.Tensor:
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert model.config._attn_implementation == "sdpa"
    batch = {"input_ids": torch.tensor([[2, 7, 9, 11, 3, 0, 0], [2, 8, 12, 14, 15, 16, 3]]),
             "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1] * 7])}
    with torch.no_grad():
        return model(**batch).logits


def test_two_runs_and_a_failed_one_leave_the_process_as_they_found_it(tiny_model, shared_mrpc_dir, tmp_path):
    torch.manual_seed(123)
    reference = stock_logits(tiny_model)
    before = process_state()
    common = dict(task="mrpc", data_dir=str(shared_mrpc_dir), **fast_options(tiny_model, max_steps=3, cpu=True))
    common.pop("mixed_precision")

    first = tuneloop.train(TrainConfig(**common, output_dir=str(tmp_path / "a"), mixed_precision="bf16",
                                       attention="chunked"))
    assert first["train"]["mixed_precision"] == "bf16"
    assert_same(before, process_state())
    second = tuneloop.train(TrainConfig(**common, output_dir=str(tmp_path / "b"), mixed_precision="no",
                                        attention="sdpa", fast_dropout=False))
    assert second["train"]["mixed_precision"] == "no"
    assert_same(before, process_state())

    def fail(state):
        assert torch.backends.mkldnn.matmul.fp32_precision == "bf16"          # the levers were on during the run
        raise RuntimeError(f"stopped by the test at step {state.step}")

    with pytest.raises(RuntimeError, match="at step 1"):
        tuneloop.train(TrainConfig(**common, output_dir=str(tmp_path / "c"), mixed_precision="bf16",
                                   attention="chunked"), on_step=fail)
    assert_same(before, process_state())
    assert torch.allclose(stock_logits(tiny_model), reference, atol=1e-6)   # a fresh model behaves as stock


def test_the_run_is_reproducible_after_earlier_runs_in_the_same_process(tiny_model, shared_mrpc_dir, tmp_path):
    """Nothing one run leaves behind changes the next: the same options give the same weights and metrics."""
    options = dict(task="mrpc", data_dir=str(shared_mrpc_dir), **fast_options(tiny_model, max_steps=4))
    a = tuneloop.train(TrainConfig(**options, output_dir=str(tmp_path / "a")))
    tuneloop.train(TrainConfig(**{**options, "mixed_precision": "bf16", "cpu": True}, output_dir=str(tmp_path / "o")))
    b = tuneloop.train(TrainConfig(**options, output_dir=str(tmp_path / "b")))
    assert a["eval"] == b["eval"]


def test_the_notebook_stop_button_saves_a_checkpoint_and_the_kernel_trains_on(tiny_model, shared_mrpc_dir, tmp_path):
    """A notebook's stop button sends SIGINT to the kernel: the run saves a checkpoint and raises Interrupted (a
    TuneloopError: one line, how to resume); the handlers are given back; resuming in the same process ends where
    an unbroken run ends."""
    from tuneloop.exceptions import Interrupted

    options = dict(task="mrpc", data_dir=str(shared_mrpc_dir), **fast_options(tiny_model, max_steps=8))
    handler = signal.getsignal(signal.SIGINT)

    def stop_button(state):
        if state.step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(Interrupted, match=r"interrupted at step 4; .*resume='latest'\)\)$"):
        tuneloop.train(**options, output_dir=str(tmp_path / "run"), on_step=stop_button)
    assert signal.getsignal(signal.SIGINT) is handler
    assert (tmp_path / "run" / "checkpoints" / "step-0000004").is_dir()
    resumed = tuneloop.train(**options, output_dir=str(tmp_path / "run"), resume="latest")
    whole = tuneloop.train(**options, output_dir=str(tmp_path / "whole"))
    assert resumed["resumed_from"].endswith("step-0000004")
    assert resumed["eval"] == pytest.approx(whole["eval"], abs=1e-6)


def test_the_label_issue_ranking_leaves_the_processs_warning_filters_as_they_were(tmp_path):
    """cleanlab's import runs warnings.filterwarnings("ignore"): imported as tuneloop imports it (a fresh process, so
    that no earlier test has imported it), every warning of the caller's process stayed silenced after a run."""
    import subprocess
    import sys

    script = (
        "import warnings, numpy as np\n"
        "from tuneloop.analysis.label_issues import rank\n"
        "from tuneloop.objective import objective_for\n"
        "from tuneloop.data.labels import LabelSchema\n"
        "before = list(warnings.filters)\n"
        "probs = np.tile([[0.8, 0.2], [0.3, 0.7]], (10, 1))\n"
        "order, confidence, flags = rank(np.array([0, 1] * 10), probs,\n"
        "                                objective_for(LabelSchema('single_label_classification', ['a', 'b'])))\n"
        "import cleanlab.filter  # noqa: F401  (imported by rank)\n"
        "assert flags is not None, 'cleanlab did not run'\n"
        "assert list(warnings.filters) == before, [f for f in warnings.filters if f not in before]\n"
        "print('same')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": ""})
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]
