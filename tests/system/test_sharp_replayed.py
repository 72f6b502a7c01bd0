"""SHARP asked for and not proven ends test-failed with the cause, through the real job
script, Slurm, sanity, ingest and verdict: an embedded partition that declares SHARP
(feature ``sharp``, Open MPI with UCX and UCC's knobs) replays osu_allreduce as recorded
on 4 embedded nodes, whose Open MPI has no coll/ucc: the output holds a complete table
and no UCC trace, as a job whose collectives never reached UCC would. Never a slow pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import DATA, TEST_STATE
from tests.system.test_gpu_replayed import report_cases, run_gpu

SHARP_ON = "OsuSharpCheck%hca=lo%benchmark=osu_allreduce%sharp=on"


@pytest.fixture(scope="module")
def sharp_site(layout) -> Path:
    site = TEST_STATE / "shared" / "sharp-site"
    (site / "systems").mkdir(parents=True, exist_ok=True)
    topology = yaml.safe_load(layout.topology_file.read_text())
    [part] = topology["partitions"]
    part.update(mpi="openmpi-ucx", features=[*part.get("features", []), "sharp"],
                binary_provider={"kind": "replay", "path": str(DATA / "replay")})
    topology.update(system="sharplocal", partitions=[part])
    (site / "systems" / "sharplocal.yaml").write_text(yaml.safe_dump(topology, sort_keys=False))
    return site


def test_sharp_requested_without_proof_is_test_failed_naming_why(
        sharp_site: Path, migrated_dsn: str) -> None:
    result = run_gpu(sharp_site, migrated_dsn, "sharplocal:compute", SHARP_ON)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    [case] = report_cases(result.stdout).values()
    assert case["result"] == "fail" and case["fail_phase"] == "sanity", case["fail_reason"]
    assert "no UCC collective trace of Allreduce in the output" in case["fail_reason"]
    script = (Path(case["stagedir"]) / "rfm_job.sh").read_text()  # a failure keeps its stage
    for line in ("export OMPI_UCC_CL_BASIC_TLS=ucp,sharp", "export UCC_COLL_TRACE=info",
                 "export UCC_TL_SHARP_DEVICES=lo"):
        assert line in script, script
    assert "test-failed: no UCC collective trace" in result.stdout, result.stdout[-2000:]
