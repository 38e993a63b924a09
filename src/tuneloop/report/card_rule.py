"""The model card's words on the decision rule saved with the model (tuneloop.json → decision, decision/rule.py):
what `tuneloop predict` and `evaluate` apply, the Problem type bullet's cut-off, and that the card's metrics
(results.json's eval: argmax, 0.5 per label, the raw probabilities) come before it."""

from __future__ import annotations

from ..decision.rule import DecisionRule
from .fmt import fmt_metric, md_code, md_text


def saved_rule(metadata: dict) -> DecisionRule | None:
    """The rule of a model folder's tuneloop.json; None where it has none (regression, a model saved without)."""
    return DecisionRule.from_dict(metadata.get("decision"))


def _decides(rule: DecisionRule | None) -> bool:
    """Whether the rule gives other answers than argmax / 0.5 per label: thresholds or an abstain level."""
    return rule is not None and (bool(rule.thresholds) or rule.abstain_below is not None)


def _calibrates(rule: DecisionRule | None) -> bool:
    return rule is not None and rule.temperature != 1.0


def problem_note(note: str, metadata: dict) -> str:
    """The Problem type bullet's note: a multi-label model under tuned thresholds does not cut at 0.5."""
    rule = saved_rule(metadata)
    if rule is None or not rule.thresholds or not rule.problem.multi_label:
        return note
    return (" (one sigmoid per label; a label is predicted when its calibrated probability is above its own "
            "threshold, see Decision rule below; the raw scores cut at 0.5)")


def metrics_note(metadata: dict) -> list[str]:
    """After the metrics table: what its figures are when the saved rule would change them."""
    rule = saved_rule(metadata)
    if _decides(rule):
        raw = "each label above 0.5" if rule.problem.multi_label else "the most probable label"
        return [f"These figures are the raw model's ({raw}, and the loss of its raw probabilities), before the "
                "decision rule below, as results.json's `eval` keeps them to compare runs; `tuneloop evaluate "
                "--model MODEL` measures the model under the rule, as `tuneloop predict` answers.", ""]
    if _calibrates(rule):
        return ["The loss is that of the raw probabilities, before the decision rule's temperature (below), which "
                "changes no prediction; `tuneloop evaluate --model MODEL` gives the calibrated one.", ""]
    return []


def _decision_text(rule: DecisionRule, names: list[str]) -> str:
    """What the rule answers with, in words."""
    sure = f", held with {rule.confidence:.0%} confidence" if rule.confidence else ""
    chosen = f"chosen for {md_text(rule.objective)}{sure}"
    if rule.problem.multi_label:
        return (f"every label whose probability is above its own threshold ({chosen}; the table below)"
                if rule.thresholds else "every label whose probability is above 0.5")
    if rule.thresholds and len(names) == 2:
        positive, other = names[rule.positive], names[1 - rule.positive]
        return (f"{md_code(positive)} when its probability is at least {rule.thresholds[0]:.4g} ({chosen}), else "
                f"{md_code(other)}")
    return "the label with the highest probability (argmax)"


def _bullets(rule: DecisionRule, names: list[str]) -> list[str]:
    squash = "sigmoid(logits / T) per label" if rule.problem.multi_label else "softmax(logits / T)"
    calibration = (f"temperature T = {rule.temperature:.4g}: the probabilities are {squash}" if _calibrates(rule)
                   else "none (T = 1): the probabilities are the raw scores")
    side = " (multi-label: of the least certain label's decided side)" if rule.problem.multi_label else ""
    abstain = (f"a prediction whose calibrated probability{side} is under {rule.abstain_below:g} comes back as "
               f"{md_code(rule.abstain_label)}" if rule.abstain_below is not None else "none: every row is answered")
    lines = [f"- **Calibration:** {calibration}", f"- **Decision:** {_decision_text(rule, names)}",
             f"- **Abstaining:** {abstain}"]
    return lines + [f"- **Note:** {md_text(note)}" for note in rule.notes] + [""]


def _measured(decision: dict, rule_notes: list[str]) -> list[str]:
    """results.json's decision: the metrics at the default and the tuned cut-offs, coverage when abstaining."""
    lines = []
    thresholds = decision.get("thresholds") or {}
    if thresholds.get("at_default"):
        tuned = thresholds.get("at_tuned") or {}
        lines += [f"Measured {md_text(decision.get('measured', ''))}:", "",
                  "| metric | default cut-off | tuned cut-off |", "|---|---:|---:|"]
        lines += [f"| {md_text(k)} | {fmt_metric(v)} | {fmt_metric(tuned.get(k))} |"
                  for k, v in thresholds["at_default"].items()] + [""]
        # what the figures measure (cut-offs the halves could not assure or tune); the rule's own notes are above
        caveats = [note for note in decision.get("notes") or [] if note not in rule_notes]
        lines += [f"Note: {md_text(note)}" for note in caveats] + ([""] if caveats else [])
    abstain = decision.get("abstain") or {}
    if abstain.get("level") is not None and abstain.get("coverage") is not None:
        accuracy = abstain.get("accuracy")
        lines += [f"Abstaining below {abstain['level']:g} answers {abstain['coverage']:.1%} of the rows"
                  + (f", {accuracy:.4f} of them right" if accuracy is not None else "")
                  + f" ({md_text(decision.get('measured', ''))}).", ""]
    return lines


def decision_section(metadata: dict, results: dict, names: list[str]) -> list[str]:
    """## Decision rule: the rule `tuneloop predict` and `evaluate` apply, its parts, and what it was measured to do;
    nothing for a model without one (regression)."""
    rule = saved_rule(metadata)
    if rule is None:
        return []
    fitted = f", fitted on {md_text(rule.fitted_on)}" if rule.fitted_on else ""
    lines = ["## Decision rule", "",
             "Saved with the model (`tuneloop.json` → `decision`) and applied by `tuneloop.load`, `tuneloop predict` "
             "and `tuneloop evaluate` (`--raw` gives the raw scores; a plain 🤗 Transformers pipeline does not apply "
             f"it): **{md_text(rule.describe())}**{fitted}.", "", *_bullets(rule, names)]
    if rule.thresholds and rule.problem.multi_label and len(rule.thresholds) == len(names):
        lines += ["| label | threshold |", "|---|---:|"]
        lines += [f"| {md_text(n)} | {t:.4g} |" for n, t in zip(names, rule.thresholds, strict=True)] + [""]
    return lines + _measured(results.get("decision") or {}, rule.notes)
