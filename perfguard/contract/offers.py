"""What a binary provider offers beyond programs, which checks need it, and how a site
adds what it lacks.

A SHARP variant needs Open MPI's coll/ucc component and UCC's SHARP TL; NCCL's CollNet
needs a net plugin (NCCL ``src/plugin/net.cc`` loads ``libnccl-net.so`` or
``NCCL_NET_PLUGIN``; ``collNetSupport()`` is ``comm->ncclCollNet != nullptr``). A stack
without them can only fail such a variant on a healthy fabric, so a variant whose
partition's provider is *known* to lack what it needs is skipped before submission,
saying what is missing and how to add it. Where nothing is known (a provider that
declares nothing and cannot be looked at from here) the variant runs and its sanity
proves what ran, as before.

Where it is known, first match wins:

1. the provider's own ``offers:`` list in the partition's topology file (what the site
   says; `perfguard topology detect` writes it from the node);
2. a ``spack`` provider: its stack's ``spack_envs/STACK/offers.yaml`` (what our stack
   builds);
3. a ``prefix`` provider whose directory this host sees: looked at
   (``bin/ompi_info --parsable``, ``lib/ucc/libucc_tl_sharp.so``, ``lib/libnccl-net*.so``).
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import yaml

#: Every capability, what it is and how a site adds it.
OFFERS = {
    "mpi-ucc": ("Open MPI's coll/ucc component (collectives through UCC)",
                "build Open MPI with UCC (Spack: openmpi fabrics=ucx,ucc; or load HPC-X's "
                "hpcx-ompi module), check with `ompi_info | grep coll:ucc`"),
    "ucc-sharp": ("UCC's SHARP TL (in-network collectives)",
                  "build UCC against the SHARP library of MLNX_OFED/HPC-X (`ucc_info -s` "
                  "lists tl/sharp; docs/spack.md)"),
    "nccl-collnet": ("an NCCL net plugin with CollNet (libnccl-net.so)",
                     "install NVIDIA's nccl-rdma-sharp-plugins (HPC-X ships it) where NCCL "
                     "finds it: on LD_LIBRARY_PATH or named by NCCL_NET_PLUGIN"),
    "cuda-mpi": ("a CUDA-aware MPI", "build the MPI +cuda (Open MPI: --with-cuda)"),
}
#: The file beside a shipped stack's spack.yaml that lists what the stack builds.
STACK_OFFERS_FILE = "offers.yaml"


def unknown_offers(names: list[str] | set[str] | frozenset[str]) -> list[str]:
    """Those of ``names`` that are no capability perfguard knows (a typo in a site file)."""
    return sorted(set(names) - set(OFFERS))


def stack_offers(stack_dir: Path) -> frozenset[str] | None:
    """What a shipped Spack stack builds (its offers.yaml), or None where it says nothing."""
    listed = stack_dir / STACK_OFFERS_FILE
    if not listed.is_file():
        return None
    return frozenset((yaml.safe_load(listed.read_text()) or {}).get("offers") or [])


def ompi_offers(components: set[str], cuda: bool) -> set[str]:
    """What ``ompi_info --parsable --all`` says (``parse_ompi_info``): the ``coll:ucc``
    component, CUDA support."""
    return {*({"mpi-ucc"} if "coll:ucc" in components else set()),
            *({"cuda-mpi"} if cuda else set())}


def library_offers(library_dirs: list[Path]) -> set[str]:
    """What libraries in ``library_dirs`` say: UCC's SHARP TL (UCC installs its
    components in ``lib/ucc/``), an NCCL net plugin (``libnccl-net.so`` or the named
    ``libnccl-net-NAME.so`` NCCL_NET_PLUGIN selects)."""
    found: set[str] = set()
    for directory in library_dirs:
        if (directory / "ucc" / "libucc_tl_sharp.so").exists():
            found.add("ucc-sharp")
        if any(directory.glob("libnccl-net*.so*")):
            found.add("nccl-collnet")
    return found


#: Open MPI 4 says ``opal_built_with_cuda_support``, 5 ``mpi_built_with_cuda_support``.
CUDA_BUILT = re.compile(r"^mca:\w+:base:param:(?:opal|mpi)_built_with_cuda_support:value:true$",
                        re.M)


def parse_ompi_info(text: str) -> tuple[set[str], bool]:
    """``ompi_info --parsable`` → (its components as ``pml:ucx``, ``coll:ucc`` …, whether
    it was built with CUDA support)."""
    components = {":".join(line.split(":")[1:3]) for line in text.splitlines()
                  if line.startswith("mca:")}
    return components, CUDA_BUILT.search(text) is not None


@functools.cache
def prefix_offers(prefix: str) -> frozenset[str] | None:
    """What an installation this host sees offers, or None where it cannot be looked at."""
    root = Path(prefix)
    if not root.is_dir():
        return None
    found = library_offers([root / "lib", root / "lib64"])
    ompi_info = root / "bin" / "ompi_info"
    if ompi_info.exists():
        try:
            text = subprocess.run([str(ompi_info), "--parsable", "--all"], capture_output=True,
                                  text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        found |= ompi_offers(*parse_ompi_info(text))
    return frozenset(found)


def missing(needs: set[str], offered: frozenset[str] | None) -> list[str]:
    """What of ``needs`` a provider is known to lack ([] where its offers are unknown)."""
    return [] if offered is None else sorted(needs - offered)


def how_to_add(names: list[str]) -> str:
    """'UCC's SHARP TL (…): build UCC against …; …' for the skip reason."""
    return "; ".join(f"{OFFERS[name][0]}: {OFFERS[name][1]}" for name in names)
