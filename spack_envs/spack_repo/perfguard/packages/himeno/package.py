# Copyright perfguard developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os
import re

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


def _riken_source(directory):
    """RIKEN's himenoBMTxps.c under ``directory``, found whatever the case of its name
    (public copies spell it himenobmtxps.c), or None."""
    for root, _, files in sorted(os.walk(directory)):
        for name in sorted(files):
            if name.lower() == "himenobmtxps.c":
                return os.path.join(root, name)
    return None


def _process_grid(value):
    """NDXxNDYxNDZ: the MPI process grid the C version fixes at compile time."""
    return re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*", str(value)) is not None


class Himeno(Package):
    """Himeno benchmark, MPI C version (RIKEN): Jacobi iterations for a Poisson
    equation, memory-bandwidth bound.

    The C version fixes grid size and process grid at compile time. The package
    installs the source and RIKEN's paramset.sh under share/himeno, so that a
    benchmark harness can build one binary per size and process grid, and builds
    bin/himeno for the ``size`` and ``grid`` variants for interactive use.
    """

    homepage = "https://i.riken.jp/en/supercom/documents/himenobmt/"
    # RIKEN publishes a ZIP that holds the LHA archive of the sources. The URL carries no
    # version (its 2015/07 is an upload folder, which Spack would otherwise read as the
    # version and replace): each version names its own.
    url = "https://i.riken.jp/wp-content/uploads/2015/07/cc_himenobmtxp_mpi.zip"

    license("LGPL-2.0-or-later")

    # No sha256 yet: RIKEN's site could not be reached where this recipe was written.
    # On a connected host, `spack checksum himeno 2002.02.21` prints the line to put
    # here; until then `perfguard spack check` warns, and an install needs
    # `spack install --no-checksum` or a mirror of the archive.
    version("2002.02.21", url=url)

    variant(
        "size",
        default="M",
        values=("XS", "S", "M", "L", "XL"),
        description="Grid size of bin/himeno",
    )
    variant(
        "grid",
        default="1x1x1",
        values=_process_grid,
        description="Process grid NDXxNDYxNDZ of bin/himeno (its product: the MPI ranks)",
    )

    depends_on("c", type="build")
    depends_on("mpi")
    # libarchive reads LHA; only its programs=bsdtar builds the program.
    depends_on("libarchive programs=bsdtar", type="build")

    def install(self, spec, prefix):
        bsdtar = Executable(spec["libarchive"].prefix.bin.bsdtar)
        for archive in find(".", "*.lzh", recursive=False):
            bsdtar("-xf", archive)
        source = _riken_source(".")
        if source is None:
            raise InstallError("RIKEN's archive holds no himenoBMTxps.c (in any case)")
        with working_dir(os.path.dirname(source)):
            if os.path.basename(source) != "himenoBMTxps.c":  # the name the checks compile
                os.rename(os.path.basename(source), "himenoBMTxps.c")
            ndx, ndy, ndz = spec.variants["grid"].value.split("x")
            Executable("sh")("paramset.sh", spec.variants["size"].value, ndx, ndy, ndz)
            Executable(spec["mpi"].mpicc)("-O3", "himenoBMTxps.c", "-o", "himeno")
            mkdirp(prefix.bin)
            install("himeno", prefix.bin)
            shared = join_path(prefix.share, "himeno")
            mkdirp(shared)
            install("himenoBMTxps.c", shared)
            install("paramset.sh", shared)
