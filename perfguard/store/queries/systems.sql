-- Every system perfguard has stored something of, by name: where `perfguard ack` looks
-- for the open finding it is given when no --system is.
SELECT name FROM system ORDER BY name
