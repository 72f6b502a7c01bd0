-- Every accepted level, cleared ones too (who cleared it and when; NULL while in force).
SELECT id, subject, from_run, who, at, reason, cleared_by, cleared_at FROM accepted_level
ORDER BY id
