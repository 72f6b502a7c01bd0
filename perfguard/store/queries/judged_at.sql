-- When the run's stored verdict was judged: its last judgement, else (a run judged before
-- judgements were recorded, 0025) when its lines were recorded; NULL for a run never judged.
SELECT coalesce((SELECT max(judged_at) FROM verdict WHERE run_id = %(run)s),
                (SELECT min(judged_at) FROM verdict_line WHERE run_id = %(run)s))
