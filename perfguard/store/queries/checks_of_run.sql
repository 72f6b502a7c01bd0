SELECT DISTINCT check_name FROM testcase WHERE run_id = %s
