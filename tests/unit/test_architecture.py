"""docs/architecture.md's import table is true: every perfguard module imports only its
own package, the base, and what its folder's row says it may (the flow run → store →
judge → present runs one way). The table is read from the page, so the test fails when
an import breaks it and the page is what to change with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
#: What every package may import (the page says so beside the table).
BASE = {"errors", "secrets", "states", "site.paths", "site.yamlfile"}


def allowed_imports() -> dict[str, set[str]]:
    rows = {}
    for line in PAGE.read_text().splitlines():
        row = re.match(r"\| `perfguard/(\w+)/` \| .* \| (.*) \|$", line)
        if row and row.group(1) != "cli":  # the CLI may import everything, thinly
            rows[row.group(1)] = set(re.findall(r"`([\w.]+)`", row.group(2))) | BASE
    return rows


def perfguard_imports(path: Path) -> set[str]:
    """``store``, ``site.paths``, … for every ``perfguard.X[.Y]`` the module imports,
    at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        found |= {".".join(n.split(".")[1:3]) for n in names
                  if n.startswith("perfguard.") and n.count(".") >= 1}
    return found


def test_every_module_imports_what_its_row_allows() -> None:
    rows = allowed_imports()
    assert set(rows) >= {"contract", "site", "run", "store", "judge", "present", "sweep",
                         "cluster"}
    assert all(f"`{module}`" in PAGE.read_text() for module in BASE)
    outside = []
    for package, allowed in rows.items():
        for module in sorted((ROOT / "perfguard" / package).rglob("*.py")):
            for target in perfguard_imports(module):
                top = target.split(".")[0]
                if top != package and target not in allowed and top not in allowed:
                    outside.append(f"{module.relative_to(ROOT)} imports perfguard.{target}")
    assert outside == []
