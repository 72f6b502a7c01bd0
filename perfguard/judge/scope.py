"""What a threshold may name: a system, check, parameter and metric that a stored run or a
check of the library has. A misspelt name never matches a value, so a threshold naming
what nothing has is refused (``--force`` pre-seeds one, with a warning); and a metric
that runs have stored has its unit, which a threshold given in another unit of the same
dimension is converted into (perfguard.judge.units).

What the checks have is read from their source (``ast``, no ReFrame, no import of the
check): classes decorated ``simple_test``, their ``parameter([...])`` values and the
metrics they name in ``perfguard_better``, ``perf_variables`` or a
``@performance_function``; a value or metric built at run time (not a literal) is
taken as "any".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from perfguard.judge import units
from perfguard.judge.thresholds import Threshold
from perfguard.store import queries
from perfguard.store.queries import Connection

#: Where a check lists its metrics literally.
_METRIC_DICTS = ("perfguard_better", "perf_variables")


@dataclass
class Declared:
    """A check class as its source declares it, its bases' declarations merged in:
    parameter name → its values (None: not a literal), and its metrics: a literal
    ``perfguard_better`` names every one a perfguard check measures; otherwise the
    ``@performance_function`` names and literal ``perf_variables`` / ``reference`` keys,
    unless perf variables are built at run time."""
    params: dict[str, set[str] | None] = field(default_factory=dict)
    better: set[str] | None = None
    named: set[str] = field(default_factory=set)
    better_at_run_time: bool = False
    perf_at_run_time: bool = False
    test: bool = False

    @property
    def metrics(self) -> set[str] | None:
        """Every metric the check may measure; None: built at run time, any."""
        if self.better is not None:
            return self.better | self.named
        return None if self.better_at_run_time or self.perf_at_run_time else self.named

    def inherit(self, base: Declared) -> None:
        self.params = {**base.params, **self.params}
        self.better = base.better if self.better is None else self.better
        self.named |= base.named
        self.better_at_run_time |= base.better_at_run_time
        self.perf_at_run_time |= base.perf_at_run_time


def declared_checks(directories: list[Path]) -> dict[str, Declared]:
    """Check class name → what it declares, for every ReFrame test in ``directories``."""
    classes: dict[str, ast.ClassDef] = {}
    for directory in directories:
        for path in sorted(directory.rglob("*.py")):
            try:
                tree = ast.parse(path.read_text(), str(path))
            except (OSError, SyntaxError, ValueError):
                continue  # ReFrame names a check file it cannot load when it runs
            classes.update((n.name, n) for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
    merged = {name: _merged(name, classes, ()) for name in classes}
    return {name: d for name, d in merged.items() if d.test}


def _merged(name: str, classes: dict[str, ast.ClassDef], seen: tuple) -> Declared:
    node = classes[name]
    found = _own(node)
    for base in map(_name, node.bases):
        if base in classes and base not in seen:
            found.inherit(_merged(base, classes, (*seen, name)))
    return found


def _own(node: ast.ClassDef) -> Declared:
    """What the class body itself declares."""
    found = Declared(test=any(_name(d) == "simple_test" for d in node.decorator_list))
    for item in node.body:
        if isinstance(item, ast.Assign) and len(item.targets) == 1 \
                and isinstance(item.targets[0], ast.Name):
            _declare(found, item.targets[0].id, item.value)
        elif isinstance(item, ast.FunctionDef):
            if any(_name(d.func if isinstance(d, ast.Call) else d) == "performance_function"
                   for d in item.decorator_list):
                found.named.add(item.name)
            assigned = _assigned_at_run_time(item)
            found.better_at_run_time |= "perfguard_better" in assigned
            found.perf_at_run_time |= "perf_variables" in assigned
    return found


def _declare(found: Declared, target: str, value: ast.expr) -> None:
    """A class attribute: a parameter, or a literal dict naming metrics."""
    if isinstance(value, ast.Call) and _name(value.func) == "parameter":
        found.params[target] = _literal_values(value)
    elif isinstance(value, ast.Dict) and target == "perfguard_better":
        found.better = {k.value for k in value.keys if isinstance(k, ast.Constant)}
    elif isinstance(value, ast.Dict) and target == "perf_variables":
        found.named |= {k.value for k in value.keys if isinstance(k, ast.Constant)}
    elif isinstance(value, ast.Dict) and target == "reference":
        found.named |= {k.value for scoped in value.values if isinstance(scoped, ast.Dict)
                        for k in scoped.keys if isinstance(k, ast.Constant)}


def _assigned_at_run_time(function: ast.FunctionDef) -> set[str]:
    """Which of ``self.perf_variables`` and ``self.perfguard_better`` a method assigns
    (whole or an item)."""
    found = set()
    for node in ast.walk(function):
        for target in node.targets if isinstance(node, ast.Assign) else []:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(one, ast.Subscript):
                    one = one.value
                if isinstance(one, ast.Attribute) and one.attr in _METRIC_DICTS:
                    found.add(one.attr)
    return found


def _literal_values(call: ast.Call) -> set[str] | None:
    try:
        return {str(v) for v in ast.literal_eval(call.args[0])}
    except (ValueError, TypeError, IndexError, SyntaxError):
        return None


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


@dataclass
class Stored:
    """What the stored runs know of a system and check (the named query stored_scope)."""
    system_known: bool
    checks: list[str]
    params: list[dict]
    metrics: dict[str, str]


def stored(conn: Connection, system: str, check: str) -> Stored:
    row = queries.first(conn, "stored_scope", {"system": system, "check": check})
    conn.commit()
    return Stored(row["system_known"], list(row["checks"]), row["params"], row["metrics"])


def unknown(t: Threshold, known: Stored, declared: dict[str, Declared],
            systems: set[str]) -> str | None:
    """What of the threshold's scope no stored run and no check has, saying what is
    known; None when every name is known."""
    if t.system not in systems and not known.system_known:
        return f"system {t.system!r} (known: {', '.join(sorted(systems)) or 'none'})"
    check = declared.get(t.check)
    if check is None and not known.params:
        names = sorted({*known.checks, *declared})
        return f"check {t.check!r} (known: {', '.join(names) or 'none'})"
    for name, value in sorted(t.params.items()):
        if not _param_known(name, value, known, check):
            return f"parameter {name}={value} of {t.check} (known: {_params_text(known, check)})"
    metrics = check.metrics if check else set()
    if metrics is not None and t.metric not in {*metrics, *known.metrics}:
        return (f"metric {t.metric!r} of {t.check} (known: "
                f"{', '.join(sorted({*metrics, *known.metrics})) or 'none'})")
    return None


def _param_known(name: str, value: str, known: Stored, check: Declared | None) -> bool:
    if any(str(p.get(name)) == value for p in known.params if name in p):
        return True
    if check is None or name not in check.params:
        return False
    values = check.params[name]
    return values is None or value in values


def _params_text(known: Stored, check: Declared | None) -> str:
    values: dict[str, set[str] | None] = {}
    for p in known.params:
        for k, v in p.items():
            values.setdefault(k, set())
            if values[k] is not None:
                values[k].add(str(v))
    for k, v in (check.params if check else {}).items():
        values[k] = None if v is None or values.get(k, set()) is None else values.get(
            k, set()) | v
    return ", ".join(f"{k}=" + ("any" if v is None else "|".join(sorted(v)))
                     for k, v in sorted(values.items())) or "none"


def in_stored_unit(t: Threshold, known: Stored) -> Threshold:
    """The threshold in the unit its metric is stored in (no unit given: that unit); a
    metric no run has stored keeps the unit given."""
    unit = known.metrics.get(t.metric)
    if unit is None:
        return t
    scale = units.factor(t.unit or unit, unit, f"{t.check} {t.metric}")

    def scaled(value: float | None) -> float | None:  # 50000 ns → 50.0 µs, not 50.000…01
        return None if value is None else float(f"{value * scale:.12g}")

    t.reference = scaled(t.reference)
    if t.bounds == "absolute":
        t.lower, t.upper = scaled(t.lower), scaled(t.upper)
    t.unit = unit
    return t
