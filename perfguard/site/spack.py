"""The project's Spack stacks: checked by Spack itself where it exists, by syntax where not.

`perfguard spack check` reads every ``spack_envs/*/spack.yaml`` and the recipes of our
repository ``spack_envs/spack_repo/perfguard``: YAML structure, includes and
repositories that exist, well-formed externals, recipes with checksummed versions.
Specs, package names, versions, variants and dependencies are Spack's to judge: with
``spack`` (>= 1.0) on PATH Spack's own parser reads every spec, every stack is
concretized (in a scratch copy, so Spack's rewrites of a manifest never touch the
checkout) and ``spack audit packages`` runs on our recipes. Without Spack the specs are
not parsed, and the output says so. Spack works on each stack rendered under the install
root (perfguard.site.stacks), never on the checkout.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from perfguard.errors import PerfguardError
from perfguard.site import stacks
from perfguard.site.paths import SPACK_ENVS_DIR, state_dir

SPACK_ENVS = SPACK_ENVS_DIR
#: Our package repository (package API v2 layout: ``spack_repo/<namespace>/packages``).
OUR_REPO = Path("spack_repo") / "perfguard"
#: Compilers as dependencies, language virtuals and repository API v2 arrived with 1.0.
MIN_SPACK = (1, 0)
#: Run by ``spack python``: Spack's own parser reads each spec of the file that
#: $PERFGUARD_SPECS names ([[where, spec], ...]) and prints {where: error}.
PARSE_SPECS = """
import json, os
import spack.spec
errors = {}
for where, text in json.load(open(os.environ["PERFGUARD_SPECS"])):
    try:
        spack.spec.Spec(text)
    except Exception as exc:
        errors[where] = " ".join(f"{type(exc).__name__}: {exc}".split())
print("PERFGUARD-SPECS " + json.dumps(errors))
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
    if not versions:
        findings.errors.append(f"{path}: no version()")
    for call in versions:
        keywords = {k.arg for k in call.keywords}
        label = ast.literal_eval(call.args[0]) if call.args else "?"
        if not keywords & {"sha256", "git", "commit", "tag"}:
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


#: Spack's builtin repository's style (spack-packages' ruff settings), for our recipes.
STYLE = Path("spack_repo") / "ruff.toml"


def style(envs_dir: Path) -> dict[str, Findings]:
    """``ruff check`` and ``ruff format --check`` of our recipes with the builtin
    repository's settings (what its CI runs), where ruff is installed; recipe → findings."""
    found = {str(recipe): Findings() for recipe in recipes(envs_dir)}
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None or not found:
        for findings in found.values():
            findings.notes.append("style not checked: ruff is not installed")
        return found
    config = envs_dir / STYLE
    for recipe, findings in found.items():
        for what, argv in (("lint", ["check", "--output-format", "concise"]),
                           ("format", ["format", "--check", "--diff"])):
            result = subprocess.run([ruff, *argv, "--no-cache", "--config", str(config), recipe],
                                    capture_output=True, text=True, timeout=120)
            if result.returncode != 0:
                said = [line for line in (result.stdout + result.stderr).splitlines()
                        if line.strip()][:6]
                findings.errors.append(f"{recipe}: not in the builtin repository's style "
                                       f"({what}, {config}): " + " | ".join(said))
        if not findings.errors:
            findings.notes.append("style of Spack's builtin repository: passed")
    return found


def environments(envs_dir: Path = SPACK_ENVS) -> list[Path]:
    return sorted(p.parent for p in envs_dir.glob("*/spack.yaml"))


def recipes(envs_dir: Path = SPACK_ENVS) -> list[Path]:
    return sorted((envs_dir / OUR_REPO / "packages").glob("*/package.py"))


def default_root() -> Path:
    """Where installs, views and the environments Spack works on go by default (a
    partition's ``binary_provider`` names its own ``root``)."""
    return state_dir() / "spack"


def _spack(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(["spack", *args], capture_output=True, text=True, timeout=timeout)


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


#: A root line of `spack concretize`'s tree: "[+]  abcdefg  name@version+variants ...".
ROOT_SPEC = re.compile(r"^ *(?:-|\[[+e^]\])\s+\w{7}  ([\w-]+@[^~+\s]+)", re.M)


def parse_specs(findings: Findings) -> dict[str, str]:
    """Spack's parser on every spec found, in one ``spack python``: where → error.
    (``spack python -c`` compiles one statement: the script is exec'd from a file.)"""
    if not findings.specs:
        return {}
    with tempfile.TemporaryDirectory(prefix="perfguard-specs-") as scratch:
        specs, script = Path(scratch) / "specs.json", Path(scratch) / "parse.py"
        specs.write_text(json.dumps(findings.specs))
        script.write_text(PARSE_SPECS)
        result = subprocess.run(
            ["spack", "python", "-c", f"exec(open({str(script)!r}).read())"],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "PERFGUARD_SPECS": str(specs)})
    marker = [line for line in result.stdout.splitlines() if line.startswith("PERFGUARD-SPECS ")]
    if result.returncode != 0 or not marker:
        said = (result.stderr + result.stdout).strip().splitlines()[-3:]
        raise PerfguardError(f"spack python could not parse the specs: {' | '.join(said)}")
    return json.loads(marker[-1].split(" ", 1)[1])


def concretize(env_dir: Path) -> Findings:
    """``spack -e ENV concretize -f``: the roots Spack chose and how long it took."""
    findings = Findings()
    started = time.monotonic()
    result = _spack("-e", str(env_dir), "concretize", "-f")
    seconds = time.monotonic() - started
    if result.returncode != 0:
        said = [line.strip() for line in (result.stderr + result.stdout).splitlines()
                if line.strip()]
        findings.errors.append(f"spack concretize failed after {seconds:.0f} s: "
                               + " | ".join(said[-6:]))
    else:
        roots = ROOT_SPEC.findall(result.stdout + result.stderr)
        findings.notes.append(f"concretized in {seconds:.0f} s: " + ", ".join(roots))
        findings.warnings += not_the_sites(result.stdout + result.stderr,
                                           declared_externals(env_dir))
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


def audit(env_dir: Path, packages: list[str]) -> Findings:
    """``spack audit packages`` on our recipes (directives, dependencies that exist)."""
    findings = Findings()
    result = _spack("-e", str(env_dir), "audit", "packages", *packages, timeout=600)
    said = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        findings.errors.append("spack audit packages: " + " | ".join(said.splitlines()[-8:]))
    else:
        findings.notes.append("spack audit packages: passed")
    return findings


def scratch_copy(envs_dir: Path, target: Path) -> Path:
    """Every stack rendered into ``target`` (Spack may rewrite a manifest it concretizes),
    installing under the default root, so that concretizing reuses what is installed."""
    for env in environments(envs_dir):
        stacks.render(env.name, default_root(), envs_dir, into=target)
    return target


def check_all(envs_dir: Path = SPACK_ENVS) -> tuple[dict[str, Findings], str | None]:
    """Findings per environment and recipe; the second value says why Spack was not
    asked (None when it was)."""
    results = {str(env): check_environment(env) for env in environments(envs_dir)}
    for recipe, styled in style(envs_dir).items():
        results[recipe] = check_recipe(Path(recipe))
        _merge(results[recipe], styled, str)
    label, why_not = usable_spack()
    if why_not is not None:
        specs = sum(len(found.specs) for found in results.values())
        return results, (f"{why_not}: only syntax and structure were checked; {specs} specs "
                         f"were not parsed, and package names, versions, variants and "
                         f"dependencies not judged: that is Spack's to do")
    for found in results.values():
        for where, error in parse_specs(found).items():
            found.errors.append(f"Spack {label}: {where}: {error}")
    with tempfile.TemporaryDirectory(prefix="perfguard-spack-") as scratch:
        copy = scratch_copy(envs_dir, Path(scratch))
        def said(text: str) -> str:  # Spack names the copy's files: name the checkout's
            return f"Spack {label}: " + text.replace(str(copy), str(envs_dir))

        for env in environments(envs_dir):
            if not results[str(env)].errors:
                _merge(results[str(env)], concretize(copy / env.name), said)
        rendered = environments(copy)  # any stack: each one names our repository
        for recipe in recipes(envs_dir) if rendered else []:
            _merge(results[str(recipe)], audit(rendered[0], [recipe.parent.name]), said)
    return results, None


def _merge(into: Findings, found: Findings, said) -> None:
    into.errors += list(map(said, found.errors))
    into.notes += list(map(said, found.notes))


def lock_hash(env_dir: Path) -> str | None:
    """sha256 of the stack's spack.lock: the exact build a result came from."""
    lock = env_dir / "spack.lock"
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else None


def environment(name: str, root: Path | None = None) -> Path:
    """The stack ``name`` rendered under ``root`` (default_root()): the environment
    directory to give ``spack -e``."""
    if not (SPACK_ENVS / name / "spack.yaml").exists():
        known = ", ".join(env.name for env in environments())
        raise PerfguardError(f"no Spack stack {name!r} under {SPACK_ENVS} (known: {known})")
    return stacks.render(name, root or default_root())


def install(name: str, root: Path | None = None) -> int:
    """``spack -e ROOT/envs/NAME install``: the checkout is never Spack's to write."""
    _, why_not = usable_spack()
    if why_not is not None:
        raise PerfguardError(why_not)
    return subprocess.run(["spack", "-e", str(environment(name, root)), "install",
                           "--fail-fast"]).returncode


#: Archive extensions Spack's mirrors know, longest first (the URL's own is kept).
ARCHIVE_EXTENSIONS = ("tar.gz", "tar.bz2", "tar.xz", "tar.zst", "tgz", "tbz2", "txz", "zip",
                      "tar", "gz", "lzh")


def mirror_path(mirror: Path, archive: Path, named: str | None = None) -> Path:
    """Where Spack looks for ``archive`` in a source mirror: by its sha256
    (``_source-cache/archive/XX/SHA.EXT``, for versions with a checksum), or for a
    version without one (``named`` NAME@VERSION) by name and version
    (``NAME/NAME-VERSION.EXT``)."""
    extension = next((e for e in ARCHIVE_EXTENSIONS if archive.name.endswith(f".{e}")), None)
    if extension is None:
        raise PerfguardError(f"{archive}: not an archive Spack's mirror layout knows "
                             f"(extensions: {', '.join(ARCHIVE_EXTENSIONS)})")
    if named is not None:
        name, _, version = named.partition("@")
        if not name or not version or "/" in named:
            raise PerfguardError(f"--named {named!r}: give NAME@VERSION (himeno@2002.02.21)")
        return mirror / name / f"{name}-{version}.{extension}"
    digest = hashlib.sha256()
    with archive.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()
    return mirror / "_source-cache" / "archive" / sha[:2] / f"{sha}.{extension}"


def add_to_mirror(mirror: Path, archive: Path, named: str | None = None) -> Path:
    """Copy ``archive`` into the source mirror ``mirror`` where Spack finds it (whole or
    not at all: a copy under a temporary name, then renamed)."""
    if not archive.is_file():
        raise PerfguardError(f"{archive}: no such archive")
    target = mirror_path(mirror, archive, named)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.part")
    shutil.copyfile(archive, partial)
    os.replace(partial, target)
    return target
