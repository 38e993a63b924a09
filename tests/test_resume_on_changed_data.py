"""A resume against training data that changed since its checkpoint (another number of rows, so of steps per
epoch) is refused in one line naming the file and both counts; checkpoints that record neither still resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop import TuneloopError
from tuneloop.training.checkpoint import check_same_data, data_record

STEP = Path("run/checkpoints/step-0000020")


def test_a_checkpoint_records_its_training_data():
    assert data_record(25, 200) == {"steps_per_epoch": 25, "train_rows": 200}


def test_a_resume_with_other_training_rows_is_refused_naming_the_file_and_both_counts():
    saved = {"step": 20, "config": {}, **data_record(25, 200)}
    check_same_data(STEP, saved, 25, 200, "train.csv")                          # the same data: resumes
    with pytest.raises(TuneloopError) as refused:
        check_same_data(STEP, saved, 23, 180, "train.csv")
    message = str(refused.value)
    assert message == ("--resume: train.csv has 180 training rows, the checkpoint step-0000020 was made with 200; "
                       "resume with the same data, or start a new run")
    with pytest.raises(TuneloopError, match=r"^--resume: train.csv makes 24 steps per epoch, the checkpoint "
                                            r"step-0000020 was made with 25 \(200 training rows\); resume with the "
                                            r"same data, or start a new run$"):
        check_same_data(STEP, saved, 24, 200, "train.csv")


def test_a_checkpoint_of_an_earlier_tuneloop_resumes_unchecked():
    check_same_data(STEP, {"step": 20, "config": {}}, 23, 180, "train.csv")


def test_a_run_resumed_on_a_train_file_with_more_rows_is_refused_before_its_metrics_are_cut(tiny_model, tmp_path,
                                                                                         capsys):
    from conftest import FILLER, fast_options

    import tuneloop
    from tuneloop.cli import main

    train, dev, out = tmp_path / "train.csv", tmp_path / "dev.csv", tmp_path / "run"
    rows = [f"{'good' if i % 2 else 'bad'} {FILLER[i % len(FILLER)]} {' '.join(str(i))},{'pos' if i % 2 else 'neg'}\n"
            for i in range(48)]
    train.write_text("text,label\n" + "".join(rows[:32]))
    dev.write_text("text,label\n" + "".join(rows[32:]))

    class Killed(Exception):
        pass

    def kill(state):
        if state.step == 5:
            raise Killed

    options = fast_options(tiny_model, save_every="4", log_every=1, train_file=str(train), validation_file=str(dev),
                           output_dir=str(out))
    with pytest.raises(Killed):
        tuneloop.train(**options, on_step=kill)
    metrics = (out / "metrics.jsonl").read_text()
    train.write_text("text,label\n" + "".join(rows[:32] + rows[:8]))            # 8 rows more since the checkpoint
    capsys.readouterr()
    assert main(["train", "--output-dir", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert str(train) in err[0] and "40 training rows" in err[0] and "made with 32" in err[0], err
    assert (out / "metrics.jsonl").read_text() == metrics                       # nothing of the run was cut
    train.write_text("text,label\n" + "".join(rows[:32]))
    assert main(["train", "--output-dir", str(out), "--resume"]) == 0           # the same rows again: it resumes
