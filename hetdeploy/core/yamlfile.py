"""The YAML files hetdeploy reads (board files, build configs): plain data, every key path's line
kept for one-line errors.

YAML 1.1 reads 1e9 and 5e-08 as strings; figures are written that way, so floats are resolved as
YAML 1.2 does. Aliases are refused while composing (none is needed, and a kilobyte of nested
aliases expands to gigabytes), as are unknown ``!tags`` and nesting too deep for a parser.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .errors import UserError, input_file


class _Loader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed",
                                              self.peek_event().start_mark)
        return super().compose_node(parent, index)


_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9_]+|[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?$"
               r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)
_SCALARS = _Loader("")  # builds Python scalars from composed nodes (whose tags the composer resolved)


class YamlFile:
    """``data``: the file's content; ``fail(path, problem)`` raises the one line naming the file,
    the line and the key path (``devices[0].name``)."""

    def __init__(self, path: Path, what: str):
        self.path = path
        self.lines: dict[str, int] = {}
        try:
            text = input_file(path, what).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise UserError(f"{path}: cannot read the {what} ({err})") from None
        try:
            node = yaml.compose(text, Loader=_Loader)
            if node is None:
                raise UserError(f"{path}: the {what} is empty")
            self.data = self._convert(node, "")
        except yaml.YAMLError as err:  # a syntax error, an alias, an unknown !tag
            mark = getattr(err, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark else ""
            raise UserError(f"{path}: {where}not valid YAML ({getattr(err, 'problem', err)})") from None
        except RecursionError:
            raise UserError(f"{path}: nested too deeply to be a {what}") from None

    def _convert(self, node: yaml.Node, path: str) -> Any:
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            result = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):  # ? [a, b]: a list or mapping as a key
                    where = f"{path}.?" if path else "?"
                    self.lines[where] = key_node.start_mark.line + 1
                    self.fail(where, f"a key must be a name, not a {key_node.id}")
                key = key_node.value
                sub = f"{path}.{key}" if path else key
                if key in result:
                    self.lines[sub] = key_node.start_mark.line + 1
                    self.fail(sub, "appears twice")
                result[key] = self._convert(value_node, sub)
                self.lines[sub] = key_node.start_mark.line + 1
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self._convert(v, f"{path}[{i}]") for i, v in enumerate(node.value)]
        return _SCALARS.construct_object(node, deep=True)

    def fail(self, path: str, problem: str) -> None:
        line = self.lines.get(path)
        while line is None and path:
            path_parent = path.rsplit(".", 1)[0] if "." in path else ""
            line, path = self.lines.get(path_parent), path_parent
        where = f"line {line}: " if line else ""
        raise UserError(f"{self.path}: {where}{path or 'top level'}: {problem}")
