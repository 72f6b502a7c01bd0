"""The contract between perfguard and its checks, and all that ``reframe_tests/`` imports:
the topology model, the sweep's pairing rounds, the run's references file and where a
check finds the site's files. Nothing here needs the database driver or the embedded
cluster (tests/system/test_adoption.py holds the checks to that)."""

from perfguard.contract.references import References, bounds_direction, run_references
from perfguard.contract.rounds import circle_rounds, disjoint_rounds, in_slots, leaf_rounds
from perfguard.contract.stacks import environment_dir, render, user_cache
from perfguard.contract.topology import Hca, NodeTopology, Partition, all_hca_names, load_system
from perfguard.paths import SPACK_ENVS_DIR, site_file, state_dir, topology_files

__all__ = ["SPACK_ENVS_DIR", "Hca", "NodeTopology", "Partition", "References",
           "all_hca_names", "bounds_direction", "circle_rounds", "disjoint_rounds",
           "environment_dir", "in_slots",
           "leaf_rounds", "render",
           "load_system",
           "run_references", "site_file", "state_dir", "topology_files", "user_cache"]
