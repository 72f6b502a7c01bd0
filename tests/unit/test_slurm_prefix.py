"""A Slurm built from source runs the embedded cluster: its prefix's bin/ and sbin/ come
first for every daemon, client, ReFrame job and schedule, from the layout alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfguard.cli import build_parser
from perfguard.cluster.layout import ClusterLayout
from perfguard.cluster.procs import require_binaries
from perfguard.errors import PerfguardError
from perfguard.site.context import Context


def test_the_prefix_comes_first_on_every_slurm_path(tmp_path: Path) -> None:
    built = ClusterLayout(tmp_path, slurm_prefix="/opt/slurm-25.11")
    path = built.client_env()["PATH"].split(os.pathsep)
    assert path[:2] == ["/opt/slurm-25.11/bin", "/opt/slurm-25.11/sbin"]
    assert built.client_env()["SLURM_CONF"] == str(tmp_path / "etc" / "slurm.conf")
    again = built.slurm_environ({"PATH": "/opt/slurm-25.11/bin:/usr/bin"})["PATH"]
    assert again == "/opt/slurm-25.11/bin:/opt/slurm-25.11/sbin:/usr/bin"  # not twice
    debian = ClusterLayout(tmp_path)  # the default: the distribution's Slurm on the PATH
    assert debian.slurm_dirs() == []
    assert debian.client_env()["PATH"] == os.environ["PATH"]


def test_the_prefix_is_kept_with_the_cluster_and_reaches_the_context(tmp_path: Path) -> None:
    ClusterLayout(tmp_path, nodes=2, slurm_prefix="/opt/slurm-25.11").save()
    assert ClusterLayout.load(tmp_path).slurm_prefix == "/opt/slurm-25.11"
    env = Context(tmp_path).slurm_env()
    assert env["PATH"].startswith("/opt/slurm-25.11/bin:/opt/slurm-25.11/sbin:")


def test_a_prefix_without_slurm_is_named(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    with pytest.raises(PerfguardError, match=rf"--slurm-prefix {tmp_path}: no slurmdbd, "
                                             r"slurmctld, slurmd, sinfo, .* in its bin/"):
        require_binaries([tmp_path / "bin", tmp_path / "sbin"])


def test_cluster_up_takes_the_prefix_from_its_option_or_the_environment(monkeypatch) -> None:
    given = build_parser().parse_args(["cluster", "up", "--slurm-prefix", "/opt/s"])
    assert given.slurm_prefix == Path("/opt/s")
    assert build_parser().parse_args(["cluster", "up"]).slurm_prefix is None
    monkeypatch.setenv("PERFGUARD_SLURM_PREFIX", "/opt/env")
    assert str(build_parser().parse_args(["cluster", "up"]).slurm_prefix) == "/opt/env"


def test_a_state_directory_keeps_the_slurm_it_last_ran(tmp_path: Path) -> None:
    """`cluster up` without --slurm-prefix after a 25.11 cluster went down started
    Debian's 22.05 on its state: slurmctld refused it, and 22.05's slurmdbd converted
    the 25.11 accounting database."""
    from perfguard.cluster import slurm_prefix_to_run

    built = ClusterLayout(tmp_path, slurm_prefix="/opt/slurm-25.11")
    assert slurm_prefix_to_run(None, built) == "/opt/slurm-25.11"
    assert slurm_prefix_to_run(None, None) == ""  # a new state: the distribution's
    assert slurm_prefix_to_run(tmp_path, None) == str(tmp_path)
    assert slurm_prefix_to_run(tmp_path / "x" / "..", built) == str(tmp_path)
