-- The drawn curves' values (their variants): this run's, and for each check the latest
-- earlier run that had it; each test case's row of its blocks alone (the dashboards' way).
-- Through series_value the runs' every curve was unpacked first (5 s for 2,000 test cases
-- at 2·10^7 samples; with the runs not named as a list, every curve of the system: 28 s).
WITH cur AS (SELECT r.id, r.started_at, r.system_id FROM run r WHERE r.id = %(run)s),
checks AS (SELECT DISTINCT check_name FROM testcase WHERE run_id = %(run)s),
prev AS (SELECT DISTINCT ON (tc.check_name) tc.check_name, tc.run_id
         FROM testcase tc JOIN run r ON r.id = tc.run_id, cur
         WHERE r.system_id = cur.system_id AND r.started_at < cur.started_at
           AND tc.check_name IN (SELECT check_name FROM checks)
         ORDER BY tc.check_name, r.started_at DESC),
cases AS (SELECT tc.id, tc.run_id, r.started_at, tc.check_name, tc.params,
                 p.name AS partition, e.name AS environ
          FROM judged_testcase tc JOIN run r ON r.id = tc.run_id
          JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id
          WHERE tc.variant = ANY(%(variants)s::uuid[]) AND tc.state = 'pass'
            AND (tc.run_id = %(run)s
                 OR (tc.check_name, tc.run_id) IN (SELECT check_name, run_id FROM prev)))
SELECT c.run_id = %(run)s AS mine, c.check_name, c.params, c.partition, c.environ,
       m.name AS metric, m.unit, pt.size, s.value
FROM cases c
JOIN sample_block b ON b.run_id = c.run_id AND b.started_at = c.started_at
                   AND b.check_name = c.check_name AND b.point_ids <> '{0}'
                   AND c.id = ANY(b.testcase_ids)
JOIN metric m ON m.id = b.metric_id
CROSS JOIN LATERAL unnest(b.point_ids,
                          b.point_values[array_position(b.testcase_ids, c.id)
                                         :array_position(b.testcase_ids, c.id)])
    AS s(point_id, value)
JOIN sized_point pt ON pt.id = s.point_id
ORDER BY size
