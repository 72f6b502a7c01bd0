-- The acknowledgements cleared, kept with who cleared them and when.
SELECT id, system, subject, who, at, reason, cleared_by, cleared_at FROM acknowledgement
WHERE cleared_at IS NOT NULL ORDER BY id
