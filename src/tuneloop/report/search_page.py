"""search.html: a search's page (search.py): the best configuration, every trial, the optimisation history and
the parameters' importances (Optuna's matplotlib plots), self-contained like report.html."""

from __future__ import annotations

import warnings
from pathlib import Path

from ..atomic import atomic_write_bytes
from ..layout import PLOTS_DIR, SEARCH_PAGE
from .figures import Plot, _png, _style
from .fmt import _esc, _figure_html, _table
from .page import write_page


def _optuna_plot(name: str, title: str, caption: str, draw) -> Plot:
    plot = Plot(name, title, caption)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # Optuna marks its matplotlib plots experimental
            ax = draw()
        fig = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
        fig.set_size_inches(7.0, 3.8)
        plot.png = _png(fig)
        import matplotlib.pyplot as plt

        plt.close(fig)
    except Exception as e:  # noqa: BLE001 - too few trials for importances and the like: say so on the page
        plot.skipped = f"{type(e).__name__}: {str(e)[:200]}"
    return plot


def write_search_page(out: Path, study, summary: dict) -> Path:
    from optuna.visualization import matplotlib as optuna_plots

    parts = [f"<h1>tuneloop search: {_esc(summary['study'])}</h1>", f'<p class="sub">{_esc(Path(out).resolve())}</p>',
             f"<p>{summary['finished']} finished trials ({summary['pruned']} pruned) in "
             f"<code>{_esc(summary['storage'])}</code>.</p>"]
    best = summary.get("best")
    if best:
        parts += ["<h2>Best configuration</h2>",
                  f"<p>Trial {best['number']}: best {_esc(best['metric'])} {best['value']:.4f} at step {best['step']}"
                  + (f"; its checkpoint is in <code>{_esc(best['model'])}</code> with its config.yaml" if best.get(
                      "model") else "; its folder is on the machine that ran it") + ".</p>",
                  _table(list(best["params"].items()), header=("option", "value"))]
    names = list(summary["space"])
    rows = [(t["number"], t["state"] + (" (diverged)" if t.get("diverged") else ""),   # a non-finite loss: pruned
             *[t["params"].get(n) for n in names], t["value"], t["pruned_at_epoch"], t["seconds"])
            for t in summary["trials"]]
    parts += ["<h2>Trials</h2>", _table(rows, header=("trial", "state", *names, "best value", "pruned at epoch",
                                                     "seconds"))]
    with _style():
        plots = [_optuna_plot("search_history", "Optimisation history", "Each trial's score (its best evaluation; "
                              "negated for metrics where lower is better) and the best so far.",
                              lambda: optuna_plots.plot_optimization_history(study)),
                 _optuna_plot("search_importances", "Parameter importances", "fANOVA importances of the searched "
                              "options for the score, over the complete trials.",
                              lambda: optuna_plots.plot_param_importances(study))]
    for plot in plots:
        if plot.png is not None:
            atomic_write_bytes(Path(out) / PLOTS_DIR / f"{plot.name}.png", plot.png)
        parts.append(_figure_html(plot))
    return write_page(out, SEARCH_PAGE, "tuneloop search", parts)
