# perfguard's Spack package for the Himeno benchmark (not in Spack's builtin repository).
from spack_repo.builtin.build_systems.generic import Package

from spack.package import *

class Himeno(Package):
    """Himeno benchmark, MPI C version (RIKEN, LGPL 2.0): Jacobi iterations for a
    Poisson equation, memory-bandwidth bound.

    The C version fixes grid size and process grid at compile time. The package
    installs the source and RIKEN's paramset.sh under share/himeno, so perfguard's
    check builds one binary per (size, process grid) variant, and builds bin/himeno
    for the ``size`` and ``grid`` variants here for interactive use.
    """

    homepage = "https://i.riken.jp/en/supercom/documents/himenobmt/"
    url = "https://i.riken.jp/wp-content/uploads/2015/07/cc_himenobmt_mpi.lzh"

    license("LGPL-2.0-or-later")

    # The archive's sha256 could not be taken where this recipe was written (no access
    # to RIKEN's site); `perfguard spack check` reports it until a site runs
    # `spack checksum himeno` and pastes the value here.
    version("2002.02.21", expand=False)

    variant("size", default="M", values=("XS", "S", "M", "L", "XL"), description="Grid size")
    variant("grid", default="1x1x1", description="Process grid NDXxNDYxNDZ (= MPI ranks)")

    depends_on("c", type="build")
    # An LHA archive: libarchive's bsdtar reads it (Spack's stage cannot).
    depends_on("libarchive", type="build")
    depends_on("mpi")

    def install(self, spec, prefix):
        which("bsdtar")("-xf", self.stage.archive_file)
        ndx, ndy, ndz = spec.variants["grid"].value.split("x")
        which("sh")("paramset.sh", spec.variants["size"].value, ndx, ndy, ndz)
        Executable(spec["mpi"].mpicc)("-O3", "himenoBMTxps.c", "-o", "himeno")
        mkdirp(prefix.bin)
        install("himeno", prefix.bin)
        source = join_path(prefix.share, "himeno")
        mkdirp(source)
        install("himenoBMTxps.c", source)
        install("paramset.sh", source)
