"""Gathered inference over DataLoaders on every process (`inference`) and metric computation, window pooling and per-
class figures (`metrics`)."""
