"""The project's Spack stacks: validate them without Spack, concretize and install with it.

`perfguard spack check` reads every ``spack_envs/*/spack.yaml`` and the recipes in
``spack_envs/repo``: YAML structure, specs that parse into name/version/variants,
package names known to Spack's builtin repo (``builtin_packages.txt``) or ours,
includes that exist, well-formed externals, and recipes with checksummed versions.
Where ``spack`` is on PATH it also runs ``spack -e ENV concretize`` for each stack.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from perfguard.errors import PerfguardError
from perfguard.paths import REPO_ROOT, state_dir

SPACK_ENVS = REPO_ROOT / "spack_envs"
TOKEN = re.compile(r"\s*(\^|%[\w.@:-]+|@[\w.:,=-]+|[+~][\w-]+|[\w-]+=[\w.,:*/-]+|[\w-]+)")
#: Keys of a `packages:` section that are not package names.
PACKAGE_SECTION_KEYS = {"all"}


@dataclass
class Spec:
    name: str
    version: str | None = None
    variants: dict[str, Any] = field(default_factory=dict)
    dependencies: list[Spec] = field(default_factory=list)


def parse_spec(text: str) -> Spec:
    """``osu-micro-benchmarks@7.5 +cuda cuda_arch=90 ^openmpi@5`` → a Spec tree."""
    tokens, position = [], 0
    while position < len(text.rstrip()):
        match = TOKEN.match(text, position)
        if match is None:
            raise PerfguardError(f"spec {text!r}: cannot parse from {text[position:]!r}")
        tokens.append(match.group(1))
        position = match.end()
    if not tokens or not re.fullmatch(r"[a-z0-9][\w-]*", tokens[0]):
        raise PerfguardError(f"spec {text!r}: must start with a package name")
    root = current = Spec(tokens[0])
    expect_name = False
    for token in tokens[1:]:
        if expect_name:
            if not re.fullmatch(r"[a-z0-9][\w-]*", token):
                raise PerfguardError(f"spec {text!r}: '^' must be followed by a package name")
            current = Spec(token)
            root.dependencies.append(current)
            expect_name = False
        elif token == "^":
            expect_name = True
        elif token.startswith("@"):
            if current.version is not None:
                raise PerfguardError(f"spec {text!r}: two versions for {current.name}")
            current.version = token[1:]
        elif token[0] in "+~":
            current.variants[token[1:]] = token[0] == "+"
        elif "=" in token:
            key, value = token.split("=", 1)
            current.variants[key] = value
        elif token.startswith("%"):
            current.variants["%compiler"] = token[1:]
        else:
            raise PerfguardError(f"spec {text!r}: unexpected {token!r} (a second package "
                                 f"name needs '^')")
    if expect_name:
        raise PerfguardError(f"spec {text!r}: ends with '^'")
    return root


def known_packages(envs_dir: Path = SPACK_ENVS) -> set[str]:
    listed = (envs_dir / "builtin_packages.txt").read_text().splitlines()
    builtin = {line.strip() for line in listed if line.strip() and not line.startswith("#")}
    ours = {p.parent.name for p in (envs_dir / "repo" / "packages").glob("*/package.py")}
    return builtin | ours


@dataclass
class Findings:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _load_yaml(path: Path, findings: Findings) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        findings.errors.append(f"{path}: cannot read ({exc.strerror})")
    except yaml.YAMLError as exc:
        findings.errors.append(f"{path}: invalid YAML: {exc}".replace("\n", " "))
    return None


def _check_spec(text: Any, where: str, known: set[str], findings: Findings) -> None:
    if not isinstance(text, str):
        findings.errors.append(f"{where}: spec must be a string, not {text!r}")
        return
    try:
        spec = parse_spec(text)
    except PerfguardError as exc:
        findings.errors.append(f"{where}: {exc}")
        return
    for node in [spec, *spec.dependencies]:
        if node.name not in known:
            findings.errors.append(f"{where}: unknown package {node.name!r} (neither in "
                                   f"builtin_packages.txt nor in repo/packages)")


def _check_packages_section(packages: Any, where: str, known: set[str],
                            findings: Findings) -> None:
    if not isinstance(packages, dict):
        findings.errors.append(f"{where}: 'packages' must be a mapping")
        return
    for name, settings in packages.items():
        if name not in known and name not in PACKAGE_SECTION_KEYS:
            findings.errors.append(f"{where}: packages.{name}: unknown package")
        for index, external in enumerate((settings or {}).get("externals") or []):
            here = f"{where}: packages.{name}.externals[{index}]"
            if not isinstance(external, dict) or "spec" not in external or (
                    "prefix" not in external and "modules" not in external):
                findings.errors.append(f"{here}: needs 'spec' and 'prefix' (or 'modules')")
                continue
            _check_spec(external["spec"], here, known, findings)
            if "prefix" in external and not str(external["prefix"]).startswith("/"):
                findings.errors.append(f"{here}: prefix {external['prefix']!r} is not absolute")


def check_environment(env_dir: Path, known: set[str]) -> Findings:
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
        _check_spec(spec, f"{manifest}: specs[{index}]", known, findings)
    for include in body.get("include") or []:
        path = (env_dir / include).resolve()
        if not path.exists():
            findings.errors.append(f"{manifest}: include {include!r} does not exist ({path})")
            continue
        included = _load_yaml(path, findings)
        if isinstance(included, dict) and "packages" in included:
            _check_packages_section(included["packages"], str(path), known, findings)
    for repo in body.get("repos") or []:
        if not (env_dir / repo / "repo.yaml").exists():
            findings.errors.append(f"{manifest}: repo {repo!r} has no repo.yaml")
    if "packages" in body:
        _check_packages_section(body["packages"], str(manifest), known, findings)
    if "view" not in body:
        findings.errors.append(f"{manifest}: no 'view': the checks need the view path")
    concretizer = body.get("concretizer") or {}
    for key in ("unify", "reuse"):
        if key not in concretizer:
            findings.warnings.append(f"{manifest}: concretizer.{key} is not set")
    return findings


def check_recipe(path: Path, known: set[str]) -> Findings:
    """A recipe's structure, read with `ast` (Spack itself is not needed)."""
    findings = Findings()
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError as exc:
        findings.errors.append(f"{path}:{exc.lineno}: {exc.msg}")
        return findings
    expected = "".join(part.capitalize() for part in path.parent.name.split("-"))
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
            name = parse_spec(call.args[0].value).name
            if name not in known:
                findings.errors.append(f"{path}: depends_on unknown package {name!r}")
    methods = {f.name for f in classes[0].body if isinstance(f, ast.FunctionDef)}
    bases = {getattr(b, "id", "") for b in classes[0].bases}
    if "Package" in bases and "install" not in methods:
        findings.errors.append(f"{path}: a plain Package needs an install() phase")
    return findings


def environments(envs_dir: Path = SPACK_ENVS) -> list[Path]:
    return sorted(p.parent for p in envs_dir.glob("*/spack.yaml"))


def spack_env(root: Path | None = None) -> dict[str, str]:
    """Environment for spack commands: where installs and views go (persistent, shared)."""
    env = dict(os.environ)
    env.setdefault("PERFGUARD_SPACK_ROOT", str(root or state_dir() / "spack"))
    return env


def concretize(env_dir: Path) -> Findings:
    findings = Findings()
    result = subprocess.run(["spack", "-e", str(env_dir), "concretize", "-f"],
                            capture_output=True, text=True, env=spack_env(), timeout=3600)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        findings.errors.append(f"{env_dir}: spack concretize failed: " + " | ".join(tail))
    return findings


def check_all(envs_dir: Path = SPACK_ENVS) -> tuple[dict[str, Findings], str | None]:
    """Findings per environment and recipe; the second value says why concretize was
    skipped (no spack), or None when it ran."""
    known = known_packages(envs_dir)
    results = {str(env): check_environment(env, known) for env in environments(envs_dir)}
    for recipe in sorted((envs_dir / "repo" / "packages").glob("*/package.py")):
        results[str(recipe)] = check_recipe(recipe, known)
    if shutil.which("spack") is None:
        return results, ("spack is not on PATH: structure checked, `spack concretize` not run "
                         "(source your Spack's setup-env.sh to include it)")
    for env in environments(envs_dir):
        if not results[str(env)].errors:
            extra = concretize(env)
            results[str(env)].errors += extra.errors
    return results, None


def lock_hash(env_dir: Path) -> str | None:
    """sha256 of the stack's spack.lock: the exact build a result came from."""
    lock = env_dir / "spack.lock"
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else None


def install(name: str) -> int:
    env_dir = SPACK_ENVS / name
    if not (env_dir / "spack.yaml").exists():
        raise PerfguardError(f"no Spack environment {name!r} under {SPACK_ENVS}")
    if shutil.which("spack") is None:
        raise PerfguardError("spack is not on PATH: source your Spack's share/spack/"
                             "setup-env.sh (perfguard does not install Spack itself)")
    return subprocess.run(["spack", "-e", str(env_dir), "install", "--fail-fast"],
                          env=spack_env()).returncode
