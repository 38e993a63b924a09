"""The report's figures of the decision rule (results.json's "decision", decision/fit.py): a reliability diagram
before and after calibration, and coverage against accuracy over abstain levels."""

from __future__ import annotations

from .figures import _figure, _png
from .run import Run


def plot_decision(run: Run) -> list:
    from .figures import Plot

    decision = (run.results or {}).get("decision")
    if not decision:
        return []
    plots = []
    before, after = decision["reliability"]["before"], decision["reliability"]["after"]
    plot = Plot("reliability", "Reliability diagram", "")
    fig = _figure((4.8, 4.4))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="#888888", linestyle="--", linewidth=1, label="perfectly calibrated")
    c = decision["calibration"]
    for points, name, colour in ((before, f"raw (ECE {c['ece_before']:.3f})", "#d62728"),
                                 (after, f"calibrated (ECE {c['ece_after']:.3f})", "#1f77b4")):
        if points:
            ax.plot([p[1] for p in points], [p[2] for p in points], marker="o", markersize=4, color=colour,
                    label=name)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted probability (15 bins)")
    ax.set_ylabel("share correct")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(f"temperature {c['temperature']:.3g}")
    plot.caption = (f"Confidence against the share of correct answers, per bin; calibrated points are "
                    f"{decision['measured'].split(' (')[0]}. On the dashed line a probability means what it says.")
    plot.png = _png(fig)
    plots.append(plot)

    curve = [row for row in decision["abstain"]["curve"] if row[2] is not None]
    if curve:
        plot = Plot("coverage", "Coverage against accuracy", "")
        fig = _figure((5.6, 3.6))
        ax = fig.add_subplot()
        ax.plot([row[1] for row in curve], [row[2] for row in curve], marker="o", markersize=4, color="#1f77b4")
        for level, coverage, accuracy in curve:
            ax.annotate(f"{level:g}", (coverage, accuracy), textcoords="offset points", xytext=(3, 4), fontsize=7)
        ax.set_xlabel("coverage (share of rows answered)")
        ax.set_ylabel("accuracy on the rows answered")
        ax.invert_xaxis()
        chosen = decision["abstain"].get("level")
        ax.set_title("abstain below each level" + (f" (chosen: {chosen:g})" if chosen is not None else ""))
        plot.caption = ("Each point is an --abstain-below level: predictions whose calibrated probability is under "
                        "it are left unanswered. Moving right to left trades answered rows for accuracy.")
        plot.png = _png(fig)
        plots.append(plot)
    return plots
