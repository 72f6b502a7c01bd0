SELECT r.started_at AS "time", r.id AS run, upper(o.outcome) AS outcome, r.trigger, array_to_string(r.labels, ',') AS labels,
       r.passed, r.failed, r.skipped, r.expected_failures, r.missed_thresholds,
       r.regressions, r.improvements, r.inconclusive, r.aborted, r.disturbed, r.blind_lines,
       CASE WHEN r.failed > 0 THEN (
           SELECT string_agg(DISTINCT tc.check_name, ', ') FROM judged_testcase tc
           WHERE tc.run_id = r.id AND tc.state = 'test-failed') END AS failing_checks
FROM run r JOIN system sy ON sy.id = r.system_id JOIN run_outcome o ON o.run_id = r.id
WHERE $__timeFilter(r.started_at) AND sy.name = '$system'
ORDER BY r.started_at DESC
