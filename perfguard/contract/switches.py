"""Which leaf switch each node hangs off, for the sweep that follows the switches.

Two sources a site already has: Slurm's tree topology (``topology.conf``, or what
``scontrol show topology`` prints: the same ``SwitchName=… Nodes=…`` lines) and the
subnet manager's view (``ibnetdiscover`` output: a ``Switch`` block per switch, a port
line per link, a host's node description first-word its hostname). A leaf is a switch
with nodes on it; spines (``Switches=…`` only, or switch-to-switch ports) carry none.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from reframe.utility import nodelist_expand

from perfguard.errors import UsageError

#: A port line of an ibnetdiscover Switch block that leads to a host (an "H-" GUID),
#: with the host's node description after the comment mark: [1] "H-…"[1](…) # "node001 HCA-1"
IBND_HOST_PORT = re.compile(r'^\[\d+\][^"]*"H-[0-9a-fA-F]+"\S*\s+#\s+"([^"]*)"')
IBND_SWITCH = re.compile(r'^Switch\s+\d+\s+"S-([0-9a-fA-F]+)"(?:\s+#\s+"([^"]*)")?')


def parse_slurm(text: str, source: str) -> dict[str, list[str]]:
    """Leaf → nodes from ``SwitchName=… Nodes=…`` lines without ``Switches=`` (keys as
    Slurm reads them, case-insensitive; comments after ``#``)."""
    leaves: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = dict(_key_values(line.split("#", 1)[0]))
        if "switchname" not in fields:
            continue
        if fields.get("nodes") and not fields.get("switches"):  # scontrol lists a spine's
            # nodes too ("SwitchName=spine Level=1 … Nodes=n[1-12] Switches=leaf[1-4]")
            try:
                nodes = list(nodelist_expand(fields["nodes"]))
            except Exception as error:  # noqa: BLE001 - any hostlist error, named
                raise UsageError(f"{source}:{number}: bad Nodes= hostlist "
                                 f"{fields['nodes']!r}: {error}") from error
            leaves.setdefault(fields["switchname"], []).extend(nodes)
    return _checked(leaves, source)


def parse_ibnetdiscover(text: str, source: str) -> dict[str, list[str]]:
    """Leaf → nodes from ibnetdiscover's Switch blocks: the switch's node description
    (its GUID where it has none) and the hostnames of the hosts on its ports."""
    leaves: dict[str, list[str]] = {}
    switch = None
    for line in text.splitlines():
        header = IBND_SWITCH.match(line)
        if header:
            switch = header[2] or f"S-{header[1]}"
        elif not line.startswith("["):
            switch = None  # a blank line or another block ends the switch's ports
        elif switch and (host := IBND_HOST_PORT.match(line)) and host[1].split():
            name = host[1].split()[0]
            if name not in leaves.setdefault(switch, []):
                leaves[switch].append(name)
    return _checked(leaves, source)


def load(path: Path) -> dict[str, list[str]]:
    """A topology.conf or ibnetdiscover output file, told apart by its content."""
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        raise UsageError(f"cannot read the switch topology {path}: {error.strerror}") from error
    if re.search(r"^\s*SwitchName=", text, re.M | re.I):
        return parse_slurm(text, str(path))
    if IBND_SWITCH.search(text) or re.search(r"^Switch\s", text, re.M):
        return parse_ibnetdiscover(text, str(path))
    raise UsageError(f"{path}: neither Slurm's topology.conf (SwitchName=… Nodes=…) nor "
                     f"ibnetdiscover output (Switch blocks)")


def from_slurm(env: dict[str, str]) -> dict[str, list[str]]:
    """Slurm's own tree (``scontrol show topology``); {} where it has none."""
    shown = subprocess.run(["scontrol", "show", "topology"], capture_output=True, text=True,
                           env=env)
    if shown.returncode != 0 or "SwitchName=" not in shown.stdout:
        return {}
    return parse_slurm(shown.stdout, "scontrol show topology")


def leaf_of(leaves: dict[str, list[str]]) -> dict[str, str]:
    return {node: leaf for leaf, nodes in leaves.items() for node in nodes}


def _key_values(line: str):
    for token in line.split():
        key, _, value = token.partition("=")
        yield key.lower(), value


def _checked(leaves: dict[str, list[str]], source: str) -> dict[str, list[str]]:
    seen: dict[str, str] = {}
    for leaf, nodes in leaves.items():
        for node in nodes:
            if node in seen and seen[node] != leaf:
                raise UsageError(f"{source}: node {node} is on two leaf switches, "
                                 f"{seen[node]} and {leaf}")
            seen[node] = leaf
    if not leaves:
        raise UsageError(f"{source}: no switch with nodes on it")
    return leaves
