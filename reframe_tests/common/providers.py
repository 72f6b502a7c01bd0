"""Binary providers: where a check's executables come from, chosen per partition.

``binary_provider`` in a partition's topology (or the embedded config) is one of

- ``{kind: spack, env: STACK, root: DIR, config: SCOPE}``: this project's Spack
  environment ``spack_envs/STACK``, installed under ``DIR`` (default ``$STATE/spack``)
  with a view at ``DIR/views/STACK``, optionally with a Spack configuration scope
  (``spack -C SCOPE``: a site's mirrors) — the default on real clusters;
- ``{kind: prefix, path: DIR, modules: [...]}``: an existing installation;
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
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from perfguard.contract import SPACK_ENVS_DIR, environment_dir, render, state_dir
from reframe_tests.common.output import read_output

SPACK_ENVS = SPACK_ENVS_DIR
REPLAY = Path(__file__).with_name("replay.py")
#: What the job prints when a program the 'system' provider names is not on the node.
MISSING_MARK = "perfguard-missing-program"


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


class BinaryProvider(rfm.RegressionTestPlugin):
    """``self.provided(relpath)`` → the executable's path from the partition's providers.
    Used with SrunLaunch (MeasuredCheck), whose SaysWhySkipped keeps skip reasons."""

    spack_stack = fixture(SpackStack, scope="partition")
    #: sha256 of the Spack stack's spack.lock the check's binaries came from.
    spack_lock_hash = variable(str, value="")
    #: Programs the 'system' provider names: the job looks for them on the node first.
    programs_on_node_path = variable(typ.List[str], value=[])

    @property
    def replaying(self) -> bool:
        """The partition's first provider replays recorded output instead of running."""
        return providers_of(self.current_partition)[0].get("kind") == "replay"

    def replays(self, relpath: str) -> bool:
        """A recording stands in for ``relpath`` (else a real program would run)."""
        return self.replaying and replay_problem(
            providers_of(self.current_partition)[0], relpath) is None

    def provided(self, relpath: str) -> str:
        reasons = []
        providers = providers_of(self.current_partition)
        for provider in providers:
            path, problem = locate(provider, relpath)
            if problem is None or self.is_dry_run():
                self.modules = list(self.modules) + list(provider.get("modules", []))
                if provider.get("kind") == "spack":
                    self.activate_spack_view(provider)
                if provider.get("kind", "system") == "system":
                    self.programs_on_node_path = [*self.programs_on_node_path, path]
                return path
            reasons.append(problem)
        self.skip_saying(f"no provider of {relpath} for {self.current_partition.fullname}: "
                  + "; ".join(reasons))

    def activate_spack_view(self, provider: dict) -> None:
        """The stack's view first on PATH in the job (its binaries carry their RPATHs)."""
        view = spack_view(provider)
        self.env_vars["PATH"] = f"{view}/bin:$PATH"
        self.spack_lock_hash = self.spack_stack.lock_hash

    @run_before("run")
    def look_for_programs_on_the_node(self):
        """First in the job: a program the node lacks ends the job cleanly, saying so."""
        probes = [f"command -v {name} >/dev/null 2>&1 || "
                  f"{{ echo \"{MISSING_MARK} {name} $HOSTNAME\"; exit 0; }}"
                  for name in dict.fromkeys(self.programs_on_node_path)]
        self.prerun_cmds = [*probes, *self.prerun_cmds]

    @run_before("sanity")
    def skip_where_the_node_lacks_a_program(self):
        """After the job, before sanity: a missing program is a skip, with the node.

        Before sanity, not after run: ReFrame 4.10's asynchronous policy keeps a test that
        leaves in ``run_wait`` (a ``run_after('run')`` hook that skips or fails) in its
        partition's running set, so every such skip held one of the partition's
        ``max_jobs`` slots for good and the run spun forever once they were all held."""
        if not self.programs_on_node_path or self.is_dry_run():
            return
        try:  # from the stage directory (hooks run elsewhere)
            text = read_output(self)
        except SanityError:
            return  # no output at all: the sanity stage says why
        missing = re.search(rf"^{MISSING_MARK} (\S+) (\S+)$", text, re.M)
        if missing:
            name, host = missing.groups()
            self.skip_saying(f"{name} is not on PATH on {host} (provider 'system'): install "
                             f"a package that provides it on the nodes, or configure a "
                             f"'prefix' or 'spack' provider for "
                             f"{self.current_partition.fullname} (embedded cluster: set "
                             f"PERFGUARD_PREFIX to an installation)")
