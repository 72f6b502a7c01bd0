# Copyright perfguard developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Perftest(AutotoolsPackage):
    """RDMA verbs benchmarks from linux-rdma: ib_{send,write,read,atomic}_{bw,lat}.

    Both ends of a test must run the same build: install it once and let every
    node use the same installation.
    """

    homepage = "https://github.com/linux-rdma/perftest"
    # Release archives carry the git hash in their name: each version names its own.
    url = (
        "https://github.com/linux-rdma/perftest/releases/download/"
        "25.10.0-0.128/perftest-25.10.0-0.128.gd01b183.tar.gz"
    )
    list_url = "https://github.com/linux-rdma/perftest/releases"

    license("GPL-2.0-only OR BSD-2-Clause")

    version(
        "25.10.0-0.128",
        sha256="750bc48b1d9362996de1d2bbe36d3b25f067b5077177d39c2faeb472bd5a7194",
        url="https://github.com/linux-rdma/perftest/releases/download/"
        "25.10.0-0.128/perftest-25.10.0-0.128.gd01b183.tar.gz",
    )
    version(
        "4.4-0.5",
        sha256="750999c9c8e6c066d06445aaa8a825fa578a273e8098c43c61dc4af4b707c2b1",
        url="https://github.com/linux-rdma/perftest/releases/download/"
        "v4.4-0.5/perftest-4.4-0.5.g1ceab48.tar.gz",
    )

    variant("cuda", default=False, description="GPU buffers (--use_cuda) through CUDA")

    depends_on("c", type="build")
    depends_on("rdma-core")
    # The PCIe relaxed-ordering check reads config space through libpci; 4.4 has none.
    depends_on("pciutils", when="@25:")
    depends_on("cuda", when="+cuda")

    def configure_args(self):
        args = []
        if self.spec.satisfies("+cuda"):
            # --use_cuda needs cuda.h at build time; GPUDirect needs nvidia-peermem to run.
            args.append(f"CUDA_H_PATH={self.spec['cuda'].prefix.include}/cuda.h")
        return args
