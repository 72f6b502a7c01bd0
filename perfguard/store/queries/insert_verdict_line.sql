-- One line of a run's verdict, as judged (what Grafana and the report read).
INSERT INTO verdict_line (run_id, check_name, params, partition, environ, metric, point, value,
                          unit, status, centre, noise, band_low, band_high, detail, reference,
                          lower_limit, upper_limit, better, paged, blind_nights)
VALUES (%(run_id)s, %(check)s, %(params)s, %(partition)s, %(environ)s, %(metric)s, %(point)s,
        %(value)s, %(unit)s, %(status)s, %(centre)s, %(noise)s, %(low)s, %(high)s, %(detail)s,
        %(reference)s, %(lower_limit)s, %(upper_limit)s, %(better)s, %(paged)s,
        %(blind_nights)s)
