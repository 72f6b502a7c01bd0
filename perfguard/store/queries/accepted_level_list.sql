-- Every accepted level.
SELECT id, subject, from_run, who, at, reason FROM accepted_level ORDER BY id
