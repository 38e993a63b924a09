"""From scores to labels: the decision rule (`rule.DecisionRule`: temperature, thresholds, abstain; ECE, NLL, threshold
search) and fitting it on a run's validation outputs, measured cross-fitted (`fit`)."""
