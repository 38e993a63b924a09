"""What each `tuneloop` command does with its parsed flags: call the library, print what a person reads."""

from __future__ import annotations

import json
import sys

from .. import extras
from ..config.flags import options_from_namespace
from ..exceptions import TuneloopError
from .parsers import EVAL_OPTIONS, EXPORT_OPTIONS


def cmd_train(ns, on_step=None) -> int:
    from accelerate import PartialState

    from ..api import train

    results = train(ns.config, on_step=on_step, **options_from_namespace(ns))
    if not PartialState().is_main_process or results.get("config", {}).get("dry_run"):
        return 0
    if results.get("kind") in ("seeds", "folds"):            # an experiment's summary
        print_experiment(results, results["output_dir"])
    else:
        print_summary(results)
    return 0


def cmd_distill(ns, on_step=None) -> int:
    from accelerate import PartialState

    from ..api import distill

    results = distill(ns.config, on_step=on_step, **options_from_namespace(ns))
    if PartialState().is_main_process:
        print_summary(results)
        print_distillation(results.get("distillation") or {})
    return 0


def print_distillation(d: dict) -> None:
    """teacher / student / labels-only: the main metric and rows/s; agreement and what the student kept."""
    from ..report.fmt import kept_phrase

    main = d.get("main_metric")
    for name in ("teacher", "student", "labels_only"):
        if name in d:
            value = d[name]["metrics"].get(main) if main else None
            shown = f"{main} {value:.4f}, " if value is not None else ""
            print(f"{name}: {shown}{d[name]['rows_per_s']:.0f} rows/s")
    versus = d.get("student_vs_teacher")
    if versus is not None:              # classes: how often the answers agree; regression: how far the scores are
        if "agreement" in versus:
            same = f"agreement {versus['agreement']:.1%}"
        else:
            pearson = versus.get("pearson")
            same = f"mean absolute difference {versus['mean_abs_difference']:.4g}, " + \
                (f"pearson {pearson:.4f}" if pearson is not None else "pearson undefined (constant scores)")
        print(f"the student {kept_phrase(d, 'x')}; {same}")
    elif d.get("note"):
        print(d["note"])


def print_experiment(summary: dict, output_dir: str) -> None:
    for name, s in summary["metrics"].items():
        interval = f"  95% [{s['ci95'][0]:.4f}, {s['ci95'][1]:.4f}]" if s["ci95"] else ""
        print(f"{name}: {s['mean']:.4f} ± {s['std']:.4f} over {s['n']} runs{interval}")
    main, baseline = summary["main_metric"], summary.get("baseline") or {}
    if main in baseline:
        print(f"TF-IDF baseline {main}: {baseline[main]['mean']:.4f} ± {baseline[main]['std']:.4f}")
    if summary["collapsed"]:
        print(f"collapsed (a single predicted class): {', '.join(summary['collapsed'])}")
    print(f"saved: {output_dir}  (summary.json, summary.html; model of {summary['kept']} in {output_dir}/model)")


def print_summary(results: dict) -> None:
    from ..report.fmt import stage_only

    ev = results["eval"]
    shown = "  ".join(f"{k}={v:.4f}" for k, v in ev.items() if k != "num_samples")
    tr, stage = results["train"], results.get("setfit") or {}
    print(f"eval ({ev['num_samples']} examples): {shown}")
    auto = results.get("auto") or {}
    estimate = (auto.get("candidates") or {}).get(auto.get("chosen"), {}).get("accuracy")
    if estimate is not None:           # --method auto's cross-validation: every training row held out once
        print(f"cross-validated: {auto['chosen']} accuracy {estimate:.4f} on the training rows "
              f"({auto['folds']} folds, each row scored by a model that did not train on it)")
    if stage_only(results):            # the probe, or the pair stage with its fitted head: the loop took no step
        what = ("a linear probe on the frozen embedding" if stage.get("method") == "probe" else
                f"SetFit, {stage['steps']} contrastive steps over {stage['pairs']} pairs")
        print(f"train: {what}, then a logistic-regression head, {stage['seconds']:.1f}s")
    elif tr["samples_per_second"] is None:            # resumed at its last step: no step in this process
        print(f"train: {tr['steps']} steps, {tr['epochs']:g} epochs, every one before the resume")
    else:
        print(f"train: {tr['steps']} steps, {tr['epochs']:g} epochs, {tr['runtime_s']:.1f}s, "
              f"{tr['samples_per_second']:.1f} samples/s")
    print(f"saved: {results['output_dir']}  (model in {results['output_dir']}/model)")


def cmd_tasks(ns) -> int:
    from ..tasks import TASKS

    print(f"{'task':6} {'labels':38} {'metrics':32} description")
    for t in TASKS.values():
        labels = ", ".join(t.label_names) if t.label_names else "score (regression)"
        metrics = ", ".join(m + ("*" if m == t.main_metric else "") for m in t.metrics)
        print(f"{t.name:6} {labels:38} {metrics:32} {t.description}")
    print("* main metric. Local files: --task NAME --data-dir FOLDER (as GLUE ships it); "
          "otherwise read from the Hub (nyu-mll/glue).")
    return 0


def cmd_evaluate(ns) -> int:
    from ..predict.classifier import Classifier
    from ..predict.evaluate import check_output, evaluation
    from ..runtime.process import command_scope, is_main_process

    overrides = {k: v for k, v in vars(ns).items() if k in EVAL_OPTIONS}
    if ns.output:
        check_output(ns.output)
    quiet, cpu = getattr(ns, "quiet", False), getattr(ns, "cpu", False)      # flags given only
    model = model_place(ns, "model", "RUN_OR_MODEL")
    with command_scope(quiet), Classifier.load(model, cpu=cpu, precision=getattr(ns, "precision", "fp32")) as clf:
        results = evaluation(clf, overrides, ns.output, raw=ns.raw, overwrite=ns.overwrite)[0]
    if not is_main_process():                   # under a launcher: one process speaks
        return 0
    ev = results["eval"]
    print(f"decision rule: {results['decision_rule']} | precision: {clf.precision}")
    print(f"eval ({ev['num_samples']} examples): {metrics_text(ev)}")
    for split, metrics in results.get("eval_splits", {}).items():
        print(f"  {split}: {metrics_text(metrics)}")
    splits = results.get("per_class_splits") or {None: results.get("per_class")}
    for split, classes in splits.items():
        for line in per_class_lines(classes, bool(ns.output), split=split):
            print(line)
    if ns.output:
        print(f"wrote {ns.output}")
    return 0


def metrics_text(metrics: dict) -> str:
    """`accuracy=0.8125  f1=0.7500 ...`; a metric no row counts towards (every row abstained) as —."""
    from ..report.fmt import fmt_metric

    return "  ".join(f"{k}={fmt_metric(v)}" for k, v in metrics.items() if k != "num_samples")


def per_class_lines(classes: dict | None, written: bool, most: int = 20, split: str | None = None) -> list[str]:
    """evaluate's per-class table of one split (named when there are several), decided as its metrics are: every
    class up to `most`, else the `most` with the lowest F1."""
    if not classes:
        return []
    shown = sorted(classes, key=lambda name: classes[name]["f1"])[:most] if len(classes) > most else list(classes)
    width = min(max(5, *(len(str(name)) for name in shown)), 40)
    where = "; every class in --output" if written else "; every class with --output FILE"
    lines = [f"per class{f' in {split}' if split else ''}"
             f"{f' (the {most} lowest F1 of {len(classes)}{where})' if len(shown) < len(classes) else ''}:",
             f"  {'class':<{width}}  precision  recall      f1  support"]
    for name in shown:
        c = classes[name]
        lines.append(f"  {str(name)[:width]:<{width}}  {c['precision']:9.4f}  {c['recall']:6.4f}  {c['f1']:6.4f}  "
                     f"{c['support']:7d}")
    return lines


def default_output(input_path: str) -> str:
    """predict's --output when none is given, in the current folder: reviews.predictions.tsv for reviews.csv,
    book.new.predictions.tsv for the sheet book.xlsx#new."""
    from pathlib import Path

    from ..sheets import sheet_path

    file, sheet = sheet_path(input_path)
    return f"{Path(file).stem}{'.' + sheet if sheet else ''}.predictions.tsv"


def cmd_predict(ns) -> int:
    from pathlib import Path

    from ..atomic import same_file
    from ..predict.classifier import Classifier
    from ..predict.evaluate import check_output, keep_columns_of
    from ..predict.rows import STDOUT, check_output_name
    from ..runtime.process import command_scope
    from ..sheets import data_file, is_data_file

    if ns.texts and ns.input:
        raise TuneloopError("give either --input FILE or text arguments, not both")
    if len(ns.texts) > 2:
        raise TuneloopError(f"one example has one or two texts; got {len(ns.texts)} arguments: quote each text "
                            f"(\"{' '.join(ns.texts)}\" as one); for many examples give --input FILE")
    if not ns.texts and not ns.input:
        raise TuneloopError("nothing to predict: give --input FILE, or the example's text(s) in quotes")
    if ns.input and not is_data_file(ns.input):                    # book.xlsx#new: a sheet of the workbook
        raise TuneloopError(f"--input {ns.input}: " + ("is a folder; give the file to label" if
                                                       Path(ns.input).is_dir() else "no such file"))
    if ns.batch_size is not None and ns.batch_size < 1:
        raise TuneloopError(f"--batch-size: must be at least 1, got {ns.batch_size}")
    output = ns.output or (default_output(ns.input) if ns.input else None)
    if output and output != STDOUT:                                 # a file: -, standard output, needs no check
        if ns.input and same_file(output, data_file(ns.input)):     # --overwrite or not: the texts would be lost
            raise TuneloopError(f"--output {output}: is the --input file, whose texts the predictions would replace; "
                                "choose another name")
        if Path(output).exists() and not ns.overwrite:
            raise TuneloopError(f"--output {output}: already exists; choose another name or pass --overwrite")
        check_output(output)
        check_output_name(output, ns.glue)
    if ns.keep_columns is not None and not ns.input:
        raise TuneloopError("--keep-columns: keeps an --input file's columns; give --input FILE")
    quiet = ns.quiet or bool(ns.texts)
    with command_scope(quiet, data=False):      # the file's notes (its separator, its sheet) said from its first read
        if ns.input:
            keep_columns_of(ns.input, ns.keep_columns, ns.glue)      # a wrong name: said before the model loads
        return _predict_with(ns, output, Classifier.load(ns.model, cpu=ns.cpu, precision=ns.precision))


def _predict_with(ns, output: str | None, loaded) -> int:
    from ..predict.evaluate import predict_file
    from ..predict.rows import STDOUT
    from ..runtime.process import is_main_process

    with loaded as clf:
        if ns.texts:                      # one example: its row, as a prediction file holds it
            recorded = clf.text_columns
            if recorded and len(ns.texts) != len(recorded):
                one = len(recorded) == 1
                shown = " ".join(ns.texts) if one else "first text\" \"second text"
                raise TuneloopError(f"the model reads {len(recorded)} text{'' if one else 's'} ({', '.join(recorded)})"
                                    f" per example; got {len(ns.texts)} argument{'' if len(ns.texts) == 1 else 's'}: "
                                    f"quote {'the' if one else 'each'} text (\"{shown}\"); for many examples give "
                                    "--input FILE")
            empty = [i for i, text in enumerate(ns.texts) if not text.strip()]
            if empty:
                raise TuneloopError(f"the {('first', 'second')[empty[0]]} text is empty; quote the example's text(s)")
            items, _ = clf.items(ns.texts[0] if len(ns.texts) == 1 else tuple(ns.texts))   # checked as predict checks
            row = clf.table_rows(["0"], clf.logits(items), raw=ns.raw)[0]
            row.pop("id")
            if is_main_process():             # under a launcher: one process speaks
                print(json.dumps(row))
            return 0
        count = predict_file(clf, ns.input, output, glue=ns.glue, batch_size=ns.batch_size,
                             text_columns=ns.text_columns, quiet=ns.quiet, raw=ns.raw, keep_columns=ns.keep_columns)
    if not is_main_process():                   # under a launcher: one process speaks
        return 0
    print(f"wrote {count} predictions to {'standard output' if output == STDOUT else output} (precision: "
          f"{clf.precision})", file=sys.stderr if output == STDOUT else sys.stdout)
    return 0


def cmd_report(ns) -> int:
    from ..report import write_report

    print(f"wrote {write_report(ns.run_dir)}")
    return 0


def cmd_search(ns, on_step=None) -> int:
    extras.require("postgres" if (ns.storage or "").startswith("postgres") else "search")
    from ..config.resolve import resolve_config
    from ..experiments.search import SearchOptions, search
    from ..runtime.process import is_main_process

    config = resolve_config(**options_from_namespace(ns))
    summary = search(config, SearchOptions(ns.space, ns.trials, ns.storage, ns.study, ns.pruner, ns.resume), on_step)
    if not is_main_process():                   # under a launcher: one process speaks
        return 0
    print(f"{summary['finished']} finished trials ({summary['pruned']} pruned)")
    best = summary.get("best")
    if best:
        print(f"best: trial {best['number']}, {best['metric']} {best['value']:.4f}, {json.dumps(best['params'])}")
        print(f"saved: {best.get('model', best['folder'])}  (search.json, search.html in {config.output_dir})")
    return 0


def model_place(ns, dest: str, metavar: str) -> str:
    """The model folder given as the first argument or as --model (parsers.add_model_place), given once."""
    given = [v for v in (getattr(ns, dest), getattr(ns, f"{dest}_flag")) if v]
    if len(given) != 1:
        raise TuneloopError(f"give the model folder once, as {metavar} or --model DIR" +
                            (f"; got {' and '.join(given)}" if given else ""))
    return given[0]


def cmd_export(ns) -> int:
    from ..deploy.export import export_model

    report = export_model(model_place(ns, "source", "RUN_OR_MODEL"), ns.output, ns.quantize, ns.allow_drop,
                          ns.overwrite, ns.quiet, data={k: v for k, v in vars(ns).items() if k in EXPORT_OPTIONS})
    g, main = report["gate"], report["gate"]["main_metric"]
    print(f"exported {report['format']} ({report['quantize']}, {report['size_mb']} MB) to {ns.output}")
    print(f"gate on {g['rows']} {g['split']} rows: {main} {g['exported'][main]:.4f} exported, "
          f"{g['pytorch'][main]:.4f} PyTorch (drop {g['drop_points']:.2f} points, allowed "
          f"{g['allowed_drop_points']:g}); " + (
              f"largest logit difference {g['max_logit_difference']:.2e}; {g['prediction_agreement']:.2%} same "
              "predictions" if g.get("prediction_agreement") is not None else
              f"largest score difference {g['max_logit_difference']:.3g}, R² against PyTorch's scores "
              f"{g.get('score_agreement', float('nan')):.4f}") + f": {g['verdict']}")
    return 0


def cmd_serve(ns) -> int:
    extras.require("serve")
    from ..deploy.serve import serve
    from ..runtime.process import console_logging

    with console_logging(quiet=False):          # where it serves, once it does (uvicorn's own lines are off)
        serve(model_place(ns, "model", "MODEL_DIR"), ns.host, ns.port, ns.max_batch_size, ns.max_wait_ms,
              ns.max_rows, ns.max_body_kb, ns.threads, ns.precision)
    return 0


def cmd_inspect(ns) -> int:
    from ..analysis.inspect import describe_failures

    if ns.top < 1:
        raise TuneloopError(f"--top: must be at least 1, got {ns.top}")
    print(describe_failures(ns.run_dir, ns.top), end="")
    return 0


def cmd_env(ns) -> int:
    from .env import environment_report

    print(environment_report())
    return 0
