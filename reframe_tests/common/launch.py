"""How every perfguard check is launched: srun options and core binding from the partition."""

from __future__ import annotations

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, variable


class SrunLaunch(rfm.RegressionTestPlugin):
    """Adds the partition's MPI launch options and a verbose core binding to srun.

    ``cpu_bind`` is what we ask Slurm for; ``verbose`` is always added, because
    the mask srun reports is the proof the sanity checks read.
    """

    #: Slurm ``--cpu-bind`` policy (cores, map_cpu:LIST, mask_cpu:LIST, ldoms, …).
    cpu_bind = variable(str, value="cores")
    #: MPI programs get the partition's ``srun_options`` (e.g. ``--mpi=pmix``).
    uses_mpi = variable(bool, value=True)

    @run_after("setup")
    def apply_launch_options(self):
        if self.uses_mpi:
            self.job.launcher.options += list(self.current_partition.extras.get(
                "srun_options", []))
        self.job.launcher.options.append(f"--cpu-bind=verbose,{self.cpu_bind}")
        if self.num_cpus_per_task is None:
            self.num_cpus_per_task = 1

    def take_over_launch(self) -> str:
        """For checks that start several steps themselves: return the srun prefix they
        should use (with all options) and let the job script run the executable as is."""
        prefix = self.job.launcher.run_command(self.job)
        self.job.launcher = getlauncher("local")()
        return prefix
