"""What a problem type means for numbers: one `Objective` per problem type (single-label, multi-label,
regression), built once from the label schema (`objective_for(schema)`), holding the training loss (class
weights or pos_weight; row weights and soft target distributions), the evaluation loss, probabilities,
predictions, window pooling, calibration and the one binarisation of multi-label targets. Code elsewhere asks
the objective instead of switching on the problem type; a new kind of target is a method here, a new problem
type a subclass in `kinds.py`."""

from __future__ import annotations

from .base import Objective
from .kinds import MultiLabel, Regression, SingleLabel, objective_for

__all__ = ["Objective", "SingleLabel", "MultiLabel", "Regression", "objective_for"]
