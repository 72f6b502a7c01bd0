"""Secrets never reach a message, a log or a file: every DSN form is redacted here.

libpq accepts a password in a URI's userinfo (``postgresql://u:PW@h/db``), as a URI
query parameter (``?password=PW``) and as a keyword (``password=PW`` or
``password='P W'``); all three are replaced by ``***`` wherever they appear in a text.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MASK = "***"

_URI_USERINFO = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^:/?#@\s]*:)[^@\s]*(?=@)", re.I)
_URI_QUERY = re.compile(r"(?P<head>[?&]password=)[^&#\s'\"]*", re.I)
_KEYWORD = re.compile(
    r"(?P<head>\b(?:password|pgpassword)\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s'&]+)", re.I)


def redact_secrets(text: str) -> str:
    """``text`` with every password of a DSN (any form) replaced by ``***``."""
    for pattern in (_URI_USERINFO, _URI_QUERY, _KEYWORD):
        text = pattern.sub(lambda m: m.group("head") + MASK, text)
    return text


def write_private(target: Path, text: str) -> None:
    """Write a file only its owner can read (0600 from the first byte), whole or not at
    all: written aside, then renamed over ``target``."""
    tmp = target.with_name(f".{target.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, target)
