-- The lines each accepted level's run measured (a value in one of its blocks): (level
-- id, check, params as jsonb text, partition, environ, metric). An accept covers these
-- (and those measured before it), never a check that first ran later.
SELECT DISTINCT a.id, tc.check_name, tc.params::text, p.name, e.name, m.name
FROM accepted_level a JOIN run f ON f.id = a.from_run
JOIN sample_block b ON b.run_id = f.id AND b.started_at = f.started_at
CROSS JOIN LATERAL unnest(b.testcase_ids) AS t(id)
JOIN testcase tc ON tc.id = t.id AND NOT tc.superseded
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN metric m ON m.id = b.metric_id
WHERE a.id = ANY(%(levels)s)
