-- The allreduce scaling series' key figure (its smallest size) per node count, software
-- and SHARP: seed 003's chart.
SELECT (k.params->>'nodes')::int AS nodes, coalesce(k.params->>'sharp', 'off') AS sharp,
       k.value
FROM key_verdict k
WHERE k.run_id = %s AND k.check_name = 'OsuAllreduceScalingCheck' AND k.metric = 'latency'
  AND k.testcase_state = 'pass'
ORDER BY 1, 2
