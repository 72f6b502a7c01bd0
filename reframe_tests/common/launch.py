"""How every perfguard check is launched: srun options and core binding from the partition."""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import run_after, run_before, variable


class SrunLaunch(rfm.RegressionTestPlugin):
    """Adds the partition's srun options (e.g. ``--mpi=pmix``) and a verbose core binding.

    ``cpu_bind`` is what we ask Slurm for; ``verbose`` is always added, because
    the mask srun reports is the proof the sanity check reads.
    """

    #: Slurm ``--cpu-bind`` policy (cores, map_cpu:LIST, mask_cpu:LIST, ldoms, …).
    cpu_bind = variable(str, value="cores")

    @run_before("run")
    def apply_launch_options(self):
        extras = self.current_partition.extras
        self.job.launcher.options += list(extras.get("srun_options", []))
        self.job.launcher.options.append(f"--cpu-bind=verbose,{self.cpu_bind}")

    @run_after("setup")
    def request_whole_cores(self):
        # One task per core unless a check says otherwise: binding proofs need it.
        if self.num_cpus_per_task is None:
            self.num_cpus_per_task = 1
