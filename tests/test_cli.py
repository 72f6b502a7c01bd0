"""Every command and subcommand explains itself."""

from __future__ import annotations

import pytest

from tests.conftest import perfguard

COMMANDS = [
    [], ["cluster"], ["cluster", "up"], ["cluster", "down"], ["cluster", "status"],
    ["run"], ["demo"], ["db"], ["db", "upgrade"], ["db", "status"], ["ingest"],
    ["thresholds"], ["thresholds", "set"], ["thresholds", "list"], ["thresholds", "history"],
    ["thresholds", "show"], ["thresholds", "import"], ["thresholds", "export"],
    ["thresholds", "derive"], ["verdict"], ["topology"], ["topology", "detect"],
    ["spack"], ["spack", "check"], ["spack", "install"], ["fingerprint"],
    ["fingerprint", "diff"], ["nightly"], ["upgrade-check"], ["cluster", "env"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "perfguard")
def test_help(command: list[str]) -> None:
    result = perfguard(*command, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: perfguard")
    assert len(result.stdout.splitlines()) > 3


def test_db_error_is_a_message_not_a_traceback() -> None:
    result = perfguard("db", "status", "--dsn", "postgresql://x@127.0.0.1:1/none")
    assert result.returncode == 1
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr
