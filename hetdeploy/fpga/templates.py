"""hetdeploy's HLS templates (package data in hls/): whole files filled by ``string.Template``, and files of
named snippets (a construct each, as hls4ml keeps a template per layer call): ``statement`` fills one of
hls/statements.cpp.in's or of a unit kind's hls/kinds/<kind>.cpp.in, ``project_line`` one of
hls/project_lines.in's."""

from __future__ import annotations

import functools
import importlib.resources
import string
from pathlib import Path

TEMPLATES = Path(str(importlib.resources.files("hetdeploy") / "hls"))  # package data


def template(name: str) -> string.Template:
    path = TEMPLATES / name
    if not path.is_file():
        raise RuntimeError(f"{path}: hetdeploy's HLS template is missing (a broken install?)")
    return string.Template(path.read_text())


@functools.cache
def _snippets(file: str, marker: str) -> dict[str, string.Template]:
    """The templates of ``file`` in hls/ by name: the text after each line "``marker`` NAME"."""
    blocks = template(file).template.split(f"\n{marker} ")[1:]
    return {name: string.Template(body.rstrip("\n")) for name, _, body in (b.partition("\n") for b in blocks)}


def statement(name: str, file: str = "statements.cpp.in", /, **values) -> str:
    """The C++ of template ``name`` of hls/``file`` filled with ``values``."""
    return _snippets(file, "//@")[name].substitute(values)


def project_line(name: str, /, **values) -> str:
    """A Makefile rule or Tcl line, hls/project_lines.in's template ``name`` filled with ``values``."""
    return _snippets("project_lines.in", "#@")[name].substitute(values)


def line(name: str, file: str = "statements.cpp.in", /, **values) -> str:
    """``statement`` as lines of a function's body."""
    return "".join(f"    {text}\n" for text in statement(name, file, **values).split("\n"))
