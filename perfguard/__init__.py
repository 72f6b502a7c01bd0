"""perfguard: Slurm-integrated performance regression testing for IB/GPU clusters."""

__version__ = "0.1.0"
