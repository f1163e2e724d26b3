"""The build cache: keys, entries that are whole or absent, damage detected, builds that reuse it."""

import json
import os
import shutil
import subprocess
import sys
import threading

import onnx
import pytest

import networks
from hetdeploy.core.cache import BuildCache, digest, tree_digest


def test_keys_change_with_every_part_and_only_then(tmp_path):
    assert digest("a", b"b") == digest("a", b"b")
    assert len({digest("a", "b"), digest("ab"), digest("a", "b", ""), digest("b", "a"), digest("a", "c")}) == 5
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.cpp").write_text("int x;")
    (tmp_path / "d" / "run.log").write_text("1")
    before = tree_digest(tmp_path / "d", (".log",))
    (tmp_path / "d" / "run.log").write_text("2")  # skipped: the same key
    assert tree_digest(tmp_path / "d", (".log",)) == before
    (tmp_path / "d" / "x.cpp").write_text("int y;")
    assert tree_digest(tmp_path / "d", (".log",)) != before
    (tmp_path / "d" / "x.cpp").write_text("int x;")
    (tmp_path / "d" / "y.h").write_text("")
    assert tree_digest(tmp_path / "d", (".log",)) != before


def test_entries_are_whole_damage_is_detected_and_rebuilt(tmp_path):
    source = tmp_path / "src"
    (source / "sub" / "empty").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("alpha")
    cache = BuildCache(tmp_path / "cache")
    assert cache.fetch("unit", "k" * 64, tmp_path / "none") is None
    cache.store("unit", "k" * 64, source, [source / "sub" / "a.txt"], {"n": 1}, (source / "sub" / "empty",))
    assert cache.fetch("unit", "k" * 64, tmp_path / "out") == {"n": 1}
    assert (tmp_path / "out" / "sub" / "a.txt").read_text() == "alpha" and (tmp_path / "out" / "sub" / "empty").is_dir()
    assert not list((tmp_path / "cache" / "tmp").iterdir())  # nothing half-written left behind
    entry = tmp_path / "cache" / "unit" / "kk" / ("k" * 64)
    (entry / "files" / "sub" / "a.txt").write_text("alphA")  # damaged
    assert cache.fetch("unit", "k" * 64, tmp_path / "again") is None and not entry.exists()
    assert (cache.hits, cache.misses) == ({"unit": 1}, {"unit": 2})
    (tmp_path / "cache" / "tmp" / "half").mkdir()  # a writer that died: never read as an entry
    assert cache.fetch("unit", "h" * 64, tmp_path / "x") is None


def test_concurrent_stores_of_one_key_keep_one_entry(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "lib.so").write_bytes(b"\x7fELF" + bytes(100_000))
    caches = [BuildCache(tmp_path / "cache") for _ in range(4)]
    threads = [threading.Thread(target=c.store, args=("library", "z" * 64, source, [source / "lib.so"], {}))
               for c in caches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.name for p in (tmp_path / "cache" / "library" / "zz").iterdir()] == ["z" * 64]
    assert caches[0].fetch("library", "z" * 64, tmp_path / "out") == {}
    assert (tmp_path / "out" / "lib.so").read_bytes() == (source / "lib.so").read_bytes()


def _store(root, key, size, limit):
    """A new build's cache storing one entry of ``size`` bytes under ``key``."""
    source = root.parent / f"src-{key}"
    source.mkdir(exist_ok=True)
    (source / "data.bin").write_bytes(bytes(size))
    cache = BuildCache(root, limit)
    cache.store("unit", key * 64, source, [source / "data.bin"], {})
    return cache


def _entry(root, key):
    return root / "unit" / (key * 2) / (key * 64)


def test_past_its_limit_the_cache_evicts_the_least_recently_used_and_the_next_build_hits_the_newest(tmp_path):
    root = tmp_path / "cache"
    _store(root, "a", 1000, 10_000)
    _store(root, "b", 1000, 10_000)
    os.utime(_entry(root, "a") / "manifest.json", (1000, 1000))  # a stored long ago ...
    os.utime(_entry(root, "b") / "manifest.json", (2000, 2000))
    third = BuildCache(root, 2500)
    assert third.fetch("unit", "a" * 64, tmp_path / "got") == {}  # ... and used now: b is the least recent
    third_source = tmp_path / "src-c"
    third_source.mkdir()
    (third_source / "data.bin").write_bytes(bytes(1000))
    third.store("unit", "c" * 64, third_source, [third_source / "data.bin"], {})
    third.evict()  # as a build does once it has stored what it made
    assert not _entry(root, "b").exists() and _entry(root, "a").exists() and _entry(root, "c").exists()
    assert sum(e.bytes for e in BuildCache(root, 2500).entries()) <= 2500
    assert BuildCache(root, 2500).fetch("unit", "c" * 64, tmp_path / "next") == {}
    # a build never evicts what it used itself, even past the limit
    greedy = BuildCache(root, 1)
    greedy.fetch("unit", "a" * 64, tmp_path / "again")
    greedy.fetch("unit", "c" * 64, tmp_path / "again2")
    assert greedy.evict() == [] and _entry(root, "a").exists()


def test_an_entry_evicted_while_it_is_copied_is_a_miss_and_leaves_nothing_half_copied(tmp_path, monkeypatch):
    from hetdeploy.core import cache as cache_module

    root = tmp_path / "cache"
    source = tmp_path / "src"
    source.mkdir()
    for name in ("one.h", "two.h"):
        (source / name).write_text(name)
    BuildCache(root, 10**9).store("unit", "e" * 64, source, [source / "one.h", source / "two.h"], {})
    real, calls = cache_module.shutil.copyfile, []

    def evicted_midway(src, dst):
        calls.append(src)
        if len(calls) == 2:  # another build's eviction took the entry after the first file
            shutil.rmtree(_entry(root, "e"))
            raise FileNotFoundError(src)
        return real(src, dst)

    monkeypatch.setattr(cache_module.shutil, "copyfile", evicted_midway)
    reader = BuildCache(root, 10**9)
    assert reader.fetch("unit", "e" * 64, tmp_path / "out") is None and reader.misses == {"unit": 1}
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file()]


def test_cache_command_shows_the_size_and_clears(tmp_path, monkeypatch, capsys):
    from hetdeploy.commands.cli import main
    from hetdeploy.core.cache import parse_size

    root = tmp_path / "cache"
    _store(root, "a", 3000, 10**9)
    _store(root, "b", 2000, 10**9)
    assert main(["cache", "--cache", str(root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["entries"] == {"unit": {"count": 2, "bytes": shown["bytes"]}} and shown["bytes"] >= 5000
    assert shown["limit"] == 5 * 2**30
    monkeypatch.setenv("HETDEPLOY_CACHE_LIMIT", "500M")
    assert main(["cache", "--cache", str(root)]) == 0
    assert f"{root}: 2 entries" in capsys.readouterr().out and BuildCache(root).limit == 500 * 2**20
    assert main(["cache", "--cache", str(root), "--clear"]) == 0
    assert "cleared" in capsys.readouterr().out and BuildCache(root).entries() == []
    monkeypatch.setenv("HETDEPLOY_CACHE_LIMIT", "lots")
    assert main(["cache", "--cache", str(root)]) == 2
    assert "$HETDEPLOY_CACHE_LIMIT: 'lots': expected a size in bytes" in capsys.readouterr().err
    assert parse_size("5G") == 5 * 2**30 and parse_size("1.5k") == 1536 and parse_size(7) == 7


def _build(model, out, *more):
    return subprocess.run([sys.executable, "-m", "hetdeploy", "build", str(model), "--board", "pynq-z2", "--policy",
                           "support", "-o", str(out), "-v", *map(str, more)], capture_output=True, text=True)


@pytest.mark.slow
def test_a_rebuild_takes_everything_from_the_cache_and_gives_the_same_bytes(tmp_path):
    model = tmp_path / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    cache = tmp_path / "cache"
    first = _build(model, tmp_path / "a", "--cache", cache)
    assert first.returncode == 0, first.stderr
    assert ("from the build cache" in first.stderr and "0 of 1 precompiled headers, 0 of 1 compiled libraries, "
            "0 of 4 units' compiled objects, 0 of 1 reports, 0 of 4 hls4ml conversions" in first.stderr), first.stderr
    second = _build(model, tmp_path / "b", "--cache", cache)
    assert second.returncode == 0, second.stderr
    assert "1 of 1 compiled libraries, 1 of 1 reports, 4 of 4 hls4ml conversions" in second.stderr
    for path in ("plan.json", "hls/sf0_fpga/libsf0_fpga.so", "hls/sf0_fpga/units/sf0_fpga_u0/firmware/sf0_fpga_u0.cpp",
                 "report.html"):
        assert (tmp_path / "a" / path).read_bytes() == (tmp_path / "b" / path).read_bytes(), path
    # every unit pinned where it was (reuse factor and strategy), then one refolded: that unit converted and
    # compiled anew, the others' objects from the cache, the library linked anew
    units = json.loads((tmp_path / "a" / "plan.json").read_text())["subfunctions"][0]["execution_units"]
    pins = [("--reuse-factor", f"{u['nodes'][0]}={u['reuse_factor'] * (2 if k == len(units) - 1 else 1)}",
             "--strategy", f"{u['nodes'][0]}={u['strategy'].lower()}") for k, u in enumerate(units)]
    refolded = _build(model, tmp_path / "c", "--cache", cache, *[a for pin in pins for a in pin])
    assert refolded.returncode == 0, refolded.stderr
    assert ("1 of 1 precompiled headers, 0 of 1 compiled libraries, 3 of 4 units' compiled objects, 0 of 1 reports, "
            "3 of 4 hls4ml conversions" in refolded.stderr), refolded.stderr
    # past --cache-limit, a build evicts at its end what it did not use (the refolded unit's entries, the
    # objects a library hit made unneeded), never what it used
    before = BuildCache(cache).entries()
    bounded = _build(model, tmp_path / "e", "--cache", cache, "--cache-limit", "1")
    assert bounded.returncode == 0, bounded.stderr
    # (its report is drawn anew: plan.json records the limit)
    assert "1 of 1 compiled libraries, 0 of 1 reports, 4 of 4 hls4ml conversions" in bounded.stderr
    after = BuildCache(cache).entries()
    assert {e.path for e in after if e.kind != "report"} < {e.path for e in before}
    # what it used: the library (so no unit's objects were looked up), its new report, the four conversions
    assert sorted(e.kind for e in after) == ["library", "report", "unit", "unit", "unit", "unit"]
    # --no-cache: nothing looked up, nothing kept
    plain = _build(model, tmp_path / "d", "--no-cache")
    assert plain.returncode == 0 and "from the build cache" not in plain.stderr


@pytest.mark.slow
def test_two_builds_sharing_a_cache_at_once_both_succeed(tmp_path):
    model = tmp_path / "cnn.onnx"
    onnx.save(networks.small_cnn(), str(model))
    builds = [subprocess.Popen([sys.executable, "-m", "hetdeploy", "build", str(model), "--board", "pynq-z2",
                                "--policy", "support", "-o", str(tmp_path / f"out{k}"), "-q", "--cache",
                                str(tmp_path / "cache")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for k in range(2)]
    results = [b.communicate(timeout=600) for b in builds]
    assert [b.returncode for b in builds] == [0, 0], results
    assert (tmp_path / "out0" / "plan.json").read_text() == (tmp_path / "out1" / "plan.json").read_text()


@pytest.mark.slow
def test_every_file_of_a_c_simulation_reads_the_precompiled_ap_types_headers(built, tmp_path):
    """The project's files include ap_types' headers first: compiled once (kept in the cache, fetched by the
    next project), each file reads that in place of parsing them (g++ -H marks a precompiled header it uses
    with '!'), and the library is the same bytes as one compiled without it."""
    from hetdeploy.core import csim

    _, out = built("jet_tagger_mlp")
    project = tmp_path / "sf0_fpga"
    shutil.copytree(out / "hls" / "sf0_fpga", project)
    cache = BuildCache(tmp_path / "cache")
    header = csim._precompiled_header(project, tmp_path / "a", cache)
    assert header is not None and cache.misses == {"headers": 1}
    assert csim._precompiled_header(project, tmp_path / "b", cache) == tmp_path / "b" / csim.PRECOMPILED
    assert cache.hits == {"headers": 1} and (tmp_path / "b" / (csim.PRECOMPILED + ".gch")).is_file()
    step = next(project.glob("units/*/*_step.cpp")).with_suffix(".o").relative_to(project)
    traced = subprocess.run(["make", "-s", str(step), f"PRECOMPILED={header}", "CXX=g++ -H"], cwd=project,
                            capture_output=True, text=True)
    assert traced.returncode == 0 and f"! {header}.gch" in traced.stderr.splitlines(), traced.stderr
    library = project / "libsf0_fpga.so"
    assert subprocess.run(["make", "-s", "-j2", f"PRECOMPILED={header}"], cwd=project).returncode == 0
    with_header = library.read_bytes()
    assert subprocess.run(["make", "-s", "clean"], cwd=project).returncode == 0
    assert subprocess.run(["make", "-s", "-j2"], cwd=project).returncode == 0
    assert library.read_bytes() == with_header
