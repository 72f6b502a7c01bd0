"""The verdict's states, one definition for Python and SQL: the judge writes them, and the
database's ``failing_status()`` is rendered from :data:`FAILING` when its repeatable file
is applied (``store/db/repeatable/60_run_outcome.sql``), so the CLI, the report and
Grafana agree on which lines fail a run."""

from __future__ import annotations

PASS, FAIL, NO_REFERENCE, TEST_FAILED = "pass", "fail", "no-reference", "test-failed"
REGRESSION, IMPROVEMENT, INCONCLUSIVE = "regression", "improvement", "inconclusive"
#: A test case that did not run (shape, provider, failed dependency): neither passed nor
#: failed. One that failed the way a reference said it would: expected-failure.
SKIPPED, EXPECTED_FAILURE = "skipped", "expected-failure"
#: A test case an interruption stopped before it finished (SIGINT, SIGTERM, the stall
#: watchdog; ReFrame's ``abort``): neither passed nor failed. A run with one is
#: interrupted, never failed for it (``run_outcome``).
ABORTED = "aborted"
#: A test case measured while other processes shared its CPUs (reframe_tests/common/
#: cpu_wait.py): its figures are kept, neither judged nor anyone's baseline.
DISTURBED = "disturbed"
#: Every state, in the order the summary counts them.
STATES = (PASS, FAIL, REGRESSION, TEST_FAILED, IMPROVEMENT, INCONCLUSIVE, NO_REFERENCE,
          EXPECTED_FAILURE, SKIPPED, ABORTED, DISTURBED)
#: The states that fail a run (a regression only through a paged finding: summarize_run).
FAILING = (FAIL, REGRESSION, TEST_FAILED)
