"""A content-addressed build cache: what hls4ml made of a unit, and a compiled C-simulation library,
kept under a key of everything that determines them, so that a rebuild redoes only what changed.

    <root>/<kind>/<key[:2]>/<key>/manifest.json   {"files": {path: sha256}, "folders": [...], "meta": {...}}
    <root>/<kind>/<key[:2]>/<key>/files/...

Keys (``digest``) hash their parts with the toolchain's identity (``TOOLCHAIN``: the versions of
hls4ml, qonnx, onnx, numpy and hetdeploy, and a hash of hetdeploy's own code and templates). An
entry is written into ``<root>/tmp/`` and renamed into place in one step, so a reader never sees a
partial one, and two builds writing the same key at once keep one; every file a reader takes is
checked against the manifest, and an entry that does not match is removed and rebuilt.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Optional


def default_root() -> Path:
    """``$XDG_CACHE_HOME/hetdeploy``, else ``~/.cache/hetdeploy``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hetdeploy"


def digest(*parts: bytes | str) -> str:
    """sha256 of the parts, each length-prefixed (so that no two lists of parts collide)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def tree_digest(folder: Path, skip_suffixes: tuple[str, ...] = ()) -> str:
    """sha256 of every file under ``folder`` (relative path and bytes), in path order."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(skip_suffixes))
    return digest(*[part for p in files for part in (str(p.relative_to(folder)), p.read_bytes())])


@functools.lru_cache(maxsize=1)
def toolchain() -> str:
    """What every key includes: the libraries that generate and the code that drives them."""
    versions = []
    for package in ("hls4ml", "qonnx", "onnx", "onnxruntime", "numpy", "hetdeploy"):
        try:
            versions.append(f"{package}=={metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package}==?")
    own = Path(__file__).resolve().parent
    code = digest(*[part for p in sorted([*own.glob("*.py"), *(own / "hls").glob("*")]) if p.is_file()
                    for part in (p.name, p.read_bytes())])
    return digest(*versions, code)


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class BuildCache:
    """Entries of kinds ("unit", "library", "objects", "report") under ``root``; ``hits`` and ``misses`` count this
    build's lookups per kind."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.hits: dict[str, int] = {}
        self.misses: dict[str, int] = {}

    def _entry(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def fetch(self, kind: str, key: str, destination: Path) -> Optional[dict]:
        """Copy the entry's files into ``destination`` (created) and return its metadata; None when
        there is no entry, or it does not match its manifest (then it is removed)."""
        entry = self._entry(kind, key)
        try:
            manifest = json.loads((entry / "manifest.json").read_text())
            files = manifest["files"]
            for relative, expected in files.items():
                if _file_hash(entry / "files" / relative) != expected:
                    raise ValueError(f"{relative} changed")
        except FileNotFoundError:
            self.misses[kind] = self.misses.get(kind, 0) + 1
            return None
        except (OSError, ValueError, KeyError, TypeError):  # damaged: rebuilt, and stored anew
            shutil.rmtree(entry, ignore_errors=True)
            self.misses[kind] = self.misses.get(kind, 0) + 1
            return None
        destination.mkdir(parents=True, exist_ok=True)
        for relative in manifest.get("folders", []):  # empty ones too (a unit without weights has its folder)
            (destination / relative).mkdir(parents=True, exist_ok=True)
        for relative in files:
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(entry / "files" / relative, target)
        self.hits[kind] = self.hits.get(kind, 0) + 1
        return manifest.get("meta", {})

    def store(self, kind: str, key: str, source: Path, files: list[Path], meta: dict,
              folders: tuple[Path, ...] = ()) -> None:
        """Keep ``files`` and ``folders`` (under ``source``) and ``meta`` under the key. A failure to
        write the cache (a full disk, a read-only cache folder) costs the next build time, never this
        one."""
        entry = self._entry(kind, key)
        if entry.exists():
            return
        with contextlib.suppress(OSError):
            (self.root / "tmp").mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=self.root / "tmp"))
            try:
                hashes = {}
                for path in files:
                    relative = str(path.relative_to(source))
                    target = staging / "files" / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
                    hashes[relative] = _file_hash(target)
                manifest = {"files": hashes, "folders": sorted(str(f.relative_to(source)) for f in folders),
                            "meta": meta}
                (staging / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))
                entry.parent.mkdir(parents=True, exist_ok=True)
                os.rename(staging, entry)  # atomic; fails when another build stored the key first
            finally:
                shutil.rmtree(staging, ignore_errors=True)

    def summary(self) -> str:
        """``1 of 2 compiled libraries, 2 of 4 hls4ml conversions`` from the cache."""
        kinds = sorted(set(self.hits) | set(self.misses))
        return ", ".join(f"{self.hits.get(k, 0)} of {self.hits.get(k, 0) + self.misses.get(k, 0)} {_PLURALS[k]}"
                         for k in kinds) or "nothing looked up"


_PLURALS = {"unit": "hls4ml conversions", "library": "compiled libraries", "objects": "units' compiled objects",
            "report": "reports"}
