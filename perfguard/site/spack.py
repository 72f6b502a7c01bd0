"""The project's Spack stacks: checked by Spack itself where it exists, by syntax where not.

`perfguard spack check` reads every ``spack_envs/*/spack.yaml`` and the recipes of our
repository ``spack_envs/spack_repo/perfguard``: YAML structure, includes and
repositories that exist, well-formed externals, recipes with checksummed versions.
Specs, package names, versions, variants and dependencies are Spack's to judge: with
``spack`` (>= 1.0) on PATH Spack's own parser reads every spec, every stack is
concretized (in a scratch copy, so Spack's rewrites of a manifest never touch the
checkout) and ``spack audit packages`` runs on our recipes. Without Spack the specs are
not parsed, and the output says so. Spack works on each stack rendered under the install
root (perfguard.contract.stacks), never on the checkout.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from perfguard.contract import stacks
from perfguard.contract.offers import OFFERS, STACK_OFFERS_FILE, unknown_offers
from perfguard.errors import PerfguardError, UsageError
from perfguard.paths import SPACK_ENVS_DIR, spack_packages_file, state_dir

SPACK_ENVS = SPACK_ENVS_DIR
#: Our package repository (package API v2 layout: ``spack_repo/<namespace>/packages``).
OUR_REPO = Path("spack_repo") / "perfguard"
#: Compilers as dependencies, language virtuals and repository API v2 arrived with 1.0.
MIN_SPACK = (1, 0)
#: Run by ``spack python``: Spack's own parser reads each spec of $PERFGUARD_IN
#: ([[where, spec], ...]) and prints {where: error}.
PARSE_SPECS = """
import json, os
import spack.spec
errors = {}
for where, text in json.load(open(os.environ["PERFGUARD_IN"])):
    try:
        spack.spec.Spec(text)
    except Exception as exc:
        errors[where] = " ".join(f"{type(exc).__name__}: {exc}".split())
print("PERFGUARD-OUT " + json.dumps(errors))
"""


@dataclass
class Findings:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: What Spack said when it was asked (concretized specs, timings, audits).
    notes: list[str] = field(default_factory=list)
    #: (where, spec) of every spec found, for Spack's parser.
    specs: list[tuple[str, str]] = field(default_factory=list)


def _load_yaml(path: Path, findings: Findings) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        findings.errors.append(f"{path}: cannot read ({exc.strerror})")
    except yaml.YAMLError as exc:
        findings.errors.append(f"{path}: invalid YAML: {exc}".replace("\n", " "))
    return None


def _check_spec(text: Any, where: str, findings: Findings) -> None:
    if not isinstance(text, str) or not text.strip():
        findings.errors.append(f"{where}: spec must be a non-empty string, not {text!r}")
        return
    findings.specs.append((where, text))


def _check_packages_section(packages: Any, where: str, findings: Findings) -> None:
    if not isinstance(packages, dict):
        findings.errors.append(f"{where}: 'packages' must be a mapping")
        return
    for name, settings in packages.items():
        for index, external in enumerate((settings or {}).get("externals") or []):
            here = f"{where}: packages.{name}.externals[{index}]"
            if not isinstance(external, dict) or "spec" not in external or (
                    "prefix" not in external and "modules" not in external):
                findings.errors.append(f"{here}: needs 'spec' and 'prefix' (or 'modules')")
                continue
            _check_spec(external["spec"], here, findings)
            if "prefix" in external and not str(external["prefix"]).startswith("/"):
                findings.errors.append(f"{here}: prefix {external['prefix']!r} is not absolute")


def _repo_paths(repos: Any) -> list[str]:
    """``repos:`` as a list (Spack's older form) or a mapping name → path (1.x form)."""
    return list(repos.values()) if isinstance(repos, dict) else list(repos or [])


def check_environment(env_dir: Path) -> Findings:
    findings = Findings()
    manifest = env_dir / "spack.yaml"
    data = _load_yaml(manifest, findings)
    if data is None:
        return findings
    body = data.get("spack") if isinstance(data, dict) else None
    if not isinstance(body, dict):
        findings.errors.append(f"{manifest}: top level must be 'spack:'")
        return findings
    specs = body.get("specs")
    if not isinstance(specs, list) or not specs:
        findings.errors.append(f"{manifest}: 'specs' must be a non-empty list")
    for index, spec in enumerate(specs or []):
        _check_spec(spec, f"{manifest}: specs[{index}]", findings)
    for include in body.get("include") or []:
        path = (env_dir / include).resolve()
        if not path.exists():
            findings.errors.append(f"{manifest}: include {include!r} does not exist ({path})")
            continue
        included = _load_yaml(path, findings)
        if isinstance(included, dict) and "packages" in included:
            _check_packages_section(included["packages"], str(path), findings)
    for repo in _repo_paths(body.get("repos")):
        if not (env_dir / repo / "repo.yaml").exists():
            findings.errors.append(f"{manifest}: repo {repo!r} has no repo.yaml")
    if "packages" in body:
        _check_packages_section(body["packages"], str(manifest), findings)
    if "view" not in body:
        findings.errors.append(f"{manifest}: no 'view': the checks need the view path")
    concretizer = body.get("concretizer") or {}
    for key in ("unify", "reuse"):
        if key not in concretizer:
            findings.warnings.append(f"{manifest}: concretizer.{key} is not set")
    stack_offers(env_dir, findings)
    return findings


#: What Spack's concretized tree must show for each capability a stack's ``offers.yaml``
#: may list (perfguard/contract/offers.py's OFFERS: what the SHARP, CollNet and GPU checks
#: need): the stack builds it, or it does not offer it.
STACK_OFFERS = {
    "mpi-ucc": "openmpi with ucc in its fabrics (coll/ucc: configured --with-ucc)",
    "ucc-sharp": "ucc +sharp (UCC's SHARP TL: perfguard's recipe, --with-sharp)",
    "nccl-collnet": "nccl-rdma-sharp-plugins +sharp (libnccl-net.so with CollNet)",
    "cuda-mpi": "an MPI +cuda",
}
#: The MPIs whose ``+cuda`` makes them CUDA-aware.
CUDA_MPIS = ("openmpi", "mvapich2", "mpich", "mvapich")


def stack_offers(env_dir: Path, findings: Findings) -> frozenset[str] | None:
    """The stack's ``offers.yaml`` (``offers:``, a list of STACK_OFFERS' names), its
    mistakes added to ``findings``; None where the stack has none."""
    path = env_dir / STACK_OFFERS_FILE
    if not path.exists():
        findings.warnings.append(f"{path} does not exist: the checks cannot tell what the "
                                 f"stack offers beyond programs (list {', '.join(OFFERS)} "
                                 f"where it builds them, `offers: []` where none)")
        return None
    data = _load_yaml(path, findings)
    listed = data.get("offers") if isinstance(data, dict) else None
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        findings.errors.append(f"{path}: needs 'offers:', a list of names ([] for none)")
        return None
    for name in unknown_offers(listed):
        findings.errors.append(f"{path}: unknown offer {name!r} (known: {', '.join(OFFERS)})")
    return frozenset(listed) & set(STACK_OFFERS)


def _variant_on(spec: str, variant: str) -> bool:
    return re.search(rf"\+{variant}(?=[+~\s]|$)", spec) is not None


#: A spec line of `spack concretize`'s tree: status, hash, ``^``, name, the rest.
SPEC_LINE = re.compile(r"^\s*(?:-|\[[+e^]\])\s+\w{7}\s+\^?([\w-]+)@(.*)$", re.M)


def offers_in_tree(tree: str) -> set[str]:
    """What a concretized tree builds (or takes as external) of STACK_OFFERS."""
    found = set()
    for name, spec in SPEC_LINE.findall(tree):
        fabrics = re.search(r"\bfabrics:?=(\S+)", spec)
        if name == "openmpi" and fabrics and "ucc" in fabrics[1].strip("'\"").split(","):
            found.add("mpi-ucc")
        if name == "ucc" and _variant_on(spec, "sharp"):
            found.add("ucc-sharp")
        if name == "nccl-rdma-sharp-plugins" and _variant_on(spec, "sharp"):
            found.add("nccl-collnet")
        if name in CUDA_MPIS and _variant_on(spec, "cuda"):
            found.add("cuda-mpi")
    return found


def offers_not_built(tree: str, claimed: frozenset[str], offers_file: Path) -> Findings:
    """An offer the stack lists that its concretization lacks is an error (a check would
    run, and fail, for want of it); one it builds but does not list, a warning."""
    findings, built = Findings(), offers_in_tree(tree)
    for name in sorted(claimed - built):
        findings.errors.append(f"{offers_file} lists {name}, but Spack's concretization of "
                               f"the stack has no {STACK_OFFERS[name]}")
    for name in sorted(built - claimed):
        findings.warnings.append(f"the stack builds {STACK_OFFERS[name]}, but {offers_file} "
                                 f"does not list {name}: the checks that need it are skipped")
    return findings


def check_recipe(path: Path) -> Findings:
    """A recipe's structure, read with `ast` (Spack itself is not needed)."""
    findings = Findings()
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError as exc:
        findings.errors.append(f"{path}:{exc.lineno}: {exc.msg}")
        return findings
    expected = "".join(part.capitalize() for part in path.parent.name.split("_"))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if [c.name for c in classes] != [expected]:
        findings.errors.append(f"{path}: expected one package class {expected!r}")
        return findings
    calls = [n for n in ast.walk(classes[0]) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name)]
    versions = [c for c in calls if c.func.id == "version"]
    if not versions and not _extends_builtin(tree, classes[0]) \
            and not _external_only(classes[0]):
        findings.errors.append(f"{path}: no version() (and no builtin recipe extended, "
                               f"whose versions it would keep; no `has_code = False` of "
                               f"a package that is only ever an external)")
    for call in versions:
        keywords = {k.arg for k in call.keywords}
        label = ast.literal_eval(call.args[0]) if call.args else "?"
        if not keywords & {"sha256", "git", "commit", "tag"} \
                and not _external_only(classes[0]):  # nothing to fetch, nothing to check
            findings.warnings.append(f"{path}: version {label} has no sha256: run "
                                     f"`spack checksum {path.parent.name}` on a connected host")
    for call in (c for c in calls if c.func.id == "depends_on"):
        if call.args and isinstance(call.args[0], ast.Constant):
            _check_spec(call.args[0].value, f"{path}: depends_on", findings)
    if not path.read_text().startswith("# Copyright"):
        findings.warnings.append(f"{path}: no copyright and SPDX header (Spack's builtin "
                                 f"repository starts every recipe with one)")
    if not any(c.func.id == "maintainers" for c in calls):
        findings.warnings.append(f"{path}: no maintainers(): the builtin repository asks for "
                                 f"the GitHub handles of whoever answers for the recipe")
    return findings


def _external_only(package: ast.ClassDef) -> bool:
    """Whether the recipe says ``has_code = False``: a package that is only ever the
    site's external (the builtin ``hcoll``, ``hpcx-mpi``; our ``sharp``), whose versions
    are the externals'."""
    return any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
               and node.value.value is False
               and any(isinstance(target, ast.Name) and target.id == "has_code"
                       for target in node.targets) for node in package.body)


def _extends_builtin(tree: ast.Module, package: ast.ClassDef) -> bool:
    """Whether the recipe's class derives from a class it imports from Spack's builtin
    packages (``spack_repo.builtin.packages.X.package``), keeping its versions and adding
    to them (a patch, say)."""
    builtin = {alias.asname or alias.name for node in tree.body
               if isinstance(node, ast.ImportFrom)
               and (node.module or "").startswith("spack_repo.builtin.packages.")
               for alias in node.names}
    return any(isinstance(base, ast.Name) and base.id in builtin for base in package.bases)


#: Spack's builtin repository's style (spack-packages' ruff settings), for our recipes.
STYLE = Path("spack_repo") / "ruff.toml"


def _ruff() -> str | None:
    return shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))


def style_of(recipe: Path, envs_dir: Path) -> Findings:
    """``ruff check`` and ``ruff format --check`` of one recipe with the builtin
    repository's settings (what its CI runs), where ruff is installed."""
    findings, ruff = Findings(), _ruff()
    if ruff is None:
        findings.notes.append("style not checked: ruff is not installed")
        return findings
    config = envs_dir / STYLE
    for what, argv in (("lint", ["check", "--output-format", "concise"]),
                       ("format", ["format", "--check", "--diff"])):
        result = subprocess.run([ruff, *argv, "--no-cache", "--config", str(config), str(recipe)],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            said = [line for line in (result.stdout + result.stderr).splitlines()
                    if line.strip()][:6]
            findings.errors.append(f"{recipe}: not in the builtin repository's style "
                                   f"({what}, {config}): " + " | ".join(said))
    if not findings.errors:
        findings.notes.append("style of Spack's builtin repository: passed")
    return findings


def environments(envs_dir: Path = SPACK_ENVS) -> list[Path]:
    return sorted(p.parent for p in envs_dir.glob("*/spack.yaml"))


def recipes(envs_dir: Path = SPACK_ENVS) -> list[Path]:
    return sorted((envs_dir / OUR_REPO / "packages").glob("*/package.py"))


def default_root() -> Path:
    """Where installs, views and the environments Spack works on go by default (a
    partition's ``binary_provider`` names its own ``root``)."""
    return state_dir() / "spack"


#: The Spack configuration scope every perfguard Spack command uses when none is given.
SCOPE_VARIABLE = "PERFGUARD_SPACK_CONFIG"


def config_scope(given: str | Path | None = None) -> str | None:
    """The configuration scope to give Spack (``spack -C``): the one given, else
    ``$PERFGUARD_SPACK_CONFIG``, else none. An offline site's scope names the builtin
    packages' copy, the mirror and ``bootstrap: enable: false``; without ``~/.spack``
    (``SPACK_DISABLE_LOCAL_CONFIG=1``) it is the only place those can come from."""
    chosen = given or os.environ.get(SCOPE_VARIABLE) or None
    if chosen is None:
        return None
    path = Path(os.path.expandvars(str(chosen))).resolve()
    if not path.is_dir():
        raise UsageError(f"Spack configuration scope {chosen}: no such directory (make one "
                             f"with `perfguard spack scope DIR --builtin PACKAGES`, "
                             f"docs/spack.md)")
    return str(path)


def spack_argv(*args: str, scope: str | None = None) -> list[str]:
    """``spack [-C SCOPE] ARGS``: every Spack call of perfguard reads the same scope."""
    return ["spack", *(["-C", scope] if scope else []), *args]


def spack_environ(root: Path | None = None) -> dict[str, str]:
    """The environment of every Spack command perfguard runs: ``SPACK_USER_CACHE_PATH``
    is ``ROOT/user-cache`` (default root: ``$STATE/spack``) unless the caller set it
    (`stacks.user_cache`: Spack's default is the ``~/.spack`` of whoever runs it)."""
    cache = os.environ.get("SPACK_USER_CACHE_PATH") or str(
        stacks.user_cache(root or default_root()))
    return {**os.environ, "SPACK_USER_CACHE_PATH": cache}


def _spack(*args: str, scope: str | None = None, timeout: float = 3600,
           root: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(spack_argv(*args, scope=scope), capture_output=True, text=True,
                          timeout=timeout, env=spack_environ(root))


def spack_version() -> tuple[str, tuple[int, ...]]:
    """``spack --version`` → ("1.1.0", (1, 1, 0)); a dev version keeps its numbers."""
    text = _spack("--version", timeout=120).stdout.split()
    label = text[0] if text else "?"
    return label, tuple(int(n) for n in re.findall(r"\d+", label)[:3])


def usable_spack() -> tuple[str, str | None]:
    """(the version of the Spack on PATH, why it cannot be used or None)."""
    if shutil.which("spack") is None:
        return "", ("spack is not on PATH (source your Spack's share/spack/setup-env.sh; "
                    "perfguard does not install Spack)")
    label, version = spack_version()
    if version[:2] < MIN_SPACK:
        return label, (f"Spack {label} is too old: perfguard's stacks need Spack >= "
                       f"{'.'.join(map(str, MIN_SPACK))} (compilers as dependencies, language "
                       f"virtuals c/cxx/fortran, package repository API v2); see docs/spack.md")
    return label, None


#: A root line of `spack concretize`'s tree: "[+]  abcdefg  name@version+variants ...",
#: with ``patches:=c64a8ad`` where a recipe patches it (said: a patch is what makes OMB 7.4
#: build against CUDA 13).
ROOT_SPEC = re.compile(r"^ *(?:-|\[[+e^]\])\s+\w{7}  ([\w-]+@[^~+\s]+)"
                       r"(?:[^\n]*?\bpatches:=(\S+))?", re.M)


def parse_specs(findings: Findings, scope: str | None = None) -> dict[str, str]:
    """Spack's parser on every spec found, in one ``spack python``: where → error."""
    return spack_python(PARSE_SPECS, findings.specs, scope=scope) if findings.specs else {}


def concretize(env_dir: Path, scope: str | None = None,
               claimed: frozenset[str] | None = None,
               offers_file: Path | None = None) -> Findings:
    """``spack -e ENV concretize -f``: the roots Spack chose and how long it took; with
    ``claimed`` (the stack's offers.yaml), whether the tree builds what it lists."""
    findings = Findings()
    started = time.monotonic()
    result = _spack("-e", str(env_dir), "concretize", "-f", scope=scope)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        said = [line.strip() for line in (result.stderr + result.stdout).splitlines()
                if line.strip()]
        findings.errors.append(f"spack concretize failed after {seconds:.0f} s: "
                               + " | ".join(said[-6:]))
    else:
        roots = [f"{spec} (patched: {patches})" if patches else spec
                 for spec, patches in ROOT_SPEC.findall(result.stdout + result.stderr)]
        findings.notes.append(f"concretized in {seconds:.0f} s: " + ", ".join(roots))
        findings.warnings += not_the_sites(result.stdout + result.stderr,
                                           declared_externals(env_dir))
        if claimed is not None:
            offered = offers_not_built(result.stdout + result.stderr, claimed,
                                       offers_file or env_dir / STACK_OFFERS_FILE)
            findings.errors += offered.errors
            findings.warnings += offered.warnings
    return findings


#: A line of `spack concretize`'s tree: status ("-" to build, [+] installed, [e]
#: external, [^] from a build cache), hash, the spec ("^name@version..." below a root).
TREE_LINE = re.compile(r"^\s*(-|\[[+e^]\])\s+\w{7}\s+\^?([\w-]+)@(\S+?)(?=[%~+\s]|$)", re.M)


def declared_externals(env_dir: Path) -> dict[str, str]:
    """Package → the external spec(s) the stack declares, in its manifest and the files it
    includes (the site's packages.yaml)."""
    manifest = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]
    sections = [manifest.get("packages") or {}]
    for include in manifest.get("include") or []:
        included = yaml.safe_load((env_dir / include).read_text()) or {}
        sections.append(included.get("packages") or {})
    declared: dict[str, list[str]] = {}
    for section in sections:
        for name, settings in section.items():
            for external in (settings or {}).get("externals") or []:
                declared.setdefault(name, []).append(str(external.get("spec")))
    return {name: " or ".join(specs) for name, specs in declared.items()}


def not_the_sites(tree: str, declared: dict[str, str]) -> list[str]:
    """A package the site declared as external that the stack builds (or reuses from an
    install) instead: a GPUDirect stack with its own gdrcopy, an Open MPI with its own
    PMIx, is not the stack the site runs."""
    found = []
    for status, name, version in TREE_LINE.findall(tree):
        if name in declared and status != "[e]":
            how = "builds" if status == "-" else "reuses a Spack install of"
            found.append(f"the stack {how} {name}@{version}, not the site's external "
                         f"{declared[name]} (a variant or version the stack needs that the "
                         f"declared external lacks?)")
    return sorted(set(found))


def audit(env_dir: Path, packages: list[str], scope: str | None = None) -> Findings:
    """``spack audit packages`` on our recipes (directives, dependencies that exist)."""
    findings = Findings()
    result = _spack("-e", str(env_dir), "audit", "packages", *packages, scope=scope,
                    timeout=600)
    said = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        findings.errors.append("spack audit packages: " + " | ".join(said.splitlines()[-8:]))
    else:
        findings.notes.append("spack audit packages: passed")
    return findings


class Stopped(PerfguardError):
    """SIGINT or SIGTERM during `perfguard spack check`: its scratch directory is gone
    and the exit status is the shell's for the signal (130, 143)."""

    def __init__(self, signum: int, message: str = "") -> None:
        super().__init__(message or f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
        self.exit_code = 128 + signum


@contextlib.contextmanager
def scratch_directory() -> Iterator[Path]:
    """A ``perfguard-spack-*`` directory under $TMPDIR, removed at the end, on an error
    and on SIGINT or SIGTERM (which raise `Stopped` here: a check killed on a login node
    left its copy of every stack in /tmp). Spack, waited on by ``subprocess.run``, is
    killed as the exception passes."""
    path = Path(tempfile.mkdtemp(prefix="perfguard-spack-"))

    def stop(signum: int, _frame: Any) -> None:
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield path
    finally:
        for sig in previous:  # a second signal must not cut the removal short
            signal.signal(sig, signal.SIG_IGN)
        shutil.rmtree(path, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def select_stacks(envs_dir: Path, names: list[str] | None) -> list[Path]:
    """The stacks of ``envs_dir`` named (all when none are), in the order given."""
    known = {env.name: env for env in environments(envs_dir)}
    if not names:
        return list(known.values())
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(f"--stack {', '.join(unknown)}: no such stack under {envs_dir} "
                         f"(known: {', '.join(known)})")
    return [known[name] for name in dict.fromkeys(names)]


#: Called with each line to show at once (a stack started) and with each item's findings
#: when it is done (a stack or recipe: its path).
Say = Callable[[str], None]
Done = Callable[[str, Findings], None]


def check_all(envs_dir: Path = SPACK_ENVS, scope: str | None = None,
              only: list[str] | None = None, say: Say = lambda line: None,
              done: Done = lambda where, findings: None) -> str | None:
    """Each stack (those named in ``only``, else all), then each recipe, checked one after
    the other, each said when it starts and given to ``done`` when it is finished (a
    concretization takes minutes on a loaded login node: a check that said nothing for 25
    min was still on its first stack). Returns why Spack was not asked, or None.
    ``scope`` is the configuration scope of every Spack call."""
    chosen = select_stacks(envs_dir, only)
    label, why_not = usable_spack()
    what = ("syntax and structure (no Spack)" if why_not else
            f"Spack {label}: specs parsed, concretized"
            + (f", and again with CUDA {NEXT_CUDA}" if any(map(builds_with_cuda, chosen)) else ""))
    specs = 0

    def finished(where: str, findings: Findings) -> None:
        nonlocal specs
        specs += len(findings.specs)
        done(where, findings)

    current, scratch = "", None
    try:
        with scratch_directory() as scratch:
            copy = scratch / "stacks"
            say(f"scratch directory {scratch} (removed at the end, on Ctrl-C and on "
                f"SIGTERM); {len(chosen)} stack(s): {what}")
            for index, env in enumerate(chosen, 1):
                current = str(env)
                say(f"---- {env} ({index} of {len(chosen)}, started "
                    f"{datetime.now():%H:%M:%S})")
                finished(current, check_stack(env, envs_dir, copy, scratch, scope, label,
                                              why_not))
            for recipe in recipes(envs_dir):
                current = str(recipe)
                finished(current, check_recipe_fully(recipe, envs_dir, copy, chosen, scope,
                                                     label, why_not))
    except Stopped as stop:
        raise Stopped(stop.signum, f"stopped by {signal.Signals(stop.signum).name} while "
                                   f"checking {current or 'nothing yet'}: not checked to the "
                                   f"end; scratch directory {scratch} removed") from None
    if why_not is None:
        return None
    return (f"{why_not}: only syntax and structure were checked; {specs} specs were not "
            f"parsed, and package names, versions, variants and dependencies not judged: that is "
            f"Spack's to do")


def check_stack(env: Path, envs_dir: Path, copy: Path, scratch: Path, scope: str | None,
                label: str, why_not: str | None) -> Findings:
    """One stack: its manifest and includes; rendered into ``copy`` as Spack sees it (the
    site's externals, ``spack_packages.yaml``, checked there too); with Spack, its specs
    parsed and the copy concretized (the CUDA stacks also against the next CUDA)."""
    found = check_environment(env)
    rendered = stacks.render(env.name, default_root(), envs_dir, into=copy)
    site_file = spack_packages_file()
    if site_file != SPACK_ENVS / "site" / "packages.yaml":  # a site directory's externals
        externals = _load_yaml(rendered.parent / "site" / "packages.yaml", Findings())
        if isinstance(externals, dict) and "packages" in externals:
            _check_packages_section(externals["packages"], str(site_file), found)
    if why_not is not None:
        return found

    def said(text: str) -> str:  # Spack names the copy's files: name the checkout's
        return f"Spack {label}: " + text.replace(str(copy), str(envs_dir))

    for where, error in parse_specs(found, scope).items():
        found.errors.append(f"Spack {label}: {where}: {error}")
    if not found.errors:
        claimed = stack_offers(env, Findings())  # its mistakes are in `found` already
        _merge(found, concretize(rendered, scope, claimed, env / STACK_OFFERS_FILE), said)
    if not found.errors and builds_with_cuda(env):
        _merge(found, with_next_cuda(env.name, envs_dir, scratch / "cuda-next", scope), said)
    return found


def check_recipe_fully(recipe: Path, envs_dir: Path, copy: Path, chosen: list[Path],
                       scope: str | None, label: str, why_not: str | None) -> Findings:
    """One recipe: its structure and style; with Spack, its specs parsed and ``spack audit
    packages`` run in a rendered stack (any one: each names our repository)."""
    found = check_recipe(recipe)
    _merge(found, style_of(recipe, envs_dir), str)
    if why_not is not None or not chosen:
        return found
    for where, error in parse_specs(found, scope).items():
        found.errors.append(f"Spack {label}: {where}: {error}")

    def said(text: str) -> str:
        return f"Spack {label}: " + text.replace(str(copy), str(envs_dir))

    _merge(found, audit(copy / chosen[0].name, [recipe.parent.name.replace("_", "-")], scope),
           said)
    return found


#: The CUDA major release after the one the stacks are written for: `perfguard spack check`
#: concretizes every CUDA stack against it too, so a site learns before its upgrade which
#: stack will refuse it (and why) rather than at install time.
NEXT_CUDA = "13.0.2"


def builds_with_cuda(env_dir: Path) -> bool:
    body = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]
    return any("+cuda" in str(spec) for spec in body.get("specs") or [])


def stack_conflicts(env_dir: Path) -> list[str]:
    """The messages of the conflicts a stack's manifest declares (``packages: P: conflict:``),
    which Spack's own explanation may not quote (an external with ``buildable: false``
    is reported as "cannot build" instead)."""
    body = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]
    return [" ".join(str(c.get("message", c.get("spec"))).split())
            for settings in (body.get("packages") or {}).values()
            for c in (settings or {}).get("conflict") or [] if isinstance(c, dict)]


def with_next_cuda(stack: str, envs_dir: Path, target: Path, scope: str | None) -> Findings:
    """The stack concretized with the site's CUDA external swapped for ``NEXT_CUDA``
    (same prefix): a refusal is reported as what will happen, not as an error of the
    stack, which is written for the CUDA 12 it states."""
    copy = stacks.render(stack, default_root(), envs_dir, into=target)
    externals = target / "site" / "packages.yaml"
    text = re.sub(r"(spec:\s*cuda@)[\w.]+", rf"\g<1>{NEXT_CUDA}", externals.read_text())
    externals.write_text(text)
    found = concretize(copy, scope)
    what = f"with the site's CUDA external at {NEXT_CUDA}"
    if found.errors:
        said = found.errors[0].split(": ", 1)[-1]
        if not any(word in said for word in ("Cannot satisfy", "conflict", "concretiz")):
            return Findings(warnings=[f"{what}: could not be tried: {said}"])
        why = "; ".join(stack_conflicts(envs_dir / stack)) or "no conflict of the stack's own"
        return Findings(notes=[f"{what}: refused. The stack says: {why}. Spack: {said}"])
    roots = found.notes[0].split(": ", 1)[-1] if found.notes else ""
    return Findings(notes=[f"{what}: concretizes ({roots})"])


def _merge(into: Findings, found: Findings, said) -> None:
    into.errors += list(map(said, found.errors))
    into.warnings += list(map(said, found.warnings))
    into.notes += list(map(said, found.notes))


def lock_hash(env_dir: Path) -> str | None:
    """sha256 of the stack's spack.lock: the exact build a result came from."""
    lock = env_dir / "spack.lock"
    return sha256_of(lock) if lock.exists() else None


def environment(name: str, root: Path | None = None) -> Path:
    """The stack ``name`` rendered under ``root`` (default_root()): the environment
    directory to give ``spack -e``."""
    if not (SPACK_ENVS / name / "spack.yaml").exists():
        known = ", ".join(env.name for env in environments())
        raise PerfguardError(f"no Spack stack {name!r} under {SPACK_ENVS} (known: {known})")
    return stacks.render(name, root or default_root())


def install(name: str, root: Path | None = None, scope: str | None = None) -> int:
    """``spack [-C SCOPE] -e ROOT/envs/NAME install``: the checkout is never Spack's to
    write."""
    _, why_not = usable_spack()
    if why_not is not None:
        raise PerfguardError(why_not)
    argv = spack_argv("-e", str(environment(name, root)), "install", "--fail-fast",
                      scope=scope)
    environ = spack_environ(root)
    print(f"+ SPACK_USER_CACHE_PATH={environ['SPACK_USER_CACHE_PATH']} " + " ".join(argv),
          flush=True)
    return subprocess.run(argv, env=environ).returncode


#: Run by ``spack -e STACK python``: for each NAME@VERSION of $PERFGUARD_IN (or an
#: archive's file name, which Spack's URL parser reads), the recipe's sha256 for that
#: version, the URL and where a source mirror must hold it (Spack's own mirror layout:
#: ``_source-cache/archive/XX/SHA.EXT`` for a checksummed version, ``NAME/NAME-VERSION.EXT``
#: for one without).
RECIPE_ARCHIVES = """
import json, os
import spack.fetch_strategy as fs, spack.mirrors.layout as layout, spack.repo, spack.spec
import spack.url, spack.version
out = []
for wanted, filename in json.load(open(os.environ["PERFGUARD_IN"])):
    try:
        if wanted:
            name, _, version = wanted.partition("@")
        else:
            name, parsed = spack.url.parse_name_and_version(filename)
            version = str(parsed)
        cls = spack.repo.PATH.get_pkg_class(name)
        known = cls.versions.get(spack.version.Version(version))
        if known is None:
            raise ValueError(f"the recipe {name} has no version {version} (it has "
                             + ", ".join(str(v) for v in sorted(cls.versions)[-6:]) + ")")
        spec = spack.spec.Spec(f"{name}@={version}")
        fetcher = fs.for_package_version(cls(spec))
        where = layout.default_mirror_layout(fetcher, f"{name}/{name}-{version}", spec)
        extension = known.get("extension") or layout._determine_extension(fetcher)
        out.append({"name": name, "version": version, "sha256": known.get("sha256"),
                    "url": getattr(fetcher, "url", None), "path": where.path,
                    "extension": extension})
    except Exception as exc:
        out.append({"error": " ".join(f"{type(exc).__name__}: {exc}".split())})
print("PERFGUARD-OUT " + json.dumps(out))
"""

#: Run by ``spack -e STACK python`` on a concretized stack: every source archive its
#: installs fetch (what is built, not the externals), with URL and mirror path.
STACK_ARCHIVES = """
import json
import spack.environment as ev, spack.mirrors.layout as layout
env = ev.active_environment()
out, seen = [], set()
for root in env.concrete_roots():
    for spec in root.traverse():
        if spec.external or spec.dag_hash() in seen or not spec.package.has_code:
            continue
        seen.add(spec.dag_hash())
        fetcher = spec.package.fetcher
        path = f"{spec.name}/" + spec.format_path("{name}-{version}")
        where = layout.default_mirror_layout(fetcher, path, spec)
        out.append({"name": spec.name, "version": str(spec.version),
                    "installed": spec.installed, "url": getattr(fetcher, "url", None),
                    "sha256": getattr(fetcher, "digest", None), "path": where.path})
print("PERFGUARD-OUT " + json.dumps(sorted(out, key=lambda a: a["name"])))
"""


def spack_python(script: str, payload: Any, env_dir: Path | None = None,
                 scope: str | None = None, timeout: float = 600,
                 root: Path | None = None) -> Any:
    """``script`` run by Spack's own Python (inside ``env_dir`` when given), reading
    ``payload`` from the JSON file $PERFGUARD_IN and printing ``PERFGUARD-OUT JSON``.
    (``spack python -c`` compiles one statement: the script is exec'd from a file.)"""
    with tempfile.TemporaryDirectory(prefix="perfguard-spack-python-") as scratch:
        given, code = Path(scratch) / "in.json", Path(scratch) / "script.py"
        given.write_text(json.dumps(payload))
        code.write_text(script)
        where = ["-e", str(env_dir)] if env_dir else []
        result = subprocess.run(
            spack_argv(*where, "python", "-c", f"exec(open({str(code)!r}).read())",
                       scope=scope),
            capture_output=True, text=True, timeout=timeout,
            env={**spack_environ(root), "PERFGUARD_IN": str(given)})
    marker = [line for line in result.stdout.splitlines() if line.startswith("PERFGUARD-OUT ")]
    if result.returncode != 0 or not marker:
        said = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
        raise PerfguardError("Spack could not answer (spack python): "
                             + " | ".join(said[-3:]))
    return json.loads(marker[-1].split(" ", 1)[1])


#: Archive extensions Spack's mirrors know, longest first (the URL's own is kept).
ARCHIVE_EXTENSIONS = ("tar.gz", "tar.bz2", "tar.xz", "tar.zst", "tgz", "tbz2", "txz", "zip",
                      "tar", "gz", "lzh")


def sha256_of(archive: Path) -> str:
    digest = hashlib.sha256()
    with archive.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def mirror_path(mirror: Path, archive: Path, named: str | None = None) -> Path:
    """Where Spack looks for ``archive`` in a source mirror, worked out without Spack: by
    its own sha256 (``_source-cache/archive/XX/SHA.EXT``), or for a version without a
    checksum (``named`` NAME@VERSION) by name and version (``NAME/NAME-VERSION.EXT``).
    Only right when the archive is the one the recipe names: `recipe_entries` asks Spack."""
    extension = next((e for e in ARCHIVE_EXTENSIONS if archive.name.endswith(f".{e}")), None)
    if extension is None:
        raise PerfguardError(f"{archive}: not an archive Spack's mirror layout knows "
                             f"(extensions: {', '.join(ARCHIVE_EXTENSIONS)})")
    if named is not None:
        name, _, version = named.partition("@")
        if not name or not version or "/" in named:
            raise PerfguardError(f"{named!r}: give NAME@VERSION (himeno@2002.02.21)")
        return mirror / name / f"{name}-{version}.{extension}"
    sha = sha256_of(archive)
    return mirror / "_source-cache" / "archive" / sha[:2] / f"{sha}.{extension}"


@dataclass
class MirrorEntry:
    """One archive for the mirror: where it goes, and what to say about it."""
    archive: Path
    target: Path
    warning: str | None = None


def recipe_entries(mirror: Path, wanted: list[tuple[Path, str | None]], scope: str | None,
                   no_checksum: bool) -> list[MirrorEntry]:
    """Each archive checked against its recipe's sha256 for that version, Spack asked (it
    has the recipes, ours and the builtin ones), filed where Spack's fetch looks. A
    mismatch is refused: Spack would refuse the archive at install time."""
    env_dir = environment(environments()[0].name)  # any stack names our repository
    answers = spack_python(RECIPE_ARCHIVES, [[named, archive.name] for archive, named in wanted],
                           env_dir, scope)
    entries, refused = [], []
    for (archive, named), answer in zip(wanted, answers):
        if "error" in answer:
            refused.append(f"{archive}: {named or 'its file name'}: {answer['error']} (name "
                           f"it NAME@VERSION=FILE)")
            continue
        spec, expected = f"{answer['name']}@{answer['version']}", answer["sha256"]
        actual, warning = sha256_of(archive), None
        if expected is None:
            warning = (f"{spec} has no checksum in its recipe: Spack will install this archive "
                       f"unverified (it warns \"Spack lacks a tree hash to verify\"); put "
                       f"version(\"{answer['version']}\", sha256=\"{actual}\") in the recipe once "
                       f"you trust it")
        elif expected != actual:
            mismatch = (f"{archive} is not the archive the recipe {spec} names: its sha256 is "
                        f"{actual}, the recipe's is {expected}")
            if not no_checksum:
                refused.append(f"{mismatch}. Get the release archive itself (from {answer['url']}"
                               f" on a connected host); a site that must build from its own "
                               f"archive gives its sha256 in the version() line of a recipe it "
                               f"keeps, or, as the last resort, --no-checksum here and "
                               f"`checksum: false` in the scope (`perfguard spack scope "
                               f"--no-checksum`)")
                continue
            warning = (f"{mismatch}; filed under the recipe's digest because of --no-checksum: "
                       f"Spack installs it only with `config: {{checksum: false}}` in the scope")
        extension = answer["extension"]
        if extension and not archive.name.endswith(f".{extension}"):
            refused.append(f"{archive}: Spack fetches {spec} as a .{extension} archive "
                           f"({answer['url']}); give the file as downloaded")
            continue
        entries.append(MirrorEntry(archive, mirror / answer["path"], warning))
    if refused:
        raise PerfguardError("nothing was added to the mirror:\n  " + "\n  ".join(refused))
    return entries


def mirror_entries(mirror: Path, wanted: list[tuple[Path, str | None]],
                   scope: str | None = None, no_checksum: bool = False) -> list[MirrorEntry]:
    """Where each archive goes: asked of Spack where it is on PATH; without Spack, by the
    layout alone, unverified (and said so)."""
    for archive, _ in wanted:
        if not archive.is_file():
            raise PerfguardError(f"{archive}: no such archive")
    if usable_spack()[1] is None:
        return recipe_entries(mirror, wanted, scope, no_checksum)
    unverified = ("not compared with the recipe's checksum: spack is not on PATH (run this "
                  "where Spack is, or Spack refuses a mismatched archive at install time)")
    return [MirrorEntry(archive, mirror_path(mirror, archive, named), unverified)
            for archive, named in wanted]


def add_to_mirror(entry: MirrorEntry) -> Path:
    """Copy the archive into the source mirror where Spack finds it (whole or not at all:
    a copy under a temporary name, then renamed)."""
    entry.target.parent.mkdir(parents=True, exist_ok=True)
    partial = entry.target.with_name(f".{entry.target.name}.part")
    shutil.copyfile(entry.archive, partial)
    os.replace(partial, entry.target)
    return entry.target


def archives(name: str, scope: str | None = None, root: Path | None = None) -> list[dict]:
    """Every source archive an install of stack ``name`` fetches (concretized as it will be
    installed: the site's externals, what is installed under the root reused)."""
    _, why_not = usable_spack()
    if why_not is not None:
        raise PerfguardError(why_not)
    env_dir = environment(name, root)
    if not (env_dir / "spack.lock").exists():
        result = _spack("-e", str(env_dir), "concretize", scope=scope, root=root)
        if result.returncode != 0:
            said = [line for line in (result.stderr + result.stdout).splitlines() if line]
            raise PerfguardError(f"stack {name} does not concretize: " + " | ".join(said[-4:]))
    return spack_python(STACK_ARCHIVES, None, env_dir, scope, root=root)


#: What `perfguard spack scope` writes: an offline site's configuration scope.
SCOPE_FILES = {
    "repos.yaml": "# Spack 1.x keeps its builtin packages in a repository of their own; offline,\n"
                  "# name a copy. Each stack's own repository first ($env: the stack's\n"
                  "# directory): a scope given with -C outranks the stack, and our recipe of\n"
                  "# a builtin package (OMB 7.4's CUDA 13 patch) must win. One colon:\n"
                  "# `repos::` would also replace each stack's own.\n"
                  "repos:\n  perfguard: $env/../spack_repo/perfguard\n  builtin: {builtin}\n",
    "bootstrap.yaml": "# clingo comes from the Python SPACK_PYTHON names (pip install clingo)\n"
                      "bootstrap:\n  enable: false\n",
}


def write_scope(directory: Path, builtin: Path, mirror: Path | None,
                no_checksum: bool) -> list[Path]:
    """An offline configuration scope: the builtin packages' copy, bootstrapping off, the
    source mirror, and (last resort) checksums off."""
    repo = builtin / "repos" / "spack_repo" / "builtin" if (
        builtin / "repos" / "spack_repo" / "builtin" / "repo.yaml").is_file() else builtin
    if not (repo / "repo.yaml").is_file():
        raise UsageError(f"--builtin {builtin}: not Spack's builtin package repository "
                             f"(no repos/spack_repo/builtin/repo.yaml): give a checkout of "
                             f"spack/spack-packages at a release tag (v2025.11.0 for Spack 1.1)")
    files = {name: text.format(builtin=repo) for name, text in SCOPE_FILES.items()}
    if mirror is not None:
        files["mirrors.yaml"] = f"mirrors:\n  perfguard: file://{mirror}\n"
    if no_checksum:
        files["config.yaml"] = ("# last resort: archives that are not the recipes' own bytes\n"
                                "config:\n  checksum: false\n")
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        stacks.write(directory / name, (SCOPE_MARK + text).encode())
    for stale in ("mirrors.yaml", "config.yaml"):  # ours from an earlier call, not asked now
        path = directory / stale
        if stale not in files and path.is_file() and path.read_text().startswith(SCOPE_MARK):
            path.unlink()
    return [directory / name for name in files]


#: The first line of every file `perfguard spack scope` writes (and may replace or remove).
SCOPE_MARK = "# written by `perfguard spack scope`\n"
