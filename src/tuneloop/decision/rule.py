"""The decision rule: how a model's scores become a prediction a user acts on.

Three parts, each fitted on validation outputs after training and saved with the model (model/tuneloop.json):
- a **temperature** T (Guo et al. 2017): probabilities are softmax(logits / T) (sigmoid for multi-label), T chosen
  to minimise the negative log-likelihood; it changes no argmax, only how far the probabilities can be trusted;
- **thresholds**: one cut-off on the positive class's probability (binary: --positive-label, by default the
  second label) or one per label (multi-label), chosen for a metric: precision at a recall or recall at a
  precision (the best cut-off of the rows), F1 or macro-F1 (bagged: the median of bootstrap resamples' best);
- an **abstain** level: a prediction whose calibrated probability (of the predicted class; multi-label: of the
  least certain label's decided side) is under it comes back as an explicit abstain label.

Thresholds act as a shift of the logits (p ≥ t ⇔ logit(p) ≥ logit(t)), so `decision_logits` feeds the metrics code
unchanged. Fitting on the rows one then reports on is optimistic: `fit.py` cross-fits and says which it did.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ..config.parsing import parse_objective
from ..objective import Objective, SingleLabel, objective_for
from ..tasks import MULTI_LABEL as MULTI, SINGLE_LABEL as SINGLE  # noqa: F401 - names callers pass as `kind`


def logit(p: np.ndarray | float) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def scaled_probabilities(logits: np.ndarray, kind: str | Objective, temperature: float = 1.0) -> np.ndarray:
    """`kind`, here and below: the Objective, or its problem type's name."""
    return objective_for(kind).calibrated(logits, temperature)


@dataclass
class DecisionRule:
    """What model/tuneloop.json's "decision" holds; the identity rule (T = 1, argmax, no abstain) by default."""

    kind: str = SingleLabel.kind             # the problem type's name (`problem`: its Objective)
    temperature: float = 1.0
    thresholds: list[float] | None = None    # binary: [t] on the positive class; multi-label: one per label
    positive: int = 1                        # binary: the class whose probability the threshold cuts
    objective: str | None = None             # what the thresholds were chosen for
    confidence: float | None = None          # precision@R / recall@P: the constraint held with this confidence
    abstain_below: float | None = None
    abstain_label: str = "abstain"
    fitted_on: str = ""                      # which rows the parts were fitted on, in words
    notes: list[str] = field(default_factory=list)

    @property
    def problem(self) -> Objective:
        """The Objective of `kind` (`objective` is what the thresholds were chosen for)."""
        return objective_for(self.kind)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "DecisionRule | None":
        if not d:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def without_abstain(self) -> "DecisionRule":
        return dataclasses.replace(self, abstain_below=None)

    def describe(self) -> str:
        """One line for a predictions file and the console, e.g. 'temperature 1.42; threshold 0.37 (f1)'."""
        parts = [f"temperature {self.temperature:.3g}"]
        if self.thresholds:
            cut = ", ".join(f"{t:.3g}" for t in self.thresholds)
            sure = f", {self.confidence:.0%} confidence" if self.confidence else ""
            parts.append(f"threshold{'s' if len(self.thresholds) > 1 else ''} {cut} ({self.objective}{sure})")
        else:
            parts.append(self.problem.decision_text)
        if self.abstain_below is not None:
            parts.append(f"{self.abstain_label} below {self.abstain_below:g}")
        return "; ".join(parts)

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        return self.problem.calibrated(logits, self.temperature)

    def decision_logits(self, logits: np.ndarray) -> np.ndarray:
        """Logits whose argmax (multi-label: sign) is the rule's decision; the metrics code takes them as they are."""
        z = np.asarray(logits, dtype=np.float64) / self.temperature
        if not self.thresholds:
            return z
        return self.problem.shifted(z, logit(np.asarray(self.thresholds)), self.positive)

    def predictions(self, logits: np.ndarray) -> np.ndarray:
        return self.problem.predictions(self.decision_logits(logits))

    def abstains(self, logits: np.ndarray) -> np.ndarray:
        """True where the rule abstains."""
        if self.abstain_below is None:
            return np.zeros(len(logits), dtype=bool)
        return self.problem.confidence(self.probabilities(logits), self.predictions(logits)) < self.abstain_below


def confidence(probs: np.ndarray, predictions: np.ndarray, kind: str | Objective) -> np.ndarray:
    """The probability of the decided answer: of the predicted class (the top one under argmax); multi-label: of
    the decided side (p or 1 - p) of the least certain label."""
    return objective_for(kind).confidence(probs, predictions)


# ---------------------------------------------------------------------------------------------- temperature
def nll(probs: np.ndarray, labels: np.ndarray, kind: str | Objective) -> float:
    """Mean negative log-likelihood of the labels (multi-label: per (row, label), as binary cross-entropy)."""
    return objective_for(kind).nll(probs, labels)


TEMPERATURE_RANGE = (0.05, 20.0)


def fit_temperature(logits: np.ndarray, labels: np.ndarray, kind: str | Objective) -> float:
    """The T in TEMPERATURE_RANGE that minimises the NLL of softmax(logits / T) (a bounded 1-D search over log T)."""
    from scipy.optimize import minimize_scalar

    objective = objective_for(kind)

    def loss(log_t: float) -> float:
        return objective.nll(objective.calibrated(logits, math.exp(log_t)), labels)

    result = minimize_scalar(loss, bounds=tuple(math.log(t) for t in TEMPERATURE_RANGE), method="bounded",
                             options={"xatol": 1e-4})
    return float(math.exp(result.x))


def _binned(probs: np.ndarray, labels: np.ndarray, kind: str | Objective, bins: int):
    """(confidence, 1.0 where right, bin) per prediction: the top label (single-label), or every (row, label)
    probability as a binary prediction of "present" (multi-label)."""
    conf, correct = objective_for(kind).calibration_pairs(probs, labels)
    return conf, correct, np.minimum((conf * bins).astype(np.int64), bins - 1)


def ece(probs: np.ndarray, labels: np.ndarray, kind: str | Objective, bins: int = 15) -> float:
    """Expected calibration error over `bins` equal-width bins: of the top-label confidence (single-label), or
    of every (row, label) probability taken as a binary prediction (multi-label)."""
    conf, correct, which = _binned(probs, labels, kind, bins)
    total = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            total += inside.mean() * abs(conf[inside].mean() - correct[inside].mean())
    return float(total)


def reliability(probs: np.ndarray, labels: np.ndarray, kind: str | Objective, bins: int = 15) -> list[list[float]]:
    """[bin centre, mean confidence, accuracy, rows] per non-empty bin: the reliability diagram's points."""
    conf, correct, which = _binned(probs, labels, kind, bins)
    return [[(b + 0.5) / bins, float(conf[which == b].mean()), float(correct[which == b].mean()),
             int((which == b).sum())] for b in range(bins) if (which == b).any()]


# ---------------------------------------------------------------------------------------------- thresholds
def _cut_table(scores: np.ndarray, positive: np.ndarray):
    """Every distinct decision on these rows (positive when score ≥ cut), highest cut first: above the top score
    (nothing positive), then midway below each distinct score; with TP, FP, FN, TN at each."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], positive[order].astype(np.int64)
    last = np.r_[np.flatnonzero(np.diff(s) != 0), len(s) - 1] if len(s) else np.array([], dtype=np.int64)
    lower = np.r_[s[last[1:]], 0.0]                                 # the next lower distinct score
    cuts = np.r_[(1.0 + s[0]) / 2 if len(s) else 0.5, (s[last] + lower) / 2]
    tp, fp = np.r_[0, np.cumsum(y)[last]], np.r_[0, np.cumsum(1 - y)[last]]
    n_pos = int(y.sum())
    return cuts, tp, fp, n_pos - tp, len(y) - n_pos - fp


def best_threshold(scores: np.ndarray, positive: np.ndarray, objective: str) -> tuple[float, bool]:
    """(cut-off, whether the objective's constraint could be met) maximising the objective on these rows;
    ties go to the highest cut-off (the fewest positives)."""
    name, target = parse_objective(objective)
    cuts, tp, fp, fn, tn = _cut_table(np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool))
    f1_pos = 2 * tp / np.maximum(2 * tp + fp + fn, 1)
    f1_neg = 2 * tn / np.maximum(2 * tn + fn + fp, 1)
    precision = tp / np.maximum(tp + fp, 1)             # 0 when nothing is predicted positive
    recall = np.where(tp + fn > 0, tp / np.maximum(tp + fn, 1), 0.0)
    met = True
    if name == "f1":
        value = f1_pos
    elif name == "macro-f1":
        value = (f1_pos + f1_neg) / 2
    else:
        goal, constraint = (precision, recall) if name == "precision" else (recall, precision)
        feasible = constraint >= target - 1e-12
        met = bool(feasible.any())
        value = np.where(feasible, goal, -1.0) if met else constraint   # not reachable: come as close as possible
    return float(cuts[int(np.argmax(value))]), met


BAG_DRAWS = 50     # bootstrap resamples whose best cut-offs' median is a tuned F1 / macro-F1 cut-off


def bagged_threshold(scores: np.ndarray, positive: np.ndarray, objective: str, seed: int = 0,
                     draws: int = BAG_DRAWS) -> tuple[float, bool]:
    """best_threshold's (cut-off, met), but for f1 and macro-f1 the cut-off is the median, on the logit scale, of
    the best cut-offs of `draws` bootstrap resamples of the rows (bagging, Breiman 1996). An F1 curve is flat and
    jagged near its top, so the best cut of one sample moves with every row it holds; the median of many
    resamples' best cuts moves less. On rows no cut was fitted on (benchmarks/check_threshold_bagging.py: six binary
    models, 40-200 validation rows) it scored a higher F1 / macro-F1 than the one best cut in 69 of 72 cells, by
    0.003 on average. A precision@R / recall@P cut-off is the edge of a constraint, not the top of a curve: for
    those this is best_threshold's (fit_thresholds takes theirs from assured_threshold)."""
    scores, positive = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    cut, met = best_threshold(scores, positive, objective)
    if parse_objective(objective)[0] not in ("f1", "macro-f1") or not 0 < positive.sum() < len(positive):
        return cut, met
    rng, cuts = np.random.default_rng(seed), []
    for _ in range(draws):
        rows = rng.integers(0, len(scores), len(scores))
        if 0 < positive[rows].sum() < len(rows):               # a resample with both sides has a best cut
            cuts.append(logit(best_threshold(scores[rows], positive[rows], objective)[0]))
    return (float(1 / (1 + np.exp(-np.median(cuts)))) if cuts else cut), met


def lower_bound(successes: np.ndarray, trials: np.ndarray, confidence: float) -> np.ndarray:
    """The one-sided Clopper-Pearson lower bound of a proportion: the rate of which `successes` of `trials` is at
    least with probability `confidence` (0 for no successes)."""
    from scipy.stats import beta

    successes, trials = np.asarray(successes), np.asarray(trials)
    bound = beta.ppf(1 - confidence, np.maximum(successes, 1), trials - successes + 1)
    return np.where(successes > 0, bound, 0.0)


def floor_of(objective: str | None) -> tuple[str, float] | None:
    """precision@R / recall@P: (the metric held as a floor, its target), recall and R / precision and P; None for
    the other objectives (F1, macro-F1: no floor)."""
    if not objective:
        return None
    name, target = parse_objective(objective)
    return {"precision": ("recall", target), "recall": ("precision", target)}.get(name)


# recall@P's candidate cut-offs: those that flag these shares of the rows, chosen from the scores alone (not the
# labels), tested in that order, fewest flagged first (assured_threshold). On the six models of
# benchmarks/check_threshold_confidence.py (2026-11-29) they assured a precision floor in 1,277 of 7,200 draws, held on
# new rows in 94.4% of them; bounded all at once (Bonferroni), in 843 (held 99.3%); 25 cut-offs fixed on the logit
# scale, in 469 under Bonferroni (many of them empty; git history).
PRECISION_SHARES = np.linspace(0.1, 1.0, 10)


def precision_cuts(scores: np.ndarray) -> np.ndarray:
    """The cut-offs that flag PRECISION_SHARES of these rows (midway below the last row flagged), highest first; where
    tied scores make two flag the same rows, the higher one."""
    ranked = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    flagged = np.clip(np.round(PRECISION_SHARES * len(ranked)).astype(int), 1, len(ranked))
    cuts = np.unique((ranked[flagged - 1] + np.r_[ranked, 0.0][flagged]) / 2)[::-1]
    counts = len(ranked) - np.searchsorted(ranked[::-1], cuts, side="left")      # rows >= each cut
    return cuts[np.r_[True, np.diff(counts) > 0]]


def assured_threshold(scores: np.ndarray, positive: np.ndarray, objective: str, confidence: float
                      ) -> tuple[float, str]:
    """precision@R / recall@P: (cut-off, how it was chosen). The best precision (recall) among the cut-offs whose
    constraint, the recall (precision), has a lower bound (lower_bound) of at least R (P) on these rows — "assured":
    it holds on new rows like these with probability `confidence`. Without one (or with `confidence` 0),
    best_threshold's: the best cut-off meeting the constraint on these rows ("rows"), else the closest ("unmet").

    A recall floor is searched over every cut of these rows: the recall grows as the cut falls, so the assured
    cut-offs are those below one edge, and that edge's bound is the bound of one cut-off. A precision floor is not
    monotone: searched over every cut, a run of right answers at the top of some sample passes a bound it would not
    pass on new rows (tests/test_decision.py plants a model whose precision stays under 0.78: searched over every
    cut, 0.8 was "assured" in 20% of 400-row samples). So it is tested at the cut-offs of precision_cuts, chosen from
    the scores alone, in a fixed sequence (Westfall & Krishen 2001): fewest rows flagged first, each at the full
    `confidence`, the assured ones those before the first that fails, so that the chance of any false "assured" stays
    1 - `confidence` however many are tested. A cut-off that flags too few rows to pass even were all of them right
    is left out beforehand (by its count alone). Measured on trained models:
    benchmarks/check_threshold_confidence.py."""
    name, target = parse_objective(objective)
    cut, met = best_threshold(scores, positive, objective)
    if not met:
        return cut, "unmet"
    if confidence <= 0:
        return cut, "rows"
    scores, positive = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    if name == "precision":
        cuts, tp, fp, fn, _ = _cut_table(scores, positive)
        assured = lower_bound(tp, tp + fn, confidence) >= target - 1e-12
    else:
        cuts = precision_cuts(scores)                     # highest first: the fewest rows flagged first
        chosen = scores[:, None] >= cuts
        flagged = chosen.sum(0)
        possible = lower_bound(flagged, flagged, confidence) >= target - 1e-12      # could pass at all
        cuts, chosen = cuts[possible], chosen[:, possible]
        tp, fp = (chosen & positive[:, None]).sum(0), (chosen & ~positive[:, None]).sum(0)
        fn = positive.sum() - tp
        assured = np.cumprod(lower_bound(tp, tp + fp, confidence) >= target - 1e-12).astype(bool)
    if not assured.any():
        return cut, "rows"
    goal = tp / np.maximum(tp + fp, 1) if name == "precision" else tp / np.maximum(tp + fn, 1)
    return float(cuts[int(np.argmax(np.where(assured, goal, -1.0)))]), "assured"


def constraint_bound(scores: np.ndarray, positive: np.ndarray, objective: str, cut: float,
                     confidence: float) -> float:
    """precision@R / recall@P: the lower bound, at `confidence`, of the constraint's rate (recall / precision) at this
    cut-off on these rows, as assured_threshold tests it."""
    name, _ = parse_objective(objective)
    chosen, positive = np.asarray(scores) >= cut, np.asarray(positive, dtype=bool)
    tp, fp, fn = (chosen & positive).sum(), (chosen & ~positive).sum(), (~chosen & positive).sum()
    return float(lower_bound(tp, tp + fn if name == "precision" else tp + fp, confidence))


def fit_thresholds(probs: np.ndarray, labels: np.ndarray, kind: str | Objective, objective: str, positive: int = 1,
                   seed: int = 0, tune: np.ndarray | None = None, confidence: float = 0.0
                   ) -> tuple[list[float], dict[str, list[int]]]:
    """Binary: [cut-off on the positive class]; multi-label: one per label (F1 / macro-F1: bagged_threshold's, its
    resamples drawn with `seed`; precision@R / recall@P: assured_threshold's with `confidence`); a label whose `tune`
    is False keeps 0.5. Returns (thresholds, misses): misses["unreachable"], the columns whose objective could not be
    reached on these rows (their closest cut-off is used); misses["unassured"], those whose constraint is met on
    these rows but not with `confidence` (the rows' best cut-off is used)."""
    misses: dict[str, list[int]] = {"unreachable": [], "unassured": []}
    problem, constrained = objective_for(kind), floor_of(objective) is not None
    columns = zip(problem.cut_scores(probs, positive).T, problem.cut_targets(labels, positive).T, strict=True)
    cuts = []
    for k, (scores, positive) in enumerate(columns):
        if tune is not None and not tune[k]:
            cuts.append(0.5)
            continue
        if constrained:
            cut, how = assured_threshold(scores, positive, objective, confidence)
        else:
            cut, met = bagged_threshold(scores, positive, objective, seed + k)
            how = "assured" if met else "unmet"
        if how == "unmet":
            misses["unreachable"].append(k)
        elif how == "rows" and confidence > 0:
            misses["unassured"].append(k)
        cuts.append(round(cut, 6))
    return cuts, misses


def coverage_curve(probs: np.ndarray, labels: np.ndarray, kind: str | Objective, predictions: np.ndarray,
                   levels=(0.0, *np.round(np.arange(0.5, 1.0, 0.05), 2))) -> list[list[float]]:
    """[abstain level, coverage, accuracy on the rows kept] for each level (multi-label accuracy: exact match);
    level 0 keeps every row."""
    objective = objective_for(kind)
    conf, right = objective.confidence(probs, predictions), objective.correct(predictions, labels)
    out = []
    for level in levels:
        kept = conf >= level
        out.append([float(level), round(float(kept.mean()), 4),
                    round(float(right[kept].mean()), 4) if kept.any() else None])
    return out
