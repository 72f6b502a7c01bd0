INSERT INTO change_point (system, check_name, params, partition, environ, metric, run_id,
                          before, after, change, better, environment)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
