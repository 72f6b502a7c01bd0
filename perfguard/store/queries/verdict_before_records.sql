-- A run judged before verdicts were recorded (0025) gets one row for that judgement, so
-- the lines and findings a re-judgement replaces are kept under it.
INSERT INTO verdict (run_id, judged_at, judged_by, outcome, why)
SELECT %(run_id)s, (SELECT min(judged_at) FROM verdict_line WHERE run_id = %(run_id)s),
       'unknown', o.outcome, o.why
FROM run_outcome o
WHERE o.run_id = %(run_id)s
  AND EXISTS (SELECT 1 FROM verdict_line WHERE run_id = %(run_id)s)
  AND NOT EXISTS (SELECT 1 FROM verdict WHERE run_id = %(run_id)s)
