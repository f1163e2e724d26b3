import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # graphs.py: published architectures and random DAGs
sys.path.insert(0, str(ROOT / "tests"))  # fuzz.py

import networks  # noqa: E402


# The test files that take longest (builds of real models checked in C-simulation), collected first: under
# the README's -n auto --dist loadfile --no-loadscope-reorder (xdist's own order would be by the number of
# tests a file holds) each goes to a worker at the start, and the other files share the workers meanwhile,
# rather than one of these starting last while the other workers wait.
LONGEST_FIRST = ("test_fpga_ops.py", "test_brevitas.py", "test_end_to_end.py", "test_rewrites.py", "test_engine.py",
                 "test_latency_policy.py", "test_quantized.py", "test_open_synth.py")


def pytest_collection_modifyitems(items):
    first = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: the rest in their order


@pytest.fixture(scope="session", autouse=True)
def build_cache(tmp_path_factory):
    """The build cache of this test session (builds in-process and in child processes share it), not
    the user's ~/.cache/hetdeploy. Under pytest-xdist (the README's ``-n auto``) one cache for all the
    workers, beside their own folders: what one worker built, another takes from it (the cache is made
    for builds that share it at once)."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.getbasetemp().parent / "cache_home"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("cache_home")
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder / "hetdeploy"
    if previous is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = previous


# the FPGA cores' largest batch (build --batch) of the reference builds that test batched calls
BATCHES = {"split_by_lrn": 4, "jet_tagger_mlp": 50}
# ... and their other build options: four_conv64's first convolution pinned to hls4ml's Resource strategy, so that
# an hls4ml unit runs in bands beside the engine's (the engine, faster, would take all four); wide_mlp without the
# engine, so that hls4ml's Dense reads its weights from DDR (the engine, faster, would take the first layer)
OPTIONS = {"four_conv64": ["--strategy", "conv1=resource"], "wide_mlp": ["--no-engine"]}


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """Build each reference network once per session: name -> (model path, build folder).
    Support policy: these tests are about the FPGA path, which the latency policy skips for
    networks this small (the 940 us per FPGA call on a PYNQ-Z2 costs more than the A9's compute)."""
    import onnx

    from hetdeploy.commands.cli import main

    root = tmp_path_factory.mktemp("builds")
    cache = {}

    def get(name):
        if name not in cache:
            model = root / f"{name}.onnx"
            onnx.save(networks.NETWORKS[name](), str(model))
            out = root / f"{name}_build"
            policy = "latency" if name in ("alexnet_style", "four_conv64", "wide_mlp") else "support"  # big enough
            batch = BATCHES.get(name, 1)
            assert main(["build", str(model), "--board", "pynq-z2", "-o", str(out), "--policy", policy,
                         "--batch", str(batch), *OPTIONS.get(name, [])]) == 0
            cache[name] = (model, out)
        return cache[name]

    return get
