-- A key figure's point: the point of its test case's sweep of the same metric that holds
-- the same value (the run's blocks, 0027: read by run and check).
SELECT tc.check_name, tc.params, p.name AS partition, e.name AS environ, m.name AS metric,
       (array_agg(pt.coords ORDER BY pt.id))[1] AS coords
FROM testcase tc JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id JOIN run r ON r.id = tc.run_id
JOIN key_figure k ON k.run_id = r.id AND k.started_at = r.started_at
                 AND k.check_name = tc.check_name AND k.testcase_id = tc.id
JOIN sample s ON s.run_id = r.id AND s.started_at = r.started_at
             AND s.check_name = tc.check_name AND s.testcase_id = tc.id
             AND s.metric_id = k.metric_id AND s.point_id <> 0
JOIN metric m ON m.id = k.metric_id JOIN point pt ON pt.id = s.point_id
WHERE tc.run_id = %(run_id)s AND s.value = k.value
GROUP BY 1, 2, 3, 4, 5
