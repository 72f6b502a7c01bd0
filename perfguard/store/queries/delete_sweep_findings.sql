-- A sweep run's findings, before they are stored again.
DELETE FROM sweep_finding WHERE run_id = %s
