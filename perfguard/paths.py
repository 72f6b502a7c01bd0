"""Where perfguard keeps its files: the repository checkout and the state directory."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SITE_CONFIG_DIR = REPO_ROOT / "site_config"
TESTS_DIR = REPO_ROOT / "reframe_tests"


def state_dir() -> Path:
    """The one directory holding every piece of runtime state.

    ``PERFGUARD_STATE_DIR`` wins; then ``$XDG_STATE_HOME/perfguard``; then
    ``.state`` in the checkout, so a demo never writes outside the repository.
    """
    explicit = os.environ.get("PERFGUARD_STATE_DIR")
    if explicit:
        return Path(explicit).resolve()
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return Path(xdg).resolve() / "perfguard"
    return REPO_ROOT / ".state"
