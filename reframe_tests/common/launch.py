"""How every perfguard check is launched: srun options and core binding from the partition."""

from __future__ import annotations

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable


class SrunLaunch(rfm.RegressionTestPlugin):
    """Adds the partition's MPI launch options and a verbose core binding to srun.

    ``cpu_bind`` is what we ask Slurm for (pinning may change it after setup);
    ``verbose`` is always added, because the mask srun reports is the proof the
    sanity checks read. Checks that start several job steps themselves (server
    and client) set ``self_launched`` and implement ``compose_steps(srun)``.
    """

    #: Slurm ``--cpu-bind`` policy (cores, map_cpu:LIST, mask_cpu:LIST, ldoms, …).
    cpu_bind = variable(str, value="cores")
    #: Extra srun options a check or the pinning adds (e.g. ``--gpu-bind=map_gpu:0``).
    srun_extra = variable(list, value=[])
    #: MPI programs get the partition's ``srun_options`` (e.g. ``--mpi=pmix``).
    uses_mpi = variable(bool, value=True)
    #: The job script runs the steps itself, each with the srun prefix we hand it.
    self_launched = variable(bool, value=False)

    @run_after("setup")
    def one_core_per_task(self):
        if self.num_cpus_per_task is None:
            self.num_cpus_per_task = 1

    @run_before("run")
    def apply_launch_options(self):
        options = list(self.current_partition.extras.get("srun_options", [])) \
            if self.uses_mpi else []
        options += [*self.srun_extra, f"--cpu-bind=verbose,{self.cpu_bind}"]
        self.job.launcher.options += options
        if self.self_launched:
            srun = self.job.launcher.run_command(self.job)
            self.job.launcher = getlauncher("local")()
            self.compose_steps(srun)

    def compose_steps(self, srun: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} sets self_launched but does not "
                                  f"implement compose_steps(srun)")
