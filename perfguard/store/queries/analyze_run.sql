-- Fresh planner statistics for the months of a run (the owner's function).
SELECT analyze_results(started_at) FROM run WHERE id = %s
