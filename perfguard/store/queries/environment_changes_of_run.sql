-- What changed in the nodes' environment at the run, one text.
SELECT string_agg(node || ': ' || text, '; ' ORDER BY node) FROM fingerprint_change
WHERE run_id = %s
