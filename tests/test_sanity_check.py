"""The MPI hello template check, through real Slurm jobs on the embedded cluster."""

from __future__ import annotations

import subprocess

from perfguard.cluster.layout import ClusterLayout
from perfguard.report import load
from perfguard.run import RunRequest, run_reframe
from tests.conftest import TEST_STATE


def run_hello(*setvars: str):
    outcome = run_reframe(RunRequest(state=TEST_STATE, names=("MpiHelloCheck",),
                                     setvars=setvars))
    [case] = load(outcome.report).testcases
    return outcome, case


def test_hello_passes_on_two_nodes_with_binding(layout: ClusterLayout) -> None:
    outcome, case = run_hello()
    assert outcome.returncode == 0, case.fail_reason
    assert case.result == "pass"
    sacct = subprocess.run(["sacct", "-X", "-n", "-P", "-j", case.jobid, "-o", "State,NNodes"],
                           env=layout.client_env(), capture_output=True, text=True)
    assert sacct.stdout.strip() == "COMPLETED|2"


def test_hello_fails_on_wrong_expected_mask(layout: ClusterLayout) -> None:
    # node1 owns CPU 0 and node2 CPU 1 (or both CPU 0 on a 1-CPU host): swap them.
    cpus = {n.name: n.cpus[0] for n in layout.node_specs()}
    wrong = ",".join(f"{node}:{hex(1 << (cpu + 1))}" for node, cpu in cpus.items())
    outcome, case = run_hello(f"expected_masks={wrong}")
    assert outcome.returncode != 0
    assert case.result == "fail" and case.fail_phase == "sanity"
    assert "CPU mask" in case.fail_reason and "expected" in case.fail_reason
