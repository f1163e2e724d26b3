"""The package's layout (issue 34): each subpackage imports only what its docstring's "May import:" line
allows, so the stages form one direction; the planning algorithms stay free of onnx, onnxruntime, hls4ml
and qonnx; no module sits outside a subpackage."""

import ast

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
