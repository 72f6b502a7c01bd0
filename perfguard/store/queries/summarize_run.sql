-- The run's summary row, what run_outcome reads.
SELECT summarize_run(%s)
