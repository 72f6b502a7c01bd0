-- Before a run is judged again: its current findings kept under the verdict they belong to.
INSERT INTO superseded_finding
SELECT v.id, f.*
FROM finding f
JOIN LATERAL (SELECT id FROM verdict WHERE run_id = f.run_id
              ORDER BY judged_at DESC, id DESC LIMIT 1) v ON true
WHERE f.run_id = %(run_id)s
