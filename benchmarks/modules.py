"""hetdeploy's modules: each one's lines and the hetdeploy modules it imports, and which subpackage imports
which (issue 34: what a reader can check of the house's layout).

    .venv/bin/python benchmarks/modules.py [--json]

Imports are read from the source (``ast``), those inside functions and under ``TYPE_CHECKING`` too, so an
import made late to keep start-up fast still counts. ``tests/test_layout.py`` checks with these readers that
each subpackage imports only what its docstring's "May import:" line allows.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hetdeploy"


def module_name(path: Path) -> str:
    """``hetdeploy/core/plan.py`` -> ``core.plan``; ``hetdeploy/planning/units/__init__.py`` -> ``planning.units``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package by name: a subpackage's ``__init__`` (its docstring, no code) left out, a
    package's within a subpackage (``planning/units/__init__.py``: code) in."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))
            if p.stem != "__init__" or len(p.relative_to(PACKAGE).parts) > 2}


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The dotted name, inside hetdeploy, that ``from <dots><module> import`` starts from."""
    here = path.relative_to(PACKAGE).parent.parts
    base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(path: Path) -> tuple[list[str], list[str]]:
    """(the hetdeploy modules ``path`` imports, the other packages it imports), each sorted."""
    known = set(modules())
    own, libraries = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            start = _absolute(path, node)
            for alias in node.names:  # from ..core import plan (a module) or from ..core.plan import Plan
                own.add(f"{start}.{alias.name}".lstrip(".") if f"{start}.{alias.name}".lstrip(".") in known
                        else start)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hetdeploy."):
            own.add(node.module.removeprefix("hetdeploy."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            libraries.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            libraries.update(alias.name.split(".")[0] for alias in node.names)
    own.discard(module_name(path))
    return sorted(m for m in own if m in known), sorted(libraries - {"hetdeploy"})


def package_of(module: str) -> str:
    """The subpackage a module sits in ("" for the package's own ``__main__``)."""
    return module.split(".")[0] if "." in module else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = {name: {"lines": len(path.read_text().splitlines()), "imports": imports(path)[0]}
             for name, path in modules().items()}
    packages: dict[str, set[str]] = {}
    for name, row in table.items():
        packages.setdefault(package_of(name), set()).update(
            package_of(m) for m in row["imports"] if package_of(m) != package_of(name))
    if args.json:
        print(json.dumps({"modules": table, "packages": {p: sorted(q) for p, q in packages.items()}}, indent=1))
        return
    for name, row in table.items():
        print(f"{name:<24} {row['lines']:>5}  {', '.join(row['imports'])}")
    print()
    for package, used in sorted(packages.items()):
        if package:
            print(f"{package:<10} imports {', '.join(sorted(used)) or 'nothing else of hetdeploy'}")


if __name__ == "__main__":
    main()
