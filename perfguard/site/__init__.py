"""Where things are and what the site says: paths, the site directory,
topology detection, Spack stacks."""
