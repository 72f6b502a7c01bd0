-- When a judgement begins, just before it reads the run's accepted levels: the time its
-- verdict is stored with (verdict.judged_at), so that the levels a report takes as
-- judged (judged_at.sql: accepted at or before it) are the ones the judgement read, not
-- those accepted while it ran (a 100,000-line verdict runs seconds).
SELECT clock_timestamp()
