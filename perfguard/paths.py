"""Where perfguard finds its files: the shipped defaults, the site directory, the state.

Three places, read in this order of precedence:

- the **site directory** (``--site DIR``, ``PERFGUARD_SITE``, else
  ``$XDG_CONFIG_HOME/perfguard`` or ``/etc/perfguard`` where one exists): the site's own
  topology files, thresholds, rules and MPI flavour additions, kept in the site's own git;
- the **shipped defaults**: inside the installed package (``perfguard/shipped/``, mapped
  from the repository's top-level ``site_config/``, ``dashboards/``, ``spack_envs/`` when
  the wheel is built), or the checkout itself in an editable install;
- the **state directory**: everything a run writes (see ``state_dir``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_SHIPPED_IN_PACKAGE = PACKAGE / "shipped"
#: The source checkout this package runs from (editable install), or None (a wheel).
CHECKOUT: Path | None = None if _SHIPPED_IN_PACKAGE.is_dir() else PACKAGE.parent
#: Root of the shipped defaults: ``site_config/``, ``dashboards/``, ``spack_envs/``.
SHIPPED = _SHIPPED_IN_PACKAGE if CHECKOUT is None else PACKAGE.parent
#: The shipped default site configuration (the example systems, rules, flavours).
DEFAULTS_DIR = SHIPPED / "site_config"
DASHBOARDS_DIR = SHIPPED / "dashboards"
SPACK_ENVS_DIR = SHIPPED / "spack_envs"
_TESTS_SPEC = importlib.util.find_spec("reframe_tests")
#: The check library (the ``reframe_tests`` package, wherever it is installed; beside
#: the package where only ``perfguard`` is on the path).
TESTS_DIR = Path(_TESTS_SPEC.submodule_search_locations[0]) if _TESTS_SPEC else \
    PACKAGE.parent / "reframe_tests"

#: Site files that replace the shipped default of the same name as a whole.
SITE_FILES = ("verdict_rules.yaml", "sweep.yaml", "mpi_flavours.yaml")
#: Site folders whose files add to the shipped ones (a file of the same name replaces).
SITE_FOLDERS = ("systems", "thresholds")


def state_dir() -> Path:
    """The one directory holding every piece of runtime state.

    ``PERFGUARD_STATE_DIR`` wins; then ``$XDG_STATE_HOME/perfguard``; then ``.state`` in
    the checkout (a demo never writes outside it), or ``~/.local/state/perfguard`` for an
    installed package.
    """
    explicit = os.environ.get("PERFGUARD_STATE_DIR")
    if explicit:
        return Path(explicit).resolve()
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return Path(xdg).resolve() / "perfguard"
    if CHECKOUT is not None:
        return CHECKOUT / ".state"
    return Path.home() / ".local" / "state" / "perfguard"


def site_dir() -> Path | None:
    """The site directory: ``PERFGUARD_SITE`` (``--site``), else the first of
    ``$XDG_CONFIG_HOME/perfguard`` (``~/.config/perfguard``) and ``/etc/perfguard`` that
    exists; None: the shipped defaults alone."""
    explicit = os.environ.get("PERFGUARD_SITE")
    if explicit:
        return Path(explicit).resolve()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    for candidate in (config / "perfguard", Path("/etc/perfguard")):
        if candidate.is_dir():
            return candidate
    return None


def site_file(name: str) -> Path:
    """The site's ``name`` where it has one, else the shipped default."""
    site = site_dir()
    if site is not None and (site / name).is_file():
        return site / name
    return DEFAULTS_DIR / name


def site_folder(folder: str, pattern: str = "*.yaml") -> list[Path]:
    """The shipped files of ``folder`` and the site's, a site file replacing the shipped
    file of the same name; sorted by name."""
    found = {p.name: p for p in (DEFAULTS_DIR / folder).glob(pattern)}
    site = site_dir()
    if site is not None:
        found.update({p.name: p for p in (site / folder).glob(pattern)})
    return [found[name] for name in sorted(found)]


def embedded_topology_file(state: Path | None = None) -> Path | None:
    """The topology file `perfguard cluster up` wrote for this state's embedded cluster
    (read from its cluster.json), if one is up; the checks treat it as any other."""
    record = (state or state_dir()) / "cluster.json"
    if not record.exists():
        return None
    path = json.loads(record.read_text()).get("topology_file")
    return Path(path) if path and Path(path).exists() else None


def topology_files(state: Path | None = None) -> list[Path]:
    """Every topology file ReFrame's systems come from: the site's and shipped ones, and
    the embedded cluster's (of ``state``, default: this process's state directory)."""
    embedded = embedded_topology_file(state)
    return [*site_folder("systems"), *([embedded] if embedded else [])]


def spack_packages_file() -> Path:
    """The externals every Spack stack includes: the site's ``spack_packages.yaml``, else
    the shipped example ``spack_envs/site/packages.yaml`` (perfguard.contract.stacks)."""
    site = site_dir()
    if site is not None and (site / "spack_packages.yaml").is_file():
        return site / "spack_packages.yaml"
    return SPACK_ENVS_DIR / "site" / "packages.yaml"


def layered_files() -> dict[str, Path]:
    """Every site setting file perfguard reads → the file it comes from (`site show`)."""
    files = {name: site_file(name) for name in SITE_FILES}
    files["spack_packages.yaml"] = spack_packages_file()
    for folder in SITE_FOLDERS:
        files.update({f"{folder}/{p.name}": p for p in site_folder(folder)})
    return files
