-- This run's sized curves (of the passed test cases): what there is to draw, by variant.
SELECT DISTINCT tc.check_name, tc.params, p.name AS partition, e.name AS environ,
       m.name AS metric, tc.variant
FROM run r
JOIN sample_block b ON b.run_id = r.id AND b.started_at = r.started_at
                   AND b.point_ids <> '{0}'
CROSS JOIN LATERAL unnest(b.testcase_ids) AS t(id)
JOIN judged_testcase tc ON tc.id = t.id AND tc.state = 'pass'
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN metric m ON m.id = b.metric_id
WHERE r.id = %(run)s
  AND EXISTS (SELECT 1 FROM sized_point pt WHERE pt.id = ANY(b.point_ids))
