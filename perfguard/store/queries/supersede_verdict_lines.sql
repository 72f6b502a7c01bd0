-- Before a run is judged again: its current lines kept under the verdict they belong to.
INSERT INTO superseded_verdict_line
SELECT v.id, l.*
FROM verdict_line l
JOIN LATERAL (SELECT id FROM verdict WHERE run_id = l.run_id
              ORDER BY judged_at DESC, id DESC LIMIT 1) v ON true
WHERE l.run_id = %(run_id)s
