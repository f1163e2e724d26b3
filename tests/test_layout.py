"""The package's layout (issue 34): each subpackage imports only what its docstring's "May import:" line
allows, so the stages form one direction; the planning algorithms stay free of onnx, onnxruntime, hls4ml
and qonnx; no module sits outside a subpackage."""

import ast
import re

import pytest
from modules import PACKAGE, imports, modules, package_of

SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
MODEL_LIBRARIES = {"onnx", "onnxruntime", "hls4ml", "qonnx"}


def allowed(package: str) -> set[str]:
    """The subpackages ``package``'s docstring says it may import, and itself."""
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text())) or ""
    lines = [line for line in doc.splitlines() if line.startswith("May import:")]
    assert len(lines) == 1, f"hetdeploy/{package}/__init__.py: no one 'May import:' line in its docstring"
    said = lines[0].removeprefix("May import:").strip().rstrip(".")
    named = set() if said.startswith("nothing") else {p.strip() for p in said.split(",")}
    assert named <= set(SUBPACKAGES), f"{package}: names no such subpackage: {named - set(SUBPACKAGES)}"
    return named | {package}


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_a_subpackage_imports_only_what_its_docstring_allows(package):
    may = allowed(package)
    found = {name: sorted({package_of(m) for m in imports(path)[0]} - may)
             for name, path in modules().items() if package_of(name) == package}
    assert found, f"{package}: no modules"
    assert {name: wrong for name, wrong in found.items() if wrong} == {}


def test_the_allowed_imports_have_no_cycle():
    """Each subpackage may import only those before it in one order (the pipeline's)."""
    order, left = [], {p: allowed(p) - {p} for p in SUBPACKAGES}
    while left:
        ready = [p for p, needs in left.items() if needs <= set(order)]
        assert ready, f"a cycle among {sorted(left)}"
        order += sorted(ready)
        for p in ready:
            del left[p]


def test_the_planning_algorithms_import_no_model_library():
    found = {name: sorted(set(imports(path)[1]) & MODEL_LIBRARIES)
             for name, path in modules().items() if package_of(name) == "planning"}
    assert {name: libs for name, libs in found.items() if libs} == {}


def test_every_module_sits_in_a_subpackage():
    assert [name for name in modules() if not package_of(name) and name != "__main__"] == []


# The kinds of execution unit (planning/units/kinds.py), by the names Shape.kind holds
UNIT_KINDS_MODULE = "planning.units.kinds"


def _kind_names() -> set[str]:
    from hetdeploy.planning.units.kinds import KINDS

    return set(KINDS)


def _names_compared(node: ast.Compare) -> set[str]:
    """The string constants a comparison compares with, alone or in a tuple, list or set."""
    found = set()
    for side in [node.left, *node.comparators]:
        for part in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]):
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                found.add(part.value)
    return found


def _reads_a_kind(node: ast.Compare) -> bool:
    """Whether a comparison reads something called ``kind`` (``shape.kind``, ``kind``)."""
    return any(isinstance(side, ast.Attribute) and side.attr == "kind" or isinstance(side, ast.Name) and
               side.id == "kind" for side in [node.left, *node.comparators])


def test_no_module_but_the_kinds_branches_on_a_unit_kinds_name():
    """Issue 64: the estimate, the folding and the stages ask a unit's kind (``kind_of(shape)``); none compares a
    kind with a kind's name but the module the kinds live in."""
    kinds, found = _kind_names(), []
    assert {"kernel", "window", "elementwise", "data"} <= kinds
    for name, path in modules().items():
        if name == UNIT_KINDS_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and _reads_a_kind(node) and _names_compared(node) & kinds:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def _hls4ml_names(tree: ast.AST) -> set[str]:
    """The names a module binds to hls4ml's modules and objects (``import hls4ml``, ``from hls4ml.x import y``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "hls4ml"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "hls4ml":
            names |= {a.asname or a.name for a in node.names}
    return names


def _root(target: ast.AST) -> ast.AST:
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return target


def test_hls4ml_is_changed_only_through_its_registration_calls():
    """Issue 64: hetdeploy extends hls4ml with register_pass and register_flow (fpga/hls4ml_passes.py); no module
    assigns an attribute or an entry of anything hls4ml's (a method, a handler table), sets one with setattr, or
    reaches hls4ml through importlib to do so."""
    found = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        hls4ml = _hls4ml_names(tree)
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            changed = [t for t in targets if isinstance(t, (ast.Attribute, ast.Subscript))
                       and isinstance(_root(t), ast.Name) and _root(t).id in hls4ml]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and \
                    isinstance(_root(node.args[0]), ast.Name) and _root(node.args[0]).id in hls4ml:
                changed.append(node)
            found += [f"{path.relative_to(PACKAGE.parent)}:{t.lineno}: {ast.unparse(t)}" for t in changed]
        found += [f"{path.relative_to(PACKAGE.parent)}: importlib.import_module('hls4ml...')"
                  for call in ast.walk(tree) if isinstance(call, ast.Call) and ast.unparse(call.func).endswith(
                      "import_module") and call.args and isinstance(call.args[0], ast.Constant)
                  and str(call.args[0].value).startswith("hls4ml")]
    assert found == []


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_readme_and_the_docs_resolves():
    """Issue 64: the README links to docs/, one page a question, and the pages to each other: every relative link
    names a file that exists and, where it has one, a heading of that file."""
    root = PACKAGE.parent
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):  # a web address
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            if not linked.exists():
                broken.append(f"{page.relative_to(root)}: {target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in {
                    _anchor(line.lstrip("#")) for line in linked.read_text().splitlines() if line.startswith("#")}:
                broken.append(f"{page.relative_to(root)}: {target}: no such heading")
    assert broken == []
