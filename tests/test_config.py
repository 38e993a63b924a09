"""Options are validated before any work starts, with one clear line naming the option."""

from __future__ import annotations

import pytest
import yaml

from tuneloop import ConfigError, TrainConfig
from tuneloop.cli.main import main
from tuneloop.config.resolve import resolve_config


@pytest.mark.parametrize("changes, message", [
    ({"lr": -1}, r"--lr: must be a positive number, got -1"),
    ({"epochs": 0}, r"--epochs: must be at least 1, got 0"),
    ({"task": "glue9"}, r"--task: unknown task 'glue9'; known tasks: cola, sst2, mrpc"),
    ({"batch_size": 0}, r"--batch-size: must be at least 1"),
    ({"warmup_ratio": 1.5}, r"--warmup-ratio: must be in \[0, 1\)"),
    ({"warmup_ratio": 0.1, "warmup_steps": 5}, r"either --warmup-steps or --warmup-ratio"),
    ({"threshold_confidence": 1.0}, r"--threshold-confidence: must be in \[0, 1\), got 1.0"),
    ({"mixed_precision": "fp8"}, r"--mixed-precision: unknown value 'fp8'"),
    ({"text_columns": ["a", "b", "c"]}, r"--text-columns: give one or two column names"),
    ({"train_file": "/no/such/file.csv"}, r"--train-file: /no/such/file.csv does not exist"),
    ({"pad_to_max_length": True}, r"--pad-to-max-length: needs --max-length"),
    # each of these ran into a traceback, or trained something else, before
    ({"seed": -1}, r"--seed: must be in 0\.\.4294967295"),                        # NumPy's ValueError
    ({"seeds": [1, 2 ** 32]}, r"--seeds: must be in 0\.\.4294967295 \(NumPy's range\), got 4294967296"),
    ({"split_seed": -1}, r"--split-seed: must be in 0\.\.4294967295"),            # scikit-learn's error
    ({"lora_alpha": 0}, r"--lora-alpha: must be a positive number \(0 scales the adapters to nothing\)"),
    ({"label_separator": ""}, r"--label-separator: give the text between labels"),
    ({"max_steps": 0}, r"--max-steps: must be at least 1, got 0"),
    ({"weight_decay": float("inf")}, r"--weight-decay: must be finite and >= 0, got inf"),   # the weights became nan
    ({"weight_decay": float("nan")}, r"--weight-decay: must be finite and >= 0, got nan"),
])
def test_invalid_options_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**changes).validate()


def test_defaults_are_the_chapters():
    c = TrainConfig()
    assert (c.batch_size, c.lr, c.epochs, c.lr_scheduler, c.warmup_steps, c.warmup_ratio) == \
        (8, 5e-5, 3, "linear", 0, 0.0)
    assert c.model == "minilm"
    c.validate()


@pytest.mark.parametrize("argv, fragment", [
    (["train", "--lr", "-1"], "--lr: must be a positive number"),
    (["train", "--epochs", "0"], "--epochs: must be at least 1"),
    (["train", "--task", "nope"], "--task: unknown task 'nope'"),
])
def test_cli_user_errors_exit_2_with_one_line(argv, fragment, capsys, tmp_path):
    code = main(argv + ["--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert fragment in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()               # nothing was written


def test_cli_type_errors_name_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--epochs", "three"])
    assert exit_info.value.code == 2
    assert "--epochs" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    # argparse took --epoch for --epochs (a script written so changes meaning once an option begins alike)
    (["train", "--epoch", "3"], "tuneloop train: error: unknown option --epoch; did you mean --epochs?"),
    (["train", "--bach-size", "8"], "tuneloop train: error: unknown option --bach-size; did you mean --batch-size?"),
    (["train", "--lernign-rate", "1"], "tuneloop train: error: unknown option --lernign-rate; see `tuneloop train "
                                       "--help-all`"),
    # argparse named the top-level command: "tuneloop: error: unrecognized arguments: off"
    (["train", "--report", "off"], "tuneloop train: error: --report takes no value (--report / --no-report), so "
                                   "'off' is left over"),
    (["predict", "--model", "m", "a", "--wat"], "tuneloop predict: error: unknown option --wat; see `tuneloop "
                                                "predict --help`"),
    (["trian", "--epochs", "2"], "tuneloop: error: unknown command 'trian'; did you mean train? (commands: train, "
                                 "evaluate, predict, report, inspect, search, distill, export, serve, tasks, env)"),
])
def test_an_option_the_command_does_not_take_is_named_with_what_was_meant(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == message


def test_yaml_unknown_key_and_bad_value(tmp_path, capsys):
    bad_key = tmp_path / "a.yaml"
    bad_key.write_text(yaml.safe_dump({"learning_rate": 0.1}))
    assert main(["train", "--config", str(bad_key)]) == 2
    assert "unknown option 'learning_rate'" in capsys.readouterr().err
    bad_value = tmp_path / "b.yaml"
    bad_value.write_text(yaml.safe_dump({"epochs": "many"}))
    assert main(["train", "--config", str(bad_value)]) == 2
    assert "epochs: expected int, got 'many'" in capsys.readouterr().err


@pytest.mark.parametrize("content, fragment", [
    (b"epochs: 1\nlr: 1e-4\nepochs: 2\n", "'epochs' is given twice (lines 1 and 3)"),     # PyYAML kept the last
    (b"max-length: 64\nmax_length: 32\n", "'max-length' and 'max_length' are the same option"),
    (b"epochs:\n", "epochs: expected int, got none (null)"),                                # was a TypeError
    (b"model: ~\n", "model: expected str, got none (null)"),
    (b"output_dir: [a, b]\n", "output_dir: expected str, got ['a', 'b']"),               # was a folder "['a', 'b']"
    (b"\xff\xfeepochs: 1\n", "is not UTF-8 text"),
    (b"epochs:\t2\n", "is not valid YAML (line 1)"),
])
def test_yaml_file_mistakes_are_one_line_errors(content, fragment, tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_bytes(content)
    assert main(["train", "--config", str(path), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
    assert main(["train", "--config", str(tmp_path)]) == 2                                  # a folder
    assert "is a folder" in capsys.readouterr().err


def test_yaml_null_keeps_meaning_not_set_for_optional_options(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("max_steps: ~\ndropout:\nepochs: 2\n")
    c = resolve_config(config_file=path, machine=False)
    assert (c.max_steps, c.dropout, c.epochs) == (None, None, 2)
    with pytest.raises(ConfigError, match="epochs: expected int, got none"):
        resolve_config(epochs=None, machine=False)
    with pytest.raises(ConfigError, match="output_dir: expected str"):
        resolve_config(output_dir=["runs"], machine=False)
    assert resolve_config(output_dir=3, machine=False).output_dir == "3"     # as YAML reads it: a TypeError in the run


def test_yaml_round_trip(tmp_path):
    c = TrainConfig(task="rte", lr=2e-5, text_columns=["a", "b"], max_steps=10)
    c.save_yaml(tmp_path / "c.yaml")
    assert TrainConfig.from_yaml(tmp_path / "c.yaml") == c
    assert TrainConfig.from_yaml(tmp_path / "c.yaml", lr=1e-4).lr == 1e-4


def test_help_groups_options_and_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    for group in ("data options", "model options", "training options", "evaluation options", "output options"):
        assert group in text
    assert "(default: 5e-05)" in text and "(default: minilm)" in text
    assert "%%" not in text
    assert "--help-all" in text and "--fast-dropout" not in text and len(text.splitlines()) < 100   # the common ones
    with pytest.raises(SystemExit):
        main(["train", "--help-all"])
    every = capsys.readouterr().out
    assert "--fast-dropout" in every and "--lora-r" in every and len(every.splitlines()) > 150


def test_options_left_out_of_the_short_help_still_parse():
    from tuneloop.cli import build_parser

    ns = build_parser().parse_args(["train", "--warmup-ratio", "0.1", "--no-fast-dropout"])
    assert ns.warmup_ratio == 0.1 and ns.fast_dropout is False


def preset_fast() -> dict:
    from tuneloop.config.resolve import preset

    return preset("fast")


def test_presets_are_shipped_yaml_files_and_the_recipe_choices():
    from tuneloop.config.options import PRESETS_DIR, RECIPES

    assert (PRESETS_DIR / "fast.yaml").is_file() and "fast" in RECIPES
    fast = preset_fast()
    assert fast["batch_size"] == 32 and fast["epochs"] == 2 and fast["eval_every"] == "4/epoch"
    TrainConfig(**fast).validate()


def test_options_you_give_win_over_a_preset_at_every_layer(tmp_path):
    from tuneloop.cli.main import build_parser
    from tuneloop.config.flags import options_from_namespace
    from tuneloop.config.resolve import resolve_config

    fast = resolve_config(recipe="fast")
    assert {k: getattr(fast, k) for k in preset_fast()} == preset_fast()
    # a value equal to the plain default, given on purpose, is not replaced: flags, YAML and keywords alike
    ns = build_parser().parse_args(["train", "--recipe", "fast", "--epochs", "3", "--lr", "5e-5"])
    cli = resolve_config(**options_from_namespace(ns))
    assert (cli.epochs, cli.lr, cli.batch_size) == (3, 5e-5, 32)
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text(yaml.safe_dump({"recipe": "fast", "epochs": 3, "batch_size": 8}))
    from_yaml = resolve_config(config_file=yaml_file, batch_size=16)
    assert (from_yaml.epochs, from_yaml.batch_size, from_yaml.lr) == (3, 16, 1e-4)      # flags win over YAML
    assert resolve_config(recipe="fast", epochs=3).epochs == 3
    # a TrainConfig object counts as what differs from the defaults
    assert resolve_config(TrainConfig(recipe="fast", batch_size=16)).batch_size == 16
    assert resolve_config(TrainConfig(recipe="fast", batch_size=16)).epochs == 2
    assert resolve_config().recipe == "none" and resolve_config().epochs == 3
    assert "explicit_options" not in resolve_config(recipe="fast").to_dict()


def test_resolution_fills_what_was_left_to_tuneloop():
    from tuneloop.config.resolve import resolve_config
    from tuneloop.runtime.machine import native_bf16

    resolved = resolve_config()
    assert (resolved.task, resolved.data_dir) == ("mrpc", "sample")
    assert resolved.mixed_precision == ("bf16" if native_bf16(False) else "no")
    assert resolved.attention == "auto"                   # decided per architecture when the model loads
    assert resolved.output_dir.startswith("runs/mrpc-")
    assert resolve_config(mixed_precision="no", attention="eager").mixed_precision == "no"
    assert resolve_config(mixed_precision="no", attention="eager").attention == "eager"
    assert resolve_config(max_grad_norm=0).max_grad_norm is None
    left = resolve_config(machine=False)
    assert (left.mixed_precision, left.attention) == ("auto", "auto")
    again = resolve_config(resolved)
    assert again == resolved                              # resolving a resolved config changes nothing


def test_resume_takes_the_run_folders_config_as_its_base_layer(tmp_path):
    from tuneloop.config.resolve import resolve_config

    run = resolve_config(output_dir=str(tmp_path), lr=2e-4, epochs=5, mixed_precision="no")
    run.save_yaml(tmp_path / "config.yaml")
    resumed = resolve_config(output_dir=str(tmp_path), resume="latest", log_every=2)
    assert (resumed.lr, resumed.epochs, resumed.log_every, resumed.resume) == (2e-4, 5, 2, "latest")
    train, dev = tmp_path / "t.csv", tmp_path / "d.csv"
    for path in (train, dev):
        path.write_text("text,label\na cat,0\n")
    files = resolve_config(output_dir=str(tmp_path), train_file=str(train), validation_file=str(dev), overwrite=True)
    files.save_yaml(tmp_path / "config.yaml")                # every option saved, the split's defaults too
    assert resolve_config(output_dir=str(tmp_path), resume="latest").validation_file == str(dev)
    held = resolve_config(train_file=str(train), validation_split=0.25, split_seed=7, machine=False)
    assert (held.validation_split, held.split_seed) == (0.25, 7)


@pytest.mark.parametrize("options, message", [
    ({"metric_for_best": "f2"}, r"--metric-for-best: 'f2' is not reported .*choose one of accuracy, f1, loss"),
    ({"metric_for_best": "pearson", "task": "rte"}, r"--metric-for-best: 'pearson'"),
    ({"eval_every": "x/epoch"}, r"--eval-every: must be a number of steps \(>= 1\) or K/epoch"),
    ({"eval_every": "0"}, r"--eval-every"),
    ({"recipe": "slow"}, r"--recipe: unknown value 'slow'"),
    ({"learning_rate": 1e-4}, r"unknown option\(s\) 'learning_rate'"),
    ({"train_file": "t.csv", "validation_file": "d.csv", "validation_split": 0.2},
     r"--validation-split: would be ignored: the validation rows come from --validation-file .*drop "
     r"--validation-split$"),
    ({"task": "mrpc", "data_dir": "MRPC", "split_seed": 3}, r"--split-seed: would be ignored: .* from --data-dir"),
    ({"validation_split": 0.3, "split_seed": 1},
     r"--validation-split and --split-seed: would be ignored: .* the data's own validation split"),
])
def test_resolution_refuses_before_reading_any_data(options, message):
    from tuneloop.config.resolve import resolve_config

    with pytest.raises(ConfigError, match=message):
        resolve_config(**options)


def test_metric_for_best_of_own_data_is_checked_against_the_problem_type(tmp_path):
    from tuneloop.config.resolve import resolve_config

    data = tmp_path / "t.csv"
    data.write_text("text,label\na,0\nb,1\n")
    assert resolve_config(train_file=str(data), metric_for_best="f1_macro").metric_for_best == "f1_macro"
    with pytest.raises(ConfigError, match="'pearson'"):
        resolve_config(train_file=str(data), problem_type="single_label_classification", metric_for_best="pearson")


def test_eval_every_in_steps_or_times_per_epoch():
    from tuneloop.training.state import Plan

    assert Plan.make(100, TrainConfig(eval_every="4/epoch"), 1).eval_interval == 25
    assert Plan.make(100, TrainConfig(eval_every=30), 1).eval_interval == 30
    assert Plan.make(3, TrainConfig(eval_every="4/epoch"), 1).eval_interval == 1
    plan = Plan.make(10, TrainConfig(eval_every=4, epochs=2), 1)
    assert [s for s in range(1, 21) if plan.eval_due(s)] == [4, 8, 10, 12, 16, 20]


def test_example_configs_are_valid_options():
    from pathlib import Path

    from tuneloop.config.options import read_yaml_options

    folder = Path(__file__).resolve().parents[1] / "configs"
    files = sorted(folder.glob("*.yaml"))
    assert len(files) >= 3
    for path in files:
        options = read_yaml_options(path)
        config = TrainConfig(**{k: v for k, v in options.items() if not k.endswith(("_dir", "_file"))})
        config.validate()


def test_train_config_is_the_data_options_then_the_rest_in_order():
    import dataclasses

    from tuneloop.config.data_options import DataOptions

    data = [f.name for f in dataclasses.fields(DataOptions)]
    every = [f.name for f in dataclasses.fields(TrainConfig)]
    assert every[:len(data)] == data and list(TrainConfig().to_dict())[:len(data)] == data     # config.yaml's order
    assert data == [f.name for f in dataclasses.fields(TrainConfig) if f.metadata["group"] == "data"]
    message = r"--text-columns: give one or two column names separated by a comma .*; to read three or more, join " \
        r"them into one column of the file"
    for options in (DataOptions, TrainConfig):           # the same check and message, with or without the rest
        with pytest.raises(ConfigError, match=message):
            options(text_columns=["a", "b", "c"]).validate()


def test_each_command_takes_the_options_declared_for_it(capsys):
    import dataclasses

    from tuneloop.cli import build_parser
    from tuneloop.config.options import with_trait

    for f in dataclasses.fields(TrainConfig):
        assert f.metadata["commands"] == ("distill",) or (  # distill's own; train takes every other option
            "train" in f.metadata["commands"] and set(f.metadata["commands"]) <= {"train", "evaluate", "search"})
        assert f.metadata["sklearn"] in (None, "own"), f.name
    evaluate = with_trait("commands", "evaluate")
    assert {"max_eval_samples", "eval_batch_size", "validation_file"} <= set(evaluate) and "lr" not in evaluate
    parser = build_parser()
    ns = parser.parse_args(["evaluate", "--model", "m", "--max-eval-samples", "3", "--eval-batch-size", "2"])
    assert (ns.max_eval_samples, ns.eval_batch_size) == (3, 2)
    for argv in (["evaluate", "--model", "m", "--lr", "1e-4"], ["search", "--space", "s.yaml", "--folds", "3"],
                 ["train", "--teacher", "t"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
    assert "folds" not in with_trait("commands", "search") and "lr" in with_trait("commands", "search")
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    shown = capsys.readouterr().out
    assert all(f"--{name.replace('_', '-')} " in shown for name in with_trait("common"))
    assert "--split-seed" not in shown and "split_seed" not in with_trait("common")


class SavedModel:
    """What data_config_for reads of a Classifier: its tuneloop.json and folder."""

    path = "model"

    def __init__(self, validation_file):
        self.metadata = {"task": None, "text_policy": {"max_length": 64, "truncation": "tail"},
                         "data": {"validation_file": str(validation_file), "text_columns": ["text"]}}


def test_evaluate_takes_data_options_and_nothing_of_training(tmp_path):
    import dataclasses

    from tuneloop.config.data_options import DataOptions
    from tuneloop.predict.evaluate import data_config_for

    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\na,0\n")
    options = data_config_for(SavedModel(dev), {"max_eval_samples": 5, "eval_batch_size": 4, "quiet": True})
    assert type(options) is DataOptions and not hasattr(options, "lr") and not hasattr(options, "eval_batch_size")
    assert (options.validation_file, options.text_columns, options.max_length, options.truncation,
            options.max_eval_samples) == (str(dev), ["text"], 64, "tail", 5)
    assert not {f.name for f in dataclasses.fields(options)} & {"model", "epochs", "lr", "seed", "output_dir"}
    with pytest.raises(ConfigError, match="--eval-batch-size: must be at least 1, got 0"):
        data_config_for(SavedModel(dev), {"eval_batch_size": 0})
    with pytest.raises(ConfigError, match="--max-eval-samples: must be at least 1, got 0"):
        data_config_for(SavedModel(dev), {"max_eval_samples": 0})
    with pytest.raises(TypeError, match="not lr"):
        data_config_for(SavedModel(dev), {"lr": 1e-4})


def test_a_test_file_given_is_predicted_unless_the_user_says_not(tmp_path):
    """--test-file without --predict-test was read and never predicted, without a word."""
    for name in ("train.csv", "test.csv"):
        (tmp_path / name).write_text("text,label\nthe cat,a\n")
    files = {"train_file": str(tmp_path / "train.csv"), "test_file": str(tmp_path / "test.csv")}
    assert resolve_config(machine=False, **files).predict_test is True
    assert resolve_config(machine=False, **files, predict_test=False).predict_test is False
    assert resolve_config(machine=False, train_file=files["train_file"]).predict_test is False
    assert resolve_config(machine=False, task="mrpc").predict_test is False       # a GLUE folder's test: asked for


def test_a_constant_schedule_with_a_warmup_warms_up():
    """transformers' `constant` ignores num_warmup_steps: the small-data rule's 10% warmup (or --warmup-ratio) was
    recorded and said, and the first step ran at the full rate."""
    import torch

    from tuneloop.model.optim import build_scheduler

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = build_scheduler(optimizer, "constant", 100, 0, 0.1)
    rates = []
    for _ in range(20):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[0] == 0.0 and rates[5] == pytest.approx(0.5) and rates[10:] == [1.0] * 10
    plain = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    build_scheduler(plain, "constant", 100, 0, 0.0)
    assert plain.param_groups[0]["lr"] == 1.0


def test_a_warmup_longer_than_the_run_is_said(caplog):
    import logging

    import torch

    from tuneloop.model.optim import build_scheduler

    with caplog.at_level(logging.WARNING, logger="tuneloop"):
        build_scheduler(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), "linear", 20, 1000, 0.0)
        build_scheduler(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), "linear", 20, 5, 0.0)
    assert [r.getMessage() for r in caplog.records] == [
        "--warmup-steps 1000: the run has 20 optimizer steps, so the learning rate never reaches --lr (it ends at 2% "
        "of it); give fewer warmup steps or --warmup-ratio"]


def test_options_that_do_nothing_without_another_are_said():
    """--lora-r without --lora, --window-pooling without --windows, ... were recorded and silently ignored."""
    from tuneloop.config.idle import idle_options
    from tuneloop.config.resolve import resolve_config

    said = idle_options(resolve_config(machine=False, lora_r=16, window_pooling="max", abstain_label="unsure",
                                       optimize_threshold_for="precision@0.8", setfit_lr=1e-4, method="finetune"))
    assert said == [
        "--window-pooling 'max' does nothing without --windows; it is recorded as given (leave it out, or add what "
        "it needs)",
        "--lora-r 16 does nothing without --lora; it is recorded as given (leave it out, or add what it needs)",
        "--setfit-lr 0.0001 does nothing without --method setfit; it is recorded as given (leave it out, or add "
        "what it needs)",
        "--optimize-threshold-for 'precision@0.8' does nothing without --decision threshold; it is recorded as given "
        "(leave it out, or add what it needs)",
        "--abstain-label 'unsure' does nothing without --abstain-below; it is recorded as given (leave it out, or "
        "add what it needs)"]
    assert idle_options(resolve_config(machine=False, lora=True, lora_r=16, windows=8, window_pooling="max",
                                       decision="threshold", optimize_threshold_for="precision@0.8")) == []
    assert idle_options(resolve_config(machine=False, lora_r=8, window_pooling="mean")) == []      # the defaults
    assert idle_options(resolve_config(machine=False, method="probe", save_every="5")) == [
        "--save-every '5' does nothing without a training loop (--method finetune, or --setfit-head end-to-end); it "
        "is recorded as given (leave it out, or add what it needs)"]
    assert idle_options(resolve_config(machine=False, method="setfit", setfit_head="end-to-end", save_every="5")) == []
    from tuneloop.data.labels import LabelSchema

    three = LabelSchema("single_label_classification", ["x", "y", "z"])
    assert idle_options(resolve_config(machine=False, positive_label="x"), three) == [
        "--positive-label 'x' does nothing without two classes of single-label data; it is recorded as given (leave "
        "it out, or add what it needs)"]
    assert idle_options(resolve_config(machine=False, positive_label="x"),
                        LabelSchema("single_label_classification", ["x", "y"])) == []


def test_a_runs_own_config_yaml_is_reusable_with_config(tmp_path):
    """OUT/config.yaml spells out every option: reused with --config, its split defaults beside --data-dir were
    refused as ignored, and its `resume: latest` / `overwrite: true` (what that run did to its folder) resumed or
    replaced the run in its output_dir. Its `chosen` says what its user chose (a resumed run's listed every
    option)."""
    (tmp_path / "MRPC").mkdir()
    run = resolve_config(task="mrpc", data_dir=str(tmp_path / "MRPC"), output_dir=str(tmp_path / "run"), lr=1e-4,
                         overwrite=True, machine=False)
    (tmp_path / "run").mkdir()
    run.save_yaml(tmp_path / "run" / "config.yaml")
    resumed = resolve_config(output_dir=str(tmp_path / "run"), resume="latest", machine=False)   # its config.yaml
    assert "validation_split" not in resumed.chosen and "lr" in resumed.chosen
    for saved in (run, resumed):
        saved.save_yaml(tmp_path / "config.yaml")
        again = resolve_config(config_file=tmp_path / "config.yaml", output_dir=str(tmp_path / "new"), machine=False)
        assert (again.lr, again.data_dir, again.resume, again.overwrite) == (1e-4, str(tmp_path / "MRPC"), None, False)
        assert "lr" in again.chosen and "validation_split" not in again.chosen and "overwrite" not in again.chosen
        assert resolve_config(config_file=tmp_path / "config.yaml", overwrite=True, machine=False).overwrite  # a flag
    (tmp_path / "own.yaml").write_text("overwrite: true\n")          # a file of the user's own: as written
    assert resolve_config(config_file=tmp_path / "own.yaml", machine=False).overwrite


@pytest.mark.parametrize("value, resume", [(False, None), (True, "latest"), ("latest", "latest"), ("false", None)])
def test_resume_true_or_false_from_python_or_yaml(value, resume, tmp_path):
    """resume=False was read as the path "false": the run looked for a checkpoint folder of that name."""
    assert resolve_config(output_dir=str(tmp_path), resume=value, machine=False).resume == resume
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"resume": value}))
    assert resolve_config(config_file=tmp_path / "run.yaml", output_dir=str(tmp_path), machine=False).resume == resume
