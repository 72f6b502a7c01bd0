-- `perfguard accept`: a cause's level from a run on, who accepted it and why.
INSERT INTO accepted_level (subject, from_run, reason, who) VALUES (%s, %s, %s, %s)
