SELECT id, system, subject, who, at, reason FROM acknowledgement
WHERE cleared_at IS NULL ORDER BY id
