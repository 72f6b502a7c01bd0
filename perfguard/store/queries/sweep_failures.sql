-- Why a sweep run's sweep test cases did not pass, as stored.
SELECT fail_phase, fail_reason FROM judged_testcase WHERE run_id = %s
  AND check_name = 'FabricSweepCheck' AND result <> 'pass'
