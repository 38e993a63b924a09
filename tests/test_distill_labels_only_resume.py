"""`tuneloop distill` stopped during its labels-only student: the advice names `tuneloop distill`, and its resume
continues that student from its checkpoint (it is not trained again from scratch)."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from test_distill import files, options, plain_teacher  # noqa: F401 - the module's fixture and helpers

import tuneloop
from tuneloop.exceptions import Interrupted
from tuneloop.experiments import distill as distill_module

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_a_stop_in_the_labels_only_student_is_resumed_by_distill(tiny_model, files, tmp_path,  # noqa: F811
                                                                   monkeypatch):
    from safetensors.torch import load_file

    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    common = dict(teacher=teacher, unlabeled_file=files["unlabeled"], train_file=files["labelled"],
                  validation_file=files["dev"], save_every=4, max_steps=10)
    real, seen = distill_module.run_training, []

    def labels_only_stopped_at(step):
        def run(cfg, on_step=None):
            if not cfg.output_dir.endswith("labels_only"):
                return real(cfg, on_step)
            seen.append(cfg.resume)

            def stop(state):
                if state.step == step:
                    os.kill(os.getpid(), signal.SIGINT)
            return real(cfg, stop if step else None)
        return run

    tuneloop.distill(**common, **options(tiny_model, tmp_path / "unbroken"))
    out = tmp_path / "stopped"
    monkeypatch.setattr(distill_module, "run_training", labels_only_stopped_at(5))
    with pytest.raises(Interrupted) as stopped:
        tuneloop.distill(**common, **options(tiny_model, out))
    said = str(stopped.value)
    assert "tuneloop distill ... --output-dir" in said and f"--output-dir {out} --resume" in said, said
    assert "tuneloop train" not in said and "interrupted in labels_only; checkpoint saved" in said, said
    monkeypatch.setattr(distill_module, "run_training", labels_only_stopped_at(None))
    results = tuneloop.distill(**common, resume="latest", **options(tiny_model, out))
    assert seen == [None, "latest"]                      # resumed from its checkpoint, not started again
    model = "distill/labels_only/model/model.safetensors"
    a, b = load_file(tmp_path / "unbroken" / model), load_file(out / model)
    assert all(torch.equal(a[k], b[k]) for k in a)       # as the unbroken run's labels-only student
    assert results["distillation"]["labels_only"]["metrics"]
    seen.clear()                                         # finished: read back, not run again
    tuneloop.distill(**common, resume="latest", **options(tiny_model, out))
    assert seen == []
