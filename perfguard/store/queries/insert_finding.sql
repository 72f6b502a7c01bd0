INSERT INTO finding (run_id, ordinal, kind, subject, summary, lines, evidence, critical,
                     change, confirmed, paged, environment, acknowledged)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
