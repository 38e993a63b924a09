"""Experiments and `tuneloop distill` as users run them: an experiment over an earlier single run with --overwrite,
a soft-label file whose number columns do not fit its problem type, a distillation stopped before its student's
first checkpoint (Ctrl-C in the teacher's labelling pass) and resumed, and a finished one resumed."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_experiments as exp
from test_distill import files, options, plain_teacher  # noqa: F401 - the module's fixture and helpers
from test_experiments import train_csv  # noqa: F401 - the module's fixture

import tuneloop
from tuneloop.cli.main import main
from tuneloop.exceptions import Interrupted
from tuneloop.experiments import distill as distill_module
from tuneloop.experiments import teacher as teacher_module

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_seeds_with_overwrite_over_a_single_run_leave_none_of_its_files(tiny_model, train_csv, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    tuneloop.train(**exp.options(tiny_model, train_csv, out, max_steps=2))
    assert (out / "results.json").is_file() and (out / "tuneloop-run.json").is_file()
    summary = tuneloop.train(**exp.options(tiny_model, train_csv, out, seeds=[1, 2], max_steps=2, overwrite=True))
    assert (out / "summary.json").is_file() and summary["kept"] in ("seed-1", "seed-2")
    # the single run's results, config, marker and best/ no longer stand beside the experiment's kept model
    left = [n for n in ("results.json", "config.yaml", "tuneloop-run.json", "best", "metrics.jsonl", "predictions")
            if (out / n).exists()]
    assert left == []
    assert (out / "model" / "model.safetensors").read_bytes() == \
        (out / summary["kept"] / "model" / "model.safetensors").read_bytes()


@pytest.mark.parametrize("problem_type, says", [("regression", "one number column (the score); the file has 2"),
                                                ("single_label_classification", "one number column per class")])
def test_soft_label_columns_that_do_not_fit_the_problem_type_are_one_line(tiny_model, files, tmp_path,  # noqa: F811
                                                                          capsys, problem_type, says):
    soft = files["soft"]
    if problem_type != "regression":          # one probability column read as classes
        soft = str(tmp_path / "one.csv")
        rows = open(files["soft"], encoding="utf-8").read().splitlines()
        open(soft, "w", encoding="utf-8").write("\n".join(",".join(r.split(",")[:2]) for r in rows) + "\n")
    code = main(["distill", "--teacher", soft, "--problem-type", problem_type, "--model", tiny_model,
                 "--max-steps", "2", "--output-dir", str(tmp_path / "out"), "--quiet", "--no-report"])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err


def test_a_stop_in_the_teachers_pass_resumes_and_a_finished_one_is_read_back(tiny_model, files,  # noqa: F811
                                                                             tmp_path, monkeypatch):
    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    common = dict(teacher=teacher, unlabeled_file=files["unlabeled"], validation_file=files["dev"], max_steps=4,
                  **options(tiny_model, tmp_path / "out"))
    real = teacher_module.teacher_outputs

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(teacher_module, "teacher_outputs", ctrl_c)
    with pytest.raises(Interrupted, match="interrupted in the teacher's labelling pass"):
        tuneloop.distill(**common)
    monkeypatch.setattr(teacher_module, "teacher_outputs", real)
    results = tuneloop.distill(**common, resume="latest")         # was: "no complete checkpoint to resume from"
    assert results["train"]["steps"] == 4 and results["distillation"]["student"]["metrics"]
    monkeypatch.setattr(distill_module, "run_training", lambda *a, **k: pytest.fail("the student trained again"))
    again = tuneloop.distill(**common, resume="latest")           # finished, its checkpoints gone: read back
    assert again["eval"] == results["eval"] and again["distillation"]["student"]["metrics"]
    with pytest.raises(tuneloop.TuneloopError, match="finished with other settings"):
        tuneloop.distill(**{**common, "max_steps": 5}, resume="latest")     # not read back as if it were that one


def test_a_stop_while_the_student_is_cut_leaves_no_half_cut_student(tiny_model, files, tmp_path,  # noqa: F811
                                                                    monkeypatch):
    from tuneloop.model import shrink

    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    common = dict(teacher=teacher, unlabeled_file=files["unlabeled"], student_layers=1, max_steps=2,
                  **options(tiny_model, tmp_path / "out"))
    real = shrink.keep_layers

    def stopped_mid_save(source, keep, folder):
        (tmp_path / "cut").mkdir()
        real(source, keep, tmp_path / "cut")
        (Path(folder) / "config.json").write_bytes((tmp_path / "cut" / "config.json").read_bytes())
        raise KeyboardInterrupt                  # the weights and tokenizer not saved yet

    monkeypatch.setattr(shrink, "keep_layers", stopped_mid_save)
    with pytest.raises(KeyboardInterrupt):
        tuneloop.distill(**common)
    assert not (tmp_path / "out" / "distill" / "student_init" / "config.json").exists()
    monkeypatch.setattr(shrink, "keep_layers", real)
    results = tuneloop.distill(**common, resume="latest")
    assert results["train"]["steps"] == 2
    assert (tmp_path / "out" / "distill" / "student_init" / "model.safetensors").is_file()


def test_an_unlabeled_file_with_a_label_column_says_its_labels_are_not_read(tiny_model, files, tmp_path,  # noqa: F811
                                                                            capsys):
    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    for name, unlabeled in (("plain", files["unlabeled"]), ("labelled", files["labelled"])):
        tuneloop.distill(teacher=teacher, unlabeled_file=unlabeled, max_steps=1,
                         **options(tiny_model, tmp_path / name))
        err = capsys.readouterr().err
        assert ("its labels ('label') are not read" in err) == (name == "labelled"), err


def test_without_a_validation_file_the_student_still_makes_the_minimum_steps(tiny_model, files, tmp_path,  # noqa: F811
                                                                              monkeypatch):
    import math

    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    given = options(tiny_model, tmp_path / "out", batch_size=2)
    given.pop("epochs")                                      # the student's own floor decides
    seen = []

    def run(cfg, on_step=None):
        seen.append(cfg)
        raise KeyboardInterrupt                              # its length is all this test wants

    monkeypatch.setattr(distill_module, "run_training", run)
    with pytest.raises(KeyboardInterrupt):
        tuneloop.distill(teacher=teacher, unlabeled_file=files["unlabeled"], train_file=files["labelled"], **given)
    rows = 64 + 24
    trained = rows - math.ceil(rows * seen[0].validation_split)      # the rest validates the student
    assert seen[0].epochs * math.ceil(trained / 2) >= distill_module.STUDENT_MIN_STEPS


def test_the_summary_page_does_not_call_a_kept_model_the_best_when_the_best_runs_was_removed(tmp_path):
    from tuneloop.report.summary import write_summary_page

    runs = [{"name": f"seed-{s}", "seed": s, "collapsed": False, "eval": {"accuracy": a}}
            for s, a in ((1, .9), (2, .8))]
    summary = {"kind": "seeds", "runs": runs, "main_metric": "accuracy", "metric_for_best": "accuracy",
               "metrics": {"accuracy": {"mean": .85, "std": .07, "ci95": [.2, 1.0], "n": 2}}, "kept": "seed-2",
               "best_run": "seed-1", "keep": "best", "collapsed": []}
    page = write_summary_page(tmp_path, summary).read_text(encoding="utf-8")
    assert "<b>seed-2</b> (best accuracy on validation;" not in page
    assert "seed-1 scores best, but an earlier pass&#x27;s --keep best removed its model" in page or \
        "seed-1 scores best, but an earlier pass's --keep best removed its model" in page


def test_retry_collapsed_says_a_collapsed_fold_is_not_rerun(tiny_model, train_csv, tmp_path, monkeypatch,  # noqa: F811
                                                           capsys):
    from tuneloop.experiments import runs

    real = runs.collapsed
    monkeypatch.setattr(runs, "collapsed", lambda results: results["output_dir"].endswith("fold-1") or real(results))
    summary = tuneloop.train(**exp.options(tiny_model, train_csv, tmp_path / "cv", folds=2, max_steps=2,
                                           retry_collapsed=True))
    assert [r["name"] for r in summary["runs"]] == ["fold-1", "fold-2"] and "fold-1" in summary["collapsed"]
    assert "fold-1 collapsed to a single predicted class; --retry-collapsed reruns a seed's run, not a fold's" \
        in capsys.readouterr().err
