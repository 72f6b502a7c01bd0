"""Reading the YAML files admins hand us (thresholds, topologies, stacks), safely.

Safe loading alone still expands aliases: 600 bytes of nested ``*a`` references
become hundreds of megabytes. Our files never need aliases, so they are refused,
and a file larger than any real one is refused before it is parsed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from perfguard.errors import UsageError

MAX_BYTES = 4 * 1024 * 1024


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in perfguard files",
                event.start_mark)
        return super().compose_node(parent, index)


def load_yaml(path: Path, what: str) -> Any:
    """The document in ``path``; any problem is a UsageError naming the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise UsageError(f"{path}: {what} file is {size} bytes, more than the "
                             f"{MAX_BYTES} a {what} file can sensibly be")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read {what} file: {exc}") from exc
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML for a {what} file: {exc}") from exc
