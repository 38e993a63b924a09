"""report.html: one self-contained page (images as base64 data URIs, CSS inline; no file, font, script or
address outside it, so it can be mailed, archived or opened offline) with the run's summary, plots, metrics and
configuration; the PNGs also go to plots/."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import re
from pathlib import Path

from ..atomic import atomic_write_bytes
from ..layout import PLOTS_DIR, REPORT_FILE
from .decision_plots import plot_decision
from .figures import Plot, _style, plot_evaluations, plot_loss, plot_lr, plot_throughput
from .fmt import (UNTIMED, _esc, auto_text, _figure_html, _table, fmt, fmt_metric, fmt_seconds, runtime_words,
                  stage_name, stage_only, stage_table, stage_text)
from .prediction_plots import plot_predictions
from .run import EVAL_KEY, Run, read_run
from .sections import decision_section, distillation_section, failures_section, label_issues_section

_OUR_PNG = re.compile(r"^(loss|lr|throughput|eval|eval_.+|confusion_.+|scatter_.+|label_f1_.+|reliability|coverage)"
                      r"\.png$")
CSS = """
*{box-sizing:border-box}
body{margin:0;background:#f6f7f9;color:#1d2330;font:14px/1.5 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,
sans-serif}
main{max-width:1000px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:32px 0 10px;padding-bottom:4px;border-bottom:1px solid #dde1e7}
h3{font-size:15px;margin:18px 0 6px}
.sub{color:#5b6475;margin:0 0 16px;word-break:break-all}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;
vertical-align:middle;margin-left:8px}
.done{background:#e3f4e8;color:#17692f}.going{background:#fff3d6;color:#8a5a00}
table{border-collapse:collapse;margin:6px 0 12px;background:#fff;font-size:13px}
th,td{border:1px solid #dde1e7;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.main td{font-weight:700}
td.changed{font-weight:600;color:#0b4f9c}
td.group{background:#f6f7f9;font-weight:600;color:#5b6475}
.facts th{width:190px}
figure{margin:12px 0 20px;background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:10px}
figure img{display:block;max-width:100%;height:auto;margin:0 auto}
figcaption{color:#5b6475;font-size:12.5px;margin-top:6px}
.note{background:#fff;border:1px dashed #c3c9d3;border-radius:6px;padding:8px 12px;color:#5b6475;margin:8px 0}
.warn{border-color:#e0b050;color:#7a5200}
footer{margin-top:36px;color:#8a93a3;font-size:12px}
code{background:#eef1f5;padding:0 4px;border-radius:3px;font-size:12.5px}
"""


def _latest_evaluation(run: Run) -> tuple[int | None, dict]:
    """{split: {metric: value}} of the last evaluation in metrics.jsonl."""
    last_step, found = None, {}
    for r in run.records:
        metrics = {}
        for key, value in r.items():
            m = EVAL_KEY.match(key)
            if m and m.group(2) != "epoch":
                metrics.setdefault(run.split_name(m.group(1)), {})[m.group(2)] = value
        if metrics:
            if r["step"] != last_step:
                found = {}
            last_step = r["step"]
            for split, values in metrics.items():
                found.setdefault(split, {}).update(values)
    return last_step, found


def _metrics_table(splits: dict, main: str | None) -> str:
    names = []
    for metrics in splits.values():
        for name in metrics:
            if name not in names and name not in ("loss", "num_samples"):
                names.append(name)
    names.sort(key=lambda n: (n != main, n))
    rows = []
    for name in names + ["loss", "num_samples"]:
        if not any(name in m for m in splits.values()):
            continue
        label = {"num_samples": "examples"}.get(name, name) + (" (main)" if name == main else "")
        show = fmt if name == "num_samples" else fmt_metric
        cells = "".join(f'<td class="num">{_esc(show(m.get(name)))}</td>' for m in splits.values())
        row = '<tr class="main">' if name == main else "<tr>"
        rows.append(f"{row}<td>{_esc(label)}</td>{cells}</tr>")
    header = "<tr><th>metric</th>" + "".join(f"<th>{_esc(s)}</th>" for s in splits) + "</tr>"
    return "<table>\n" + header + "\n" + "\n".join(rows) + "\n</table>"


def _device(run: Run) -> str:
    train = (run.results or {}).get("train") or {}
    parts = []
    if train.get("device"):
        parts.append(str(train["device"]))
    elif (run.config or {}).get("cpu"):
        parts.append("CPU (--cpu)")
    if train.get("num_processes") is not None:
        parts.append(f"{train['num_processes']} process(es)")
    # train.precision: what ran (bf16 asked on a CPU without bf16 units runs fp32), mixed_precision what was asked
    precision = train.get("precision") or train.get("mixed_precision") or (run.config or {}).get("mixed_precision")
    if precision:
        parts.append(f"precision {'fp32' if precision == 'no' else precision}")
    return ", ".join(parts) or "—"


def _facts(run: Run) -> list[tuple]:
    results, config, meta = run.results or {}, run.config or {}, run.metadata
    train = results.get("train") or {}
    spec = run.task_spec
    facts = []
    if run.task:
        facts.append(("task", f"{run.task} (GLUE {spec.folder or spec.name}): {spec.description}" if spec
                      else run.task))
    else:
        data = [Path(str(config[k])).name for k in ("train_file", "validation_file") if config.get(k)]
        facts.append(("data", ", ".join(data) or "—"))
    if config.get("data_dir") == "sample":
        facts.append(("data", "the built-in MRPC-style sample (synthetic, not the GLUE data)"))
    held = results.get("validation_split")
    if held:
        facts.append(("validation", f"{held['validation_rows']} rows held out of {Path(held['source']).name} "
                      f"({held['fraction']:g}, stratified by {held['stratified_by']}, split seed {held['seed']}; "
                      "split.json lists them)"))
    facts.append(("model", results.get("model") or config.get("model") or meta.get("base_model") or "—"))
    objective, names = run.objective, run.label_names
    if objective is not None and not objective.classes:
        facts.append(("labels", "regression: one score"))
    elif names:
        facts.append(("labels", f"{len(names)}: " + ", ".join(names) +
                      (" (multi-label)" if objective.multi_label else "")))
    if meta.get("text_columns"):
        facts.append(("text columns", ", ".join(map(str, meta["text_columns"]))))
    examples = []
    if train.get("num_samples") is not None:
        examples.append(f"train {fmt(train['num_samples'])}")
    eval_splits = results.get("eval_splits") or ({run.primary_split: results["eval"]} if results.get("eval") else {})
    for split, metrics in eval_splits.items():
        if isinstance(metrics, dict) and metrics.get("num_samples") is not None:
            examples.append(f"{split} {fmt(metrics['num_samples'])}")
    if examples:
        facts.append(("examples", ", ".join(examples)))
    if results.get("auto"):                       # --method auto: the choice and each candidate's score
        facts.append(("method", _auto_text(results["auto"])))
    stage = results.get("setfit")                 # --method setfit / probe: the stage ran before the loop
    if stage:
        facts.append((stage_name(stage), stage_text(stage)))
    if train and not stage_only(results):
        facts.append(("steps / epochs", f"{fmt(train.get('steps'))} steps, {fmt(train.get('epochs'))} epochs, "
                      f"global batch {fmt(train.get('global_batch_size'))}"))
        facts.append(("runtime", _runtime_text(results)))
        if train.get("samples_per_second") is not None:
            facts.append(("throughput", f"{fmt(train['samples_per_second'])} training samples/s"
                          + (" after the resume" if results.get("resumed_from") else "")))
    elif train:                                   # the logistic head: the loop trained no step
        what = "the frozen encoder's embeddings and the head" if stage.get("method") == "probe" else \
            "the contrastive stage and its head"
        facts.append(("runtime", f"{fmt_seconds((stage.get('seconds') or 0) + (train.get('runtime_s') or 0))} "
                      f"({what}; set-up {fmt_seconds(train.get('setup_s'))} before it); "
                      "the training loop trained no step"))
    elif run.records:
        last = run.records[-1]
        times = [r["time"] for r in run.records if isinstance(r.get("time"), (int, float))]
        epoch = next((r.get("train/epoch") for r in reversed(run.records) if "train/epoch" in r), None)
        facts.append(("progress", f"step {fmt(last['step'])}" + (f", epoch {fmt(epoch)}" if epoch is not None
                                                                 else "") + " (last line of metrics.jsonl)"))
        if len(times) >= 2:
            facts.append(("elapsed", f"{fmt_seconds(times[-1] - times[0])} between the first and the last log line"))
    if results.get("timeline"):                   # training/timeline.py: seconds per phase, so far
        facts.append(("where the time went", _timeline_text(results["timeline"])))
    facts.append(("device", _device(run)))
    if config.get("seed") is not None:
        facts.append(("seed", config["seed"]))
    return facts


def _runtime_text(results: dict) -> str:
    """The runtime fact: the loop's time, evaluations included; a resumed run's since the resume."""
    train, since = results.get("train") or {}, runtime_words(results)
    return (f"{fmt_seconds(train.get('runtime_s'))}" + ("" if since == "in all" else f" {since}") +
            f" (training {fmt_seconds(train.get('training_s'))}, evaluation {fmt_seconds(train.get('eval_s'))}; "
            f"set-up {fmt_seconds(train.get('setup_s'))} before it" +
            ("" if since == "in all" else f"; {UNTIMED}") + ")")


def _timeline_text(timeline: dict) -> str:
    """`start-up 4.1 s · accelerator 0.2 s · ...` (the phases up to the report: results.json has them all)."""
    before = timeline.get("before_run_s")
    parts = ([f"start-up {fmt_seconds(before)}"] if before is not None else []) + \
        [f"{name} {fmt_seconds(seconds)}" for name, seconds in timeline.get("phases", {}).items()]
    return " · ".join(parts) + " (up to this report; results.json has every phase)"


def _auto_text(auto: dict) -> str:
    """One line for results.json's "auto" section: the method chosen, why, and each candidate's cross-validated
    score (fmt.auto_text, the log's words too)."""
    return f"chosen by --method auto: {auto_text(auto)}"


def _config_table(config: dict) -> str:
    from ..config.options import GROUPS, TrainConfig

    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    grouped = {g: [] for g in GROUPS}
    other = []
    for key, value in config.items():
        f = fields.get(key)
        (grouped.get(f.metadata.get("group"), other) if f else other).append((key, value, f))
    rows = ["<tr><th>option</th><th>value</th><th>default</th></tr>"]
    for group, items in [*grouped.items(), ("other", other)]:
        if not items:
            continue
        rows.append(f'<tr><td class="group" colspan="3">{_esc(group)}</td></tr>')
        for key, value, f in items:
            default = f.default if f is not None and f.default is not dataclasses.MISSING else None
            changed = f is not None and value != default
            value_cell = '<td class="changed">' if changed else "<td>"
            rows.append(f"<tr><td>{_esc(key)}</td>{value_cell}{_esc(fmt(value))}</td>"
                        f"<td>{_esc(fmt(default)) if f is not None else ''}</td></tr>")
    return "<table>\n" + "\n".join(rows) + "\n</table>"


TRAIN_NAMES = {"runtime_s": "runtime (s), evaluations included", "training_s": "training time (s)",
               "eval_s": "evaluation time (s)", "samples_per_second": "training samples / s",
               "steps": "optimizer steps",
               "epochs": "epochs", "num_samples": "training examples", "global_batch_size": "global batch size",
               "setup_s": "set-up time (s)", "num_processes": "processes", "mixed_precision": "mixed precision",
               "compile": "torch.compile", "first_step_s": "first optimizer step (s), compilation included"}


def _curves(plots: list[Plot], only_the_stage: bool, stage: dict | None = None) -> list[str]:
    """The Training and Evaluation sections: the loop's curves, or (--method setfit with the logistic head, and
    --method probe, where the loop ran no step) a note saying why there are none."""
    if only_the_stage:
        what = ("--method probe: a logistic-regression head fitted on the frozen encoder's embeddings is the whole "
                "training (Linear probe, below); the encoder is not trained" if (stage or {}).get("method") == "probe"
                else "--method setfit with the logistic head: the contrastive stage and the head are the whole "
                "training (Contrastive stage, below)")
        return ["<h2>Training</h2>",
                f'<div class="note">{what}; the training loop ran no step, so there are no loss, learning-rate, '
                "throughput or evaluation curves. The model was evaluated once, after the head (Final evaluation, "
                "above).</div>"]
    by_name = {p.name: p for p in plots}
    return ["<h2>Training</h2>", *[_figure_html(by_name[n]) for n in ("loss", "lr", "throughput") if n in by_name],
            "<h2>Evaluation</h2>", *[_figure_html(p) for p in plots if p.name == "eval" or p.name.startswith("eval_")]]


def render_html(run: Run, plots: list[Plot]) -> str:
    from ..version import __version__

    results = run.results or {}
    title = f"tuneloop run report: {run.folder.resolve().name}"
    status = ('<span class="badge done">complete</span>' if run.complete else
              '<span class="badge going">in progress or stopped (no results.json yet)</span>')
    parts = [f"<h1>{_esc(title)}{status}</h1>", f'<p class="sub">{_esc(run.folder.resolve())}</p>']
    for note in run.notes:
        parts.append(f'<div class="note warn">{_esc(note)}</div>')
    parts += ["<h2>Summary</h2>", _table(_facts(run), cls="facts")]
    if results.get("warnings"):                   # runtime/run_log.py: what the run warned of (train.log has all)
        parts += ["<h2>Warnings</h2>", "<ul>" + "".join(f"<li>{_esc(w)}</li>" for w in results["warnings"]) + "</ul>"]

    main = results.get("main_metric") or run.metadata.get("main_metric")
    if results.get("eval"):
        splits = results.get("eval_splits") or {run.primary_split: results["eval"]}
        baseline = results.get("baseline")
        if baseline:                              # evaluation/baseline.py: the same rows and metrics
            splits = {f"TF-IDF baseline ({baseline['split']})": baseline["eval"],
                      **{f"model ({k})": v for k, v in splits.items()}}
        parts += ["<h2>Final evaluation</h2>", _metrics_table(splits, main)]
        if results.get("collapsed") is not None:
            parts.append(f'<div class="note warn">Collapsed: the model predicts {_esc(results["collapsed"])!r} for '
                         "every validation row. On small data try more epochs, a smaller learning rate with warmup, "
                         "--class-weights balanced, or several seeds.</div>")
        if baseline:
            parts.append(f'<p class="sub">Baseline: {_esc(baseline["method"])} on the same {baseline["train_rows"]} '
                         f'training rows, fitted in {baseline["fit_s"]:.1f} s (scikit-learn; --baseline none turns '
                         "it off).</p>")
        for split, classes in (results.get("per_class") or {}).items():
            if classes:
                parts += [f"<h3>Each class: {_esc(split)}</h3>",
                          _table([(name, m["precision"], m["recall"], m["f1"], m["support"])
                                  for name, m in classes.items()],
                                 header=("class", "precision", "recall", "F1", "examples"))]
    else:
        step, latest = _latest_evaluation(run)
        parts.append("<h2>Latest evaluation</h2>")
        if latest:
            parts += [f"<p>At step {_esc(fmt(step))} (from metrics.jsonl; the run has no results.json yet).</p>",
                      _metrics_table(latest, main)]
        else:
            parts.append('<div class="note">No evaluation yet.</div>')

    stage, only_the_stage = results.get("setfit"), stage_only(results)
    parts += _curves(plots, only_the_stage=only_the_stage, stage=stage)
    parts.append("<h2>Predictions</h2>")
    parts += [_figure_html(p) for p in plots if p.name.startswith(("confusion_", "scatter_", "label_f1_",
                                                                    "predictions"))]

    parts += decision_section(run, plots)
    parts += failures_section(run)
    parts += label_issues_section(run)
    parts += distillation_section(run)
    if stage:
        parts += [f"<h2>{_esc(stage_name(stage).capitalize())}</h2>", stage_table(stage)]
    if results.get("train") and not only_the_stage:
        train = results["train"]
        names = TRAIN_NAMES if not results.get("resumed_from") else \
            {**TRAIN_NAMES, "runtime_s": f"runtime (s), evaluations included, {runtime_words(results)}",
             "training_s": "training time (s) since the resume",
             "samples_per_second": "training samples / s after the resume"}
        parts += ["<h2>Training statistics</h2>",
                  _table([(names.get(k, k), v) for k, v in train.items()], header=("", "value"))]
    other = {k: v for k, v in results.items()
             if k not in ("eval", "eval_splits", "train", "per_class", "decision", "setfit", "distillation")}
    if other:
        parts += ["<h3>results.json</h3>", _table([(k, v) for k, v in other.items()], header=("key", "value"))]
    parts.append("<h2>Configuration</h2>")
    if run.config:
        parts += ["<p>config.yaml: the resolved options of the run; values that differ from the defaults are "
                  "highlighted.</p>", _config_table(run.config)]
    else:
        parts.append('<div class="note">No config.yaml in the run folder.</div>')
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    parts.append(f"<footer>Written by tuneloop {_esc(__version__)} on {_esc(now)}. Plots are also in "
                 f"<code>{_esc(PLOTS_DIR)}/</code> beside this file.</footer>")
    return html_page(title, parts)


def write_page(folder: str | os.PathLike, name: str, title: str, parts: list[str]) -> Path:
    """An experiment's or a search's page (summary.html, search.html): the parts, a dated footer, written
    atomically; returns its path."""
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    path = Path(folder) / name
    atomic_write_bytes(path, html_page(title, [*parts, f"<footer>Written on {_esc(now)}.</footer>"]).encode("utf-8"))
    return path


def html_page(title: str, parts: list[str]) -> str:
    """A self-contained page in the report's style (summary.html and search.html use it too)."""
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{_esc(title)}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n")


def write_report(run_dir: str | os.PathLike) -> Path:
    """Write `run_dir/report.html` (self-contained) and the PNGs it shows into `run_dir/plots/`; returns the
    report's path. Plots whose data are missing are skipped and the page says why. Raises TuneloopError when
    `run_dir` is not a folder or holds neither metrics.jsonl nor results.json."""
    run = read_run(run_dir)
    plots: list[Plot] = []
    with _style():
        for make in (plot_loss, plot_lr, plot_evaluations, plot_predictions, plot_decision, plot_throughput):
            made = make(run)
            plots += made if isinstance(made, list) else [made]
    plots_dir = run.folder / PLOTS_DIR
    written = set()
    if any(p.png for p in plots):
        plots_dir.mkdir(exist_ok=True)
    for plot in plots:
        if plot.png is not None:
            atomic_write_bytes(plots_dir / f"{plot.name}.png", plot.png)
            written.add(f"{plot.name}.png")
    if plots_dir.is_dir():       # plots of an earlier report that this one no longer has
        for old in plots_dir.iterdir():
            if old.is_file() and _OUR_PNG.match(old.name) and old.name not in written:
                with contextlib.suppress(OSError):
                    old.unlink()
    path = run.folder / REPORT_FILE
    atomic_write_bytes(path, render_html(run, plots).encode("utf-8"))
    return path

