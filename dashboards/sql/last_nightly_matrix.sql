WITH last AS (
  SELECT r.id FROM run r JOIN system sy ON sy.id = r.system_id
  WHERE sy.name = '$system' AND r.trigger = 'nightly' ORDER BY r.started_at DESC LIMIT 1)
SELECT node, k.check_name || ' ' || k.metric AS metric,
       avg(k.value / nullif(k.reference, 0)) AS ratio_to_reference
FROM key_verdict k, unnest(k.nodelist) AS node
WHERE k.run_id = (SELECT id FROM last) AND node IN ($node)
GROUP BY 1, 2 ORDER BY 1, 2
