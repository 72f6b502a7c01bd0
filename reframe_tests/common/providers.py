"""Binary providers: where a check's executables come from, chosen per partition.

``binary_provider`` in a partition's topology (or the embedded config) is one of

- ``{kind: spack, env: STACK, root: DIR}``: this project's Spack environment
  ``spack_envs/STACK``, installed under ``DIR`` (default ``$STATE/spack``) with a
  view at ``DIR/views/STACK`` — the default on real clusters;
- ``{kind: prefix, path: DIR, modules: [...]}``: an existing installation;
- ``{kind: system}``: distribution packages on ``PATH`` (Debian's perftest, ucx-utils).

A list of them is searched in order (the embedded cluster: ``$PERFGUARD_PREFIX``,
then the system).

When the provider cannot deliver (no ``spack``, prefix or binary missing) the
check is skipped with a reason that says how to fix it. Dry runs skip the
look-up, so job scripts can be generated for clusters this machine is not.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import reframe as rfm

from perfguard.paths import REPO_ROOT, state_dir

SPACK_ENVS = REPO_ROOT / "spack_envs"


def providers_of(partition) -> list[dict]:
    """The partition's providers in search order (one mapping, or a list of them)."""
    configured = partition.extras.get("binary_provider") or {"kind": "system"}
    return [dict(p) for p in (configured if isinstance(configured, list) else [configured])]


def spack_root(provider: dict) -> Path:
    return Path(os.path.expandvars(provider.get("root") or str(state_dir() / "spack")))


def spack_view(provider: dict) -> Path:
    return spack_root(provider) / "views" / provider["env"]


def locate(provider: dict, relpath: str) -> tuple[str, str | None]:
    """(path of the executable, or why this provider cannot deliver it)."""
    kind = provider.get("kind", "system")
    if kind == "system":
        if relpath.startswith("share/"):
            return relpath, (f"{relpath} is a data file: provider 'system' offers "
                             f"programs on PATH only; configure a 'prefix' or 'spack' "
                             f"provider (embedded cluster: PERFGUARD_PREFIX)")
        name = Path(relpath).name
        found = shutil.which(name)
        return name, None if found else (
            f"{name} is not on PATH (provider 'system'): install a package that provides "
            f"it, or configure a 'prefix' or 'spack' provider (embedded cluster: set "
            f"PERFGUARD_PREFIX to an installation)")
    if kind == "prefix":
        path = Path(os.path.expandvars(provider["path"])) / relpath
        return str(path), None if path.exists() else (
            f"{path} does not exist (provider 'prefix' {provider['path']}: install the "
            f"benchmark there or fix the prefix in the partition's configuration)")
    path = spack_view(provider) / relpath
    env_dir = SPACK_ENVS / provider["env"]
    if shutil.which("spack") is None:
        return str(path), (f"provider 'spack' (environment {provider['env']}) needs `spack` "
                           f"on PATH: source your Spack's setup-env.sh, or configure a "
                           f"'prefix' provider")
    if not env_dir.is_dir():
        return str(path), f"Spack environment {env_dir} does not exist"
    if not path.exists():
        return str(path), (f"{path} is not installed: run `perfguard spack install "
                           f"{provider['env']}`")
    return str(path), None


class BinaryProvider(rfm.RegressionTestPlugin):
    """``self.provided(relpath)`` → the executable's path from the partition's providers."""

    def provided(self, relpath: str) -> str:
        reasons = []
        providers = providers_of(self.current_partition)
        for provider in providers:
            path, problem = locate(provider, relpath)
            if problem is None or self.is_dry_run():
                self.modules = list(self.modules) + list(provider.get("modules", []))
                return path
            reasons.append(problem)
        self.skip(f"no provider of {relpath} for {self.current_partition.fullname}: "
                  + "; ".join(reasons))
