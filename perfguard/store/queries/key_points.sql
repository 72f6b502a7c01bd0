-- A key figure's point: the point of its test case's sweep of the same metric (`curve`,
-- a btree per month) that holds the same value. Read from `sample`, each test case's
-- points went through the month's BRIN index, only as good as its summaries.
SELECT tc.check_name, tc.params, p.name AS partition, e.name AS environ, m.name AS metric,
       (array_agg(pt.coords ORDER BY pt.id))[1] AS coords
FROM testcase tc JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id JOIN run r ON r.id = tc.run_id
JOIN sample k ON k.testcase_id = tc.id AND k.started_at = r.started_at AND k.point_id = 0
JOIN curve cv ON cv.testcase_id = tc.id AND cv.started_at = r.started_at
             AND cv.metric_id = k.metric_id
CROSS JOIN LATERAL unnest(cv.point_ids, cv.point_values) AS s(point_id, value)
JOIN metric m ON m.id = k.metric_id JOIN point pt ON pt.id = s.point_id
WHERE tc.run_id = %(run_id)s AND s.value = k.value
GROUP BY 1, 2, 3, 4, 5
