"""The GPU half from real output: the device-buffer variants of OMB and the UCX `cuda`
variants run their real job scripts through Slurm, with the outputs recorded on an H100
node replayed in the benchmarks' place (tests/data/replay-h100), on an embedded
partition that declares that node's GPU and, like it, no HCA; nccl-tests likewise from
an H200 node (tests/data/replay-h200). Sanity, performance, ingest and verdict are the
real ones; so are the crashes and their stated causes."""

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


@pytest.fixture(scope="module")
def h200_site(gpu_site: Path) -> Path:
    """The H200 node as recorded (one GPU, no HCA), its nccl-tests outputs replayed:
    partition `h200`, and `h200-net-ib` whose site forces NCCL onto InfiniBand."""
    site = TEST_STATE / "shared" / "h200-site"
    (site / "systems").mkdir(parents=True, exist_ok=True)
    topology = yaml.safe_load((gpu_site / "systems" / "gpulocal.yaml").read_text())
    part = topology["partitions"][0]
    part["node"]["gpus"] = [{**H100_GPU, "model": "NVIDIA H200"}]
    part["binary_provider"]["path"] = str(DATA / "replay-h200")
    forced = {**copy.deepcopy(part), "name": "h200-net-ib", "env_vars": {"NCCL_NET": "IB"}}
    topology.update(system="h200local", partitions=[{**part, "name": "h200"}, forced])
    (site / "systems" / "h200local.yaml").write_text(yaml.safe_dump(topology, sort_keys=False))
    (site / "mpi_flavours.yaml").write_text((gpu_site / "mpi_flavours.yaml").read_text())
    return site


def run_gpu(site: Path, dsn: str, system: str, *names: str, node: str = "h100"):
    env = {"PATH": f"{DATA / node / 'bin'}:{os.environ['PATH']}"}  # nvidia-smi, recorded
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


def test_nccl_tests_on_one_h200_store_the_copy_and_skip_what_one_rank_cannot_measure(
        h200_site: Path, migrated_dsn: str) -> None:
    """One GPU, no HCA: sendrecv (the rank sends to itself) passes with its recorded
    busbw curve; the collectives skip saying why, neither passed nor failed."""
    result = run_gpu(h200_site, migrated_dsn, "h200local:h200", "NcclTestsCheck",
                     node="h200")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    cases = report_cases(result.stdout)
    assert {n: c["result"] for n, c in cases.items()} == {
        f"NcclTestsCheck %test={t} %collnet=off": "pass" if t == "sendrecv_perf" else "skip"
        for t in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                  "sendrecv_perf")}, {n: c["fail_reason"] for n, c in cases.items()}
    assert "one GPU in all on h200local:h200: a collective over one rank moves nothing " \
        "(busbw 0 by definition)" in result.stdout, result.stdout[-3000:]
    assert "3 skipped" in result.stdout.splitlines()[-2]  # the counts, then "run N: …"
    script = (Path(cases["NcclTestsCheck %test=sendrecv_perf %collnet=off"]["outputdir"])
              / "rfm_job.sh").read_text()
    assert "export NCCL_DEBUG=INFO" in script and "NCCL_IB_HCA" not in script
    with psycopg.connect(migrated_dsn) as conn:
        key = dict(conn.execute(
            "SELECT metric, value FROM key_verdict WHERE check_name = 'NcclTestsCheck'"
        ).fetchall())
        curve = conn.execute(
            "SELECT count(*) FROM sample s JOIN testcase tc ON tc.id = s.testcase_id "
            "JOIN metric m ON m.id = s.metric_id WHERE tc.check_name = 'NcclTestsCheck' "
            "AND m.name = 'busbw' AND s.point_id <> 0").fetchone()[0]
    assert key == {"busbw": 1904.4, "mean_busbw": pytest.approx(460.56357, rel=1e-6)}
    assert curve == 28


def test_nccl_forced_onto_an_absent_fabric_is_a_test_failure_with_nccls_cause(
        h200_site: Path, migrated_dsn: str) -> None:
    """The site forces NCCL_NET=IB and the node has no HCA (a port down after a reboot, a
    driver not loaded): NCCL's own warning is the failure's reason."""
    result = run_gpu(h200_site, migrated_dsn, "h200local:h200-net-ib",
                     "NcclTestsCheck%test=sendrecv_perf", node="h200")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    [case] = report_cases(result.stdout).values()
    assert case["result"] == "fail" and case["fail_phase"] == "sanity", case["fail_reason"]
    assert "NCCL WARN Failed to initialize any NET plugin; NCCL call failed: invalid usage" \
        in case["fail_reason"]
    assert "test-failed" in result.stdout
