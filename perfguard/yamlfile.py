"""Reading the YAML files admins hand us (thresholds, topologies, rules, stacks), safely,
and checking each against its JSON Schema (``perfguard/schemas/<name>.schema.yaml``).

Safe loading alone still expands aliases: 600 bytes of nested ``*a`` references
become hundreds of megabytes. Our files never need aliases, so they are refused,
and a file larger than any real one is refused before it is parsed. Every site file's
shape is checked by one mechanism, jsonschema (ReFrame needs it too), and every problem
is a line naming the file, the place in it and, for an unknown key, the key meant.
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path
from typing import Any

import yaml

from perfguard.errors import UsageError

MAX_BYTES = 4 * 1024 * 1024
SCHEMAS_DIR = Path(__file__).parent / "schemas"


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in perfguard files",
                event.start_mark)
        return super().compose_node(parent, index)


class _Dumper(yaml.SafeDumper):
    """What we write, read back by ``load_yaml`` as written: a string that reads as a
    number there (``1e3``, a parameter value) is quoted."""


# PyYAML reads YAML 1.1, where a float needs a dot and a signed exponent: ``alpha: 1e-3``
# was the string "1e-3", and the rules file was refused for a number any admin writes.
# YAML 1.2 (and every other reader) takes it as 0.001; so do we, both ways.
for _side in (_NoAliasLoader, _Dumper):
    _side.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."))


def dump_yaml(document: Any) -> str:
    """``document`` as YAML that ``load_yaml`` reads back the same, keys in their order."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def load_yaml(path: Path, what: str, schema: str | None = None) -> Any:
    """The document in ``path``; any problem is a UsageError naming the file. With a
    ``schema`` (``topology``, ``thresholds``, ``verdict_rules``, ``sweep``,
    ``mpi_flavours``) an empty file is an empty mapping, and every place that breaks the
    schema is one line of the error."""
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
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML for a {what} file: {exc}") from exc
    if schema is None:
        return data
    data = {} if data is None else data
    problems = schema_problems(data, schema)
    if problems:
        raise UsageError(f"{path}: " + f"\n{path}: ".join(problems))
    return data


@functools.cache
def _validator(schema: str):  # noqa: ANN202 - a jsonschema validator, imported lazily
    from jsonschema import Draft202012Validator, validators

    # a count is a whole number written as one: JSON Schema's integer takes 30.0 (and, read
    # as YAML 1.2, 3e1), which reached a Rule's window as a float and broke judging
    whole = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))
    strict = validators.extend(Draft202012Validator, type_checker=whole)
    return strict(load_yaml(SCHEMAS_DIR / f"{schema}.schema.yaml", "schema"))


def schema_problems(data: Any, schema: str) -> list[str]:
    """What in a document breaks the schema ``schema``, one line each, by place in the
    document (``partitions[0].measurment_options: unknown key (did you mean …)``)."""
    errors = _validator(schema).iter_errors(data)
    return [_problem(error) for error in sorted(
        errors, key=lambda e: [str(p) for p in e.absolute_path])]


def _problem(error) -> str:  # noqa: ANN001 - a jsonschema ValidationError
    place = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    place = place.lstrip(".")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict) \
            and "properties" in error.schema:
        known = list(error.schema["properties"])
        return "; ".join(f"{place + '.' if place else ''}{key}: unknown key"
                         f"{_did_you_mean(str(key), known)}"
                         for key in error.instance if key not in known)
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return f"{place or '(top level)'}: missing '{missing}'"
    return f"{place or '(top level)'}: {error.message}"


def _did_you_mean(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(known)})"
