-- When the environment of a system's nodes last changed before a time.
SELECT fingerprint_epoch(%s, %s, %s)
