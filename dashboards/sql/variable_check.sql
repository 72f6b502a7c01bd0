WITH RECURSIVE names AS (
  SELECT min(check_name) AS name FROM testcase
  UNION ALL
  SELECT (SELECT min(check_name) FROM testcase WHERE check_name > names.name)
  FROM names WHERE names.name IS NOT NULL)
SELECT name FROM names WHERE name IS NOT NULL
