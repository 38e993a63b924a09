"""The report's figures of the final evaluation's outputs: a confusion matrix (classification), predicted
against true (regression), F1 of each label (multi-label)."""

from __future__ import annotations

from ..objective import MultiLabel, Regression
from .figures import FIGSIZE, Plot, _figure, _png, _safe, _short
from .run import Run


def plot_predictions(run: Run) -> list[Plot]:
    if not run.predictions:
        return [Plot("predictions", "Predictions", "", skipped="no saved predictions (predictions/eval_<split>.npz "
                     "is written at the end of training; runs from older tuneloop versions and runs still going "
                     "have none)")]
    plot_of = PLOTS.get(type(run.objective), _confusion)
    plots = []
    for split, value in run.predictions.items():
        if isinstance(value, str):
            plots.append(Plot(f"predictions_{_safe(split)}", f"Predictions: {split}", "", skipped=value))
            continue
        logits, labels = value
        try:
            plots.append(plot_of(split, logits, labels, run.label_names))
            if _cut(run):
                plots[-1].caption += (" These are the raw model's decisions (argmax; multi-label: 0.5), as in the "
                                      "final evaluation, not the saved decision rule's cut-offs (below), by which "
                                      "errors.csv and tuneloop predict decide.")
        except Exception as e:       # odd arrays: say so on the page instead of failing the whole report
            plots.append(Plot(f"predictions_{_safe(split)}", f"Predictions: {split}", "",
                              skipped=f"could not plot the predictions ({type(e).__name__}: {str(e)[:200]})"))
    return plots


def _cut(run: Run) -> bool:
    """Whether the run's saved decision rule cuts elsewhere than argmax / 0.5 (results.json's decision)."""
    decision = (run.results or {}).get("decision")
    return isinstance(decision, dict) and bool(decision.get("thresholds"))


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
    fig = _figure((side + 1.2, side), layout="compressed")      # the square matrix's tick labels kept inside
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


def _scatter(split: str, logits, labels, names: list[str] | None = None) -> Plot:
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

    from ..objective.kinds import label_columns

    plot = Plot(f"label_f1_{_safe(split)}", f"F1 of each label: {split}", "")
    labels = labels.astype(np.int64)
    if labels.ndim != 2 or labels.shape != logits.shape:
        raise ValueError(f"multi-label labels of shape {labels.shape} do not match logits {logits.shape}")
    n_labels = labels.shape[1]
    if not names or len(names) != n_labels:
        names = [str(i) for i in range(n_labels)]
    preds = (logits > 0).astype(np.int64)
    y, decided, which = label_columns(labels, preds)          # one label: its own side, not a two-class problem
    f1 = np.atleast_1d(f1_score(y, decided, average=None, zero_division=0.0, **which))
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
    for row, value, count in zip(rows, f1, support, strict=True):
        ax.text(min(value, 1.0) + 0.01, row, f"{value:.2f}  (n={int(count)})", va="center", fontsize=7)
    micro = f1_score(y, decided, average="micro", zero_division=0.0, **which)
    ax.set_title(f"{split}: {len(labels)} examples, micro F1 {micro:.4f}")
    plot.caption = "F1 of each label on its own; n is how many examples carry the label."
    plot.png = _png(fig)
    return plot


PLOTS = {Regression: _scatter, MultiLabel: _label_f1}       # single-label: the confusion matrix
