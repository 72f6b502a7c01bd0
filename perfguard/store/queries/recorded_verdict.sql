-- A run's verdict as recorded when it was judged, with the nodes each line's test case ran
-- on (the table names them per variant).
SELECT v.check_name, v.params, v.params::text AS params_text, v.partition, v.environ,
       v.metric, v.point,
       coalesce(pt.id, -1) AS point_id, v.value, v.unit, v.status, v.centre, v.noise,
       v.detail, v.reference, v.lower_limit, v.upper_limit, v.better, v.paged,
       v.blind_nights, n.nodelist
FROM verdict_line v LEFT JOIN point pt ON pt.coords = v.point
LEFT JOIN LATERAL (
    SELECT tc.nodelist FROM judged_testcase tc
    JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id
    WHERE tc.run_id = v.run_id AND tc.check_name = v.check_name AND tc.params = v.params
      AND p.name = v.partition AND e.name = v.environ
    ORDER BY tc.id DESC LIMIT 1) n ON true
WHERE v.run_id = %(run_id)s
ORDER BY v.check_name, v.params::text, v.partition, v.environ, v.metric, v.point::text
