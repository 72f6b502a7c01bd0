-- The run of the same system judged just before the run (one with a stored verdict: a
-- sweep, a budget nightly or an upgrade check's loopback retest is never judged so, and
-- has no findings to read).
SELECT p.id FROM run r JOIN run p ON p.system_id = r.system_id AND p.started_at < r.started_at
WHERE r.id = %s AND EXISTS (SELECT 1 FROM verdict v WHERE v.run_id = p.id)
ORDER BY p.started_at DESC, p.id DESC LIMIT 1
