-- The run's start as a constant, not joined: joined, PostgreSQL read the whole month's
-- key-figure index (1.2 s for a run of 50,000 test cases; 33 ms so).
SELECT tc.id AS testcase_id, tc.check_name, tc.params, p.name AS partition,
       e.name AS environ, tc.state AS testcase_state, tc.fail_reason, tc.nodelist
FROM judged_testcase tc JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
WHERE tc.run_id = %(run_id)s
  AND tc.id NOT IN (SELECT k.testcase_id FROM key_figure k WHERE k.run_id = %(run_id)s
                    AND k.started_at = (SELECT started_at FROM run WHERE id = %(run_id)s))
ORDER BY tc.check_name, tc.params::text
