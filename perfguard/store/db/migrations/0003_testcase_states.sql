-- Verdict states of a test case, and only the last attempt of a retried one is judged.
--
-- ReFrame's result → perfguard's state (one mapping, read by the CLI verdict, the
-- workflows and the dashboards alike):
--   pass                  → pass
--   skip, fail_deps       → skipped           (did not run: shape, provider, dependency)
--   xfail                 → expected-failure  (failed as a reference said it would)
--   fail, abort, xpass    → test-failed       (xpass: passed where a failure was expected)
-- An attempt that ReFrame retried (--max-retries) is superseded by its last attempt.
CREATE VIEW judged_testcase AS
SELECT tc.*,
       CASE tc.result
            WHEN 'pass' THEN 'pass'
            WHEN 'success' THEN 'pass'
            WHEN 'skip' THEN 'skipped'
            WHEN 'fail_deps' THEN 'skipped'
            WHEN 'xfail' THEN 'expected-failure'
            ELSE 'test-failed' END AS state
FROM testcase tc
WHERE NOT EXISTS (
    SELECT 1 FROM testcase later
    WHERE later.run_id = tc.run_id AND later.unique_name = tc.unique_name
      AND later.partition_id = tc.partition_id AND later.environ_id = tc.environ_id
      AND later.run_index > tc.run_index);

-- key_verdict as before, over last attempts only, with the test case's state.
CREATE OR REPLACE VIEW key_verdict AS
SELECT r.id AS run_id, r.started_at, r.trigger, r.labels, sy.name AS system,
       p.name AS partition, e.name AS environ, tc.id AS testcase_id, tc.check_name,
       tc.params, tc.result, tc.fail_reason, tc.nodelist, m.name AS metric, m.unit, s.value,
       th.id AS threshold_id, th.reference, th.lower, th.upper, th.bounds, th.direction,
       th.lower_limit, th.upper_limit,
       CASE WHEN th.id IS NULL THEN 'no-reference'
            WHEN (th.lower_limit IS NULL OR s.value >= th.lower_limit)
             AND (th.upper_limit IS NULL OR s.value <= th.upper_limit) THEN 'pass'
            ELSE 'fail' END AS status,
       tc.state AS testcase_state
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN sample s ON s.testcase_id = tc.id AND s.point_id = 0
JOIN metric m ON m.id = s.metric_id
LEFT JOIN LATERAL (
    SELECT t.* FROM threshold_limit t
    WHERE t.system = sy.name AND t.check_name = tc.check_name AND t.metric = m.name
      AND t.point IS NULL
      AND (t.partition IS NULL OR t.partition = p.name)
      AND (t.environ IS NULL OR t.environ = e.name)
      AND tc.params @> t.params
      AND t.valid_from <= r.started_at AND (t.valid_to IS NULL OR t.valid_to > r.started_at)
    ORDER BY t.specificity DESC, t.valid_from DESC
    LIMIT 1) th ON true;

GRANT SELECT ON judged_testcase, key_verdict TO perfguard_grafana;
