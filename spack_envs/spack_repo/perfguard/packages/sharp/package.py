# Copyright perfguard developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class Sharp(Package):
    """NVIDIA SHARP (Scalable Hierarchical Aggregation and Reduction Protocol): the
    library libsharp_coll that UCC's SHARP TL and NCCL's SHARP plugin offload
    collectives to the switches with. External only: it comes with MLNX_OFED, DOCA-OFED
    or HPC-X (``/opt/mellanox/sharp``, ``$HPCX_SHARP_DIR``) and must match the site's
    aggregation manager and firmware. Declare it in packages.yaml with the version of the
    site's ``sharp`` package (``dpkg -s sharp``, ``rpm -q sharp``):

        sharp:
          externals:
          - spec: sharp@3.1.0
            prefix: /opt/mellanox/sharp
          buildable: false
    """

    homepage = "https://docs.nvidia.com/networking/category/mlnxsharp"

    has_code = False

    # An external's version need not be listed; one is, so that a dependency on sharp
    # can be satisfied by a known version (`spack audit packages`).
    version("3.1.0")  # MLNX_OFED 5.8 (sharp_3.1.0.MLNX20221025)

    def install(self, spec, prefix):
        raise InstallError("SHARP is not installable: declare the site's as an external")
