-- A run's node-hours and its jobs' queue wait (the run_cost view); no row: not recorded.
SELECT jobs, node_hours, queue_wait_s, longest_wait_s FROM run_cost WHERE run_id = %s
