-- The test cases of a run that ran on one node each ('.nid'): each node's state and why.
SELECT tc.check_name, tc.params - '.nid' - '.part' AS params, tc.params->>'.nid' AS node,
       tc.state, tc.fail_reason
FROM judged_testcase tc WHERE tc.run_id = %s AND tc.params ? '.nid'
ORDER BY tc.check_name, tc.params::text
