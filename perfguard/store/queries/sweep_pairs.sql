-- A sweep run's pair measurements (a failed one: metric 'failed', its test named).
SELECT hca, memory, server, client, metric, unit, value, failed_test
FROM sweep_pair WHERE run_id = %s ORDER BY server, client
