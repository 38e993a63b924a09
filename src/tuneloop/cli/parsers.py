"""The `tuneloop` command's parser: one function per command, each adding its subparser and flags (training options
come from TrainConfig through config/flags.py)."""

from __future__ import annotations

import argparse
import difflib
import sys

from ..config.flags import COMMON, add_config_arguments
from ..config.data_options import DataOptions
from ..config.options import PRECISIONS, PRUNERS, with_trait
from ..version import __version__

# predict's and serve's --precision (predict/classifier.py)
PRECISION_HELP = ("PyTorch backend: auto takes the route the model folder records as gated for this device (checked "
                  "against fp32 on the validation rows at the end of training: int8 Linear layers or bf16 weights on "
                  "a CPU, bf16/fp16 on a GPU), fp32 where none is; fp32 is the exact model; int8, bf16, fp16 force a "
                  "route without the gate")

# each option names the commands that take it (`commands` in the options): `train` takes every one, a search's
# trials all but those of experiments and resuming (the search has its own), evaluate the data it reads
TRAIN_OPTIONS = with_trait("commands", "train")
SEARCH_OPTIONS = with_trait("commands", "search")
EVAL_OPTIONS = with_trait("commands", "evaluate")
EXPORT_OPTIONS = tuple(n for n in EVAL_OPTIONS if n in DataOptions.__dataclass_fields__)  # the data its gate reads
DISTILL_OPTIONS = with_trait("commands", "distill")


def _formatter(prog):
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=34, width=110)


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations (`--epoch 3` is not taken for --epochs: a script written so would start
    meaning another option, or stop, the day an option beginning alike is added), and an unknown argument named in
    its command's terms with the options it may have meant (argparse names the top-level command)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        commands = self._commands()
        if commands and argv and not argv[0].startswith("-") and argv[0] not in commands:
            meant = difflib.get_close_matches(argv[0], commands, n=1, cutoff=0.6)
            self.error(f"unknown command {argv[0]!r}" + (f"; did you mean {meant[0]}?" if meant else "") +
                       f" (commands: {', '.join(commands)})")
        ns, extras = self.parse_known_args(argv, namespace)
        if extras:
            command = self._command_parser(getattr(ns, "command", None))
            command.error(unknown_arguments(command, extras, argv))
        return ns

    def _commands(self) -> dict:
        return next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})

    def _command_parser(self, name) -> argparse.ArgumentParser:
        return self._commands().get(name, self)


def unknown_arguments(parser: argparse.ArgumentParser, extras: list[str], argv: list[str]) -> str:
    """What is wrong with the first argument the command does not take, and what it may have meant."""
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    first = extras[0]
    if first.startswith("-"):
        name = first.split("=", 1)[0]
        meant = [o for o in options if o.startswith(name)] or difflib.get_close_matches(name, options, n=3, cutoff=0.8)
        every = "--help-all" if "--help-all" in options else "--help"
        hint = f"; did you mean {' or '.join(meant[:3])}?" if meant else f"; see `{parser.prog} {every}`"
        return f"unknown option {name}{hint}"
    switches = {o: a for a in parser._actions if a.nargs == 0 for o in a.option_strings}
    after = next((argv[i - 1] for i in range(1, len(argv)) if argv[i] == first and argv[i - 1] in switches), None)
    if after is not None:                        # `--report off`: a switch given a value
        names = " / ".join(o for o in switches[after].option_strings if o.startswith("--"))
        return f"{after} takes no value ({names}), so {first!r} is left over"
    return f"unexpected argument {first!r}" + (f" (with {len(extras) - 1} more)" if len(extras) > 1 else "")


def build_parser(full_help: bool = False) -> argparse.ArgumentParser:
    """`full_help`: `train --help` lists every option (as `--help-all` asks), not the common ones."""
    parser = Parser(
        prog="tuneloop",
        formatter_class=_formatter,
        description=(
            "Fine-tune pretrained transformers (encoders, or decoder LLMs as classifiers) for text classification "
            "and regression.\n"
            "`tuneloop train` with no options fine-tunes the embedded MiniLM on a built-in paraphrase sample, offline."
        ),
    )
    parser.add_argument("--version", action="version", version=f"tuneloop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (
        add_train,
        add_evaluate,
        add_predict,
        add_report,
        add_inspect,
        add_search,
        add_distill,
        add_export,
        add_serve,
        add_tasks,
        add_env,
    ):
        add(sub, full_help) if add is add_train else add(sub)
    return parser


def add_train(sub, full_help: bool = False) -> None:
    p = sub.add_parser(
        "train",
        help="fine-tune a model and evaluate it after every epoch",
        formatter_class=_formatter,
        description="Fine-tune a model and evaluate it after every "
        "epoch. Options can also come from --config FILE.yaml (flags win)."
        + ("" if full_help else " The common options are below; `tuneloop train --help-all` lists all of them."),
    )
    p.add_argument("--config", metavar="FILE", help="YAML file of options (keys as the flags, with _ or -)")
    p.add_argument("--help-all", action="store_true", help="show every option and exit")
    add_config_arguments(p, only=TRAIN_OPTIONS, listed=None if full_help else COMMON)


def add_distill(sub) -> None:
    p = sub.add_parser(
        "distill",
        help="train a small, fast student on a teacher's outputs (a model, or a file of soft labels)",
        formatter_class=_formatter,
        description="The teacher labels --unlabeled-file once (its probabilities are kept in OUT/distill/ and reused "
        "by --resume); the student (--model, or --student-layers N of it) trains on them at --temperature, plus "
        "--train-file's labels weighted by --gold-weight, and is an ordinary run folder in OUT. results.json's "
        "`distillation` compares teacher and student on --validation-file. Every `train` option applies to the "
        "student (`tuneloop train --help-all`).",
    )
    p.add_argument("--config", metavar="FILE", help="YAML file of options (keys as the flags, with _ or -)")
    add_config_arguments(p, only=TRAIN_OPTIONS + DISTILL_OPTIONS, listed=COMMON + DISTILL_OPTIONS)


def add_evaluate(sub) -> None:
    p = sub.add_parser(
        "evaluate",
        help="metrics of a trained model on a labeled split",
        formatter_class=_formatter,
        description="Evaluate a saved model. Without data options it uses the validation data recorded with the model.",
    )
    add_model_place(p, "model", "RUN_OR_MODEL", "a run folder or a saved model folder (RUN/model)")
    p.add_argument("--output", metavar="FILE", help="also write the metrics to this JSON file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument(
        "--raw",
        action="store_true",
        help="ignore the model's decision rule (temperature, "
        "thresholds, abstain level): metrics of raw softmax/sigmoid and argmax (0.5 per label)",
    )
    p.add_argument("--precision", default="fp32", choices=PRECISIONS, help=f"{PRECISION_HELP} (default: fp32)")
    add_config_arguments(p, only=EVAL_OPTIONS)


def add_predict(sub) -> None:
    p = sub.add_parser(
        "predict",
        help="label a file, or one example given as arguments",
        formatter_class=_formatter,
        description="Predict with a saved model: "
        "`--input FILE [--output FILE]` for a file (csv/tsv/json/jsonl/parquet/xlsx, a sheet as book.xlsx#name), "
        "or quoted "
        'text(s) for one example: tuneloop predict --model DIR "first" ["second"]',
    )
    p.add_argument("texts", nargs="*", metavar="TEXT", help="one example: its text, or its two texts")
    p.add_argument("--model", required=True, metavar="DIR", help="a run folder or a saved model folder (RUN/model)")
    p.add_argument("--input", metavar="FILE", help="file to label; text columns as the model's or detected")
    p.add_argument(
        "--output",
        metavar="FILE",
        help="predictions file: .csv, .tsv, .jsonl or .xlsx (the [excel] extra), or - for standard output as JSON "
        "Lines (default: <input "
        "name>.predictions.tsv in the current folder)",
    )
    p.add_argument("--glue", action="store_true", help="write GLUE's submission layout: index<TAB>prediction")
    p.add_argument(
        "--keep-columns",
        metavar="all|none|A,B",
        help="the input's columns written beside the predictions (default: all; a column named like a prediction "
        "column, such as a gold label, as input_<name>)",
    )
    p.add_argument(
        "--text-columns",
        type=lambda s: s.split(","),
        metavar="A[,B]",
        help="the input's text column(s), when they are not the model's",
    )
    p.add_argument("--batch-size", type=int, default=64, metavar="N", help="examples per batch (default: 64)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument(
        "--raw",
        action="store_true",
        help="ignore the model's decision rule: raw softmax/sigmoid "
        "probabilities and argmax (0.5 per label), no abstaining",
    )
    p.add_argument("--cpu", action="store_true", help="run on the CPU even when a GPU is present")
    p.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help=f"{PRECISION_HELP} (default: auto)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars, only warnings")


def add_report(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write RUN_DIR/report.html: plots, metrics and configuration of a run",
        formatter_class=_formatter,
        description="Write a self-contained report.html (images "
        "inline) and plots/*.png into a run folder; also works while the run is going.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (the --output-dir of tuneloop train)")


def add_inspect(sub) -> None:
    p = sub.add_parser(
        "inspect",
        help="where the model fails: wrong validation rows, doubtful training labels",
        formatter_class=_formatter,
        description="Print the top of RUN_DIR/errors.csv (the "
        "validation rows the model gets wrong, most confidently wrong first) and of "
        "RUN_DIR/label_issues.csv (training rows whose given label is probably wrong).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (the --output-dir of tuneloop train)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows shown from each list (default: 10)")


def add_search(sub) -> None:
    p = sub.add_parser(
        "search",
        help="hyperparameter search on Optuna; ends with the best model in OUT/best",
        formatter_class=_formatter,
        description="Search the options of a YAML space (e.g. `lr: "
        "{low: 1.0e-5, high: 2.0e-4, log: true}`, `batch_size: {choices: [16, 32]}`) with Optuna: "
        "TPE sampling, pruning on every evaluation, each trial a run in OUT/trials/. Workers on "
        "other machines join with the same --storage URL and --study NAME.",
    )
    p.add_argument(
        "--space", required=True, metavar="FILE", help="YAML file: option → {low, high[, log]} or {choices: [...]}"
    )
    p.add_argument(
        "--trials",
        type=int,
        default=12,
        metavar="N",
        help="finished (complete or pruned) trials the study should reach, all workers together (default: 12)",
    )
    p.add_argument(
        "--storage",
        metavar="URL",
        help="Optuna storage URL, e.g. postgresql://user@host/db (default: a journal file OUT/study.journal)",
    )
    p.add_argument("--study", default="tuneloop", metavar="NAME", help="study name (default: tuneloop)")
    p.add_argument(
        "--pruner", default="median", choices=PRUNERS, help="stop unpromising trials at an evaluation (default: median)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue a search: interrupted trials resume from their checkpoints, finished ones are kept",
    )
    add_config_arguments(p, only=SEARCH_OPTIONS)


def add_model_place(p, dest: str, metavar: str, help: str) -> None:
    """The model folder as the first argument, or as --model DIR as predict and evaluate take it
    (commands.model_place reads either)."""
    p.add_argument(dest, metavar=metavar, nargs="?", help=help + " (or --model DIR)")
    p.add_argument("--model", dest=f"{dest}_flag", metavar="DIR", help=argparse.SUPPRESS)


def add_export(sub) -> None:
    p = sub.add_parser(
        "export",
        help="export a trained model to ONNX (int8 optional), checked against PyTorch",
        formatter_class=_formatter,
        description="Export RUN_DIR/model (or a model folder) to "
        "ONNX with dynamic batch and sequence axes; with --quantize int8, dynamic int8 weights. "
        "The export is evaluated on the run's validation data (or the data options' rows: a run fed from "
        "Python needs them) beside the PyTorch model and "
        "refused when the main metric drops by more than 0.5 points (or --allow-drop X).",
    )
    add_model_place(p, "source", "RUN_OR_MODEL", "a run folder or a model folder")
    p.add_argument("--output", required=True, metavar="DIR", help="the exported model folder")
    p.add_argument("--format", default="onnx", choices=("onnx",), help="(default: onnx)")
    p.add_argument("--quantize", choices=("int8",), help="dynamic int8 quantization (ONNX Runtime)")
    p.add_argument(
        "--allow-drop",
        type=float,
        metavar="POINTS",
        help="the largest drop of the main metric "
        "accepted, in points (default 0.5; a drop over 0.5 within POINTS is a warning)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output folder")
    p.add_argument("--quiet", action="store_true", help="no progress bars, only warnings")
    add_config_arguments(p, only=EXPORT_OPTIONS)


def add_serve(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a model over HTTP (JSON) with dynamic batching",
        formatter_class=_formatter,
        description='POST /predict {"texts": ...}, GET /health, '
        "GET /metadata, GET /stats. Requests are batched, whole (to --max-batch-size rows or "
        "--max-wait-ms), and run on PyTorch, or ONNX Runtime for an exported folder.",
    )
    add_model_place(p, "model", "MODEL_DIR", "a run folder, a model folder (RUN/model) or an exported one")
    p.add_argument("--host", default="127.0.0.1", help="(default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="(default: 8000)")
    p.add_argument("--max-batch-size", type=int, default=32, metavar="N",
                   help="a batch takes whole requests until it holds N rows or more (default: 32)")
    p.add_argument(
        "--max-wait-ms",
        type=float,
        default=5.0,
        metavar="MS",
        help="how long the first request of a batch waits for others (default: 5; a lone client's request, "
        "after a batch of one, runs at once)",
    )
    p.add_argument("--max-rows", type=int, default=256, metavar="N", help="rows per request (default: 256)")
    p.add_argument("--max-body-kb", type=int, default=1024, metavar="KB", help="request size (default: 1024)")
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads for the model (default: torch's)")
    p.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help=f"{PRECISION_HELP} (default: auto)",
    )


def add_tasks(sub) -> None:
    sub.add_parser("tasks", help="list the GLUE tasks tuneloop knows", formatter_class=_formatter)


def add_env(sub) -> None:
    sub.add_parser(
        "env", help="versions, devices and the accelerate configuration (for bug reports)", formatter_class=_formatter
    )
