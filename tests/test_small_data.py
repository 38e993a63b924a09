"""Small training sets (training/small_data.py): the settings decided by the number of training rows, recorded in
config.yaml, never over an option the user set; and the evaluation spacing of runs with many short epochs."""

from __future__ import annotations

import json
import logging
import math

import pytest
import yaml
from conftest import write_mrpc_folder

import tuneloop
from tuneloop import TrainConfig
from tuneloop.config.resolve import resolve_config
from tuneloop.training import small_data
from tuneloop.training.state import MAX_EPOCH_EVALUATIONS, Plan



def adapted(rows: int, **options):
    return small_data.adapt(resolve_config(machine=False, **options), rows)


def test_defaults_on_a_small_set_train_longer_with_warmup_and_say_so(caplog):
    with caplog.at_level(logging.INFO, logger="tuneloop"):
        config = adapted(400)              # the built-in sample's size: 50 steps an epoch at batch 8
    assert (config.small_data, config.epochs, config.warmup_ratio, config.lr) == ("on", 10, 0.1, 5e-5)
    assert config.epochs == small_data.MIN_EPOCHS and config.epochs * 50 <= small_data.EPOCH_FLOOR_STEPS
    assert "small data, 400 training rows" in caplog.text and "--small-data off" in caplog.text


def test_the_recipes_values_adapt_but_the_users_own_are_kept():
    fast = adapted(400, recipe="fast")     # batch 32: 13 steps an epoch
    assert (fast.epochs, fast.lr, fast.warmup_ratio, fast.eval_every) == (16, 5e-5, 0.1, None)
    mine = adapted(400, recipe="fast", epochs=2, lr=2e-4, eval_every="4/epoch")
    assert (mine.small_data, mine.epochs, mine.lr, mine.eval_every) == ("on", 2, 2e-4, "4/epoch")
    assert {"epochs", "lr", "eval_every"} <= set(mine.chosen)
    assert adapted(400, max_steps=30).epochs == 3             # a step budget of the user's is a choice too


def test_a_small_regression_set_trains_longer_too():
    """Few optimizer steps under-train a regression head as they leave a classifier in its majority class
    (benchmarks/bench_small_regression.py): regression under the line gets the same settings."""
    config = adapted(400, problem_type="regression")
    assert (config.small_data, config.epochs, config.warmup_ratio) == ("on", 10, 0.1)
    assert adapted(5000, problem_type="regression").small_data == "off"


def test_off_large_and_resumed_runs_are_left_alone():
    base = resolve_config(machine=False)
    for config, rows in ((base.replace(small_data="off"), 400), (base, 5000),
                         (base.replace(small_data="off", problem_type="regression"), 400),
                         (base.replace(method="setfit"), 400)):
        after = small_data.adapt(config, rows)
        assert after.small_data == "off" and (after.epochs, after.lr, after.warmup_ratio) == (3, 5e-5, 0.0)
    forced = small_data.adapt(base.replace(small_data="on"), 5000)
    assert forced.small_data == "on" and forced.warmup_ratio == 0.1 and forced.epochs == 3   # 1875 steps already
    resumed = base.replace(small_data="on", epochs=4, resume="latest")
    assert small_data.adapt(resumed, 400) is resumed   # config.yaml recorded what ran


def long_enough(epochs: int, steps_per_epoch: int) -> bool:
    """MIN_STEPS steps, and MIN_EPOCHS epochs unless EPOCH_FLOOR_STEPS steps come first."""
    steps = epochs * steps_per_epoch
    return steps >= small_data.MIN_STEPS and (epochs >= small_data.MIN_EPOCHS or steps >= small_data.EPOCH_FLOOR_STEPS)


def test_the_steps_decided_are_the_steps_the_plan_runs():
    cases = ((400, 8, 1), (48, 8, 1), (400, 32, 1), (123, 8, 3), (10, 16, 2), (192, 8, 1), (512, 8, 1), (999, 8, 1))
    decided = []
    for rows, batch, accumulation in cases:
        config = adapted(rows, batch_size=batch, gradient_accumulation_steps=accumulation)
        plan = Plan.make(math.ceil(rows / batch), config, 1)          # the loader's batches of one process
        assert long_enough(config.epochs, plan.steps_per_epoch) or config.epochs == small_data.MAX_EPOCHS
        assert not long_enough(config.epochs - 1, plan.steps_per_epoch)              # no epoch more than needed
        decided.append((config.epochs, plan.total_steps))
    # 10 epochs of the built-in sample; 34 epochs to reach 200 steps; a set near 1,000 rows: 4 epochs, not 10
    assert decided[0] == (10, 500) and decided[1] == (34, 204) and decided[-1] == (4, 500)


def test_many_short_epochs_are_evaluated_evenly_not_every_epoch():
    plan = Plan.make(5, TrainConfig(epochs=40), 1)              # 40 epochs of 5 steps
    due = [s for s in range(1, plan.total_steps + 1) if plan.eval_due(s)]
    assert len(due) == MAX_EPOCH_EVALUATIONS and due[-1] == 200 and due[0] == 10
    plan = Plan.make(5, TrainConfig(epochs=3), 1)
    assert [s for s in range(1, 16) if plan.eval_due(s)] == [5, 10, 15]     # a few epochs: each one's end


def test_a_small_run_records_the_settings_and_off_keeps_the_usual_ones(tiny_model, tmp_path):
    data = write_mrpc_folder(tmp_path / "MRPC", n_train=40, n_dev=16, n_test=4)
    common = dict(task="mrpc", data_dir=str(data), model=tiny_model, lr=3e-3, quiet=True, report=False,
                  baseline="none", mixed_precision="no", seed=0, method="finetune")   # the rule, not auto
    result = tuneloop.train(**common, output_dir=str(tmp_path / "auto"))
    saved = yaml.safe_load((tmp_path / "auto" / "config.yaml").read_text())
    assert (saved["small_data"], saved["epochs"], saved["warmup_ratio"], saved["lr"]) == ("on", 40, 0.1, 3e-3)
    assert "lr" in saved["chosen"] and "epochs" not in saved["chosen"]
    assert result["train"]["steps"] == 200
    evaluations = [json.loads(line) for line in (tmp_path / "auto" / "metrics.jsonl").read_text().splitlines()
                   if '"eval/accuracy"' in line]
    assert len(evaluations) == MAX_EPOCH_EVALUATIONS
    off = tuneloop.train(**common, small_data="off", output_dir=str(tmp_path / "off"))
    assert off["train"]["steps"] == 15
    assert yaml.safe_load((tmp_path / "off" / "config.yaml").read_text())["small_data"] == "off"


@pytest.mark.parametrize("value", ["sometimes"])
def test_a_bad_value_is_one_line(value):
    with pytest.raises(tuneloop.ConfigError, match="--small-data: unknown value 'sometimes'"):
        resolve_config(machine=False, small_data=value)


def test_what_the_rule_changes_is_what_the_options_declare_it_may():
    from tuneloop.config.options import with_trait

    changed = set()
    for options in ({}, {"recipe": "fast"}):
        before = resolve_config(machine=False, **options)
        after = small_data.adapt(before, 400)
        changed |= {k for k, v in after.to_dict().items() if v != before.to_dict()[k]}
    assert changed == set(with_trait("small_data")) == set(small_data.DECIDES)
