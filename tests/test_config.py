"""Options are validated before any work starts, with one clear line naming the option."""

from __future__ import annotations

import pytest
import yaml

from tuneloop import ConfigError, TrainConfig
from tuneloop.cli import main


@pytest.mark.parametrize("changes, message", [
    ({"lr": -1}, r"--lr: must be a positive number, got -1"),
    ({"epochs": 0}, r"--epochs: must be at least 1, got 0"),
    ({"task": "glue9"}, r"--task: unknown task 'glue9'; known tasks: cola, sst2, mrpc"),
    ({"batch_size": 0}, r"--batch-size: must be at least 1"),
    ({"warmup_ratio": 1.5}, r"--warmup-ratio: must be in \[0, 1\)"),
    ({"warmup_ratio": 0.1, "warmup_steps": 5}, r"either --warmup-steps or --warmup-ratio"),
    ({"mixed_precision": "fp8"}, r"--mixed-precision: unknown value 'fp8'"),
    ({"text_columns": ["a", "b", "c"]}, r"--text-columns: give one or two column names"),
    ({"train_file": "/no/such/file.csv"}, r"--train-file: /no/such/file.csv does not exist"),
    ({"pad_to_max_length": True}, r"--pad-to-max-length: needs --max-length"),
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


def test_yaml_unknown_key_and_bad_value(tmp_path, capsys):
    bad_key = tmp_path / "a.yaml"
    bad_key.write_text(yaml.safe_dump({"learning_rate": 0.1}))
    assert main(["train", "--config", str(bad_key)]) == 2
    assert "unknown option 'learning_rate'" in capsys.readouterr().err
    bad_value = tmp_path / "b.yaml"
    bad_value.write_text(yaml.safe_dump({"epochs": "many"}))
    assert main(["train", "--config", str(bad_value)]) == 2
    assert "epochs: expected int, got 'many'" in capsys.readouterr().err


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


def test_fast_recipe_changes_defaults_only():
    from tuneloop.session import FAST_RECIPE, apply_recipe

    fast = apply_recipe(TrainConfig(recipe="fast"))
    assert {k: getattr(fast, k) for k in FAST_RECIPE} == FAST_RECIPE
    mine = apply_recipe(TrainConfig(recipe="fast", batch_size=16, epochs=1))
    assert mine.batch_size == 16 and mine.epochs == 1 and mine.lr == FAST_RECIPE["lr"]
    assert apply_recipe(TrainConfig()) == TrainConfig()
    # a value equal to the plain default, set on purpose, is not replaced either (flags, YAML, API keywords)
    said = apply_recipe(TrainConfig(recipe="fast", epochs=3).with_explicit(["epochs", "recipe"]))
    assert said.epochs == 3 and said.batch_size == FAST_RECIPE["batch_size"]
    from tuneloop.cli import build_parser
    from tuneloop.config import config_from_namespace

    ns = build_parser().parse_args(["train", "--recipe", "fast", "--epochs", "3", "--lr", "5e-5"])
    cli = apply_recipe(config_from_namespace(ns))
    assert (cli.epochs, cli.lr, cli.batch_size) == (3, 5e-5, FAST_RECIPE["batch_size"])


def test_auto_precision_resolves_to_what_the_hardware_computes_natively():
    from tuneloop.session import native_bf16, resolve_defaults

    resolved = resolve_defaults(TrainConfig())
    assert resolved.mixed_precision == ("bf16" if native_bf16(False) else "no")
    assert resolve_defaults(TrainConfig(recipe="fast")).mixed_precision == ("bf16" if native_bf16(False) else "no")
    assert resolve_defaults(TrainConfig(mixed_precision="no")).mixed_precision == "no"


def test_example_configs_are_valid_options():
    from pathlib import Path

    from tuneloop.config import read_yaml_options

    folder = Path(__file__).resolve().parents[1] / "configs"
    files = sorted(folder.glob("*.yaml"))
    assert len(files) >= 3
    for path in files:
        options = read_yaml_options(path)
        config = TrainConfig(**{k: v for k, v in options.items() if not k.endswith(("_dir", "_file"))})
        config.validate()
