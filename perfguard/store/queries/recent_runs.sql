-- The recent runs of the checks up to the judged run (recent_runs()), newest first:
-- their ids and start times as two arrays.
SELECT array_agg(r.id ORDER BY r.started_at DESC, r.id DESC),
       array_agg(r.started_at ORDER BY r.started_at DESC, r.id DESC)
FROM run r WHERE r.id IN (SELECT recent_runs(%(run_id)s, %(checks)s, %(runs)s))
