-- A test case an interruption stopped (ReFrame's `abort`: SIGINT, SIGTERM, the stall
-- watchdog) is `aborted`, neither passed nor failed (perfguard/states.py); a run with one
-- is interrupted. `run.aborted` counts them when the verdict is recorded (summarize_run).
ALTER TABLE verdict_line DROP CONSTRAINT verdict_line_status_check;
ALTER TABLE verdict_line ADD CONSTRAINT verdict_line_status_check CHECK (status IN (
    'pass', 'fail', 'regression', 'test-failed', 'improvement', 'inconclusive',
    'no-reference', 'expected-failure', 'skipped', 'aborted'));
ALTER TABLE run ADD COLUMN aborted integer;

-- A line blind: its noise too large to see a change of the rule's max_detectable (25 %),
-- for this many nights in a row up to this run (judge/rules.py: blind_nights); NULL when
-- it is not. `run.blind_lines` counts them (summarize_run), the dashboard shows it.
ALTER TABLE verdict_line ADD COLUMN blind_nights integer;
-- the copies of replaced verdicts, where a schema keeps them, keep the same columns
ALTER TABLE IF EXISTS superseded_verdict_line ADD COLUMN blind_nights integer;
ALTER TABLE run ADD COLUMN blind_lines integer;
