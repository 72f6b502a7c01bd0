INSERT INTO finding (run_id, ordinal, kind, subject, summary, lines, evidence, critical,
                     change, confirmed, paged, environment, acknowledged, members)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
