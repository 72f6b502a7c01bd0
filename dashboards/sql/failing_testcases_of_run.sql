SELECT tc.check_name, tc.params::text AS variant, p.name AS partition, tc.state,
       tc.fail_phase, tc.fail_reason, tc.slurm_jobid, array_to_string(tc.nodelist, ',') AS nodes
FROM judged_testcase tc JOIN partition p ON p.id = tc.partition_id
WHERE tc.run_id = $run
  AND (tc.state = 'test-failed'
       OR tc.id IN (SELECT k.testcase_id FROM key_verdict k
                    WHERE k.run_id = $run AND k.status = 'fail'))
ORDER BY 1, 2
