"""The contract between perfguard and its checks: the topology model, the
sample schema and references; all that reframe_tests/ imports (no database driver)."""
