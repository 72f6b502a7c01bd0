SELECT time, node || ': ' || text AS text, node AS tags
FROM fingerprint_change
WHERE $__timeFilter(time) AND system = '$system'
ORDER BY 1
