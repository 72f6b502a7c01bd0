"""Job scripts for the example IB+GPU systems, asserted line by line.

The seed-000 system (seedfdr: Open MPI 4 openib, mlx4_0 PIX / mlx4_1 PHB to one V100)
and the 4-GPU/4-NDR system (ndr4x4: Open MPI 5 + UCX, two sockets).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import TEST_STATE, dry_run_scripts, perfguard

PT2PT = "OsuPt2PtCheck%hca={hca}%benchmark={bench}%transfer={transfer}%placement={placement}"
OMB = "/opt/perfguard/gcc-openmpi-ucx-cuda/libexec/osu-micro-benchmarks/mpi"
#: The fingerprint step every job runs first, one task per node.
FINGERPRINT = ("srun -J perfguard-helper -N $SLURM_JOB_NUM_NODES -n $SLURM_JOB_NUM_NODES "
               "--ntasks-per-node=1 "
               "--cpu-bind=none bash fingerprint.sh > fingerprints.txt 2>/dev/null || true")
#: CPU pressure read on every node just before the benchmark and just after it
#: (reframe_tests/common/cpu_wait.py): the last line of every job.
CPU_WAIT = ("srun -J perfguard-helper -N $SLURM_JOB_NUM_NODES -n $SLURM_JOB_NUM_NODES "
            "--ntasks-per-node=1 --cpu-bind=none bash cpu_wait.sh > cpu_wait_{}.txt "
            "2>/dev/null || true")
START = CPU_WAIT.format("start")
#: The benchmark's exit status stays the job's.
END = ("perfguard_rc=$?; " + CPU_WAIT.format("end").removesuffix(" || true")
       + "; exit $perfguard_rc")
#: The job's record of its allocation, the first command of every job.
ALLOCATION = 'echo "$SLURM_JOB_NODELIST" > allocation.txt'
#: A pinned job's steps own their nodes on Slurm 23.11+ too (launch.WHOLE_NODE_STEPS).
WHOLE = "unset SLURM_CPUS_PER_TASK SLURM_TRES_PER_TASK"
#: The step that proves each rank's GPU (device-buffer variants), with the job's layout.
RANK_GPU = ("srun -J perfguard-helper --cpu-bind=none --gpu-bind=map_gpu:{} bash rank_gpu.sh "
            "> rank_gpus.txt 2>/dev/null || true")


def sbatch(*extra: str, tasks: int = 2, per_node: int = 1, limit: str = "0:6:0") -> list[str]:
    """The #SBATCH lines every OMB job has, then the partition's own. ``limit``: the time
    limit derived from the sweep's sizes and OMB's iterations (time_limit.py): osu_bw's
    1 B-4 MiB is 12.5 s at the floor rate, 300 s + 4 x that is 6 min."""
    return [f"#SBATCH --ntasks={tasks}", f"#SBATCH --ntasks-per-node={per_node}",
            "#SBATCH --cpus-per-task=1", "#SBATCH --output=rfm_job.out",
            # Pinned (map_cpu): whole nodes, steps without --cpus-per-task (--exact).
            "#SBATCH --error=rfm_job.err", f"#SBATCH --time={limit}", "#SBATCH --exclusive",
            "#SBATCH --partition=gpu", *(f"#SBATCH {option}" for option in extra)]


def body(lines: list[str]) -> list[str]:
    """The script without the shebang and the job-name/output lines that carry hashes."""
    return [line for line in lines[1:] if not line.startswith("#SBATCH --job-name")]


def pt2pt(system: str, **choice: str) -> list[str]:
    scripts = dry_run_scripts(system, PT2PT.format(**choice))
    [lines] = scripts.values()
    return body(lines)


@pytest.fixture(scope="module")
def seed_view() -> str:
    """seedfdr builds OMB with Spack; the view lives under the state dir by default."""
    return f"{TEST_STATE}/spack/views/gcc-openmpi4-verbs-cuda/libexec/osu-micro-benchmarks/mpi"


def test_seed000_gpudirect_through_pix_hca(seed_view: str) -> None:
    assert pt2pt("seedfdr", hca="mlx4_0", bench="osu_bw", transfer="D-D-gdr",
                 placement="inter") == [
        *sbatch("--gres=gpu:1"),
        f"export PATH={seed_view.split('/libexec')[0]}/bin:$PATH",
        "export CUDA_VISIBLE_DEVICES=0",
        "export OMPI_MCA_btl=openib,self,vader",
        "export OMPI_MCA_btl_openib_if_include=mlx4_0:1",
        # Open MPI 4's openib refuses InfiniBand ports without it (seed 000).
        "export OMPI_MCA_btl_openib_allow_ib=1",
        "export OMPI_MCA_btl_openib_want_cuda_gdr=1",
        # GPUDirect for every size: openib's default carries 30,000 B at most and stages
        # the rest through host memory (btl_openib_mca.c); 0 lifts it (pml_ob1.c)
        "export OMPI_MCA_btl_openib_cuda_rdma_limit=0",
        ALLOCATION, WHOLE,
        FINGERPRINT,
        RANK_GPU.format(0), START,
        "srun --mpi=pmix --kill-on-bad-exit=1 --gpu-bind=map_gpu:0 --cpu-bind=verbose,map_cpu:0 "
        f"{seed_view}/pt2pt/osu_bw -m 1:4194304 -d cuda D D",
        END,
    ]


def test_seed000_device_buffers_without_gpudirect_through_phb_hca(seed_view: str) -> None:
    lines = pt2pt("seedfdr", hca="mlx4_1", bench="osu_latency", transfer="D-D",
                  placement="inter")
    assert "export OMPI_MCA_btl_openib_if_include=mlx4_1:1" in lines
    assert "export OMPI_MCA_btl_openib_want_cuda_gdr=0" in lines
    assert not any("cuda_rdma_limit" in line for line in lines)  # GDR off: nothing to lift
    assert lines[-2] == ("srun --mpi=pmix --kill-on-bad-exit=1 --gpu-bind=map_gpu:0 "
                         "--cpu-bind=verbose,map_cpu:0 "
                         f"{seed_view}/pt2pt/osu_latency -m 1:4194304 -d cuda D D")


def test_seed000_host_buffers_take_no_gpu(seed_view: str) -> None:
    lines = pt2pt("seedfdr", hca="mlx4_0", bench="osu_bw", transfer="H-H", placement="inter")
    assert not any("gres" in line or "CUDA" in line or "cuda_gdr" in line for line in lines)
    assert lines[-2] == ("srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=verbose,map_cpu:0 "
                         f"{seed_view}/pt2pt/osu_bw -m 1:4194304")


def test_ndr_hca_on_second_socket_pins_cores_gpu_and_ucx_device() -> None:
    assert pt2pt("ndr4x4", hca="mlx5_3", bench="osu_bw", transfer="D-D-gdr",
                 placement="inter") == [
        *sbatch("--exclusive", "--gres=gpu:4"),
        "export CUDA_VISIBLE_DEVICES=3",
        "export UCX_NET_DEVICES=mlx5_3:1",
        "export UCX_IB_GPU_DIRECT_RDMA=yes",
        ALLOCATION, WHOLE,
        FINGERPRINT,
        RANK_GPU.format(3), START,
        "srun --mpi=pmix --kill-on-bad-exit=1 --gpu-bind=map_gpu:3 --cpu-bind=verbose,map_cpu:48 "
        f"{OMB}/pt2pt/osu_bw -m 1:4194304 -d cuda D D",
        END,
    ]


def test_ndr_intra_node_pins_two_ranks_near_hca() -> None:
    lines = pt2pt("ndr4x4", hca="mlx5_2", bench="osu_latency", transfer="H-D-gdr",
                  placement="intra")
    assert "#SBATCH --ntasks-per-node=2" in lines
    assert lines[-2] == ("srun --mpi=pmix --kill-on-bad-exit=1 --gpu-bind=map_gpu:2 "
                         "--cpu-bind=verbose,map_cpu:48,49 "
                         f"{OMB}/pt2pt/osu_latency -m 1:4194304 -d cuda H D")


def test_ndr_multi_pair_and_collectives() -> None:
    scripts = dry_run_scripts("ndr4x4", "OsuMultiPairCheck%hca=mlx5_0",
                              "OsuCollectiveCheck%hca=mlx5_2%benchmark=osu_allreduce",
                              "OsuCollectiveCheck%hca=mlx5_2%benchmark=osu_barrier")
    mbw = body(scripts["OsuMultiPairCheck %hca=mlx5_0"])
    assert "#SBATCH --ntasks=8" in mbw and "#SBATCH --ntasks-per-node=4" in mbw
    assert mbw[-2] == ("srun --mpi=pmix --kill-on-bad-exit=1 --distribution=block:block "
                       "--cpu-bind=verbose,map_cpu:0,1,2,3 "
                       f"{OMB}/pt2pt/osu_mbw_mr -m 1:4194304")
    allreduce = body(scripts["OsuCollectiveCheck %hca=mlx5_2 %benchmark=osu_allreduce"])
    assert "#SBATCH --ntasks=4" in allreduce  # the partition's 4 nodes, one rank each
    assert "export UCX_NET_DEVICES=mlx5_2:1" in allreduce
    assert allreduce[-2] == ("srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=verbose,map_cpu:48 "
                             f"{OMB}/collective/osu_allreduce -f -m 1:1048576")
    barrier = body(scripts["OsuCollectiveCheck %hca=mlx5_2 %benchmark=osu_barrier"])
    assert barrier[-2].endswith(f"{OMB}/collective/osu_barrier -f")


def test_hca_variants_follow_the_topology() -> None:
    names = set(dry_run_scripts("seedfdr", "OsuMultiPairCheck"))
    assert names == {"OsuMultiPairCheck %hca=mlx4_0", "OsuMultiPairCheck %hca=mlx4_1"}


SHARP = "OsuSharpCheck%hca=mlx5_2%benchmark=osu_allreduce%sharp={}"
#: What both SHARP variants share: Open MPI's coll/ucc on, UCC's collective trace (the
#: proof the sanity check reads), the pinned HCA for UCX.
UCC_ON = ["export UCX_NET_DEVICES=mlx5_2:1", "export OMPI_MCA_coll_ucc_enable=1",
          "export OMPI_MCA_coll_ucc_priority=100"]


def test_ndr_sharp_on_and_off_ask_ucc_and_trace_what_ran() -> None:
    """Seed 003: the same allreduce over the partition's 4 nodes with UCC's SHARP TL on the
    pinned HCA, and without it; each job asks UCC to trace the TL every collective ran on."""
    scripts = dry_run_scripts("ndr4x4", SHARP.format("on"), SHARP.format("off"))
    on, off = (body(scripts[SHARP.format(s).replace("%", " %")]) for s in ("on", "off"))
    # -T mpi_float: what SHARP reduces (OMB's default MPI_CHAR is SHARP_DTYPE_NULL before
    # SHARP 3, refused by UCC's TL: a software run blamed on the aggregation manager)
    command = (f"srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=verbose,map_cpu:48 "
               f"{OMB}/collective/osu_allreduce -f -T mpi_float -m 8:2048")
    # 9 sizes x 1000 iterations take 0.4 s at the floor rate: the 300 s start rules
    header = ["#SBATCH --ntasks=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=1",
              "#SBATCH --output=rfm_job.out", "#SBATCH --error=rfm_job.err",
              "#SBATCH --time=0:6:0", "#SBATCH --exclusive", "#SBATCH --partition=gpu",
              "#SBATCH --exclusive"]
    assert on == [*header, *UCC_ON, "export OMPI_UCC_CL_BASIC_TLS=ucp,sharp",
                  "export UCC_TL_SHARP_DEVICES=mlx5_2:1", "export SHARP_COLL_LOG_LEVEL=3",
                  "export UCC_COLL_TRACE=info", ALLOCATION, WHOLE, FINGERPRINT, START,
                  command, END]
    assert off == [*header, *UCC_ON, "export OMPI_UCC_CL_BASIC_TLS=ucp",
                   "export UCC_COLL_TRACE=info", ALLOCATION, WHOLE, FINGERPRINT, START,
                  command, END]


def test_sharp_variants_on_every_hca_of_a_sharp_partition() -> None:
    """ndr4x4's partition says `sharp`: every HCA × collective × on/off; seedfdr's does not
    and gets none (test_hca_variants_follow_the_topology lists what it gets)."""
    names = set(dry_run_scripts("ndr4x4", "OsuSharpCheck"))
    assert len(names) == 4 * 3 * 2, sorted(names)
    # what UCC's SHARP TL runs (tl_sharp.h), and no Reduce, which it never does
    assert {n.split("%benchmark=")[1].split()[0] for n in names} == {
        "osu_allreduce", "osu_barrier", "osu_bcast"}


def test_ndr_nccl_tests_one_rank_per_gpu_on_the_topologys_hcas() -> None:
    """Seed 003's NCCL bus bandwidth: 4 nodes × 4 GPUs, each local rank on its GPU and a
    core of that GPU's socket, NCCL restricted to the four NDR ports (exact names) and
    asked for the INFO lines that prove NET/IB with GDRDMA and each rank's GPU."""
    scripts = dry_run_scripts("ndr4x4", "NcclTestsCheck%test=all_reduce_perf")
    off = body(scripts["NcclTestsCheck %test=all_reduce_perf %collnet=off"])
    on = body(scripts["NcclTestsCheck %test=all_reduce_perf %collnet=on"])
    # the collective network (SHARP) asked of NCCL, through the net plugin of the prefix
    # (which offers nccl-collnet): dlopen("libnccl-net.so") searches LD_LIBRARY_PATH, not
    # libnccl's RUNPATH (NCCL src/plugin/net.cc)
    assert [line for line in on if line not in off] == [
        "export LD_LIBRARY_PATH=/opt/perfguard/gcc-openmpi-ucx-cuda/lib:$LD_LIBRARY_PATH",
        "export NCCL_COLLNET_ENABLE=1"]
    assert off == [
        "#SBATCH --ntasks=16", "#SBATCH --ntasks-per-node=4", "#SBATCH --cpus-per-task=1",
        "#SBATCH --output=rfm_job.out", "#SBATCH --error=rfm_job.err",
        # 8 B-1 GiB, 104 operations a size (nccl-tests' counts) at 1 GB/s: 223 s; 300 s
        # + 4 x that is 20 min, where no --time at all held 4 GPU nodes for the default
        "#SBATCH --time=0:20:0", "#SBATCH --exclusive",
        "#SBATCH --partition=gpu", "#SBATCH --exclusive", "#SBATCH --gres=gpu:4",
        # each task sees its one GPU under --gpu-bind: nccl-tests' device 0 (test_tool_rules)
        "export CUDA_VISIBLE_DEVICES=0,1,2,3", "export NCCL_TESTS_DEVICE=0",
        "export NCCL_DEBUG=INFO",
        "export NCCL_DEBUG_SUBSYS=INIT,NET",
        "export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1",
        # no rank_gpu.sh step: NCCL's own ncclCommInitRank lines prove each rank's GPU
        "export NCCL_COLLNET_ENABLE=0", ALLOCATION, WHOLE, FINGERPRINT, START,
        "srun --mpi=pmix --kill-on-bad-exit=1 --gpu-bind=map_gpu:0,1,2,3 "
        "--cpu-bind=verbose,map_cpu:0,1,48,49 "
        "/opt/perfguard/gcc-openmpi-ucx-cuda/bin/all_reduce_perf -b 8 -e 1073741824 -f 2 -g 1",
        END]


def test_the_readmes_dry_run_writes_a_job_script_for_every_check_it_does_not_skip() -> None:
    """README's `perfguard run --system seedfdr --dry-run`, as typed: every test case that
    is not skipped has its job script (sbatch, the partition's), every skipped one says
    why (too few nodes in the example's two), and none fails."""
    dry = perfguard("run", "--system", "seedfdr", "--dry-run", state=TEST_STATE)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert re.search(r"Ran \d+/\d+ test case\(s\) .*\(0 failure\(s\)", dry.stdout), dry.stdout
    [report] = re.findall(r"^report: (\S+)$", dry.stdout, re.M)
    cases = json.loads(Path(report).read_text())["runs"][0]["testcases"]
    skipped = [case for case in cases if case["result"] == "skip"]
    ran = [case for case in cases if case["result"] != "skip"]
    assert len(ran) > 200 and {case["result"] for case in ran} == {"pass"}
    assert all(case["perfguard_skip_reason"] for case in skipped)
    assert all(f"[{case['perfguard_skip_reason']}]" in dry.stdout for case in skipped)
    scripts = [Path(case["stagedir"]) / "rfm_job.sh" for case in ran
               if not case["name"].startswith("SpackStack")]  # a build, not a job
    assert scripts and all("#SBATCH --partition=gpu" in script.read_text()
                           for script in scripts)
