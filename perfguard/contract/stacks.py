"""A Spack stack as Spack works on it: a copy of the stack under its install root.

The shipped manifests (``spack_envs/STACK/spack.yaml``) are templates in which
``${PERFGUARD_SPACK_ROOT}`` stands for the install root. Spack writes ``spack.lock`` and
``.spack-env/`` beside a manifest and rewrites the manifest it concretizes (the 1.x form
of ``repos:``, detected compilers): done in the checkout, that dirtied the tracked tree;
done in an installed package, it writes into site-packages. Every Spack operation of
perfguard works on ``ROOT/envs/STACK`` instead, rendered here: the manifest with the root
filled in (no variable left for a plain ``spack -e`` to turn into a literal
``${PERFGUARD_SPACK_ROOT}`` directory), beside copies of our package repository and of
the site's externals (``paths.spack_packages_file``), so the manifest's relative includes
hold.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from perfguard.paths import SPACK_ENVS_DIR, spack_packages_file

#: What the shipped manifests write for the install root.
ROOT_VARIABLE = "${PERFGUARD_SPACK_ROOT}"
#: What every stack shares: our recipes and the site's externals.
SHARED = ("spack_repo", "site")


def user_cache(root: Path) -> Path:
    """Spack's user cache for the stacks under ``root`` (``SPACK_USER_CACHE_PATH``): its
    package index, misc cache and bootstrap store are ``~/.spack`` of whoever runs Spack
    unless told, so root's ``/root/.spack`` for every user of a root-run service."""
    return root / "user-cache"


def environment_dir(stack: str, root: Path) -> Path:
    """Where Spack works on ``stack`` installed under ``root``."""
    return root / "envs" / stack


def render(stack: str, root: Path, envs: Path = SPACK_ENVS_DIR,
           into: Path | None = None) -> Path:
    """``ROOT/envs/STACK`` made current from the shipped ``envs`` (Spack's lock and
    ``.spack-env`` there are kept: an installed stack stays installed); ``into`` renders
    it elsewhere (a scratch directory to concretize in), still installing under
    ``root``."""
    manifest = envs / stack / "spack.yaml"
    if not manifest.is_file():
        raise FileNotFoundError(f"no Spack stack {stack!r}: {manifest} does not exist")
    target = into or root / "envs"
    for shared in SHARED:
        _sync_tree(envs / shared, target / shared)
    write(target / "site" / "packages.yaml", spack_packages_file().read_bytes())
    text = manifest.read_text().replace(ROOT_VARIABLE, str(root))
    write(target / stack / "spack.yaml", text.encode())
    return target / stack


def _sync_tree(source: Path, target: Path) -> None:
    """``target`` holds exactly the files of ``source``, each replaced atomically (two
    runs may render at once)."""
    wanted = {p.relative_to(source) for p in source.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts}
    for relative in wanted:
        write(target / relative, (source / relative).read_bytes())
    for stale in (p for p in target.rglob("*") if p.is_file()) if target.is_dir() else ():
        if stale.relative_to(target) not in wanted and "__pycache__" not in stale.parts:
            stale.unlink(missing_ok=True)
    # a package folder left empty would still name a package to Spack
    for folder in sorted((p for p in target.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            try:
                folder.rmdir()
            except OSError:  # another rendering wrote into it meanwhile
                pass


def write(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, never half of it; unchanged files are not touched."""
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.",
                                     delete=False) as handle:
        handle.write(data)
    os.chmod(handle.name, 0o644)  # a shared root: every user of the stack reads it
    os.replace(handle.name, path)
