"""Binary providers: where a check's executables come from, chosen per partition.

``binary_provider`` in a partition's topology (or the embedded config) is one of

- ``{kind: spack, env: STACK, root: DIR, config: SCOPE}``: this project's Spack
  environment ``spack_envs/STACK``, installed under ``DIR`` (default ``$STATE/spack``)
  with a view at ``DIR/views/STACK``, optionally with a Spack configuration scope
  (``spack -C SCOPE``: a site's mirrors) — the default on real clusters;
- ``{kind: prefix, path: DIR, modules: [...]}``: an existing installation, with the
  environment modules it needs (HPC-X's): ReFrame writes their ``module load`` lines
  into the job (the system's ``modules_system``), and the job checks each is loaded
  before anything runs (``module_probes``);
- ``{kind: system}``: distribution packages on the compute node's ``PATH`` (Debian's
  perftest, ucx-utils): looked up *in the job*, on the node, never on the host that runs
  ReFrame (a login node may lack what the nodes have, and the other way round);
- ``{kind: replay, path: DIR}``: **recorded real output** replayed in place of the
  benchmark (reframe_tests/common/replay.py), for CI where the benchmark cannot run.
  Never a default: the embedded cluster uses it only when ``$PERFGUARD_REPLAY`` is set.

A list of them is searched in order (the embedded cluster: ``$PERFGUARD_PREFIX``,
``$PERFGUARD_SPACK_ENV``, then the system).

When the provider cannot deliver (no ``spack``, prefix or binary missing) the
check is skipped with a reason that says how to fix it: before submission where the
files are on the shared prefix, after the job where the node said so. Dry runs skip the
look-up, so job scripts can be generated for clusters this machine is not.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, sanity_function, variable

from perfguard.contract import SPACK_ENVS_DIR, environment_dir, render, state_dir, user_cache
from perfguard.contract import offers as capabilities

SPACK_ENVS = SPACK_ENVS_DIR
REPLAY = Path(__file__).with_name("replay.py")
#: What the job prints when a program the 'system' provider names is not on the node.
MISSING_MARK = "perfguard-missing-program"
#: What the job prints when a provider's module did not load on the node.
MISSING_MODULE_MARK = "perfguard-missing-module"


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
        return Path(relpath).name, None  # the node's PATH: probed in the job
    if kind == "replay":
        return f"{REPLAY} {provider['path']} {relpath}", replay_problem(provider, relpath)
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
        scope = provider.get("config") or os.environ.get("PERFGUARD_SPACK_CONFIG")
        return str(path), (f"{path} is not installed: run `perfguard spack install "
                           f"{provider['env']}{f' -C {scope}' if scope else ''}`")
    return str(path), None


def replay_problem(provider: dict, relpath: str) -> str | None:
    """Why the replay catalogue cannot stand in for ``relpath`` (no recording of it)."""
    catalogue = Path(os.path.expandvars(provider["path"])) / "recordings.json"
    try:
        programs = {entry["program"] for entry in json.loads(catalogue.read_text())}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"replay catalogue {catalogue} is unreadable: {exc}"
    name = Path(relpath).name
    return None if name in programs else f"replay catalogue {catalogue} has no {name}"


def offers(provider: dict) -> frozenset[str] | None:
    """What the provider offers beyond programs (coll/ucc, UCC's SHARP TL, an NCCL net
    plugin), or None where that is not known (perfguard/contract/offers.py says where
    each answer comes from)."""
    if "offers" in provider:
        return frozenset(provider["offers"])
    kind = provider.get("kind", "system")
    if kind == "spack":
        return capabilities.stack_offers(SPACK_ENVS / provider["env"])
    if kind == "prefix":
        return capabilities.prefix_offers(os.path.expandvars(provider["path"]))
    return None


def library_dir(provider: dict) -> str | None:
    """The provider's library directory (a net plugin is looked for there), or None
    where its libraries are the node's own."""
    kind = provider.get("kind", "system")
    if kind == "prefix":
        return f"{os.path.expandvars(provider['path'])}/lib"
    if kind == "spack":
        return f"{spack_view(provider)}/lib"
    return None


def lacks(provider: dict, needs: set[str], partition: str) -> str | None:
    """Why ``provider`` cannot serve a variant that ``needs`` these capabilities, naming
    what is missing and how to add it, or None (it has them, or nobody knows)."""
    absent = capabilities.missing(needs, offers(provider))
    if not absent:
        return None
    where = provider.get("env") or provider.get("path") or provider.get("kind", "system")
    return (f"the binaries of {partition} ({provider.get('kind', 'system')} {where}) lack "
            f"{', '.join(absent)}: {capabilities.how_to_add(absent)}; then list it in "
            f"binary_provider's offers (topology file)")


def spack_command(provider: dict) -> str:
    """``spack``, with the provider's own configuration scope (``config: DIR``: mirrors
    of an air-gapped site, build settings for perfguard's installs) when it names one."""
    scope = provider.get("config") or os.environ.get("PERFGUARD_SPACK_CONFIG")
    return f"spack -C {os.path.expandvars(scope)}" if scope else "spack"


def spack_provider(partition) -> dict | None:
    return next((p for p in providers_of(partition) if p.get("kind") == "spack"), None)


class SpackStack(rfm.RunOnlyRegressionTest):
    """Installs the partition's Spack stack once per session (a fixture of every check).

    The install tree, the view and the environment Spack works on (rendered from
    ``spack_envs/STACK``: the checkout stays untouched) live under the provider's
    ``root`` (a persistent shared path, not the stage dir ReFrame deletes); ``spack
    install`` of an installed stack is a no-op. The sha256 of ``spack.lock`` is what
    results record as the build they used. Partitions without a Spack provider have
    nothing to build.
    """

    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    local = True
    executable = "true"
    #: sha256 of the stack's spack.lock once installed; empty without a Spack provider.
    lock_hash = variable(str, value="")

    @run_after("setup")
    def install_stack(self):
        provider = spack_provider(self.current_partition)
        if provider is None:
            return
        env_dir = environment_dir(provider["env"], spack_root(provider))
        # Spack's user cache beside the installs, not ~/.spack of whoever runs the job
        self.env_vars["SPACK_USER_CACHE_PATH"] = (os.environ.get("SPACK_USER_CACHE_PATH")
                                                  or str(user_cache(spack_root(provider))))
        self.executable = f"{spack_command(provider)} -e {env_dir} install --fail-fast"
        self.postrun_cmds = [f"sha256sum {env_dir}/spack.lock"]
        if self.is_dry_run():
            return
        if shutil.which("spack") is None:
            self.skip(f"binary_provider 'spack' (environment {provider['env']}) needs `spack` "
                      f"on PATH: source your Spack's setup-env.sh, or configure a 'prefix' "
                      f"provider for {self.current_partition.fullname}")
        try:
            render(provider["env"], spack_root(provider))
        except OSError as exc:
            self.skip(f"cannot write Spack environment {env_dir} under the install root "
                      f"of {self.current_partition.fullname}: {exc}")

    @sanity_function
    def installed(self):
        if spack_provider(self.current_partition) is None:
            return True
        self.lock_hash = sn.evaluate(sn.extractsingle(r"^([0-9a-f]{64})\s", self.stdout, 1))
        return True


def find(partition, relpath: str, dry_run: bool) -> tuple[tuple[str, dict] | None, list[str]]:
    """((path, provider) of the first provider that has ``relpath``, or None; why each
    provider before it could not deliver). A dry run takes the first provider as is."""
    reasons = []
    for provider in providers_of(partition):
        path, problem = locate(provider, relpath)
        if problem is None or dry_run:
            return (path, provider), reasons
        reasons.append(problem)
    return None, reasons


def probe_commands(programs: list[str]) -> list[str]:
    """First in the job: a program the node lacks ends the job cleanly, saying so."""
    return [f"command -v {name} >/dev/null 2>&1 || "
            f"{{ echo \"{MISSING_MARK} {name} $HOSTNAME\"; exit 0; }}"
            for name in dict.fromkeys(programs)]


def module_probes(modules: list) -> list[str]:
    """First in the job, after ReFrame's ``module load`` lines: a provider's module that
    did not load ends the job cleanly, saying which, where, and whether the job's shell
    had a ``module`` command at all (``type -t module``: function, file, or none)."""
    names = [m["name"] if isinstance(m, dict) else str(m) for m in modules]
    return [f"module is-loaded {name} >/dev/null 2>&1 || {{ echo \"{MISSING_MODULE_MARK} "
            f"{name} $HOSTNAME $(type -t module || echo none)\"; exit 0; }}"
            for name in dict.fromkeys(names)]


def missing_module(output: str, provider: dict, partition: str) -> str | None:
    """The skip reason where the job said a provider's module did not load, naming the
    module, the node and the fix."""
    missing = re.search(rf"^{MISSING_MODULE_MARK} (\S+) (\S+) (\S+)$", output, re.M)
    if missing is None:
        return None
    name, host, command = missing.groups()
    where = f"provider '{provider.get('kind', 'system')}' {provider.get('path') or ''}".strip()
    if command == "none":
        return (f"module {name} was not loaded on {host} ({where}): the job's shell has no "
                f"`module` command: set the system's modules_system (lmod) and a "
                f"prepare_cmds line that sources Lmod's bash init for {partition} "
                f"(topology file; docs/adopting.md)")
    return (f"module {name} did not load on {host} ({where}): check the name with `module "
            f"avail {name}` on {host} and that MODULEPATH in the job reaches its module "
            f"file, or fix binary_provider's modules for {partition} (topology file; "
            f"embedded cluster: PERFGUARD_PREFIX_MODULES)")


def missing_program(output: str, partition: str) -> str | None:
    """The skip reason where the job said a node lacked a program, naming node and fix."""
    missing = re.search(rf"^{MISSING_MARK} (\S+) (\S+)$", output, re.M)
    if missing is None:
        return None
    name, host = missing.groups()
    return (f"{name} is not on PATH on {host} (provider 'system'): install a package that "
            f"provides it on the nodes, or configure a 'prefix' or 'spack' provider for "
            f"{partition} (embedded cluster: set PERFGUARD_PREFIX to an installation)")
