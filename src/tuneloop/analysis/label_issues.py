"""Training rows whose given label is probably wrong.

Every training forward pass already computes the model's probabilities for its rows; `TrainingDynamics` keeps
them per row and epoch, on the device (no host sync). In the first epoch each row is scored before the model has
learned from it, so those probabilities are out-of-sample; later epochs show whether the model could fit the
label at all (a mislabelled row keeps a low probability for its label, a hard but correct one climbs). At the end
the sums are added up over processes and each row gets the mean probability of every class over the epochs it
was seen in (its windows averaged first, with --windows). Rows are ranked by the probability of their given label,
lowest first ("self-confidence", Swayamdipta et al. 2020's "confidence"), and cleanlab's confident learning
(`cleanlab.filter.find_label_issues`, Northcutt et al. 2021) marks those it estimates are mislabelled, from the
per-class thresholds of the same probabilities. Single- and multi-label classification; regression has none.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from ..objective import Objective

log = logging.getLogger("tuneloop")



def mean_probabilities(sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows seen, their mean probabilities over the epochs they were seen in, how many epochs that was)."""
    seen_in = counts > 0                                            # epochs × rows
    per_epoch = sums / np.maximum(counts, 1)[..., None]             # a row's windows averaged within an epoch
    epochs_seen = seen_in.sum(0)
    rows = np.flatnonzero(epochs_seen)
    mean = (per_epoch * seen_in[..., None]).sum(0)[rows] / epochs_seen[rows, None]
    return rows, mean, epochs_seen[rows]


def rank(given: np.ndarray, probs: np.ndarray, objective: Objective
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(order, self-confidence, cleanlab's flags or None): rows by the probability of their given label, lowest
    first (multi-label: the lowest over the labels, each counted as present or absent)."""
    confidence = objective.given_confidence(probs, given)
    flags, multi_label = None, objective.multi_label
    try:
        with warnings.catch_warnings():
            # imported here: cleanlab's import runs warnings.filterwarnings("ignore") (datalab's
            # spurious_correlation module), which would silence every warning of the user's process from then on
            from cleanlab.filter import find_label_issues

            warnings.simplefilter("ignore")       # cleanlab's own switch: label lists and per-label probabilities
            labels = [list(np.flatnonzero(row)) for row in objective.binarize(given)] if multi_label else given
            pred_probs = probs if multi_label else probs / probs.sum(1, keepdims=True)
            flags = np.asarray(find_label_issues(labels, pred_probs, multi_label=multi_label, n_jobs=1), dtype=bool)
    except Exception as e:  # noqa: BLE001 - too few rows per class and the like: the ranking still stands
        log.warning(f"label issues: confident learning (cleanlab) could not run ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:160] if str(e) else ''}); ranking by self-confidence only")
    return np.argsort(confidence, kind="stable"), confidence, flags


def issue_rows(table, given_by_row: np.ndarray, arrays: dict[str, np.ndarray], schema) -> tuple[list[dict], dict]:
    """label_issues.csv's rows (every training row seen, most probably mislabelled first) and a summary.
    `table`: the training split's canonical table; `given_by_row`: each row's encoded label, by `doc`."""
    objective = schema.objective
    rows, probs, epochs = mean_probabilities(arrays["sums"], arrays["counts"])
    given, suggested = given_by_row[rows], objective.predicted_from(probs)
    order, confidence, flags = rank(objective.gold(given), probs, objective)
    columns = {c: table[c] for c in ("idx", "id", "pos", "text_a", "text_b")}
    position = np.full(int(max(np.max(columns["idx"]), rows.max())) + 1, -1)
    position[np.asarray(columns["idx"])] = np.arange(len(table))
    pair = columns["text_b"][0] is not None
    out = []
    for i in order:
        at = int(position[rows[i]])
        record = {"id": columns["id"][at], "row": columns["pos"][at]}
        record.update({"text_a": columns["text_a"][at], "text_b": columns["text_b"][at]} if pair else
                      {"text": columns["text_a"][at]})
        record.update(given=objective.name(given[i], schema), suggested=objective.name(suggested[i], schema))
        record.update(p_given=round(float(confidence[i]), 6),
                      likely_wrong="" if flags is None else bool(flags[i]), epochs=int(epochs[i]))
        out.append(record)
    method = "mean probability of the given label over the training epochs (lowest first); " + \
        ("flags: cleanlab find_label_issues" if flags is not None else "no confident-learning flags")
    summary = {"rows": len(out), "flagged": None if flags is None else int(flags.sum()), "method": method}
    return out, summary
