-- What names a series: its newest test case's (looked up by id: through the grouped rows
-- PostgreSQL's estimates are off by 10^3 and it read every test case to join a few).
SELECT tc.id, tc.check_name, tc.params::text, p.name, e.name, sy.name,
       array_to_string(tc.nodelist, ',')
FROM testcase tc JOIN run r ON r.id = tc.run_id JOIN system sy ON sy.id = r.system_id
JOIN partition p ON p.id = tc.partition_id JOIN environ e ON e.id = tc.environ_id
WHERE tc.id = ANY(%s)
