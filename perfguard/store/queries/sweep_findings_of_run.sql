-- The sweep findings stored with the run, in the order they were found.
SELECT kind, subject, hca, evidence FROM sweep_finding WHERE run_id = %s ORDER BY id
