"""The GPU half from real output: the device-buffer variants of OMB and the UCX `cuda`
variants run their real job scripts through Slurm, with the outputs recorded on an H100
node replayed in the benchmarks' place (tests/data/replay-h100), on an embedded
partition that declares that node's GPU and, like it, no HCA. Sanity, performance,
ingest and verdict are the real ones; so are the crash and its stated cause."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import psycopg
import pytest
import yaml

from tests.conftest import DATA, TEST_STATE, perfguard

H100_GPU = {"index": 0, "model": "NVIDIA H100 80GB HBM3", "numa": 0,
            "bus_id": "00000000:00:06.0"}
DEVICE_VARIANTS = [f"OsuPt2PtCheck%hca=auto%benchmark={b}%transfer={t}%placement=intra"
                   for b, t in (("osu_bw", "D-D"), ("osu_bibw", "D-D"), ("osu_bw", "H-D-gdr"))]
UCX_CUDA = [f"UcxPerftestCheck%hca=auto%test={t}%memory=cuda" for t in ("tag_bw", "tag_lat",
                                                               "ucp_put_bw")]


@pytest.fixture(scope="module")
def gpu_site(layout) -> Path:
    """A site directory: the embedded cluster's nodes as the H100 node looked (its GPU,
    no HCA, Open MPI with UCX), GPUs not Slurm GRES; partition `gpu` with the shipped
    flavour table, `gpu-unforced` with a flavour that leaves Open MPI's defaults."""
    site = TEST_STATE / "shared" / "gpu-site"
    (site / "systems").mkdir(parents=True, exist_ok=True)
    topology = yaml.safe_load(layout.topology_file.read_text())
    [part] = topology["partitions"]
    part["node"]["hcas"] = []
    part["node"]["gpus"] = [H100_GPU]
    part.update(mpi="openmpi-ucx", gres_gpus=False,
                binary_provider={"kind": "replay", "path": str(DATA / "replay-h100")})
    unforced = {**copy.deepcopy(part), "name": "gpu-unforced", "mpi": "openmpi-ucx-unforced"}
    topology.update(system="gpulocal", partitions=[{**part, "name": "gpu"}, unforced])
    (site / "systems" / "gpulocal.yaml").write_text(yaml.safe_dump(topology, sort_keys=False))
    flavours = yaml.safe_load((Path(__file__).parents[2] / "site_config" /
                               "mpi_flavours.yaml").read_text())
    flavours["openmpi-ucx-unforced"] = {k: v for k, v in copy.deepcopy(flavours["openmpi-ucx"])
                                        .items() if k != "device_buffers_without_hca"}
    (site / "mpi_flavours.yaml").write_text(yaml.safe_dump(flavours))
    return site


def run_gpu(site: Path, dsn: str, system: str, *names: str):
    env = {"PATH": f"{DATA / 'h100' / 'bin'}:{os.environ['PATH']}"}  # nvidia-smi, recorded
    args = ["--site", str(site), "run", "--system", system, "--dsn", dsn]
    for name in names:
        args += ["-n", name]
    return perfguard(*args, state=TEST_STATE, env=env)


def report_cases(stdout: str) -> dict[str, dict]:
    path = Path(re.search(r"\(report (\S+)\)", stdout).group(1))
    return {case["display_name"]: case
            for case in json.loads(path.read_text())["runs"][0]["testcases"]
            if not case["display_name"].startswith("SpackStack")}  # the build fixture


def test_device_buffer_and_cuda_variants_pass_from_the_h100_recordings(
        gpu_site: Path, migrated_dsn: str) -> None:
    result = run_gpu(gpu_site, migrated_dsn, "gpulocal:gpu", *DEVICE_VARIANTS, *UCX_CUDA)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    cases = report_cases(result.stdout)
    assert len(cases) == 6 and {c["result"] for c in cases.values()} == {"pass"}, \
        {n: c["fail_reason"] for n, c in cases.items()}
    assert "0 test-failed" in result.stdout.splitlines()[-2]  # the counts, then "run N: …"
    dd = next(c for n, c in cases.items() if "osu_bw" in n and "D-D" in n)
    script = (Path(dd["outputdir"]) / "rfm_job.sh").read_text()
    # the flavour forced the UCX PML; the rank's GPU was chosen and proven by bus id
    for line in ("export OMPI_MCA_pml=ucx", "export CUDA_VISIBLE_DEVICES=0",
                 "bash rank_gpu.sh > rank_gpus.txt"):
        assert line in script, script
    proof = (Path(dd["outputdir"]) / "rank_gpus.txt").read_text()  # kept with the output
    assert sorted(re.findall(r"perfguard-gpu\t(\d)\t\d\tnode\d\t0\t00000000:00:06\.0",
                             proof)) == ["0", "1"], proof  # the ranks write in any order
    ucx = next(c for n, c in cases.items() if "tag_bw" in n)  # server and client, a node each
    proof = (Path(ucx["outputdir"]) / "rank_gpus.txt").read_text()
    assert sorted(re.findall(r"perfguard-gpu\t\d\t0\t(node\d)\t0\t00000000:00:06\.0",
                             proof)) == sorted(ucx["job_nodelist"]), proof
    with psycopg.connect(migrated_dsn) as conn:
        figures = dict(conn.execute(
            "SELECT k.params->>'benchmark' || ' ' || (k.params->>'transfer'), k.value "
            "FROM key_verdict k WHERE k.check_name = 'OsuPt2PtCheck' "
            "AND k.metric = 'bandwidth'").fetchall())
        curve = conn.execute(
            "SELECT count(*) FROM sample s JOIN testcase tc ON tc.id = s.testcase_id "
            "JOIN metric m ON m.id = s.metric_id WHERE tc.check_name = 'UcxPerftestCheck' "
            "AND tc.params->>'memory' = 'cuda' AND m.name = 'bandwidth' "
            "AND s.point_id <> 0").fetchone()[0]
    assert figures["osu_bw D-D"] == pytest.approx(449031.69)  # cuda_ipc at 4 MiB, recorded
    assert set(figures) == {"osu_bw D-D", "osu_bibw D-D", "osu_bw H-D-gdr"}
    assert curve == 4 + 2 + 4  # tag_bw, tag_lat, ucp_put_bw: every recorded size stored


def test_device_buffers_that_crash_the_mpi_are_a_test_failure_with_the_cause(
        gpu_site: Path, migrated_dsn: str) -> None:
    """Open MPI's defaults on a node without an HCA (ob1/vader): the recorded SIGSEGV after
    OMB's title is `test-failed` naming the cause, never a pass or a parse error."""
    result = run_gpu(gpu_site, migrated_dsn, "gpulocal:gpu-unforced",
                     "OsuPt2PtCheck%hca=auto%benchmark=osu_latency%transfer=D-D%placement=intra")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    [case] = report_cases(result.stdout).values()
    assert case["result"] == "fail" and case["fail_phase"] == "sanity", case["fail_reason"]
    assert "device buffers crashed the MPI" in case["fail_reason"]
    assert "header but no result rows" not in case["fail_reason"]
    assert re.search(r"test-failed: device buffers crashed the MPI", result.stdout), \
        result.stdout[-2000:]
