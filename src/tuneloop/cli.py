"""The `tuneloop` command: train, evaluate, predict, report, inspect, tasks, env."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from .config import PRUNERS, SERVE_PRECISIONS, TrainConfig
from .errors import Interrupted, TuneloopError
from .flags import add_config_arguments, options_from_namespace
from .version import __version__

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

    evaluate = sub.add_parser("evaluate", help="metrics of a trained model on a labeled split",
                              formatter_class=_formatter, description="Evaluate a saved model. Without data options "
                              "it uses the validation data recorded with the model.")
    evaluate.add_argument("--model", required=True, metavar="DIR", help="a saved model folder (e.g. RUN/model)")
    evaluate.add_argument("--output", metavar="FILE", help="also write the metrics to this JSON file")
    evaluate.add_argument("--raw", action="store_true", help="ignore the model's decision rule (temperature, "
                          "thresholds, abstain level): metrics of raw softmax/sigmoid and argmax (0.5 per label)")
    add_config_arguments(evaluate, only=EVAL_OPTIONS)

    predict = sub.add_parser("predict", help="label a file, or one example given as arguments",
                             formatter_class=_formatter, description="Predict with a saved model: "
                             "`--input FILE [--output FILE]` for a file (csv/tsv/json/jsonl/parquet), or quoted "
                             "text(s) for one example: tuneloop predict --model DIR \"first\" [\"second\"]")
    predict.add_argument("texts", nargs="*", metavar="TEXT", help="one example: its text, or its two texts")
    predict.add_argument("--model", required=True, metavar="DIR", help="a saved model folder (e.g. RUN/model)")
    predict.add_argument("--input", metavar="FILE", help="file to label; text columns as the model's or detected")
    predict.add_argument("--output", metavar="FILE", help="predictions file: .csv, .tsv or .jsonl "
                         "(default: <input name>.predictions.tsv in the current folder)")
    predict.add_argument("--glue", action="store_true", help="write GLUE's submission layout: index<TAB>prediction")
    predict.add_argument("--text-columns", type=lambda s: s.split(","), metavar="A[,B]",
                         help="the input's text column(s), when they are not the model's")
    predict.add_argument("--batch-size", type=int, default=64, metavar="N", help="examples per batch (default: 64)")
    predict.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    predict.add_argument("--raw", action="store_true", help="ignore the model's decision rule: raw softmax/sigmoid "
                         "probabilities and argmax (0.5 per label), no abstaining")
    predict.add_argument("--cpu", action="store_true", help="run on the CPU even when a GPU is present")
    predict.add_argument("--quiet", action="store_true", help="no progress bars")

    report = sub.add_parser("report", help="write RUN_DIR/report.html: plots, metrics and configuration of a run",
                            formatter_class=_formatter, description="Write a self-contained report.html (images "
                            "inline) and plots/*.png into a run folder; also works while the run is going.")
    report.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (the --output-dir of tuneloop train)")

    inspect = sub.add_parser("inspect", help="where the model fails: wrong validation rows, doubtful training labels",
                             formatter_class=_formatter, description="Print the top of RUN_DIR/errors.csv (the "
                             "validation rows the model gets wrong, most confidently wrong first) and of "
                             "RUN_DIR/label_issues.csv (training rows whose given label is probably wrong).")
    inspect.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (the --output-dir of tuneloop train)")
    inspect.add_argument("--top", type=int, default=10, metavar="N", help="rows shown from each list (default: 10)")

    search = sub.add_parser("search", help="hyperparameter search on Optuna; ends with the best model in OUT/best",
                            formatter_class=_formatter, description="Search the options of a YAML space (e.g. `lr: "
                            "{low: 1.0e-5, high: 2.0e-4, log: true}`, `batch_size: {choices: [16, 32]}`) with Optuna: "
                            "TPE sampling, pruning on every evaluation, each trial a run in OUT/trials/. Workers on "
                            "other machines join with the same --storage URL and --study NAME.")
    search.add_argument("--space", required=True, metavar="FILE", help="YAML file: option → {low, high[, log]} or "
                        "{choices: [...]}")
    search.add_argument("--trials", type=int, default=12, metavar="N", help="finished (complete or pruned) trials "
                        "the study should reach, all workers together (default: 12)")
    search.add_argument("--storage", metavar="URL", help="Optuna storage URL, e.g. postgresql://user@host/db "
                        "(default: a journal file OUT/study.journal)")
    search.add_argument("--study", default="tuneloop", metavar="NAME", help="study name (default: tuneloop)")
    search.add_argument("--pruner", default="median", choices=PRUNERS,
                        help="stop unpromising trials at an evaluation (default: median)")
    search.add_argument("--resume", action="store_true", help="continue a search: interrupted trials resume from "
                        "their checkpoints, finished ones are kept")
    add_config_arguments(search, only=SEARCH_OPTIONS)

    export = sub.add_parser("export", help="export a trained model to ONNX (int8 optional), checked against PyTorch",
                            formatter_class=_formatter, description="Export RUN_DIR/model (or a model folder) to "
                            "ONNX with dynamic batch and sequence axes; with --quantize int8, dynamic int8 weights. "
                            "The export is evaluated on the run's validation data beside the PyTorch model and "
                            "refused when the main metric drops by more than 0.5 points (or --allow-drop X).")
    export.add_argument("source", metavar="RUN_OR_MODEL", help="a run folder or a model folder")
    export.add_argument("--output", required=True, metavar="DIR", help="the exported model folder")
    export.add_argument("--format", default="onnx", choices=("onnx",), help="(default: onnx)")
    export.add_argument("--quantize", choices=("int8",), help="dynamic int8 quantization (ONNX Runtime)")
    export.add_argument("--allow-drop", type=float, metavar="POINTS", help="the largest drop of the main metric "
                        "accepted, in points (default 0.5; a drop over 0.5 within POINTS is a warning)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing --output folder")
    export.add_argument("--quiet", action="store_true", help="no progress bars")

    serve = sub.add_parser("serve", help="serve a model over HTTP (JSON) with dynamic batching",
                           formatter_class=_formatter, description="POST /predict {\"texts\": ...}, GET /health, "
                           "GET /metadata, GET /stats. Requests are batched (up to --max-batch-size rows or "
                           "--max-wait-ms) and run on PyTorch, or ONNX Runtime for an exported folder.")
    serve.add_argument("model", metavar="MODEL_DIR", help="a model folder (RUN/model) or an exported one")
    serve.add_argument("--host", default="127.0.0.1", help="(default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="(default: 8000)")
    serve.add_argument("--max-batch-size", type=int, default=32, metavar="N", help="rows per batch (default: 32)")
    serve.add_argument("--max-wait-ms", type=float, default=5.0, metavar="MS", help="how long the first request of "
                       "a batch waits for others (default: 5)")
    serve.add_argument("--max-rows", type=int, default=256, metavar="N", help="rows per request (default: 256)")
    serve.add_argument("--max-body-kb", type=int, default=1024, metavar="KB", help="request size (default: 1024)")
    serve.add_argument("--threads", type=int, metavar="N", help="CPU threads for the model (default: torch's)")
    serve.add_argument("--precision", default="auto", choices=SERVE_PRECISIONS, help="PyTorch backend: "
                       "bf16 matrix products (fp32 accumulation), 1.4x the rows/s of fp32 on CPUs with AMX; auto: "
                       "bf16 where the CPU has AMX, fp32 elsewhere (default: auto)")

    sub.add_parser("tasks", help="list the GLUE tasks tuneloop knows", formatter_class=_formatter)
    sub.add_parser("env", help="versions, devices and the accelerate configuration (for bug reports)",
                   formatter_class=_formatter)
    return parser


# a search's trials take every training option but those of experiments and resuming (the search has its own)
SEARCH_OPTIONS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in (
    "resume", "seeds", "num_seeds", "folds", "fold", "keep", "retry_collapsed", "dry_run"))
EVAL_OPTIONS = ("task", "data_dir", "validation_file", "text_columns", "label_column", "max_length",
                "max_eval_samples", "eval_batch_size", "cpu", "quiet", "num_proc")


def cmd_train(ns, on_step=None) -> int:
    from accelerate import PartialState

    from .experiments import is_experiment, run_experiment
    from .loop import run_training
    from .resolve import resolve_config

    config = resolve_config(config_file=ns.config, **options_from_namespace(ns))
    if is_experiment(config):
        summary = run_experiment(config, on_step)
        if PartialState().is_main_process:
            print_experiment(summary, config.output_dir)
        return 0
    results = run_training(config, on_step)
    if PartialState().is_main_process and not results.get("config", {}).get("dry_run"):
        print_summary(results)
    return 0


def print_experiment(summary: dict, output_dir: str) -> None:
    for name, s in summary["metrics"].items():
        interval = f"  95% [{s['ci95'][0]:.4f}, {s['ci95'][1]:.4f}]" if s["ci95"] else ""
        print(f"{name}: {s['mean']:.4f} ± {s['std']:.4f} over {s['n']} runs{interval}")
    if summary["collapsed"]:
        print(f"collapsed (a single predicted class): {', '.join(summary['collapsed'])}")
    print(f"saved: {output_dir}  (summary.json, summary.html; model of {summary['kept']} in {output_dir}/model)")


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


def cmd_evaluate(ns) -> int:
    from .predict import evaluate_model

    overrides = {k: v for k, v in vars(ns).items() if k in EVAL_OPTIONS}
    results = evaluate_model(ns.model, overrides, ns.output, raw_scores=ns.raw)
    ev = results["eval"]
    print(f"decision rule: {results['decision_rule']}")
    print(f"eval ({ev['num_samples']} examples): " +
          "  ".join(f"{k}={v:.4f}" for k, v in ev.items() if k != "num_samples"))
    for split, metrics in results.get("eval_splits", {}).items():
        print(f"  {split}: " + "  ".join(f"{k}={v:.4f}" for k, v in metrics.items() if k != "num_samples"))
    if ns.output:
        print(f"wrote {ns.output}")
    return 0


def cmd_predict(ns) -> int:
    from pathlib import Path

    from .predict import predict_file, predict_texts

    if ns.texts and ns.input:
        raise TuneloopError("give either --input FILE or text arguments, not both")
    if ns.texts:
        if len(ns.texts) > 2:
            raise TuneloopError(f"one example has one or two texts; got {len(ns.texts)} (quote each text)")
        row = predict_texts(ns.model, ns.texts, ns.cpu, raw_scores=ns.raw)
        row.pop("id")
        print(json.dumps(row))
        return 0
    if not ns.input:
        raise TuneloopError("nothing to predict: give --input FILE, or the example's text(s) in quotes")
    if not Path(ns.input).is_file():
        raise TuneloopError(f"--input {ns.input}: no such file")
    output = ns.output or f"{Path(ns.input).stem}.predictions.tsv"
    if Path(output).exists() and not ns.overwrite:
        raise TuneloopError(f"--output {output}: already exists; choose another name or pass --overwrite")
    count = predict_file(ns.model, ns.input, output, glue=ns.glue, batch_size=ns.batch_size,
                         text_columns=ns.text_columns, cpu=ns.cpu, quiet=ns.quiet, raw_scores=ns.raw)
    print(f"wrote {count} predictions to {output}")
    return 0


def cmd_report(ns) -> int:
    from .report import write_report

    print(f"wrote {write_report(ns.run_dir)}")
    return 0


def cmd_search(ns, on_step=None) -> int:
    from .resolve import resolve_config
    from .search import SearchOptions, search

    config = resolve_config(**options_from_namespace(ns))
    summary = search(config, SearchOptions(ns.space, ns.trials, ns.storage, ns.study, ns.pruner, ns.resume), on_step)
    print(f"{summary['finished']} finished trials ({summary['pruned']} pruned)")
    best = summary.get("best")
    if best:
        print(f"best: trial {best['number']}, {best['metric']} {best['value']:.4f}, {json.dumps(best['params'])}")
        print(f"saved: {best.get('model', best['folder'])}  (search.json, search.html in {config.output_dir})")
    return 0


def cmd_export(ns) -> int:
    from .export import export_model

    report = export_model(ns.source, ns.output, ns.quantize, ns.allow_drop, ns.overwrite, ns.quiet)
    g, main = report["gate"], report["gate"]["main_metric"]
    print(f"exported {report['format']} ({report['quantize']}, {report['size_mb']} MB) to {ns.output}")
    print(f"gate on {g['rows']} {g['split']} rows: {main} {g['exported'][main]:.4f} exported, "
          f"{g['pytorch'][main]:.4f} PyTorch (drop {g['drop_points']:.2f} points, allowed "
          f"{g['allowed_drop_points']:g}); largest logit difference {g['max_logit_difference']:.2e}; "
          f"{g['prediction_agreement']:.2%} same predictions: {g['verdict']}")
    return 0


def cmd_serve(ns) -> int:
    from .serve import serve

    for name in ("max_batch_size", "max_rows", "max_body_kb"):
        if getattr(ns, name) < 1:
            raise TuneloopError(f"--{name.replace('_', '-')}: must be at least 1")
    if ns.max_wait_ms < 0:
        raise TuneloopError("--max-wait-ms: must be >= 0")
    serve(ns.model, ns.host, ns.port, ns.max_batch_size, ns.max_wait_ms, ns.max_rows, ns.max_body_kb, ns.threads,
          ns.precision)
    return 0


def cmd_inspect(ns) -> int:
    from .failures import describe_failures

    print(describe_failures(ns.run_dir, ns.top), end="")
    return 0


def cmd_env(ns) -> int:
    from .envinfo import environment_report

    print(environment_report())
    return 0


COMMANDS = {"train": cmd_train, "report": cmd_report, "env": cmd_env, "evaluate": cmd_evaluate, "predict": cmd_predict,
            "tasks": cmd_tasks, "inspect": cmd_inspect, "export": cmd_export, "serve": cmd_serve}


def main(argv: list[str] | None = None, *, on_step=None) -> int:
    """The `tuneloop` command; `on_step(state)` is passed to training runs (a hook for tests and tools)."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    if not ns.command:
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        if ns.command in ("train", "search"):
            return (cmd_train if ns.command == "train" else cmd_search)(ns, on_step)
        return COMMANDS[ns.command](ns)
    except Interrupted as e:
        print(f"tuneloop {ns.command}: {e}", file=sys.stderr)
        return 128 + e.signal_number
    except TuneloopError as e:
        print(f"tuneloop {ns.command}: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("tuneloop: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
