SELECT CASE WHEN f.paged THEN 'page' WHEN f.acknowledged IS NOT NULL THEN 'ack'
            ELSE 'watch' END AS "page", f.kind, f.subject,
       f.lines, f.change, round(f.evidence::numeric, 1) AS evidence,
       round(f.critical::numeric, 2) AS "pages at z", f.summary
FROM finding f
WHERE f.run_id = $run
ORDER BY f.ordinal
