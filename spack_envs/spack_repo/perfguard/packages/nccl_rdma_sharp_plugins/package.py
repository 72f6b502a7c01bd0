# Copyright perfguard developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class NcclRdmaSharpPlugins(AutotoolsPackage):
    """NVIDIA's network plugin for NCCL, ``libnccl-net.so``: InfiniBand verbs, and with
    SHARP the CollNet that offloads NCCL's all-reduce to the switches
    (``NCCL_COLLNET_ENABLE=1``). NCCL loads it from its library path
    (``LD_LIBRARY_PATH``) or by ``NCCL_NET_PLUGIN``.

    Releases stopped at v2.1.0 (2020); NVIDIA keeps a branch per NCCL release
    (``v2.28.x``): a version here is a commit of one.
    """

    homepage = "https://github.com/Mellanox/nccl-rdma-sharp-plugins"
    git = "https://github.com/Mellanox/nccl-rdma-sharp-plugins.git"

    license("BSD-3-Clause")

    # v2.28.x: "net v11 update (v2.28.7-1)", 2025-10-21
    version("2.28", commit="ebb449d30aa793f0b1b7af8ca99f5339d1974387")

    variant("sharp", default=True, description="CollNet through SHARP (the site's SHARP)")
    variant("ucx", default=False, description="Also the UCX net plugins")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")

    depends_on("cuda")
    depends_on("rdma-core")
    depends_on("sharp", when="+sharp")
    depends_on("ucx", when="+ucx")

    def autoreconf(self, spec, prefix):
        Executable("./autogen.sh")()

    def configure_args(self):
        args = [
            f"--with-cuda={self.spec['cuda'].prefix}",
            f"--with-verbs={self.spec['rdma-core'].prefix}",
        ]
        args.extend(self.with_or_without("sharp", activation_value="prefix"))
        args.extend(self.with_or_without("ucx", activation_value="prefix"))
        return args
