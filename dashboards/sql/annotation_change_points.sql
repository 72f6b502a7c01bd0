SELECT time, text, kind AS tags
FROM change_point_annotation
WHERE $__timeFilter(time) AND system = '$system'
ORDER BY 1
