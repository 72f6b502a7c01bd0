SELECT v.check_name, v.params::text AS variant, v.partition || '/' || v.environ AS where_run,
       v.metric || CASE WHEN v.point = '{}' THEN '' ELSE ' @' || v.point::text END AS metric,
       v.value, v.unit, v.centre AS baseline,
       (v.value - v.centre) / nullif(abs(v.centre), 0) AS change, v.status,
       v.blind_nights, v.detail
FROM verdict_line v
WHERE v.run_id = $run AND (v.status <> 'pass' OR v.blind_nights > 0)
ORDER BY array_position(ARRAY['fail', 'regression', 'test-failed', 'improvement', 'inconclusive',
                              'aborted', 'disturbed', 'no-reference', 'expected-failure', 'skipped',
                              'pass'],
                        v.status), 1, 2, 4
