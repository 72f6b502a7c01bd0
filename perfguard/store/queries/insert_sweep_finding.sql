-- One finding of a sweep, and whether its node was drained.
INSERT INTO sweep_finding (run_id, hca, kind, subject, evidence, drained)
VALUES (%s, %s, %s, %s, %s, %s)
