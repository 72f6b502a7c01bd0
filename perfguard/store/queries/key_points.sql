-- A key figure's point: the point of its test case's sweep of the same metric that holds
-- the same value (the run's blocks, 0027: read by run). The run's key figures and its
-- sweeps' values are each taken once and matched by hash: joined in one plan, PostgreSQL
-- unnested a key-figure block again for every sweep value (2.4 s for a run of 2,000 test
-- cases).
WITH keys AS MATERIALIZED (
    SELECT k.testcase_id, k.metric_id, k.value FROM key_figure k
    WHERE k.run_id = %(run_id)s
      AND k.started_at = (SELECT started_at FROM run WHERE id = %(run_id)s)),
points AS MATERIALIZED (  -- the run as a constant: what reaches each branch of the view
    SELECT s.testcase_id, s.metric_id, s.point_id, s.value FROM sample s
    WHERE s.run_id = %(run_id)s
      AND s.started_at = (SELECT started_at FROM run WHERE id = %(run_id)s)
      AND s.point_id <> 0)
SELECT tc.check_name, tc.params, p.name AS partition, e.name AS environ, m.name AS metric,
       (array_agg(pt.coords ORDER BY pt.id))[1] AS coords
FROM keys k JOIN points s USING (testcase_id, metric_id, value)
JOIN testcase tc ON tc.id = k.testcase_id
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN metric m ON m.id = k.metric_id JOIN point pt ON pt.id = s.point_id
GROUP BY 1, 2, 3, 4, 5
