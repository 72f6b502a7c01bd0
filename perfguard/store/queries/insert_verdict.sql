-- One judgement of a run (0025), after its lines and findings are stored: when, by whom,
-- whether it was an explicit re-judgement, and the outcome it gave.
INSERT INTO verdict (run_id, judged_by, rejudged, outcome, why, judged_at)
SELECT %(run_id)s, %(who)s, %(rejudged)s, o.outcome, o.why,
       coalesce(%(judged_at)s::timestamptz, now())
FROM run_outcome o WHERE o.run_id = %(run_id)s
RETURNING id, judged_at
