-- A series' change points, before detection stores them again.
DELETE FROM change_point WHERE system = %s AND check_name = %s AND params = %s
  AND partition = %s AND environ = %s AND metric = %s
