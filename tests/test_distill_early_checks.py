"""`tuneloop distill` before and during the teacher's pass: --student-layers the student's source model cannot keep
are refused from its config before the teacher labels anything, and a Ctrl-C in the teacher's pass says how to
resume (and that resume works)."""

from __future__ import annotations

import random
import re
import signal
from pathlib import Path

import pytest
from conftest import keyword_pair

import tuneloop
from tuneloop.cli import main
from tuneloop.evaluation import inference
from tuneloop.exceptions import ConfigError, Interrupted
from tuneloop.experiments import teacher as teacher_module

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def unlabeled(tmp_path_factory) -> str:
    rng = random.Random(1)
    path = tmp_path_factory.mktemp("early-checks") / "unlabeled.csv"
    path.write_text("text\n" + "".join(f"{keyword_pair(rng)[2]}\n" for _ in range(32)))
    return str(path)


def cli_options(tiny_model: str, out: Path) -> list[str]:
    return ["--model", tiny_model, "--output-dir", str(out), "--quiet", "--no-report", "--baseline", "none",
            "--small-data", "off", "--calibrate", "none", "--mixed-precision", "no", "--max-steps", "2",
            "--batch-size", "8", "--eval-batch-size", "8"]


@pytest.fixture
def no_teacher_work(monkeypatch):
    """The teacher's pass (loading it as a Classifier and labelling): a test fails if it starts."""
    from tuneloop.predict.classifier import Classifier

    def refused(*args, **kwargs):
        pytest.fail("the teacher's work started before --student-layers was checked")

    monkeypatch.setattr(teacher_module, "teacher_outputs", refused)
    monkeypatch.setattr(Classifier, "load", refused)


# the tiny BERT (the teacher here, and --model: the student is cut from the teacher) has 2 layers
@pytest.mark.parametrize("given, said", [("3", "has 2 layers; choose 1 to 2"),
                                         ("0,2", "has 2 layers, numbered 0 to 1"),
                                         ("0,1,2", "has 2 layers, numbered 0 to 1")])
def test_student_layers_the_model_lacks_are_refused_before_the_teachers_pass(tiny_model, unlabeled, tmp_path,
                                                                             capsys, no_teacher_work, given, said):
    out = tmp_path / "out"
    code = main(["distill", "--teacher", tiny_model, "--unlabeled-file", unlabeled, "--student-layers", given,
                 *cli_options(tiny_model, out)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"tuneloop distill: error: --student-layers {given}: {tiny_model} {said}"), err
    assert not (out / "distill" / "soft_targets.npz").exists()


def test_student_layers_cut_from_model_are_checked_against_models_config_before_the_teacher(tiny_model, unlabeled,
                                                                                           tmp_path,
                                                                                           no_teacher_work):
    said = rf"^--student-layers 5: {re.escape(tiny_model)} has 2 layers; choose 1 to 2$"
    with pytest.raises(ConfigError, match=said):
        tuneloop.distill(teacher=tiny_model, unlabeled_file=unlabeled, student_layers=5, student_init="model",
                         model=tiny_model, output_dir=str(tmp_path / "out"), quiet=True, report=False)


def test_a_ctrl_c_in_the_teachers_pass_says_how_to_resume_and_that_resume_works(tiny_model, unlabeled, tmp_path,
                                                                               capsys, monkeypatch):
    real, batches = inference.run_inference, []

    def ctrl_c_in_a_batch(model, loader, *args, **kwargs):
        """The teacher's scoring of its first batch is stopped by a Ctrl-C (KeyboardInterrupt)."""
        def stop(module, inputs, kwargs):
            batches.append(1)
            raise KeyboardInterrupt

        handle = model.register_forward_pre_hook(stop, with_kwargs=True)
        try:
            return real(model, loader, *args, **kwargs)
        finally:
            handle.remove()

    out = tmp_path / "out"
    command = ["distill", "--teacher", tiny_model, "--unlabeled-file", unlabeled, *cli_options(tiny_model, out)]
    monkeypatch.setattr(inference, "run_inference", ctrl_c_in_a_batch)
    code = main(command)
    err = capsys.readouterr().err.strip()
    assert batches == [1] and code == 130, err                 # stopped in the teacher's pass, as SIGINT
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "interrupted in the teacher's labelling pass" in err, err
    assert f"tuneloop distill ... --output-dir {out} --resume" in err, err
    assert not (out / "distill" / "soft_targets.npz").exists()    # nothing of the pass was saved

    monkeypatch.setattr(inference, "run_inference", real)
    labelled = []
    real_outputs = teacher_module.teacher_outputs
    monkeypatch.setattr(teacher_module, "teacher_outputs", lambda *a, **k: labelled.append(1) or real_outputs(*a, **k))
    assert main([*command, "--resume"]) == 0, capsys.readouterr().err      # the hint is true: the resume finishes
    assert labelled == [1] and (out / "distill" / "soft_targets.npz").is_file()
    assert (out / "results.json").is_file() and (out / "model" / "config.json").is_file()


def test_in_python_the_stop_is_an_interrupted_naming_the_resume(tiny_model, unlabeled, tmp_path, monkeypatch):
    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(teacher_module, "teacher_outputs", ctrl_c)
    out = tmp_path / "out"
    with pytest.raises(Interrupted) as stopped:       # as a stop in the student's run is
        tuneloop.distill(teacher=tiny_model, unlabeled_file=unlabeled, model=tiny_model, output_dir=str(out),
                         quiet=True, report=False)
    assert stopped.value.signal_number == signal.SIGINT
    assert f"output_dir={str(out)!r}, resume='latest'" in str(stopped.value), str(stopped.value)
