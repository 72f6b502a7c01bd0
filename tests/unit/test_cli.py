"""Every command and subcommand explains itself."""

from __future__ import annotations

import argparse

import pytest

from perfguard.cli import build_parser
from tests.conftest import perfguard


def every_command(parser: argparse.ArgumentParser | None = None,
                  path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str, list[str]]]:
    """(command path, the help its parent gives it, its options without a help text) of
    every command and subcommand, as the parser itself has them: a command added later is
    checked without editing a list."""
    parser = parser or build_parser()
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                silent = [a.option_strings[-1] if a.option_strings else a.dest
                          for a in sub._actions if not (a.help or "").strip()
                          and not isinstance(a, argparse._SubParsersAction)]
                found.append(((*path, name), helps.get(name) or "", silent))
                found += every_command(sub, (*path, name))
    return found


COMMANDS = every_command()


def test_the_commands_are_all_there() -> None:
    names = {" ".join(path) for path, _, _ in COMMANDS}
    assert {"run", "nightly", "upgrade-check", "verdict", "accept", "ack", "spack scope",
            "spack archives", "site check"} <= names


@pytest.mark.parametrize("command, summary, silent", COMMANDS,
                         ids=[" ".join(path) for path, _, _ in COMMANDS])
def test_help(command: tuple[str, ...], summary: str, silent: list[str]) -> None:
    """Each command says what it is in its parent's list, explains every option, and
    answers --help with its own usage line."""
    assert summary.strip(), f"`perfguard {' '.join(command[:-1])}` lists {command[-1]} " \
                            f"without a word on what it does"
    assert not silent, f"`perfguard {' '.join(command)}`: options without help: {silent}"
    result = perfguard(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: perfguard {' '.join(command)}")


def test_db_error_is_a_message_not_a_traceback() -> None:
    result = perfguard("db", "status", "--dsn", "postgresql://x@127.0.0.1:1/none")
    assert result.returncode == 1
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr


def test_site_show_names_the_state_directory_given_on_the_command_line(tmp_path) -> None:
    """`--state-dir X site show` said the default state directory, not X."""
    shown = perfguard("site", "show", state=tmp_path / "mine")
    assert shown.returncode == 0, shown.stderr
    assert f"state directory: {tmp_path / 'mine'}\n" in shown.stdout, shown.stdout
