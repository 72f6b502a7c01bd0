-- The share of measured test cases under which the run measured nothing.
UPDATE run SET measured_floor = %s WHERE id = %s
