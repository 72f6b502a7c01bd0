-- Which way a metric of a check is better, as the check declared it.
SELECT better FROM metric_direction WHERE check_name = %s AND metric = %s
