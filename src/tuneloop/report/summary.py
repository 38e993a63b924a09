"""summary.html: an experiment's page (experiments/runs.py): every metric as mean ± std with its 95% interval, the
per-run values, collapsed runs, the kept model, and a dot plot of the main metric per run."""

from __future__ import annotations

from pathlib import Path

from ..atomic import atomic_write_bytes
from ..layout import PLOTS_DIR, SUMMARY_PAGE
from .figures import Plot, _figure, _png, _style
from .fmt import _esc, _figure_html, _table
from .page import write_page


def _dots(summary: dict) -> Plot:
    metric = summary["main_metric"]
    stats = summary["metrics"][metric]
    plot = Plot("summary", f"{metric} per run", "")
    fig = _figure((6.4, 2.6))
    ax = fig.add_subplot()
    names = [r["name"] for r in summary["runs"]]
    values = [r["eval"].get(metric) for r in summary["runs"]]
    colours = ["#d62728" if r["collapsed"] else "#1f77b4" for r in summary["runs"]]
    ax.scatter(values, [0] * len(values), c=colours, s=40, zorder=3)
    for name, value in zip(names, values, strict=True):
        ax.annotate(name, (value, 0), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7,
                    rotation=45)
    ax.axvline(stats["mean"], color="#444444", linewidth=1, label=f"mean {stats['mean']:.4f}")
    if stats["ci95"]:
        ax.axvspan(*stats["ci95"], color="#1f77b4", alpha=0.12, label="95% interval of the mean")
    ax.set_yticks([])
    ax.set_xlabel(metric)
    ax.legend(loc="lower right", fontsize=7)
    plot.caption = "Each dot is one run's final validation value (red: collapsed to a single class)."
    plot.png = _png(fig)
    return plot


def _collapsed_scored_higher(summary: dict) -> bool:
    """Whether a counted run that collapsed scores above the kept one (experiments/runs.py keeps the best of the runs
    that did not collapse): then the kept model is not simply the best on validation."""
    from ..tasks import signed_score

    metric, main = summary["metric_for_best"], summary["main_metric"]

    def score(run: dict) -> float:
        value = run["eval"].get(metric, run["eval"].get(main))
        return signed_score(metric, value) if isinstance(value, (int, float)) else float("-inf")

    kept = next((r for r in summary["runs"] if r["name"] == summary["kept"]), None)
    return kept is not None and any(r["collapsed"] and "replaced_by" not in r and score(r) > score(kept)
                                    for r in summary["runs"])


def write_summary_page(out: Path, summary: dict) -> Path:
    kind = "seeds" if summary["kind"] == "seeds" else "folds"
    parts = [f"<h1>tuneloop experiment: {len(summary['runs'])} runs over {kind}</h1>",
             f'<p class="sub">{_esc(Path(out).resolve())}</p>']
    for name in summary["collapsed"]:
        parts.append(f'<div class="note warn">{_esc(name)} collapsed: its model predicts a single class on '
                     "validation.</div>")
    rows = [(k, f"{s['mean']:.4f} ± {s['std']:.4f}",
             f"[{s['ci95'][0]:.4f}, {s['ci95'][1]:.4f}]" if s["ci95"] else "", s["n"])
            for k, s in summary["metrics"].items()]
    rows += [(f"{k} of the TF-IDF baseline", f"{s['mean']:.4f} ± {s['std']:.4f}",
              f"[{s['ci95'][0]:.4f}, {s['ci95'][1]:.4f}]" if s["ci95"] else "", s["n"])
             for k, s in (summary.get("baseline") or {}).items() if k == summary["main_metric"]]
    parts += ["<h2>Metrics</h2>", _table(rows, header=("metric", "mean ± std", "95% interval of the mean", "runs"))]
    metrics = list(summary["metrics"])
    parts += ["<h2>Runs</h2>", _table([(r["name"], *[r["eval"].get(k) for k in metrics],
                                        "collapsed" if r["collapsed"] else "", r.get("replaced_by", ""),
                                        len(r.get("warnings") or ()))     # each run's report and train.log list them
                                       for r in summary["runs"]], header=("run", *metrics, "", "replaced by",
                                                                          "warnings"))]
    metric = _esc(summary["metric_for_best"])
    best = f"best {metric} on validation" + (" of the runs that did not collapse" if _collapsed_scored_higher(summary)
                                             else "")
    why = (best if not summary.get("best_run") else   # the best run's model was removed
           f"the best {metric} on validation of the runs that still have a model: {_esc(summary['best_run'])} "
           "scores best, but an earlier pass's --keep best removed its model")
    parts.append(f"<p>Kept as <code>model/</code>: <b>{_esc(summary['kept'])}</b> ({why}; --keep "
                 f"{_esc(summary['keep'])}). Each run's own report is in its folder.</p>")
    if summary.get("out_of_fold"):
        o = summary["out_of_fold"]
        parts.append(f"<p>Out-of-fold predictions of all {o['rows']} training rows: <code>{_esc(o['file'])}</code>"
                     + (f"; training labels ranked by them in <code>label_issues.csv</code> (cleanlab flags "
                        f"{o['label_issues']['flagged']})" if o.get("label_issues") else "") + ".</p>")
    with _style():
        dots = _dots(summary)
    atomic_write_bytes(Path(out) / PLOTS_DIR / f"{dots.name}.png", dots.png)
    parts.append(_figure_html(dots))
    return write_page(out, SUMMARY_PAGE, "tuneloop experiment", parts)
