"""`perfguard topology detect`: describe the node this runs on as a topology partition.

Sources, each optional (a missing tool leaves its part empty and says so):
``lscpu -p`` for NUMA domains and cores, ``ibv_devinfo -v`` and sysfs for HCAs,
``nvidia-smi topo -m`` for GPUs and their PCIe affinity to each HCA, ``nvidia-smi
--query-gpu`` for their model; ``ompi_info --parsable`` for the MPI flavour, and what is
on the node's PATH (spack, osu_latency) for where the benchmarks come from.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard.contract import offers
from perfguard.contract.topology import AFFINITY_ORDER, parse_cpu_list
from perfguard.errors import PerfguardError
from perfguard.yamlfile import dump_yaml


@dataclass
class Detected:
    numa: dict[int, list[int]] = field(default_factory=dict)
    hcas: list[dict[str, Any]] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Open MPI's PML and BTL components (``ompi_info``); None: no Open MPI on the node.
    ompi_components: set[str] | None = None
    #: Programs found on the node's PATH, of those that decide the binary provider.
    programs: set[str] = field(default_factory=set)
    #: What the node's MPI and libraries offer beyond programs (perfguard.contract.offers).
    offers: set[str] = field(default_factory=set)
    #: The memory a job gets on the node: Slurm's RealMemory in a Slurm job (what Himeno's
    #: sizes are checked against: a job beyond it is killed), else MemTotal.
    memory_mib: int | None = None
    #: The node's own MemTotal (/proc/meminfo), written as a comment beside Slurm's figure.
    node_memory_mib: int | None = None
    #: What Slurm says of the node (``scontrol show node``) when detect runs in a job.
    slurm: dict[str, str] = field(default_factory=dict)
    #: Comments about the node written above the YAML (its own totals beside Slurm's).
    facts: list[str] = field(default_factory=list)

    @property
    def rdma(self) -> bool:
        return any(h.get("link_layer") in ("InfiniBand", "Ethernet") and
                   h.get("state") == "PORT_ACTIVE" for h in self.hcas)

    def mpi_flavour(self) -> str:
        """The key of mpi_flavours.yaml the node's MPI is: UCX or openib over an RDMA
        port, TCP without one."""
        components = self.ompi_components or set()
        if self.rdma and "pml:ucx" in components:
            return "openmpi-ucx"
        if self.rdma and "btl:openib" in components:
            return "openmpi-openib"
        return "openmpi-tcp"

    def binary_provider(self) -> dict[str, str]:
        """Spack where the node has it (the stack to install named), else the node's
        own programs."""
        if "spack" in self.programs:
            return {"kind": "spack",
                    "env": "gcc-openmpi-ucx-cuda" if self.gpus else "gcc-openmpi-ucx"}
        return {"kind": "system", "offers": sorted(self.offers)}


def parse_lscpu(text: str) -> dict[int, list[int]]:
    """NUMA node → CPUs, one CPU per core (the first hardware thread of each core)."""
    numa: dict[int, list[int]] = {}
    seen_cores: set[tuple[str, str]] = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split(",")
        cpu, core, socket, node = fields[0], fields[1], fields[2], fields[3] or "0"
        if (socket, core) in seen_cores:
            continue
        seen_cores.add((socket, core))
        numa.setdefault(int(node), []).append(int(cpu))
    return numa


def parse_ibv_devinfo(text: str) -> list[dict[str, Any]]:
    """One entry per (HCA, port): name, port, state, link layer, firmware, rate if shown."""
    ports: list[dict[str, Any]] = []
    hca: dict[str, Any] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if key == "hca_id":
            hca = {"name": value}
        elif key == "fw_ver":
            hca["fw_ver"] = value
        elif key == "board_id":
            hca["board_id"] = value
        elif key == "port" and value.isdigit():
            ports.append({**hca, "port": int(value)})
        elif ports and key == "state":
            ports[-1]["state"] = value.split()[0]
        elif ports and key == "link_layer":
            ports[-1]["link_layer"] = value
        elif ports and key == "active_width":
            ports[-1]["width"] = int(re.match(r"(\d+)X", value).group(1))
        elif ports and key == "active_speed":
            ports[-1]["lane_gbps"] = float(re.match(r"([\d.]+)", value).group(1))
            named = re.search(r"\(([A-Z][A-Z0-9]*)\)", value)  # "10.0 Gbps (FDR10)"
            if named:
                ports[-1]["speed"] = named.group(1)
    for port in ports:
        if "width" in port and "lane_gbps" in port:
            port["rate_gbps"] = round(port.pop("width") * port.pop("lane_gbps"), 2)
    return ports


#: The escape sequences nvidia-smi underlines its header with, also through a pipe.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
TOPO_SOURCE = "nvidia-smi topo -m"


#: The header's columns: devices (``GPU0``, ``NIC3``, ``mlx5_0`` in older drivers) and the
#: affinity columns, found in the line rather than split from it: drivers 550 print a
#: 10-NIC header as ``NIC7NIC8`` (no separator), and a paste turns tabs into spaces.
TOPO_COLUMN = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID"
                         r"|[A-Za-z][\w-]*?\d+(?=\s|$|NIC|GPU)")
#: A matrix cell: one of the legend's levels; ``SYSSYS`` is two cells run together.
TOPO_LEVEL = re.compile(r"X|SYS|NODE|PHB|PXB|PIX|NV\d+")
TOPO_LEVELS = re.compile(f"(?:{TOPO_LEVEL.pattern})+")


def _row(line: str, devices: int, trailing: list[str]) -> tuple[str, list[str], dict[str, str]]:
    """A row's name, its ``devices`` matrix cells and its affinity columns by header name.

    The matrix cells come first, each a level of the legend (cells run together split
    apart); the affinity columns are read from the right: ``GPU NUMA ID`` and ``NUMA
    Affinity`` are one word each (a number or N/A), and the CPU Affinity is what is left:
    ``112-127,240-255 7`` with one space, or nothing where nvidia-smi left it empty (GPUs
    outside a Slurm job's CPUs)."""
    name, *words = line.split()
    cells: list[str] = []
    while words and len(cells) < devices and TOPO_LEVELS.fullmatch(words[0]):
        cells += TOPO_LEVEL.findall(words.pop(0))
    affinity = {}
    for column in reversed(trailing):
        if column == "CPU Affinity":
            affinity[column] = ",".join(words) or "N/A"
            break
        affinity[column] = words.pop() if words else "N/A"
    return name, cells, affinity


def parse_nvidia_topo(text: str, source: str = TOPO_SOURCE) -> list[dict[str, Any]]:
    """GPUs with NUMA and CPU affinity and PCIe affinity to each NIC (named by the NIC
    legend), from the matrix as the driver prints it (escape sequences, tabs, the
    ``GPU NUMA ID`` column of driver 580) and as people paste it (tabs turned to spaces,
    so a full CPU list and its NUMA node are one space apart). The header is the row that
    names ``CPU Affinity``; where GPU rows come without one, that is an error naming
    ``source``, never a data row taken for a header."""
    lines = [line for line in ANSI_ESCAPE.sub("", text).splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if "CPU Affinity" in line), None)
    gpu_rows = [line for line in lines if re.match(r"\s*GPU\d+\s", line)]
    if header is None:
        if gpu_rows:
            raise PerfguardError(f"{source}: GPU rows but no header row naming 'CPU "
                                 f"Affinity': the columns cannot be told apart")
        return []
    columns = TOPO_COLUMN.findall(lines[header])
    devices = [c for c in columns if " " not in c]
    trailing = columns[len(devices):]
    legend = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)", "\n".join(lines), re.M))
    gpus = []
    for line in lines[header + 1:]:
        if not re.match(r"\s*GPU\d+\s", line):
            continue  # NIC rows, legends, MIG device lines
        name, cells, row = _row(line, len(devices), trailing)
        where = f"{source}: row {name}"
        affinity = {legend.get(col, col): level for col, level in zip(devices, cells)
                    if not col.startswith("GPU") and level in AFFINITY_ORDER}
        cpus = row.get("CPU Affinity", "N/A")
        numa = row.get("NUMA Affinity", "N/A")
        gpus.append({"index": int(name[3:]), "affinity": affinity,
                     "numa": int(numa) if numa.isdigit() else 0,
                     "cpus": [] if cpus == "N/A" else list(parse_cpu_list(cpus, where))})
    return gpus


QUERY_GPU = "index,name,pci.bus_id"


def parse_nvidia_query(text: str) -> dict[int, dict[str, str]]:
    """``nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader`` → index →
    model and PCI bus id."""
    found = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 3 and fields[0].isdigit():
            found[int(fields[0])] = {"model": fields[1], "bus_id": fields[2]}
    return found


def _run(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return result.stdout if result.returncode == 0 else None


def _hca_numa(name: str) -> int:
    path = Path(f"/sys/class/infiniband/{name}/device/numa_node")
    try:
        return max(0, int(path.read_text().strip()))
    except (OSError, ValueError):
        return 0


def _sysfs_rate(name: str, port: int) -> float | None:
    """``/sys/class/infiniband/mlx5_0/ports/1/rate``: '200 Gb/sec (4X HDR)'."""
    try:
        text = Path(f"/sys/class/infiniband/{name}/ports/{port}/rate").read_text()
    except OSError:
        return None
    match = re.match(r"([\d.]+)", text)
    return float(match.group(1)) if match else None


#: Programs whose presence on a node decides its binary provider.
PROVIDER_PROGRAMS = ("spack", "osu_latency")


#: Where the dynamic linker looks when LD_LIBRARY_PATH does not say (Debian's and the RPM
#: distributions' multiarch and lib64 directories): an NCCL net plugin installed there is
#: what NCCL's dlopen("libnccl-net.so") finds.
SYSTEM_LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                       "/usr/lib", "/usr/local/lib")


def library_dirs() -> list[Path]:
    """The directories a program run on this node loads libraries from, in order."""
    listed = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    return [Path(d) for d in dict.fromkeys([*listed, *SYSTEM_LIBRARY_DIRS])]


def _software(found: Detected) -> None:
    found.programs = {p for p in PROVIDER_PROGRAMS if shutil.which(p)}
    ompi = _run(["ompi_info", "--parsable", "--all"])
    if ompi is None:
        found.notes.append("ompi_info not on PATH: no Open MPI found on the node; mpi is a "
                           "guess (a key of mpi_flavours.yaml)")
    else:
        found.ompi_components, cuda = offers.parse_ompi_info(ompi)
        found.offers = offers.ompi_offers(found.ompi_components, cuda)
    found.offers |= offers.library_offers(library_dirs())
    if "spack" in found.programs:
        provider = found.binary_provider()
        found.notes.append(f"binary_provider spack: install the stack before the first run "
                           f"(`perfguard spack install {provider['env']}`)")
    elif "osu_latency" not in found.programs:
        found.notes.append("neither spack nor osu_latency on PATH: the OMB checks will skip "
                           "(nothing-measured) until binary_provider names where OMB is "
                           "(kind prefix or spack; docs/adopting.md)")


def parse_meminfo(text: str) -> int | None:
    """``/proc/meminfo`` → MemTotal in MiB."""
    match = re.search(r"^MemTotal:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) // 1024 if match else None


def parse_scontrol_node(text: str) -> dict[str, str]:
    """``scontrol show node -o NAME`` → its ``Key=value`` fields (RealMemory, CPUTot,
    CPUEfctv, CPUSpecList …); a value with spaces (OS=) keeps its first word."""
    return dict(re.findall(r"(?:^|\s)(\w+)=(\S*)", text))


def slurm_node() -> dict[str, str]:
    """What Slurm says of the node this job runs on (empty outside a Slurm job)."""
    name = os.environ.get("SLURMD_NODENAME")
    text = _run(["scontrol", "show", "node", "-o", name]) if name else None
    return parse_scontrol_node(text) if text else {}


def slurm_gives(found: Detected, node: dict[str, str]) -> None:
    """Memory and CPUs as Slurm gives them to a job, where detect runs in one: RealMemory
    for ``memory_mib`` (a job that needs more is killed, whatever the node has), the
    node's CPUs less those Slurm keeps for itself (CPUSpecList); the node's own totals
    become a comment."""
    cores = sorted(c for cpus in found.numa.values() for c in cpus)
    own = (f"MemTotal {found.node_memory_mib} MiB, " if found.node_memory_mib else "") + \
        f"{len(cores)} core(s) (CPUs {compact_cpus(cores) or 'unknown'})"
    if not node:
        found.facts.append(f"node: {own}; not in a Slurm job: memory_mib is MemTotal "
                           f"(run through srun to take Slurm's RealMemory)")
        return
    memory = node.get("RealMemory", "")
    if memory.isdigit() and int(memory) > 1:  # Slurm's default RealMemory is 1
        found.memory_mib = int(memory)
    else:
        found.notes.append(f"Slurm declares no RealMemory for node {node.get('NodeName')}: "
                           f"memory_mib is the node's MemTotal")
    withheld = set(parse_cpu_list(node["CPUSpecList"], "CPUSpecList")) \
        if node.get("CPUSpecList") not in (None, "", "(null)") else set()
    found.numa = {n: [c for c in cpus if c not in withheld]
                  for n, cpus in found.numa.items() if set(cpus) - withheld}
    given = node.get("CPUEfctv") or node.get("CPUTot") or "?"
    found.facts.append(f"node {node.get('NodeName')}: {own}; Slurm gives a job "
                       f"RealMemory {memory or '?'} MiB and {given} CPU(s)"
                       + (f" (CPUSpecList {node['CPUSpecList']} kept by Slurm)"
                          if withheld else ""))
    left = sum(map(len, found.numa.values()))
    if given.isdigit() and left > int(given):
        found.notes.append(f"Slurm gives a job {given} CPU(s) on {node.get('NodeName')}, "
                           f"numa lists {left} cores: trim node.numa to the cores jobs get")


def detect() -> Detected:
    found = Detected()
    _software(found)
    try:
        found.node_memory_mib = parse_meminfo(Path("/proc/meminfo").read_text())
        found.memory_mib = found.node_memory_mib
    except OSError:
        found.notes.append("/proc/meminfo not readable: node memory unknown")
    lscpu = _run(["lscpu", "-p"])
    if lscpu is None:
        found.notes.append("lscpu not available: NUMA domains unknown")
    else:
        found.numa = parse_lscpu(lscpu)
    slurm_gives(found, slurm_node())
    devinfo = _run(["ibv_devinfo", "-v"])
    if not devinfo or "hca_id" not in devinfo:
        found.notes.append("no RDMA device (ibv_devinfo lists none): no HCAs")
    else:
        for port in parse_ibv_devinfo(devinfo):
            port.setdefault("rate_gbps", _sysfs_rate(port["name"], port["port"]) or 0)
            port["numa"] = _hca_numa(port["name"])
            found.hcas.append(port)
    topo = _run(["nvidia-smi", "topo", "-m"])
    if topo is None:
        found.notes.append("nvidia-smi not available: no GPUs")
    else:
        found.gpus = parse_nvidia_topo(topo)
        models = parse_nvidia_query(
            _run(["nvidia-smi", f"--query-gpu={QUERY_GPU}", "--format=csv,noheader"]) or "")
        for gpu in found.gpus:
            gpu.update(models.get(gpu["index"], {}))
    return found


def as_topology_yaml(found: Detected, system: str, partition: str, mpi: str | None = None,
                     nodes: int | None = None) -> str:
    """A topology file for one partition, to review and commit under site_config/systems/:
    its jobs go to the Slurm partition of the same name; ``mpi`` None: the node's own."""
    hca_names = {h["name"] for h in found.hcas}
    node = {
        **({"memory_mib": found.memory_mib} if found.memory_mib else {}),
        "numa": [{"id": node, "cpus": compact_cpus(cpus)}
                 for node, cpus in sorted(found.numa.items())],
        "hcas": [{"name": h["name"], "port": h["port"], "link_layer": h.get("link_layer", ""),
                  "rate_gbps": h.get("rate_gbps", 0), "numa": h["numa"],
                  **({"speed": h["speed"]} if h.get("speed") else {})}
                 for h in found.hcas if h.get("state") == "PORT_ACTIVE"],
        "gpus": [{"index": g["index"], **({"model": g["model"]} if g.get("model") else {}),
                  **({"bus_id": g["bus_id"]} if g.get("bus_id") else {}),
                  "numa": g["numa"],
                  "affinity": {k: v for k, v in g["affinity"].items() if k in hca_names}}
                 for g in found.gpus],
    }
    document = {"system": system, "partitions": [{
        "name": partition, "access": [f"--partition={partition}"],
        "environs": ["gnu-openmpi"], "features": ["mpi", "ucx"],
        **({"nodes": nodes} if nodes else {}),
        "mpi": mpi or found.mpi_flavour(), "binary_provider": found.binary_provider(),
        "node": node}]}
    header = "".join(f"# {fact}\n" for fact in found.facts) + \
        "".join(f"# note: {n}\n" for n in found.notes)
    return header + dump_yaml(document)


def compact_cpus(cpus: list[int]) -> str:
    """[0, 1, 2, 5] → '0-2,5'."""
    ranges: list[str] = []
    start = prev = None
    for cpu in sorted(cpus) + [None]:
        if start is None:
            start = prev = cpu
        elif cpu is not None and cpu == prev + 1:
            prev = cpu
        else:
            ranges.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = cpu
    return ",".join(ranges)
