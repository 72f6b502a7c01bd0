"""nccl-tests output: the table of sizes and NCCL's own account of the path it took.

The table (``all_reduce_perf`` and its siblings, nccl-tests ``src/common.cu``): a header
``#       size         count      type   redop    root     time   algbw   busbw #wrong``
(the same four columns again for in-place), then one row per size; ``# Out of bounds
values : 0 OK`` and ``# Avg bus bandwidth    : 12.3``. Bandwidths are in GB/s (10⁹),
times in µs; ``#wrong`` is ``N/A`` when the check is off (``-c 0``).

With ``NCCL_DEBUG=INFO`` NCCL prints which network each peer connection took (NCCL
``src/transport/net.cc``): ``… NCCL INFO Channel 00/0 : 0[0] -> 4[0] [send] via
NET/IB/0/GDRDMA`` (``/GDRDMA``: the HCA reads the GPU's memory itself), and which
devices the IB plugin uses (``src/transport/net_ib.cc``): ``NET/IB : Using [0]mlx5_0:1/IB
[1]mlx5_1:1/IB ; OOB ib0:…``. A run over ``NET/Socket`` crossed the fabric by TCP.
With ``NCCL_COLLNET_ENABLE=1`` each rank that set up the collective network (SHARP)
says ``rank 3 Connected CollNet``.

NVIDIA's RDMA/SHARP net plugin (nccl-rdma-sharp-plugins, shipped in HPC-X and the DGX
images) names its IB transport ``IBext`` and, from its v7 API on, ``IBext_v7``,
``IBext_v8`` …: ``via NET/IBext_v8/7/GDRDMA`` is NET over IB as ``NET/IB/7/GDRDMA`` is
(``5(2)``: PXN, device 5 through rank 2's proxy). Its device list (``src/ib_plugin.c``)
marks a SHARP-capable port ``[0]mlx5_1:1/IB/SHARP``; RoCE ports end ``/RoCE``, relaxed
ordering adds `` [RO]`` after the list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = re.compile(r"^#\s+size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong",
                    re.M)
ROW = re.compile(r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?P<redop>\w+)\s+"
                 r"(?P<root>-?\d+)\s+(?P<time>[\d.]+)\s+(?P<algbw>[\d.]+)\s+(?P<busbw>[\d.]+)"
                 r"\s+(?P<wrong>\S+)"
                 r"(?:[ \t]+[\d.]+[ \t]+[\d.]+[ \t]+[\d.]+[ \t]+(?P<wrong_ip>\S+))?", re.M)
BOUNDS = re.compile(r"^# Out of bounds values : (\d+) (OK|FAILED)", re.M)
AVERAGE = re.compile(r"^# Avg bus bandwidth\s*: ([\d.]+)", re.M)
VIA = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : \d+\[\w+\] -> \d+\[\w+\] \[(?:send|receive)\]"
                 r" via (?P<transport>NET/(?P<net>\w+)/\S+|\S+)")
IB_DEVICES = re.compile(r"NCCL INFO NET/IB : Using((?: \[\d+\]\S+)+)")
#: One device of that list: ``[0]mlx5_1:1/IB/SHARP`` → ``mlx5_1:1`` (link layer and the
#: plugin's SHARP mark after the first ``/``).
IB_DEVICE = re.compile(r"\[\d+\]([^/\s]+)")
#: NCCL's own IB transport and the RDMA/SHARP plugin's: ``IB``, ``IBext``, ``IBext_v8``.
IB_NETS = re.compile(r"IB(?:ext(?:_v\d+)?)?")
#: NCCL ``src/init.cc``: each rank whose communicator set CollNet (SHARP through the
#: collective network plugin) up; on failure NCCL drops CollNet and says nothing more.
COLLNET = re.compile(r"NCCL INFO rank (\d+) Connected CollNet")
#: What stopped a run before its table (NCCL ``src/debug.cc``, nccl-tests ``src/common.cu``),
#: as recorded on an H200 with ``NCCL_NET=IB`` and no HCA: ``[…] vm:1020:1020 [0]
#: plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin`` and ``vm: Test NCCL
#: failure common.cu:222 'invalid usage (run with NCCL_DEBUG=WARN for details) / '``.
#: nccl-tests' CUDACHECK prints ``host: Test CUDA failure common.cu:1304 '<cudaGetErrorString>'``
#: and TESTCHECK each caller up the stack: `` .. host pid 42: Test failure common.cu:1189``
#: (``src/common.h``); the innermost caller is the one named.
FAILURE = re.compile(r"NCCL WARN (?P<warn>.+)$|Test NCCL failure \S+ '(?P<test>[^'(]+)"
                     r"|(?P<cuda>Test CUDA failure \S+ '[^']*')"
                     r"|(?P<caller>Test failure \S+)$"
                     r"|^(?P<gpus>Invalid number of GPUs: .+)$", re.M)
#: NCCL ``src/init.cc``, each rank as its communicator starts and completes:
#: ``vm:1383:1383 [0] NCCL INFO ncclCommInitRankConfig comm 0x55ae… rank 0 nranks 2 cudaDev 0
#: nvmlDev 0 busId 60 commId 0x89fb… - Init START`` (2.28; older releases print
#: ``ncclCommInitRank`` and no ``nvmlDev``). ``busId`` is the PCI address as a hex number
#: (``0000:00:06.0`` → ``60``), the one name of a GPU that no renumbering changes.
RANK_INIT = re.compile(r"(?P<host>[^\s:]+):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO ncclCommInitRank\w* "
                       r"comm \S+ rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda>\d+)"
                       r"(?: nvmlDev (?P<nvml>\d+))? busId (?P<bus>[0-9a-fA-F]+)")


class ParseError(ValueError):
    """nccl-tests output that cannot be a complete, correct run."""


@dataclass(frozen=True)
class NcclResult:
    sizes: list[int]
    #: Out-of-place figures per size: time (µs), algorithm and bus bandwidth (GB/s).
    time: list[float]
    algbw: list[float]
    busbw: list[float]
    average_busbw: float

    def at(self, metric: str, size: int) -> float:
        return getattr(self, metric)[self.sizes.index(size)]

    @property
    def mean_busbw(self) -> float:
        """The mean out-of-place busbw. nccl-tests' own average counts in place too, which
        for a rank sending to itself copies nothing: 516,831 GB/s at 1 GiB on an H200 made
        its average 18,866 GB/s where the copy ran at 1,904."""
        return sum(self.busbw) / len(self.busbw)


def parse(text: str, max_size: int | None = None) -> NcclResult:
    """The table, complete up to ``max_size`` and without a wrong value, or ParseError."""
    if not HEADER.search(text):
        raise ParseError("no nccl-tests table header (# size count type redop root time "
                         "algbw busbw #wrong): the program did not get to measuring"
                         + "".join(f"; {cause}" for cause in failure_causes(text)))
    rows = [m for m in ROW.finditer(text[HEADER.search(text).end():])]
    if not rows:
        raise ParseError("nccl-tests printed its header but no result rows"
                         + "".join(f"; {cause}" for cause in failure_causes(text)))
    wrong = [m["size"] for m in rows
             if m["wrong"] not in ("0", "N/A") or (m["wrong_ip"] or "0") not in ("0", "N/A")]
    if wrong:
        raise ParseError(f"nccl-tests found wrong results at {', '.join(wrong)} B: the "
                         f"collective corrupts data")
    bounds = BOUNDS.search(text)
    if bounds is None or bounds.group(2) != "OK":
        raise ParseError("nccl-tests did not report '# Out of bounds values : 0 OK'")
    sizes = [int(m["size"]) for m in rows]
    if max_size is not None and sizes[-1] != max_size:
        raise ParseError(f"nccl-tests table ends at {sizes[-1]} B, expected {max_size} B")
    average = AVERAGE.search(text)
    return NcclResult(sizes, [float(m["time"]) for m in rows], [float(m["algbw"]) for m in rows],
                      [float(m["busbw"]) for m in rows],
                      float(average.group(1)) if average else 0.0)


def failure_causes(text: str) -> list[str]:
    """NCCL's warnings and nccl-tests' failed call, each once, in the order printed; the
    innermost ``Test failure`` caller only where nothing else was said (a failed data check,
    ``# Out of bounds values : 4 FAILED``, prints nothing more)."""
    causes = [f"NCCL WARN {m['warn'].strip()}" if m["warn"]
              else f"NCCL call failed: {m['test'].strip()}" if m["test"]
              else f"nccl-tests: {(m['cuda'] or m['caller'] or m['gpus']).strip()}"
              for m in FAILURE.finditer(text)]
    named = [c for c in causes if not c.startswith("nccl-tests: Test failure ")]
    return list(dict.fromkeys(named or causes[:1]))


def network_inside_a_node(text: str) -> list[str]:
    """One node's ranks talk over NVLink, PCIe or shared memory (``via P2P/…``, ``SHM``);
    a channel through the network inside a node means those paths were refused."""
    return sorted({f"a channel inside the node went via {m['transport']}: NCCL found no "
                   f"P2P or shared-memory path between the GPUs" for m in VIA.finditer(text)
                   if m["transport"].startswith("NET/")})


def transport_problems(text: str, hcas: list[str], gdr: bool) -> list[str]:
    """What NCCL's INFO lines say against the request: every peer over IB (not sockets),
    only through ``hcas`` (``mlx5_0:1``), with GPUDirect RDMA where ``gdr``."""
    vias = [m for m in VIA.finditer(text) if m["transport"].startswith("NET/")]
    problems = [] if vias else [
        "no 'NCCL INFO Channel … via NET/…' line: NCCL_DEBUG=INFO did not reach the ranks, "
        "or no peer was across the network"]
    over_ib = [m for m in vias if IB_NETS.fullmatch(m["net"])]
    problems += sorted({f"a channel went via {m['transport']}, not NET/IB"
                        for m in vias if not IB_NETS.fullmatch(m["net"])})
    if gdr:
        problems += sorted({f"a channel went via {m['transport']} without GPUDirect RDMA "
                            f"(/GDRDMA), which the topology's GPU–HCA affinity allows"
                            for m in over_ib if "/GDRDMA" not in m["transport"]})
    used = {device for m in IB_DEVICES.finditer(text) for device in IB_DEVICE.findall(m[1])}
    strays = sorted(used - set(hcas))
    if strays:
        problems.append(f"NCCL used {', '.join(strays)}, outside NCCL_IB_HCA {','.join(hcas)}")
    return problems


def collnet_problem(text: str, ranks: int, requested: bool) -> str | None:
    """CollNet (in-network reduction) asked for: every rank connected it; not asked for:
    none did."""
    connected = {int(rank) for rank in COLLNET.findall(text)}
    if requested and len(connected) < ranks:
        return (f"CollNet (SHARP) requested but {ranks - len(connected)} of {ranks} ranks "
                f"never said 'Connected CollNet': NCCL fell back to rings and trees (no "
                f"collective network plugin, the aggregation manager down, or no SHARP "
                f"resources left)")
    if not requested and connected:
        return f"CollNet not requested but {len(connected)} ranks connected it"
    return None


@dataclass(frozen=True)
class RankGpu:
    """The GPU one rank's communicator runs on, in NCCL's words."""
    rank: int
    host: str
    cuda_device: int
    nvml_device: int | None
    bus_id: int


def rank_gpus(text: str) -> dict[int, RankGpu]:
    """Each rank's GPU from NCCL's ``ncclCommInitRank…`` lines (START and COMPLETE agree)."""
    return {int(m["rank"]): RankGpu(int(m["rank"]), m["host"], int(m["cuda"]),
                                     int(m["nvml"]) if m["nvml"] else None, int(m["bus"], 16))
            for m in RANK_INIT.finditer(text)}


def bus_number(bus_id: str) -> int:
    """A PCI address as NCCL numbers it (``busIdToInt64``: the hex digits, punctuation
    dropped): ``0000:1B:00.0`` → 0x1b000."""
    return int(re.sub(r"[^0-9a-fA-F]", "", bus_id), 16)


def rank_gpu_problems(text: str, expected: list[list], ranks_per_node: int) -> list[str]:
    """Each rank on the topology's GPU for its local rank (``expected``: [index, bus id]
    per local rank; ranks are placed in blocks, rank R is local rank R mod ranks per node)
    and no two ranks of a node on one GPU, from NCCL's own lines."""
    found = rank_gpus(text)
    if not found:
        return ["no 'NCCL INFO ncclCommInitRank… cudaDev … busId …' line: which GPU each rank "
                "used is unproven (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT did not reach "
                "the ranks)"]
    problems = []
    nranks = max(int(m["nranks"]) for m in RANK_INIT.finditer(text))
    silent = sorted(set(range(nranks)) - set(found))
    if silent:
        problems.append(f"ranks {', '.join(map(str, silent))} of {nranks} printed no 'NCCL INFO "
                        f"ncclCommInitRank… cudaDev …' line: which GPU they used is unproven")
    seen: dict[tuple[str, int], int] = {}
    for rank, gpu in sorted(found.items()):
        other = seen.setdefault((gpu.host, gpu.bus_id), rank)
        if other != rank:
            problems.append(f"ranks {other} and {rank} on {gpu.host} share the GPU at busId "
                            f"{gpu.bus_id:x}")
        if not expected:
            continue
        index, bus = expected[(rank % ranks_per_node) % len(expected)]
        if bus and bus_number(bus) != gpu.bus_id:
            problems.append(f"rank {rank} on {gpu.host} ran on busId {gpu.bus_id:x} (cudaDev "
                            f"{gpu.cuda_device}), the topology chose GPU {index} ({bus})")
        elif not bus and gpu.nvml_device is not None and gpu.nvml_device != index:
            problems.append(f"rank {rank} on {gpu.host} ran on GPU {gpu.nvml_device} (NVML), "
                            f"the topology chose GPU {index}")
    return problems
