"""hetdeploy's modules: each one's lines and the hetdeploy modules it imports (issue 34: what a reader can
check of the house's layout).

    .venv/bin/python benchmarks/modules.py [--json]

Imports are read from the source (``ast``), those inside functions and under ``TYPE_CHECKING`` too, so an
import made late to keep start-up fast still counts.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hetdeploy"


def imports(path: Path) -> list[str]:
    """The hetdeploy modules ``path`` imports, by name, sorted."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:  # from .x import y; from . import x, y
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hetdeploy."):
            found.add(node.module.split(".")[1])
    modules = {p.stem for p in path.parent.glob("*.py")}  # not a name a module exports (__version__)
    return sorted(found & modules - {path.stem})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = {p.stem: {"lines": len(p.read_text().splitlines()), "imports": imports(p)}
             for p in sorted(PACKAGE.glob("*.py")) if p.stem != "__init__"}
    if args.json:
        print(json.dumps(table, indent=1))
        return
    for name, row in table.items():
        print(f"{name:<16} {row['lines']:>5}  {', '.join(row['imports'])}")


if __name__ == "__main__":
    main()
