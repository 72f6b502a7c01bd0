-- Every judgement of a run, oldest first: (id, when, by whom, re-judged, outcome, why).
SELECT id, judged_at, judged_by, rejudged, outcome, why
FROM verdict WHERE run_id = %s ORDER BY judged_at, id
