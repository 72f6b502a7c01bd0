-- The Slurm jobs of a run's test cases, retried attempts too (each took its nodes).
SELECT DISTINCT slurm_jobid FROM testcase
WHERE run_id = %s AND coalesce(slurm_jobid, '') <> '' ORDER BY 1
