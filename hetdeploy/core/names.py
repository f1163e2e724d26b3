"""Turn names from model and board files into safe identifiers.

Node, tensor and board names reach C++ identifiers, Tcl, file paths and shell
scripts. Everything that leaves Python goes through ``identifier``; the
original name is kept alongside in plan.json for the user.
"""

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def identifier(name: str, prefix: str = "n") -> str:
    """A C/Tcl/path-safe identifier derived from ``name``.

    Unsafe characters become ``_``; when anything was replaced a short hash of
    the original keeps distinct names distinct (``a/b`` and ``a_b``).
    """
    cleaned = _UNSAFE.sub("_", name).strip("_")
    cleaned = re.sub(r"_+", "_", cleaned)[:48]
    if cleaned != name or not cleaned:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:6]
        cleaned = f"{cleaned}_{digest}" if cleaned else digest
    if not cleaned[0].isalpha():
        cleaned = f"{prefix}_{cleaned}"
    return cleaned
