"""The report's figures of training (loss, learning rate, throughput) and evaluation, drawn with matplotlib's
`Figure` objects on the Agg canvas, never pyplot: nothing interactive, and the caller's backend is left as it
was (a notebook that calls write_report keeps its inline plots). Matplotlib is imported inside the functions, so
importing tuneloop stays fast."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import re

from ..tasks import lower_is_better
from .run import EVAL_KEY, NOT_METRICS, Run

FIGSIZE = (6.4, 3.6)
DPI = 110


@contextlib.contextmanager
def _style():
    import matplotlib

    with matplotlib.rc_context({
        "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8, "legend.frameon": False,
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
        "grid.linewidth": 0.6, "figure.dpi": DPI, "savefig.dpi": DPI,
        "savefig.facecolor": "white",
        # no mathtext: a label, split or file name with two `$` ('$5 to $10') is drawn as written, not as math
        # (and one that is not valid math does not cost the figure)
        "text.parse_math": False,
        "axes.prop_cycle": matplotlib.cycler(color=[
            "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]),
    }):
        yield


def _figure(size=FIGSIZE, layout: str = "constrained"):
    """A figure laid out by matplotlib; `layout` "compressed" for an axes of fixed aspect beside a colour bar (a
    confusion matrix: "constrained" left its long tick labels past the figure's edge)."""
    from matplotlib.figure import Figure

    return Figure(figsize=size, dpi=DPI, layout=layout)


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    # no Software tag: the default one carries matplotlib's web address. A figure laid out by its own engine
    # (ours: constrained) fills its canvas; a tight bounding box would draw it twice (20% of a report's time)
    tight = None if fig.get_layout_engine() is not None else "tight"
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches=tight, metadata={"Software": None})
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


def _training_plot(run: Run, plot: Plot, key: str, what: str):
    """(plot, steps, values, axes) for a train/ series of metrics.jsonl; axes is None, and the plot says why it
    is skipped, when nothing of it is logged yet."""
    steps, values = _series(run.records, key)
    if not steps:
        plot.skipped = f"no {what} logged yet (metrics.jsonl has no {key} lines)"
        return plot, steps, values, None
    return plot, steps, values, _figure().add_subplot()


def plot_loss(run: Run) -> Plot:
    plot, steps, losses, ax = _training_plot(run, Plot("loss", "Training loss", "Mean training loss of each "
                                                       "logging window, raw and smoothed."), "train/loss",
                                             "training loss")
    if ax is None:
        return plot
    finite = [(s, v) for s, v in zip(steps, losses, strict=True) if math.isfinite(v)]
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
    plot.png = _png(ax.figure)
    return plot


def plot_lr(run: Run) -> Plot:
    plot, steps, lrs, ax = _training_plot(run, Plot("lr", "Learning rate", "Learning rate at each logged step (the "
                                                    "schedule after warmup)."), "train/lr", "learning rate")
    if ax is None:
        return plot
    ax.plot(steps, lrs, color="#2ca02c", linewidth=1.8, marker="." if len(steps) < 40 else None)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "0" if v == 0 else f"{v:.2g}"))
    ax.set_ylim(bottom=0)
    _epoch_axis(ax, _steps_per_epoch(run.records))
    plot.png = _png(ax.figure)
    return plot


def plot_throughput(run: Run) -> Plot:
    plot, steps, sps, ax = _training_plot(run, Plot("throughput", "Throughput", "Training samples per second in "
                                                    "each logging window (a window that holds an evaluation or a "
                                                    "checkpoint is slower)."), "train/samples_per_second",
                                          "throughput")
    if ax is None:
        return plot
    ax.plot(steps, sps, color="#ff7f0e", linewidth=1.5, marker="." if len(steps) < 40 else None, label="window")
    median = sorted(sps)[len(sps) // 2]
    ax.axhline(median, color="#555555", linestyle="--", linewidth=1, label=f"median {median:,.1f}/s")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("samples / second")
    ax.set_ylim(bottom=0)
    _epoch_axis(ax, _steps_per_epoch(run.records))
    ax.legend()
    plot.png = _png(ax.figure)
    return plot


def _eval_prefixes(run: Run) -> list[str]:
    prefixes = []
    for r in run.records:
        for key in r:
            m = EVAL_KEY.match(key)
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
            m = EVAL_KEY.match(key)
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
        up = [n for n in names if not lower_is_better(n)]
        down = ["loss"] + [n for n in names if lower_is_better(n)]
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

