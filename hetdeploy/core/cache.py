"""A content-addressed build cache: what hls4ml made of a unit, and a compiled C-simulation library,
kept under a key of everything that determines them, so that a rebuild redoes only what changed.

    <root>/<kind>/<key[:2]>/<key>/manifest.json   {"files": {path: sha256}, "folders": [...], "meta": {...}}
    <root>/<kind>/<key[:2]>/<key>/files/...

Keys (``digest``) hash their parts with the toolchain's identity (``TOOLCHAIN``: the versions of
hls4ml, qonnx, onnx, numpy and hetdeploy, and a hash of hetdeploy's own code and templates). An
entry is written into ``<root>/tmp/`` and renamed into place in one step, so a reader never sees a
partial one, and two builds writing the same key at once keep one; every file a reader takes is
checked against the manifest, and an entry that does not match is removed and rebuilt.

The cache is bounded: past its limit (``DEFAULT_LIMIT``, ``$HETDEPLOY_CACHE_LIMIT``, the config's
``cache_limit``) a build, once it has stored what it made, evicts the least recently used entries (a
hit marks its entry used), never one this build has used. An evicted entry is renamed out of the tree before it is deleted, and a
reader that loses an entry in the middle of copying it counts a miss and rebuilds: eviction never
breaks a build in progress.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Optional


DEFAULT_LIMIT = 5 * 2**30  # bytes: about fifty mid-sized CNN builds' conversions and libraries
LIMIT_VARIABLE = "HETDEPLOY_CACHE_LIMIT"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(value: int | str) -> int:
    """Bytes from a whole number of bytes or one with a K, M, G or T suffix (binary: 5G is 5 GiB)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    text = str(value).strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "")
    try:
        size = float(number) * _UNITS[unit]
    except ValueError:
        size = -1.0
    if not 0 <= size < 2**63 or isinstance(value, bool):
        raise ValueError(f"'{value}': expected a size in bytes, as 5368709120 or 5G (K, M, G, T)")
    return int(size)


def default_limit() -> int:
    """``$HETDEPLOY_CACHE_LIMIT`` when set, else DEFAULT_LIMIT."""
    given = os.environ.get(LIMIT_VARIABLE)
    if not given:
        return DEFAULT_LIMIT
    try:
        return parse_size(given)
    except ValueError as err:
        from .errors import UserError

        raise UserError(f"${LIMIT_VARIABLE}: {err}") from None


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
    own = Path(__file__).resolve().parent.parent  # the package, all its stages
    code = digest(*[part for p in sorted([*own.rglob("*.py"), *(own / "hls").rglob("*")]) if p.is_file()
                    for part in (str(p.relative_to(own)), p.read_bytes())])
    return digest(*versions, code)


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class BuildCache:
    """Entries of kinds ("unit", "library", "objects", "headers", "report", "synthesis") under ``root``; ``hits``
    and ``misses`` count this build's lookups per kind."""

    def __init__(self, root: Path, limit: Optional[int] = None):
        self.root = Path(root)
        self.limit = default_limit() if limit is None else limit
        self.hits: dict[str, int] = {}
        self.misses: dict[str, int] = {}
        self.used: set[Path] = set()  # the entries this build fetched or stored: never evicted by it

    def _entry(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def entries(self) -> list["CacheEntry"]:
        """Every complete entry, least recently used first."""
        found = []
        for manifest in self.root.glob("*/*/*/manifest.json"):
            if manifest.relative_to(self.root).parts[0] == "tmp":  # one being written or evicted
                continue
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                size = json.loads(manifest.read_text()).get("bytes")
                if not isinstance(size, int):  # an entry of an older hetdeploy: measured
                    size = sum(p.stat().st_size for p in manifest.parent.rglob("*") if p.is_file())
                found.append(CacheEntry(manifest.parent, manifest.parent.parent.parent.name, size,
                                        manifest.stat().st_mtime))
        return sorted(found, key=lambda e: (e.last_used, str(e.path)))

    def evict(self) -> list["CacheEntry"]:
        """The least recently used entries removed until the cache is within its limit (never one this
        build used); returns them. A build calls it once, at its end: it reads every entry's manifest."""
        entries = self.entries()
        total, evicted = sum(e.bytes for e in entries), []
        for entry in entries:
            if total <= self.limit:
                break
            if entry.path in self.used:
                continue
            _remove(entry.path, self.root)
            total -= entry.bytes
            evicted.append(entry)
        return evicted

    def clear(self) -> int:
        """Every entry removed (and what interrupted writes left); returns the bytes freed."""
        entries = self.entries()
        for entry in entries:
            _remove(entry.path, self.root)
        shutil.rmtree(self.root / "tmp", ignore_errors=True)
        return sum(e.bytes for e in entries)

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
        copied = []
        try:
            for relative in manifest.get("folders", []):  # empty ones too (a unit without weights has its folder)
                (destination / relative).mkdir(parents=True, exist_ok=True)
            for relative in files:
                target = destination / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(entry / "files" / relative, target)
                copied.append(target)
        except FileNotFoundError:  # another build evicted it while we copied: built anew, nothing half-copied
            for target in copied:
                target.unlink(missing_ok=True)
            self.misses[kind] = self.misses.get(kind, 0) + 1
            return None
        with contextlib.suppress(OSError):
            os.utime(entry / "manifest.json")  # used now: the last to be evicted
        self.used.add(entry)
        self.hits[kind] = self.hits.get(kind, 0) + 1
        return manifest.get("meta", {})

    def store(self, kind: str, key: str, source: Path, files: list[Path], meta: dict,
              folders: tuple[Path, ...] = ()) -> None:
        """Keep ``files`` and ``folders`` (under ``source``) and ``meta`` under the key. A failure to
        write the cache (a full disk, a read-only cache folder) costs the next build time, never this
        one."""
        entry = self._entry(kind, key)
        self.used.add(entry)
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
                            "meta": meta, "bytes": sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())}
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


@dataclass
class CacheEntry:
    path: Path
    kind: str  # unit, library, objects, headers, report or synthesis
    bytes: int
    last_used: float  # seconds since the epoch: when it was stored or last fetched


def _remove(folder: Path, root: Path) -> None:
    """``folder`` out of the tree in one rename (a reader sees it whole or not at all), then deleted."""
    with contextlib.suppress(OSError):
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        doomed = Path(tempfile.mkdtemp(dir=root / "tmp", prefix="evicted-"))
        os.rename(folder, doomed / "entry")
        shutil.rmtree(doomed, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)  # where the rename failed (another build removed it first)


_PLURALS = {"headers": "precompiled headers", "unit": "hls4ml conversions", "library": "compiled libraries",
            "objects": "units' compiled objects", "report": "reports", "synthesis": "Yosys syntheses"}
