"""Where a run's time goes: the Timeline's arithmetic, and a run's results.json and report carrying it."""

from __future__ import annotations

import json

import pytest
from conftest import fast_options

from tuneloop import TrainConfig
from tuneloop.training import timeline as timeline_module
from tuneloop.training.timeline import Timeline


def test_marks_take_the_time_since_the_last_less_the_phases_inside(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(timeline_module.time, "perf_counter", lambda: now[0])
    t = Timeline()
    now[0] = 102.0
    t.mark("set-up")                       # 2 s
    now[0] = 103.0
    with t.phase("evaluations"):           # 4 s inside ...
        now[0] = 107.0
    now[0] = 110.0
    with t.phase("evaluations"):           # ... and 1 s more: phases add up
        now[0] = 111.0
    now[0] = 112.0
    t.mark("training steps")               # 10 s since the last mark, less 5 s of evaluations
    assert t.to_dict()["phases"] == {"set-up": 2.0, "evaluations": 5.0, "training steps": 5.0}
    assert t.to_dict()["run_s"] == 12.0 == sum(t.to_dict()["phases"].values())


def test_a_run_says_where_its_time_went(tiny_model, mrpc_dir, tmp_path):
    import tuneloop

    out = tmp_path / "run"
    results = tuneloop.train(TrainConfig(output_dir=str(out), task="mrpc", data_dir=str(mrpc_dir),
                                         **fast_options(tiny_model, epochs=2, report=True, save_every="epoch")))
    timeline = results["timeline"]
    assert json.loads((out / "results.json").read_text())["timeline"] == timeline     # the complete one, saved
    phases = timeline["phases"]
    for name in ("accelerator", "tokenizer", "data", "model", "run folder", "optimizer, loaders, state",
                 "evaluations", "model folders", "checkpoints", "training steps", "results, decision rule",
                 "label issues", "results files", "model card, report", "end"):
        assert phases[name] >= 0, name
    assert sum(phases.values()) == pytest.approx(timeline["run_s"], abs=0.05)        # nothing counted twice
    assert timeline["before_run_s"] is None or timeline["before_run_s"] >= 0
    assert "where the time went" in (out / "report.html").read_text()


def test_only_a_processs_first_run_counts_the_start_up(monkeypatch):
    """An experiment's second seed (or a notebook's next train()) had no start-up: the time since the import holds
    the runs before it, which its report called start-up."""
    import sys
    import time

    monkeypatch.setattr(timeline_module, "_COUNTED", [])
    monkeypatch.setattr(sys.modules["tuneloop"], "_IMPORTED_AT", time.perf_counter() - 5.0, raising=False)
    first, second = Timeline().to_dict(), Timeline().to_dict()
    assert first["before_run_s"] == pytest.approx(5.0, abs=0.5) and second["before_run_s"] is None
