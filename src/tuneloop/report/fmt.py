"""Values as the report and the model card show them: escaped for HTML or Markdown, numbers and durations short
and readable."""

from __future__ import annotations

import base64
import html
import json
import math
import re
from pathlib import Path
from typing import Any


def _esc(value: Any) -> str:
    """HTML-escaped text; `://` is broken up too, so no address in the data can read as a link."""
    return html.escape(str(value), quote=True).replace("://", ":&#47;&#47;")


# what a user's text (a label, a file name) needs in Markdown to read as itself on the Hub, GitHub and MkDocs alike:
# backslash escapes where every renderer takes them, character references where some do not (`\$`, `\<`, `\~`);
# an underscore inside a word (not_equivalent) emphasises nothing, so it stays as it is
_MD_ESCAPES = {**{c: "\\" + c for c in "\\`*[]|#"}, "<": "&lt;", ">": "&gt;", "&": "&amp;", "$": "&#36;",
               "~": "&#126;"}
_EDGE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")


def md_text(value: Any) -> str:
    """Text for Markdown, a table cell included: no HTML tag, emphasis, link, code, math or cell break in it."""
    text = "".join(_MD_ESCAPES.get(c, c) for c in " ".join(str(value).splitlines()))
    return _EDGE_UNDERSCORE.sub(r"\\_", text)


def md_code(value: Any) -> str:
    """Text as a Markdown code span (shown as it is), fenced by more backticks than it holds in a row."""
    text = " ".join(str(value).splitlines())
    ticks = max((len(run) for run in re.findall(r"`+", text)), default=0)
    pad = " " if ticks else ""
    return f"{'`' * (ticks + 1)}{pad}{text}{pad}{'`' * (ticks + 1)}"


def resumed_step(results: dict) -> int | None:
    """The step a resumed run went on from (results.json's resumed_from: its checkpoint, `step-0000030`); None for
    a run that was not resumed, -1 for a checkpoint whose name gives no step."""
    found = results.get("resumed_from")
    if not found:
        return None
    m = re.fullmatch(r"step-(\d+)", Path(str(found)).name)
    return int(m.group(1)) if m else -1


UNTIMED = "the time before the resume is not recorded"     # a checkpoint keeps no clock


def runtime_words(results: dict) -> str:
    """What a run's train.runtime_s covers: "in all", or, for a resumed run, "since the resume from step N" (the
    process that resumed it timed only its own part; say UNTIMED beside it)."""
    step = resumed_step(results)
    if step is None:
        return "in all"
    return f"since the resume from {f'step {step}' if step >= 0 else 'its checkpoint'}"


def stage_name(stage: dict) -> str:
    """What results.json's "setfit" section was: --method probe's linear probe, or --method setfit's contrastive
    stage."""
    return "linear probe" if stage.get("method") == "probe" else "contrastive stage"


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


def stage_only(results: dict) -> bool:
    """--method setfit with the logistic head, and --method probe: the stage ran and the training loop trained no
    step, so the card and the page show the stage instead of the loop's settings, time and curves."""
    return bool(results.get("setfit")) and not (results.get("train") or {}).get("steps")


def setfit_stage_rows(stage: dict) -> list[tuple[str, str]]:
    """--method setfit (results.json → setfit) as (name, text) rows: the contrastive stage, then the head it fitted
    (the model card's hyperparameters and the report's stage table)."""
    head = ("a logistic-regression head fitted on the embeddings (it is the model's classification layer)"
            if stage.get("head") == "logistic" else
            "a logistic-regression head, then the training loop over every weight (the rows below)")
    embedding = ("embedding the head reads", {"mean": "mean of the last hidden states, normalised",
                                              "head": "the model's own pooled output"}.get(stage.get("pooling"),
                                                                                           fmt(stage.get("pooling"))))
    if stage.get("method") == "probe":
        return [("method", f"a linear probe: the encoder frozen, then {head}"), embedding]
    return [("method", f"SetFit: the encoder fine-tuned contrastively on pairs of training rows, then {head}"),
            ("pairs", f"{fmt(stage.get('pairs'))} " + (
                "(every pair of training rows, as the setfit package, same-class and other-class pairs made as "
                f"many; at most {fmt(stage.get('pair_limit'))} of each kind)" if stage.get("iterations") is None else
                f"(at most {fmt(stage.get('iterations'))} × the training rows of each kind, same class and other "
                "class)")),
            ("contrastive steps", f"{fmt(stage.get('steps'))} ({fmt(stage.get('epochs'))} pass(es) over the pairs"
                                  + (f" to make at least {stage['min_steps']} steps" if stage.get("min_steps")
                                     else "") + f", {fmt(stage.get('batch_size'))} pairs a step"
                                  + (f"; a step in up to {stage['pieces']} forward/backward passes to fit in memory"
                                     if (stage.get("pieces") or 1) > 1 else "") + ")"),
            ("learning rate (contrastive stage)", fmt(stage.get("lr"))), embedding]


def stage_text(stage: dict) -> str:
    """One line for results.json's "setfit" section: pairs, steps, the loss, the head, the seconds (the probe: the
    frozen encoder and its head)."""
    loss = (f", loss {fmt_metric(stage['loss_first'])} → {fmt_metric(stage['loss_last'])}"
            if isinstance(stage.get("loss_first"), float) and isinstance(stage.get("loss_last"), float) else "")
    head = ("then a logistic-regression head" if stage.get("head") == "logistic" else
            "then a logistic-regression head and the training loop over every weight")
    accuracy = (f" (training accuracy {fmt_metric(stage['head_train_accuracy'])})"
                if isinstance(stage.get("head_train_accuracy"), float) else "")
    if stage.get("method") == "probe":           # --method probe: no pairs, the frozen embedding
        return (f"the encoder frozen (not trained), {head[5:]} on its embeddings{accuracy}; "
                f"{fmt_seconds(stage.get('seconds'))}")
    return (f"{fmt(stage.get('pairs'))} pairs in {fmt(stage.get('steps'))} steps{loss}, {head}{accuracy}; "
            f"{fmt_seconds(stage.get('seconds'))}")


def stage_table(stage: dict) -> str:
    """results.json's "setfit" section as a table: the options the model card lists, then what the stage did (the
    probe: no pairs, so no pair loss)."""
    loss = [] if stage.get("method") == "probe" else [
        ("pair loss, first step → last",
         f"{fmt_metric(stage.get('loss_first'))} → {fmt_metric(stage.get('loss_last'))}")]
    return _table([*setfit_stage_rows(stage), *loss,
                   ("head's accuracy on the training rows", fmt_metric(stage.get("head_train_accuracy"))),
                   ("time", f"{fmt_seconds(stage.get('seconds'))} (the head fitted in "
                            f"{fmt_seconds(stage.get('head_fit_s'))})")], header=("", "value"))


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


def _figure_html(plot) -> str:
    """A figures.Plot as an inline <figure> (or a note saying why it is not shown)."""
    from ..layout import PLOTS_DIR

    if plot.png is None:
        return f'<div class="note"><strong>{_esc(plot.title)}</strong>: not shown: {_esc(plot.skipped)}.</div>'
    data = base64.b64encode(plot.png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{_esc(plot.title)}">'
            f"<figcaption><strong>{_esc(plot.title)}.</strong> {_esc(plot.caption)} "
            f"(<code>{_esc(PLOTS_DIR + '/' + plot.name + '.png')}</code>)</figcaption></figure>")


def auto_text(choice: dict) -> str:
    """One line: the method, why, and each candidate's cross-validated accuracy with its test against the default
    (the log's and the report's words; training/choose.py makes the choice)."""
    default = choice.get("default", "setfit")

    def one(m, c):
        if "stopped" in c:
            return f"{m} stopped early (could not beat {default} beyond chance)"
        if "accuracy" not in c:
            return f"{m} skipped ({c.get('skipped')})"
        test = c.get("against_" + default)
        vs = f" ({test['wins']} rows won, {test['losses']} lost against {default}: p {test['p']:.3f})" if test else ""
        return f"{m} {c['accuracy']:.4f}{vs}"

    chosen, candidates = choice["chosen"], choice.get("candidates") or {}
    if not candidates:
        return f"{chosen} ({choice.get('why')})"
    why = ("the few-shot default: no candidate was better beyond chance" if chosen == default and default in candidates
           and "accuracy" in candidates[default] else "the few-shot default: not compared within the budget"
           if chosen == default else f"right on more held-out rows than {default} beyond chance")
    return (f"{chosen}, {why}; {choice['folds']}-fold cross-validation accuracy: "
            + ", ".join(one(m, c) for m, c in candidates.items()))


def kept_phrase(d: dict, times: str = "×") -> str:
    """The sentence's middle for `distillation` `d` ("The student ... "): the share kept where there is one (`kept`),
    else the difference from the teacher, and the speed-up."""
    main, speed = d.get("main_metric"), f"{d['speedup']:.2f}{times}"
    if "kept" in d:
        return f"keeps {d['kept']:.1%} of the teacher's {main} at {speed} its rows/s"
    if "difference" in d:
        return f"is {d['difference']:+.4g} from the teacher's {main} (student minus teacher) at {speed} its rows/s"
    return f"runs at {speed} the teacher's rows/s"
