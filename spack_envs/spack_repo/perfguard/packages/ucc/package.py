# Copyright perfguard developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.ucc.package import Ucc as BuiltinUcc

from spack.package import *


class Ucc(BuiltinUcc):
    """The builtin recipe with a ``sharp`` variant: UCC's SHARP TL (``tl/sharp``).

    UCC's configure builds the SHARP TL only where it finds ``sharp/api/sharp_coll.h``
    and ``libsharp_coll``: ``--with-sharp=DIR`` names where, and without it UCC guesses
    the compiler's default paths alone (config/m4/sharp.m4), which never hold the SHARP of
    MLNX_OFED or HPC-X (``/opt/mellanox/sharp``). The builtin recipe passes nothing.
    """

    variant("sharp", default=False, description="Build the SHARP TL (the site's SHARP)")

    depends_on("sharp", when="+sharp")

    def configure_args(self):
        args = super().configure_args()
        args.extend(self.with_or_without("sharp", activation_value="prefix"))
        return args
