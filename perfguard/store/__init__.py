"""Store: the database, its migrations, reports read and ingested, the spool."""
