"""docs/architecture.md's package table is true: its folders are floors listed from the
bottom; every perfguard module imports only its own package, the base, and what its
folder's row allows, and a row allows only folders above it in the table. So no import
runs back up the flow and no two folders import each other. The table is read from the
page: the test fails when an import breaks it, and the page is what to change with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
#: What every package may import (the page says so below the table).
BASE = {"errors", "secrets", "states", "paths", "yamlfile", "__version__"}


def floors() -> list[tuple[str, set[str]]]:
    """The table's rows from the bottom: folder, and the folders its row allows."""
    rows = []
    for line in PAGE.read_text().splitlines():
        row = re.match(r"\| `perfguard/(\w+)/` \| .* \| (.*) \|$", line)
        if row:
            rows.append((row.group(1), set(re.findall(r"`(\w+)`", row.group(2)))))
    return rows


def imported(path: Path) -> set[str]:
    """Every module name the module at ``path`` imports, at its top or inside a function,
    dotted in full (``from perfguard.judge import rules``: ``perfguard.judge`` and
    ``perfguard.judge.rules``; a relative import read from the module's package)."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = package + (f".{module}" if module else "")
            found |= {module, *(f"{module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def perfguard_imports(path: Path) -> set[str]:
    """``store``, ``paths``, … for every ``perfguard.X`` the module imports, at its top
    or inside a function (``from perfguard import paths`` too)."""
    return {name.split(".")[1] for name in imported(path) if name.startswith("perfguard.")}


def test_every_module_imports_what_its_row_allows() -> None:
    rows = dict(floors())
    assert set(rows) >= {"cluster", "contract", "site", "run", "store", "judge", "present",
                         "workflows", "cli"}
    assert all(f"`{module}`" in PAGE.read_text() for module in BASE - {"__version__"})
    outside = []
    for package, allowed in rows.items():
        if package == "cli":  # the CLI may import everything, thinly
            continue
        for module in sorted((ROOT / "perfguard" / package).rglob("*.py")):
            for target in perfguard_imports(module) - BASE - allowed - {package}:
                outside.append(f"{module.relative_to(ROOT)} imports perfguard.{target}")
    assert outside == []


def test_a_folder_allows_only_folders_below_it() -> None:
    seen: set[str] = set()
    upward = []
    for package, allowed in floors():
        if package != "cli":
            upward += [f"{package} → {target}" for target in sorted(allowed - seen)]
        seen.add(package)
    assert upward == []


def test_the_base_imports_only_the_base() -> None:
    for name in BASE - {"__version__"}:
        assert perfguard_imports(ROOT / "perfguard" / f"{name}.py") <= BASE, name


def module_imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that the module at ``path`` imports (``imported``)."""
    modules = {p.stem for p in path.parent.glob("*.py")} - {path.stem}
    return {name.split(".")[2] for name in imported(path)
            if name.startswith(f"perfguard.{package}.")} & modules


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of ``graph`` (module → the modules it imports), each from its least
    module: verdict.py importing run_findings.py and back was one (issue 67)."""
    circles = []

    def walk(start: str, path: list[str]) -> None:
        for target in sorted(graph.get(path[-1], set())):
            if target == start:
                circles.append(path)
            elif target > start and target not in path:
                walk(start, [*path, target])

    for start in sorted(graph):
        walk(start, [start])
    return circles


def test_import_circles_are_found() -> None:
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_of_a_package_import_each_other_in_a_circle() -> None:
    circles = {}
    for package in (p for p in (ROOT / "perfguard").iterdir() if p.is_dir()):
        graph = {path.stem: module_imports(path, package.name)
                 for path in package.glob("*.py")}
        if found := import_circles(graph):
            circles[package.name] = found
    assert circles == {}
