-- Key figures come from the key_verdict view; curve points where a point threshold
-- names them. Both choose the threshold with matching_threshold(). Which way is better:
-- as the check declares, else as its threshold says, else as its reference's bounds say.
SELECT k.testcase_id, k.check_name, k.params, k.params::text AS params_text, k.partition,
       k.environ,
       k.testcase_state, k.fail_reason, k.metric, k.unit, k.value,
       '{}'::jsonb AS point, 0 AS point_id, k.threshold_id, k.reference, k.lower_limit,
       k.upper_limit, k.status, k.started_at, coalesce(d.better, k.direction) AS better,
       CASE WHEN d.better IS NOT NULL AND d.implied THEN 'implied by its reference'
            WHEN d.better IS NOT NULL THEN 'declared by the check'
            WHEN k.threshold_id IS NOT NULL THEN 'the threshold''s'
            WHEN k.direction = 'higher' THEN 'the reference''s lower bound'
            WHEN k.direction = 'lower' THEN 'the reference''s upper bound'
            ELSE '' END AS better_from,
       k.nodelist
FROM key_verdict k
LEFT JOIN metric_direction d ON d.check_name = k.check_name AND d.metric = k.metric
WHERE k.run_id = %(run_id)s
UNION ALL
SELECT tc.id, tc.check_name, tc.params, tc.params::text, p.name, e.name, tc.state,
       tc.fail_reason,
       m.name, m.unit, s.value, pt.coords, pt.id, th.id, th.reference, th.lower_limit,
       th.upper_limit, threshold_status(s.value, th.id, th.lower_limit, th.upper_limit),
       r.started_at, coalesce(d.better, th.direction),
       CASE WHEN d.better IS NOT NULL AND d.implied THEN 'implied by its reference'
            WHEN d.better IS NOT NULL THEN 'declared by the check' ELSE 'the threshold''s' END,
       tc.nodelist
FROM run r
JOIN system sy ON sy.id = r.system_id
JOIN judged_testcase tc ON tc.run_id = r.id
JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
JOIN LATERAL (SELECT DISTINCT t.metric, t.point FROM threshold t
              WHERE t.system = sy.name AND t.check_name = tc.check_name
                AND t.point IS NOT NULL) named ON true
JOIN metric m ON m.name = named.metric
JOIN point pt ON pt.coords = named.point
JOIN sample s ON s.run_id = r.id AND s.started_at = r.started_at
             AND s.check_name = tc.check_name AND s.testcase_id = tc.id
             AND s.metric_id = m.id AND s.point_id = pt.id
JOIN LATERAL matching_threshold(sy.name, tc.check_name, m.name, pt.coords, p.name, e.name,
                                tc.params, r.started_at) th ON true
LEFT JOIN metric_direction d ON d.check_name = tc.check_name AND d.metric = m.name
WHERE r.id = %(run_id)s
ORDER BY 2, 4, 5, 6, 9
