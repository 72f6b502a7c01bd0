SELECT n.night::timestamp AT TIME ZONE 'UTC' AS "time",
       n.check_name || ' ' || n.params::text || ' ' || n.partition AS metric,
       n.median AS value
FROM key_figure_night n
WHERE n.night BETWEEN ($__timeFrom())::date AND ($__timeTo())::date
  AND n.system = '$system' AND n.partition IN ($partition)
  AND n.check_name = '$check' AND n.metric = '$metric'
ORDER BY 1
