"""A site's module stack as a binary provider (docs/adopting.md, "A site's module stack"):
the doc's HPC-X system file gives job scripts with Lmod's init, `module load` before the
benchmark and the job's is-loaded probe; on the embedded cluster a prefix reached through
a Lua module file runs a real program with the module loaded in the job, and a misspelled
module is a skip naming module and node."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import TEST_STATE, dry_run_scripts, perfguard

ADOPTING = Path(__file__).resolve().parents[2] / "docs" / "adopting.md"
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")
OSU_BW = "OsuPt2PtCheck%hca=mlx5_0%benchmark=osu_bw%transfer=H-H%placement=inter"
UCX_LAT = "^UcxPerftestCheck%hca=lo%test=tag_lat%memory=host"


def doc_block(language: str, first_line: str) -> str:
    """The doc's ``language`` block whose first line starts with ``first_line``."""
    blocks = re.findall(rf"```{language}\n(.*?)```", ADOPTING.read_text(), re.S)
    [block] = [b for b in blocks if b.startswith(first_line)]
    return block


def test_a_module_stack_gives_jobs_lmods_init_module_load_and_the_probe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The doc's system file as written: the partition's prepare_cmds first, then
    ReFrame's `module load hpcx/2.20` (modules_system lmod), then the job's probe that the
    module is loaded, all before the benchmark from the prefix."""
    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "mycluster.yaml").write_text(
        doc_block("yaml", "# SITE/systems/mycluster.yaml"))
    monkeypatch.setenv("PERFGUARD_SITE", str(tmp_path))
    [lines] = dry_run_scripts("mycluster", OSU_BW).values()
    probe = ('module is-loaded hpcx/2.20 >/dev/null 2>&1 || { echo "perfguard-missing-module '
             'hpcx/2.20 $HOSTNAME $(type -t module || echo none)"; exit 0; }')
    [bench] = [i for i, line in enumerate(lines) if "/shared/perfguard/omb-hpcx/libexec/"
               "osu-micro-benchmarks/mpi/pt2pt/osu_bw" in line]
    order = [lines.index(f"source {LMOD_INIT}"), lines.index("module use /opt/hpcx/modulefiles"),
             lines.index("module load hpcx/2.20"), lines.index(probe), bench]
    assert order == sorted(order), "\n".join(lines)
    assert lines.count("module load hpcx/2.20") == 1


@pytest.fixture
def module_prefix() -> tuple[Path, Path]:
    """(prefix, module path): a prefix whose bin/ucx_perftest is Debian's, run only where
    the module `pgtest/1.0` (a Lua module file) set its variable, saying so on stderr;
    under the cluster's state (every node sees it; /tmp is each node's own)."""
    base = TEST_STATE / "modules-test"
    prefix, modulefiles = base / "prefix", base / "modulefiles"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    (modulefiles / "pgtest").mkdir(parents=True, exist_ok=True)
    wrapper = prefix / "bin" / "ucx_perftest"
    wrapper.write_text('#!/bin/sh\necho "pgtest-module ${PGTEST_MODULE:-none} $(hostname)" >&2\n'
                       '[ -n "$PGTEST_MODULE" ] || exit 97\nexec /usr/bin/ucx_perftest "$@"\n')
    wrapper.chmod(0o755)
    (modulefiles / "pgtest" / "1.0.lua").write_text(
        f'prepend_path("PATH", "{prefix}/bin")\nsetenv("PGTEST_MODULE", "pgtest/1.0")\n')
    return prefix, modulefiles


def job_output(stdout: str, check: str) -> Path:
    """The output directory of the run's ``check`` (its report, named in the verdict)."""
    report = Path(re.search(r"\(report (\S+)\):", stdout).group(1))
    [case] = [c for c in json.loads(report.read_text())["runs"][0]["testcases"]
              if c["name"].startswith(check)]
    return Path(case["outputdir"])


def test_a_prefix_through_a_module_runs_with_it_loaded_and_a_misspelled_one_is_a_skip(
        layout, migrated_dsn: str, module_prefix: tuple[Path, Path]) -> None:
    """The embedded cluster with Lmod: PERFGUARD_PREFIX_MODULES loads the module in the
    job (the program ran with its variable set, on the node); a misspelled module skips
    the check after its job, the stored reason naming module, node and fix. Then the
    doc's commands, as written but for the site's names."""
    assert LMOD_INIT.is_file(), "install.sh installs Debian's lmod"
    prefix, modulefiles = module_prefix
    env = {"PERFGUARD_PREFIX": str(prefix), "MODULEPATH": str(modulefiles)}
    run = ["run", "--dsn", migrated_dsn, "-n", UCX_LAT, "-S", "UcxPerftestCheck.iterations=200"]
    loaded = perfguard(*run, state=TEST_STATE,
                       env={**env, "PERFGUARD_PREFIX_MODULES": "pgtest/1.0"})
    assert loaded.returncode == 0, loaded.stdout[-3000:] + loaded.stderr[-2000:]
    output = job_output(loaded.stdout, "UcxPerftestCheck")
    lines = (output / "rfm_job.sh").read_text().splitlines()
    assert lines.index(f"source {LMOD_INIT}") < lines.index("module load pgtest/1.0")
    said = (output / "rfm_job.err").read_text()
    assert re.search(r"^pgtest-module pgtest/1\.0 node\d", said, re.M), said[-2000:]
    assert "pgtest-module none" not in said

    misspelled = perfguard(*run, state=TEST_STATE,
                           env={**env, "PERFGUARD_PREFIX_MODULES": "pgtest/1.O"})
    assert misspelled.returncode == 3, misspelled.stdout[-3000:] + misspelled.stderr[-2000:]
    notes = " ".join(misspelled.stdout.split())  # the note under the table, unwrapped
    assert re.search(r"\[\d\] module pgtest/1\.O did not load on node\d \(provider 'prefix' "
                     rf"{re.escape(str(prefix))}\): check the name with `module avail "
                     r"pgtest/1\.O` on node\d", notes), misspelled.stdout[-3000:]
    with psycopg.connect(migrated_dsn) as conn:
        [reason] = conn.execute(
            "SELECT fail_reason FROM testcase WHERE check_name = 'UcxPerftestCheck' "
            "ORDER BY id DESC LIMIT 1").fetchone()
    assert re.match(r"module pgtest/1\.O did not load on node\d", reason), reason

    # docs/adopting.md's commands, the site's names replaced by the test cluster's
    names = [("-p batch", "-p compute"), ("/opt/hpcx/modulefiles", str(modulefiles)),
             ("hpcx/2.20", "pgtest/1.0"), ("mycluster", "local")]
    for command in doc_block("bash", "srun -N1 -p batch").splitlines():
        for doc, ours in names:
            command = command.replace(doc, ours)
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, timeout=600,
            env={**os.environ, **env, "PERFGUARD_PREFIX_MODULES": "pgtest/1.0",
                 "SLURM_CONF": str(layout.slurm_conf), "PERFGUARD_STATE_DIR": str(TEST_STATE),
                 "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
        if command.startswith("srun"):
            assert re.match(r"loaded on node\d", done.stdout), done.stdout
