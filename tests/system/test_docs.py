"""Every perfguard command the docs show is one perfguard takes: each is parsed by the real
command line (subcommand, options, their values); docs/adopting.md's blocks are also run,
in order, by tests/system/test_adoption.py."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from perfguard.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
#: `perfguard …` on a line of a code block (after environment assignments, or as a path
#: ending in bin/), up to a comment, pipe or `&&`.
COMMAND = re.compile(r"(?:^|\s)(?:[A-Z_]+=\S+\s+)*(?:\S*/bin/)?perfguard ([^#|&\n]*)", re.M)


def doc_commands() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.S):
            found += [(path.name, m) for m in COMMAND.findall(block.replace("\\\n", " "))]
        inline = re.sub(r"```.*?```", "", text, flags=re.S)
        found += [(path.name, m) for m in re.findall(r"`(?:[A-Z_]+=\S+ )*(?:\S*/)?perfguard "
                                                     r"([^`]*)`", inline)]
    # the synopsis of the global options (`perfguard --site DIR <command>`) is no command
    found = [(name, command.split(" | ")[0]) for name, command in found]  # a shell pipe
    return [(name, command.strip()) for name, command in found
            if command.strip() and not re.search(r"<\w+>|\bCOMMAND\b", command)]


def as_argv(command: str) -> list[str]:
    """A command, or a synopsis (``verdict [RUN] [--baseline LABEL]``, ``a|b``): its
    brackets dropped, the first of each set of alternatives taken."""
    command = " ".join(command.replace("…", "").replace("...", "x").split())
    command = re.sub(r"(\w)\[([\d,-]+)\]", r"\1{\2}", command)  # hostlists: node[1-64]
    command = re.sub(r"(\S+?)\|\S+", r"\1", command.replace("[", "").replace("]", ""))
    command = re.sub(r"(\w)\{([\d,-]+)\}", r"\1[\2]", command)
    # placeholders (N, DAYS, RUN) stand for values: a number fits every one of them
    return ["1" if re.fullmatch(r"[A-Z][A-Z_]*", word) else word
            for word in shlex.split(command)]


@pytest.mark.parametrize("doc, command", doc_commands())
def test_a_documented_command_parses(doc: str, command: str) -> None:
    """A command named in prose without its required arguments, or an option named
    without its value (`perfguard verdict --explain`), is a mention: only those errors
    are let pass."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(as_argv(command))
            return
        except SystemExit as exit_:
            if exit_.code == 0:  # --help
                return
    message = errors.getvalue().strip().splitlines()[-1]
    mentioned_option = "expected one argument" in message and as_argv(command)[-1] in message
    assert "the following arguments are required" in message or mentioned_option, \
        f"{doc}: `perfguard {command}`: {message}"
