-- A run's outcome (the repeatable view run_outcome: one rule for CLI, report, Grafana).
SELECT failed, why, outcome FROM run_outcome WHERE run_id = %s
