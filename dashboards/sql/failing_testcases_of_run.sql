SELECT tc.check_name, tc.params::text AS variant, p.name AS partition, tc.state,
       tc.fail_phase, tc.fail_reason, tc.slurm_jobid, array_to_string(tc.nodelist, ',') AS nodes
FROM judged_testcase tc JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id
WHERE tc.run_id = $run
  AND (tc.state = 'test-failed'
       OR EXISTS (SELECT 1 FROM verdict_line v
                  WHERE v.run_id = tc.run_id AND v.check_name = tc.check_name
                    AND v.params = tc.params AND v.partition = p.name AND v.environ = e.name
                    AND v.status = 'fail' AND v.point = '{}'))
ORDER BY 1, 2
