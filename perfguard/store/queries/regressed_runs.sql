-- The earlier runs of the judged run's system in which a key figure's line was judged
-- regression (the last 90 days: far beyond any history window).
SELECT v.check_name, v.params::text, v.partition, v.environ, v.metric,
       array_agg(r.started_at)
FROM verdict_line v JOIN run r ON r.id = v.run_id
JOIN run j ON j.id = %s AND j.system_id = r.system_id
WHERE v.status = 'regression' AND v.metric NOT LIKE '%% curve'
  AND r.started_at < j.started_at AND r.started_at > j.started_at - interval '90 days'
GROUP BY 1, 2, 3, 4, 5
