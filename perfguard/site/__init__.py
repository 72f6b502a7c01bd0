"""What the site says and has: the context a command resolves, the site directory, its
Slurm, topology detection, Spack stacks."""
