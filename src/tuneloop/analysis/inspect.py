"""`tuneloop inspect RUN`: the top of errors.csv and of label_issues.csv as text a person reads."""

from __future__ import annotations

from ..decision.rule import DecisionRule
from ..exceptions import TuneloopError
from ..layout import (ERRORS_FILE, LABEL_ISSUES_FILE, METADATA_FILE, METRICS_FILE, MODEL_DIR, RESULTS_FILE,
                      not_one_run)
from ..tasks import REGRESSION


def read_rows(path) -> list[dict] | None:
    """A CSV errors.csv or label_issues.csv, as dicts; None when the file is not there."""
    import csv
    from pathlib import Path

    if not Path(path).is_file():
        return None
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def describe_failures(run_dir, top: int = 10, width: int = 160) -> str:
    """`tuneloop inspect RUN`: the top of errors.csv and of label_issues.csv as text a person reads."""
    from pathlib import Path

    folder = Path(run_dir)
    files = [(folder / ERRORS_FILE, "validation rows the model gets wrong" + _under_rule(folder) +
              ", most confidently wrong first"),
             (folder / LABEL_ISSUES_FILE,
              "training rows ranked by the probability of their given label, lowest first")]
    if not any(path.is_file() for path, _ in files):
        raise TuneloopError(_not_a_run(run_dir))
    cut = lambda text: text if len(text) <= width else text[:width] + " …"  # noqa: E731
    lines = []
    for path, what in files:
        rows = read_rows(path)
        if rows is None:
            if path.name == LABEL_ISSUES_FILE:
                lines += [f"{path}: not written: {why_no_label_issues(folder)}", ""]
            continue
        flagged = sum(r.get("likely_wrong") == "True" for r in rows)
        abstained = sum(r.get("abstained") == "True" for r in rows)
        if rows and "abs_error" in rows[0]:                     # regression: every row, by its error
            what = "validation rows, largest error first"
        if len(rows) == 1:
            what = what.replace(" rows", " row", 1)
        lines.append(f"{path}: {len(rows)} {what}" + (f"; confident learning flags {flagged}" if flagged else "")
                     + (f"; the rule abstains on {abstained} of them (predict answers those with its abstain label)"
                        if abstained else ""))
        for n, r in enumerate(rows[:top], 1):
            if "given" in r:
                head = (f"given {_set(r['given'])}, the model says {_set(r['suggested'])} (p_given {r['p_given']})"
                        + (" — likely wrong" if r["likely_wrong"] == "True" else ""))
            elif "abs_error" in r:
                head = f"gold {r['gold']}, predicted {r['predicted']} (error {r['abs_error']})"
            else:       # multi-label: the largest gap between a wrong label's probability and its target, not a p
                score = f"p {r['p_predicted']}" if "p_predicted" in r else \
                    f"confidence_wrong {r.get('confidence_wrong')}"
                head = f"gold {_set(r['gold'])}, predicted {_set(r['predicted'])} ({score})" + \
                    (" — abstained" if r.get("abstained") == "True" else "")
            where = f"id {r['id']}" + (f", row {r['row']}" if r.get("row") else "")
            lines.append(f"{n:4d}. {where}: {head}")
            lines += [f"      {key}: {cut(r[key])}" for key in ("text", "text_a", "text_b") if key in r]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _set(labels: str) -> str:
    """A label (multi-label: the labels joined) as the line shows it; an empty set of labels as (none)."""
    return labels if labels != "" else "(none)"


def _not_a_run(run_dir) -> str:
    """Why `run_dir` has neither list: no such folder, a folder inside a run (its model/, say: the run named), or
    not a run's folder."""
    import os
    from pathlib import Path

    folder, give = Path(run_dir), "give the folder of a finished `tuneloop train` run (its --output-dir)"
    if not folder.exists():
        return f"{run_dir}: no such folder; {give}"
    if not folder.is_dir():
        return f"{run_dir}: not a folder; {give}"
    if (folder / METRICS_FILE).is_file() and not (folder / RESULTS_FILE).is_file():       # still going, or stopped
        return (f"{run_dir}: no {ERRORS_FILE} or {LABEL_ISSUES_FILE} yet: the run has not finished (no "
                f"{RESULTS_FILE}), and they are written at its end; `tuneloop report {run_dir}` shows it so far")
    for n, up in enumerate(list(Path(os.path.abspath(folder)).parents)[:3]):
        if (up / ERRORS_FILE).is_file() or (up / LABEL_ISSUES_FILE).is_file():
            given = folder.parents[n] if n < len(folder.parents) else Path(".")   # as the path was given
            named = up if str(given) == "." else given
            what = "the saved model of" if (folder / METADATA_FILE).is_file() else "inside"
            return (f"{run_dir}: no {ERRORS_FILE} or {LABEL_ISSUES_FILE} here: it is {what} the run {named}, which has "
                    f"them: `tuneloop inspect {named}`")
    parent = folder.parent if folder.name else Path(os.path.abspath(folder)).parent
    if (folder / METADATA_FILE).is_file() and not_one_run(parent):       # an experiment's or a search's model
        return (f"{run_dir}: no {ERRORS_FILE} or {LABEL_ISSUES_FILE} here: it is a saved model of {parent}"
                f"{not_one_run(parent)}; inspect one of those runs")
    return (f"{run_dir}: no {ERRORS_FILE} or {LABEL_ISSUES_FILE} here; {give}{not_one_run(folder)}")


def _under_rule(folder) -> str:
    """", under its saved decision rule (...)" where the run's model decides otherwise than argmax / 0.5 (errors.csv
    lists the rows that rule gets wrong); empty otherwise."""
    import json

    try:
        saved = json.loads((folder / MODEL_DIR / METADATA_FILE).read_text(encoding="utf-8")).get("decision")
        rule = DecisionRule.from_dict(saved)
    except (OSError, ValueError, TypeError, AttributeError):
        return ""
    if rule is None or not (rule.thresholds or rule.abstain_below is not None):
        return ""
    return f" under its saved decision rule ({rule.describe()})"


def why_no_label_issues(folder) -> str:
    """Why a finished run has no label_issues.csv, from its results.json: the ranking reads each training row's
    probability of its label at every epoch of the training loop."""
    import json

    try:
        results = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        results = {}
    method = (results.get("setfit") or {}).get("method")
    if results.get("problem_type") == REGRESSION:
        return "a regression run has no classes to doubt a label against"
    if method:
        return (f"--method {method} fits its head outside the training loop, whose per-epoch probabilities of each "
                "training row's label the ranking reads; `tuneloop train --folds K` ranks every training row by "
                "out-of-fold predictions, with any method")
    return "the run's log (train.log) says why"
