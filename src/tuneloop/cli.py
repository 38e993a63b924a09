"""The `tuneloop` command: train, evaluate, predict, tasks."""

from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .config import TrainConfig, add_config_arguments, config_from_namespace
from .errors import TuneloopError

EXIT_USER_ERROR = 2


def _formatter(prog):
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=34, width=110)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tuneloop", formatter_class=_formatter, description=(
        "Fine-tune pretrained transformer encoders (BERT and friends) for text classification and regression.\n"
        "`tuneloop train` with no options fine-tunes the embedded MiniLM on a built-in paraphrase sample, offline."))
    parser.add_argument("--version", action="version", version=f"tuneloop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = sub.add_parser("train", help="fine-tune a model and evaluate it after every epoch",
                           formatter_class=_formatter, description="Fine-tune a model and evaluate it after every "
                           "epoch. Options can also come from --config FILE.yaml (flags win).")
    train.add_argument("--config", metavar="FILE", help="YAML file of options (keys as the flags, with _ or -)")
    add_config_arguments(train)

    sub.add_parser("tasks", help="list the GLUE tasks tuneloop knows", formatter_class=_formatter)
    return parser


def cmd_train(ns) -> int:
    from .loop import train

    results = train(config_from_namespace(ns, TrainConfig))
    print_summary(results)
    return 0


def print_summary(results: dict) -> None:
    ev = results["eval"]
    shown = "  ".join(f"{k}={v:.4f}" for k, v in ev.items() if k != "num_samples")
    tr = results["train"]
    print(f"eval ({ev['num_samples']} examples): {shown}")
    print(f"train: {tr['steps']} steps, {tr['epochs']:g} epochs, {tr['runtime_s']:.1f}s, "
          f"{tr['samples_per_second']:.1f} samples/s")
    print(f"saved: {results['output_dir']}  (model in {results['output_dir']}/model)")


def cmd_tasks(ns) -> int:
    from .tasks import TASKS

    print(f"{'task':6} {'labels':38} {'metrics':32} description")
    for t in TASKS.values():
        labels = ", ".join(t.label_names) if t.label_names else "score (regression)"
        metrics = ", ".join(m + ("*" if m == t.main_metric else "") for m in t.metrics)
        print(f"{t.name:6} {labels:38} {metrics:32} {t.description}")
    print("* main metric. Local files: --task NAME --data-dir FOLDER (as GLUE ships it); "
          "otherwise read from the Hub (nyu-mll/glue).")
    return 0


COMMANDS = {"train": cmd_train, "tasks": cmd_tasks}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if not ns.command:
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        return COMMANDS[ns.command](ns)
    except TuneloopError as e:
        print(f"tuneloop {ns.command}: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("tuneloop: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
