# perfguard's Spack package for perftest (not in Spack's builtin repository).
from spack_repo.builtin.build_systems.autotools import AutotoolsPackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *

class Perftest(AutotoolsPackage, CudaPackage):
    """RDMA verbs benchmarks from linux-rdma: ib_{send,write,read,atomic}_{bw,lat}.

    Both ends of a test must run the same build: install it once per stack and let
    every node use the stack's view.
    """

    homepage = "https://github.com/linux-rdma/perftest"
    url = (
        "https://github.com/linux-rdma/perftest/releases/download/"
        "25.10.0-0.128/perftest-25.10.0-0.128.gd01b183.tar.gz"
    )

    license("GPL-2.0-only OR BSD-2-Clause")

    version(
        "25.10.0-0.128",
        sha256="750bc48b1d9362996de1d2bbe36d3b25f067b5077177d39c2faeb472bd5a7194",
    )
    version(
        "4.4-0.5",
        sha256="750999c9c8e6c066d06445aaa8a825fa578a273e8098c43c61dc4af4b707c2b1",
        url="https://github.com/linux-rdma/perftest/releases/download/v4.4-0.5/"
        "perftest-4.4-0.5.g1ceab48.tar.gz",
    )

    depends_on("c", type="build")
    depends_on("rdma-core")
    depends_on("pciutils")

    def configure_args(self):
        args = []
        if self.spec.satisfies("+cuda"):
            # --use_cuda needs cuda.h at build time; GPUDirect needs nvidia-peermem at run time.
            args.append(f"CUDA_H_PATH={self.spec['cuda'].prefix.include}/cuda.h")
        return args
