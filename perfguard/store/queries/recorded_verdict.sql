-- A run's verdict as recorded when it was judged.
SELECT v.check_name, v.params, v.params::text AS params_text, v.partition, v.environ,
       v.metric, v.point,
       coalesce(pt.id, -1) AS point_id, v.value, v.unit, v.status, v.centre, v.noise,
       v.detail, v.reference, v.lower_limit, v.upper_limit, v.better, v.paged,
       v.blind_nights
FROM verdict_line v LEFT JOIN point pt ON pt.coords = v.point
WHERE v.run_id = %(run_id)s
ORDER BY v.check_name, v.params::text, v.partition, v.environ, v.metric, v.point::text
