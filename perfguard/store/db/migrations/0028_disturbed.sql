-- A test case measured while other processes shared its CPUs is `disturbed` (Linux PSI
-- read at the job's start and end: reframe_tests/common/cpu_wait.py): its figures are
-- kept, neither judged nor anyone's baseline, its lines carry the state and the reason.
-- `run.disturbed` counts such test cases when the verdict is recorded (summarize_run).
ALTER TABLE verdict_line DROP CONSTRAINT verdict_line_status_check;
ALTER TABLE verdict_line ADD CONSTRAINT verdict_line_status_check CHECK (status IN (
    'pass', 'fail', 'regression', 'test-failed', 'improvement', 'inconclusive',
    'no-reference', 'expected-failure', 'skipped', 'aborted', 'disturbed'));
ALTER TABLE run ADD COLUMN disturbed integer;
