"""What the unit and the system suites both describe: recorded data and the example
fabrics they are judged on (plain values: importing this starts nothing)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
#: The recorded switch tables (ibnetdiscover, ibswitches) of the leaf-sweep tests.
SWITCHES = DATA / "switches"
#: The recorded H100 node (nvidia-smi, sysfs) of the fingerprint tests.
H100 = DATA / "h100"
#: Four leaves of four nodes.
LEAVES = {f"leaf{leaf}": [f"n{leaf}{i}" for i in range(1, 5)] for leaf in range(1, 5)}
#: The embedded cluster's four nodes, as a sweep names them.
FOUR = ["n1", "n2", "n3", "n4"]
#: What ReFrame's report schema requires of every test case beyond what a test sets: the
#: cases the tests write by hand are stored only when ReFrame could have written them.
AS_REFRAME_WRITES = {"filename": "/checks/handmade.py", "fail_phase": None,
                     "fail_reason": None, "job_completion_time_unix": None,
                     "time_total": 1.0}
