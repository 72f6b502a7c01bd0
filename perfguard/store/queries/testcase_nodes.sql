-- The nodes each judged test case of the run ran on.
SELECT tc.check_name, tc.params, p.name AS partition, e.name AS environ, tc.nodelist
FROM judged_testcase tc JOIN partition p ON p.id = tc.partition_id
JOIN environ e ON e.id = tc.environ_id WHERE tc.run_id = %s
