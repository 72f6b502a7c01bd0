"""The MPI hello template check, through real Slurm jobs on the embedded cluster."""

from __future__ import annotations

import subprocess

from perfguard.cluster.layout import ClusterLayout
from perfguard.run.reframe import RunRequest
from perfguard.store.report import load
from tests.conftest import run_checks


def run_hello(*setvars: str):
    outcome = run_checks(RunRequest(names=("MpiHelloCheck",),
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
    # A mask of a CPU no node has: Slurm can never bind there, whichever core it picks.
    wrong = ",".join(f"{n.name}:{hex(1 << len(layout.host_cpus))}" for n in layout.node_specs())
    outcome, case = run_hello(f"expected_masks={wrong}")
    assert outcome.returncode != 0
    assert case.result == "fail" and case.fail_phase == "sanity"
    assert "CPU mask" in case.fail_reason and "expected" in case.fail_reason
