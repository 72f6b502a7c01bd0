SELECT DISTINCT params::text FROM testcase WHERE check_name = '$check' ORDER BY 1
