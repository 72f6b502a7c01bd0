-- Which way is better for each metric of the checks (their perfguard_better).
SELECT check_name, metric, better FROM metric_direction WHERE check_name = ANY(%s)
