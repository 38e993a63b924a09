"""Options a user set that do nothing in this run: each needs another option (`--lora-r` without `--lora`,
`--window-pooling` without `--windows`, `--optimize-threshold-for` without `--decision threshold`). They are kept
and recorded as given (a preset or a shared --config file may carry them), and said once, so that a typo'd command
does not train as if they applied."""

from __future__ import annotations

# option -> (what it needs, as the message says it; whether the config has it)
NEEDS = {
    "window_pooling": ("--windows", lambda c: c.windows is not None),
    **{name: ("--lora", lambda c: c.lora) for name in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")},
    **{name: ("--method setfit", lambda c: c.method == "setfit")
       for name in ("setfit_iterations", "setfit_epochs", "setfit_lr", "setfit_batch_size", "setfit_head")},
    "setfit_pooling": ("--method setfit or probe", lambda c: c.method in ("setfit", "probe")),
    "optimize_threshold_for": ("--decision threshold", lambda c: c.decision == "threshold"),
    "threshold_confidence": ("--decision threshold", lambda c: c.decision == "threshold"),
    "abstain_label": ("--abstain-below", lambda c: c.abstain_below is not None),
    # the probe and SetFit's fitted head take no step of the loop: nothing to checkpoint
    "save_every": ("a training loop (--method finetune, or --setfit-head end-to-end)", lambda c: (
        c.method not in ("probe", "setfit") or c.method == "setfit" and c.setfit_head != "logistic")),
}


def idle_options(config, labels=None) -> list[str]:
    """One line per option the user set (config.chosen) that this run's other options (and `labels`, the data's
    LabelSchema) leave without effect; an option at its default value is not said (a --config file that spells the
    default out)."""
    defaults = type(config).__dataclass_fields__
    needs_of = dict(NEEDS)
    if labels is not None:              # the class F1 and a cut-off are of: binary single-label data only
        needs_of["positive_label"] = ("two classes of single-label data", lambda c: labels.num_labels == 2 and
                                      labels.problem_type == "single_label_classification")
    said = []
    for name, (needs, applies) in needs_of.items():
        if name in (config.chosen or ()) and getattr(config, name) != defaults[name].default and not applies(config):
            flag = f"--{name.replace('_', '-')}"
            said.append(f"{flag} {getattr(config, name)!r} does nothing without {needs}; it is recorded as given "
                        "(leave it out, or add what it needs)")
    return said
