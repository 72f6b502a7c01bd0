"""Judge: thresholds, history, rules, curves, change points, verdicts,
fingerprint differences."""
