"""The report's sections about decisions and failures: the decision rule (results.json's "decision"), the
validation rows the model gets wrong (errors.csv) and the training rows whose label may be wrong
(label_issues.csv)."""

from __future__ import annotations

from ..analysis.inspect import read_rows
from ..layout import ERRORS_FILE, LABEL_ISSUES_FILE
from .fmt import _esc, _figure_html, _table, kept_phrase
from .run import Run


def failures_section(run: Run, shown: int = 10) -> list[str]:
    """The top of errors.csv: the validation rows the model gets wrong, most confidently wrong first."""
    rows = read_rows(run.folder / ERRORS_FILE)
    if rows is None:
        return []
    parts = ["<h2>Where the model fails</h2>"]
    if not rows:
        return parts + ['<div class="note">The model gets every validation row right.</div>']
    what = "rows with the largest errors" if "abs_error" in rows[0] else "wrong rows, most confidently wrong first"
    d = (run.results or {}).get("decision") or {}
    if d.get("thresholds") or (d.get("abstain") or {}).get("level") is not None:
        what = what.replace("wrong rows", "wrong rows under the saved decision rule (above)")
    abstained = sum(r.get("abstained") == "True" for r in rows)
    also = (f"; the rule abstains on {abstained} of them (<code>abstained</code>: <code>tuneloop predict</code> "
            "answers those with its abstain label)" if abstained else "")
    parts.append(f"<p>{len(rows)} {_esc(what)}{also}; the first {min(shown, len(rows))} below, all of them in "
                 "<code>errors.csv</code>.</p>")
    return parts + [_rows_table(rows[:shown])]


def decision_section(run: Run, plots: list) -> list[str]:
    """The decision rule saved with the model, and what it does, measured out of fold (decision/fit.py)."""
    d = (run.results or {}).get("decision")
    if not d:
        return []
    c = d["calibration"]
    parts = ["<h2>Decision rule</h2>",
             f"<p>Saved with the model and applied by <code>tuneloop predict</code> and <code>evaluate</code> "
             f"(<code>--raw</code> shows the raw scores): <b>{_esc(d['rule'])}</b>, fitted on {_esc(d['fitted_on'])}. "
             f"The figures below are {_esc(d['measured'])}.</p>",
             _table([("ECE (15 bins)", c["ece_before"], c["ece_after"]), ("NLL", c["nll_before"], c["nll_after"])],
                    header=("", "raw", f"calibrated (T = {c['temperature']:.3g})"))]
    if "thresholds" in d:
        t = d["thresholds"]
        labels = _per_label(run, len(t["values"]))
        each = [f"{labels[k]} {v:.3g}" if labels else f"{v:.3g}" for k, v in enumerate(t["values"])]
        names, positive = run.label_names or [], t.get("positive", 1)
        of = f" on the probability of {names[positive]}" if not labels and len(names) == 2 and positive in (0, 1) \
            else ""                                  # binary: the class cut (--positive-label)
        parts += [f"<h3>Thresholds for {_esc(t['objective'])}{_esc(of)}: {_esc(', '.join(each))}</h3>",
                  _table([(k, t["at_default"][k], t["at_tuned"].get(k)) for k in t["at_default"]],
                         header=("metric", "default cut-off", "tuned cut-off"))]
        if "assured" in t:          # precision@R / recall@P: the floor's lower confidence bound at the cut-off
            a = t["assured"]
            bounds = ", ".join(f"{b:.3f}" + (f" ({labels[k]})" if labels and k < len(labels) else "")
                               for k, b in enumerate(a["lower_bounds"]))
            parts.append(f"<p>With {a['confidence']:.0%} confidence, {_esc(a['floor'])} on new rows like these is at "
                         f"least {_esc(bounds)} at the cut-off (asked: {a['target']:g}; a lower bound from the rows it "
                         "was fitted on, <code>--threshold-confidence</code>).</p>")
    for note in d.get("notes", []):
        parts.append(f'<div class="note warn">{_esc(note)}</div>')
    a = d["abstain"]
    rows = [(f"{level:g}", f"{coverage:.1%}", "" if accuracy is None else f"{accuracy:.4f}")
            for level, coverage, accuracy in a["curve"]]
    chosen = f" (chosen: {a['level']:g}, coverage {a['coverage']:.1%})" if a.get("level") is not None else ""
    parts += [f"<h3>Abstaining{_esc(chosen)}</h3>",
              _table(rows, header=("abstain below", "coverage", "accuracy on answered rows"))]
    parts += [_figure_html(p) for p in plots if p.name in ("reliability", "coverage")]
    return parts


def _per_label(run: Run, cut_offs: int) -> list[str] | None:
    """Multi-label: the labels' names, one per cut-off, that name each threshold; None otherwise (one cut-off)."""
    names = run.label_names
    multi = run.objective is not None and run.objective.multi_label
    return names if multi and names and len(names) == cut_offs else None


def label_issues_section(run: Run, shown: int = 10) -> list[str]:
    """The top of label_issues.csv: the training rows whose given label is most probably wrong."""
    rows = read_rows(run.folder / LABEL_ISSUES_FILE)
    if not rows:
        return []
    flagged = sum(r["likely_wrong"] == "True" for r in rows)
    verdict = (f"confident learning (cleanlab) flags {flagged} as likely mislabelled" if rows[0]["likely_wrong"]
               else "confident learning could not run on this data")
    return ["<h2>Training rows whose label may be wrong</h2>",
            f"<p>{len(rows)} training rows ranked by the model's mean probability of their given label over the "
            f"training epochs (the first epoch's scored before the model learned the row), lowest first; "
            f"{_esc(verdict)}. The first {min(shown, len(rows))} below, all of them in "
            "<code>label_issues.csv</code>. Check them by hand: some are hard examples, not wrong ones.</p>",
            _rows_table(rows[:shown])]


def _rows_table(rows: list[dict], width: int = 300) -> str:
    """A table of CSV rows, long texts cut to `width` characters."""
    columns = list(rows[0])
    cut = lambda v: v if len(v) <= width else v[:width] + " …"  # noqa: E731
    return _table([tuple(cut(r[c]) for c in columns) for r in rows], header=tuple(columns))


def distillation_section(run: Run) -> list[str]:
    """`tuneloop distill`: teacher, student and the student trained on the labelled rows alone, on the same
    validation rows (results.json's distillation)."""
    d = (run.results or {}).get("distillation")
    if not d:
        return []
    parts = ["<h2>Distillation</h2>"]
    if d.get("note"):
        return parts + [f'<div class="note">{_esc(d["note"])}</div>']
    main = d.get("main_metric") or (run.results or {}).get("main_metric")
    names = {"teacher": "teacher", "student": "student (this model)", "labels_only": "student on the labels alone"}
    rows = [(names[k], d[k]["metrics"].get(main), d[k]["rows_per_s"], d[k].get("parameters"))
            for k in names if k in d]
    parts += [f"<p>On the {d['rows']} rows of <code>{_esc(d['validation_file'])}</code>, each model under its own "
              f"decision rule; rows/s: one pass over them in one process on {_esc(d.get('cpu'))}.</p>",
              _table(rows, header=("model", main, "rows/s", "parameters"))]
    agree = d.get("student_vs_teacher")
    if agree is not None:               # a teacher model was measured (its metric may give no share: `kept`)
        said = f"answers as the teacher on {agree['agreement']:.1%} of the rows" if "agreement" in agree else \
            f"scores {agree['mean_abs_difference']:.4g} from the teacher's on average"
        parts.append(f"<p>The student {kept_phrase({**d, 'main_metric': _esc(main)})}, and {_esc(said)}.</p>")
    return parts
