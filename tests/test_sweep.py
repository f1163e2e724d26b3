"""``hetdeploy sweep``: every point of the grid planned (or built) on Dask, recorded, resumed."""

import contextlib
import json
import subprocess
import sys
import time

import numpy as np
import pytest

import hetdeploy
from hetdeploy.commands.cli import main
from hetdeploy.core.plan import Plan


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    import onnx

    import networks

    path = tmp_path_factory.mktemp("sweep") / "small_cnn.onnx"
    onnx.save(networks.small_cnn(), str(path))
    return path


def _plan(model, board, width, policy, reuse_factor=None):
    return hetdeploy.plan(model, board, width=width, policy=policy, model_reuse_factor=reuse_factor).plan


def test_every_point_is_recorded_as_its_own_plan_and_failures_do_not_stop_it(cnn, tmp_path):
    table = hetdeploy.sweep(cnn, boards=["pynq-z2", "zcu104"], widths=[8, 16], policies=["latency", "support"],
                            reuse_factors=[None, 4], output=tmp_path / "s", workers=2)
    assert [(r["board"], r["width"], r["policy"], r["reuse_factor"]) for r in table] == [
        (b, w, p, rf) for b in ("pynq-z2", "zcu104") for w in (8, 16) for p in ("latency", "support")
        for rf in (None, 4)]
    for record in table:
        if record["status"] != "ok":  # reuse factor 4 everywhere does not fit: the plan's own refusal
            with pytest.raises(hetdeploy.UserError) as refused:
                _plan(cnn, record["board"], record["width"], record["policy"], record["reuse_factor"])
            assert record["error"] == str(refused.value)
            continue
        plan = _plan(cnn, record["board"], record["width"], record["policy"], record["reuse_factor"])
        assert record["latency_s"] == plan.estimate.latency_s
        assert record["throughput_per_s"] == plan.estimate.throughput_per_s
        assert record["devices"] == sorted({s.device for s in plan.subfunctions})
        for resource in ("dsp", "lut", "bram18", "ff"):
            assert record[resource] == sum(r.used[resource] for r in plan.fpga_resources.values())
    assert any(r["status"] == "failed" for r in table) and any(r["lut"] > 0 for r in table if r["status"] == "ok")
    saved = json.loads((tmp_path / "s" / "results.json").read_text())
    assert saved == list(table)
    rows = (tmp_path / "s" / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + len(table) and rows[0].startswith("board,width,policy,reuse_factor,status,latency_s")
    assert (tmp_path / "s" / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "failed: the FPGA units do not fit" in str(table)


def test_an_interrupted_sweep_resumes_and_another_sweep_is_refused(cnn, tmp_path, capsys):
    out = tmp_path / "s"
    args = ["sweep", str(cnn), "--boards", "pynq-z2", "--widths", "8,16", "--policies", "support", "-o", str(out),
            "--workers", "1"]
    assert main(args) == 0
    first = json.loads((out / "results.json").read_text())
    # a sweep stopped after its first point: the second is run again, the first is not
    first[0]["latency_s"] = -1.0  # what a point run again would overwrite
    (out / "results.json").write_text(json.dumps(first[:1]))
    capsys.readouterr()
    assert main(args + ["--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed[0]["latency_s"] == -1.0 and resumed[1]["status"] == "ok" and resumed[1]["width"] == 16
    # the grid grows: only the new point runs, the file keeps every one
    assert main(args[:5] + ["8,12,16"] + args[6:] + ["--json"]) == 0
    grown = json.loads(capsys.readouterr().out)
    assert [r["width"] for r in grown] == [8, 12, 16] and grown[0]["latency_s"] == -1.0
    # the same folder with other options is another sweep
    assert main(args + ["--samples", "9"]) == 2
    assert "holds another sweep (it differs in option samples)" in capsys.readouterr().err


def test_bad_sweeps_are_one_line(cnn, tmp_path, capsys):
    for args, message in (
            (["--boards", "pynq-z3"], "unknown board 'pynq-z3'; did you mean 'pynq-z2'?"),
            (["--boards", "pynq-z2", "--labels", "y.npy"], "--labels needs --build and --calibration"),
            (["--boards", "pynq-z2", "--scheduler", "tcp://127.0.0.1:9"], "no Dask scheduler answers there")):
        assert main(["sweep", str(cnn), "-o", str(tmp_path / "s"), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    with pytest.raises(SystemExit):
        main(["sweep", str(cnn), "-o", str(tmp_path / "s"), "--boards", "pynq-z2", "--widths", "8,8"])
    assert "'8' is listed twice" in capsys.readouterr().err
    with pytest.raises(hetdeploy.UserError, match="the sweep varies it; give widths"):
        hetdeploy.sweep(cnn, boards=["pynq-z2"], width=8, output=tmp_path / "t")


@pytest.mark.slow
def test_a_built_sweep_records_the_verified_error_and_accuracy(built, tmp_path):
    model, _ = built("jet_tagger_mlp")  # the same units: the session's build cache serves them
    rng = np.random.default_rng(3)
    np.save(tmp_path / "x.npy", rng.standard_normal((6, 16)).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.integers(0, 5, 6))
    [record] = hetdeploy.sweep(model, boards=["pynq-z2"], policies=["support"], output=tmp_path / "s", build=True,
                               calibration=tmp_path / "x.npy", labels=tmp_path / "y.npy", workers=1)
    assert record["status"] == "ok", record["error"]
    result = hetdeploy.load(tmp_path / "s" / record["build_dir"])
    emulated = result.predict(np.load(tmp_path / "x.npy"))[0]
    assert record["accuracy"] == np.mean(emulated.argmax(-1) == np.load(tmp_path / "y.npy"))
    assert record["verified"] and 0 < record["max_abs_error"] <= record["tolerance"]


@contextlib.contextmanager
def running_cluster(folder, threads):
    """A separately started scheduler and one worker of ``threads`` threads; yields the address."""
    scheduler_file = folder / "scheduler.json"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    processes = [subprocess.Popen([*dask, "--scheduler-file", str(scheduler_file), "--host", "127.0.0.1",
                                   "--port", "0", "--dashboard-address", ":0"], stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        processes.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                           str(scheduler_file), "--nthreads", str(threads), "--dashboard-address",
                                           ":0"], stderr=subprocess.DEVNULL))
        yield json.loads(scheduler_file.read_text())["address"]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def test_a_running_dask_cluster_gives_the_local_clusters_records(cnn, tmp_path):
    """A separately started scheduler and worker: the same records as the local cluster's."""
    with running_cluster(tmp_path, threads=1) as address:
        grid = dict(boards=["pynq-z2", "kv260"], widths=[8, 16], policies=["latency", "support"])
        remote = hetdeploy.sweep(cnn, **grid, output=tmp_path / "remote", scheduler=address)
        local = hetdeploy.sweep(cnn, **grid, output=tmp_path / "local", workers=2)
        assert (tmp_path / "remote" / "results.json").read_bytes() == (tmp_path / "local" / "results.json").read_bytes()
        assert len(remote) == 8 and all(r["status"] == "ok" for r in local)


@pytest.mark.slow
@pytest.mark.long  # (each thread's own stdout: test_captured_stdout_keeps_each_threads_lines_apart)
def test_builds_on_one_worker_of_two_threads_equal_the_local_clusters_and_keep_their_own_logs(built, tmp_path):
    """dask worker --nthreads 2: two builds in one process at once, converting units through hls4ml
    (which prints to stdout) side by side. The records equal the local cluster's byte for byte, and
    every unit's hls4ml log equals the one the same unit of the same point wrote alone."""
    model, _ = built("jet_tagger_mlp")
    grid = dict(boards=["pynq-z2"], widths=[8, 16], policies=["support"], build=True, cache=None)
    with running_cluster(tmp_path, threads=2) as address:
        remote = hetdeploy.sweep(model, **grid, output=tmp_path / "remote", scheduler=address)
    hetdeploy.sweep(model, **grid, output=tmp_path / "local", workers=1)
    assert len(remote) == 2 and all(r["status"] == "ok" and r["verified"] for r in remote), remote
    assert (tmp_path / "remote" / "results.json").read_bytes() == (tmp_path / "local" / "results.json").read_bytes()
    logs = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("hls4ml_convert.log"))
    plans = [Plan.load(p) for p in (tmp_path / "local").glob("builds/*/plan.json")]  # each point's build
    converted = sum(u.hls is not None for plan in plans for s in plan.subfunctions for u in s.execution_units)
    assert len(plans) == 2 and len(logs) == converted >= 2 * 4  # each point's units, one log each
    for log in logs:
        assert (tmp_path / "remote" / log).read_text() == (tmp_path / "local" / log).read_text(), log


def test_captured_stdout_keeps_each_threads_lines_apart():
    """Two threads capturing at once, each printing between the other's lines: each capture holds its
    own lines only, and the process's stdout is the same object before and after."""
    import threading

    from hetdeploy.core.capture import captured_stdout

    before = sys.stdout
    both = threading.Barrier(2)
    captures = {}

    def work(name):
        with captured_stdout() as text:
            for k in range(50):
                print(f"{name} {k}")
                if k % 10 == 0:
                    both.wait()
        captures[name] = text.getvalue().split()

    threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert captures["a"] == [w for k in range(50) for w in ("a", str(k))]
    assert captures["b"] == [w for k in range(50) for w in ("b", str(k))]
    assert getattr(sys.stdout, "original", sys.stdout) is getattr(before, "original", before)


def test_a_capturing_threads_warnings_are_dropped_and_the_others_shown():
    """A warning shows once per place in a process, so the unit whose log would hold it depends on the order
    of the builds: while a thread captures, its warnings are dropped (its capture and stderr hold none of
    them); another thread's, and the same thread's after, show as Python shows them."""
    import threading
    import warnings

    from hetdeploy.core.capture import captured_stdout

    def warn(text):
        warnings.warn(text, UserWarning, stacklevel=1)

    captured = {}

    def work():
        with captured_stdout() as text:
            warn("inside a capture")
        captured["text"] = text.getvalue()

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        warn("outside a capture")
    assert captured["text"] == ""
    assert [str(w.message) for w in shown] == ["outside a capture"]


@pytest.mark.slow
def test_a_model_wide_reuse_factor_gives_every_unit_the_nearest_valid_one(built):
    from hetdeploy.planning.units import valid_reuse_factors

    model, _ = built("jet_tagger_mlp")
    plan = hetdeploy.plan(model, "pynq-z2", policy="support", model_reuse_factor=48,
                          reuse_factors={"/fc4/Gemm": 8}).plan
    got = [u.reuse_factor for s in plan.subfunctions for u in s.execution_units]
    layers = [(16, 64), (64, 32), (32, 32)]  # the last (32 x 5) pinned per node
    assert got == [min(valid_reuse_factors(*layer), key=lambda rf: (abs(rf - 48), rf)) for layer in layers] + [8]
    assert got[0] == 32  # 32 and 64 are as near: hls4ml's get_closest_reuse_factor takes the smaller


def test_pareto_chart_tells_boards_policies_and_widths_apart_in_readable_units():
    """Latency in ms (not 2.75x10^-3 s), the support policy a ring that a latency-policy point planned
    alike cannot hide, each width its own size, and a legend for each."""
    from hetdeploy.commands.sweep import pareto_figure

    records = [{"status": "ok", "board": board, "policy": policy, "width": width, "latency_s": latency,
                "lut": 20000 * width * larger, "dsp": 100}
               for board, latency, larger in (("pynq-z2", 2.75e-3, 1), ("zcu104", 1.3e-3, 3))
               for policy in ("latency", "support") for width in (8, 16)]
    records.append({"status": "failed", "board": "kv260", "policy": "latency", "width": 8})
    figure = pareto_figure(records, "m.onnx")
    axes = figure.axes[0]
    figure.canvas.draw()
    assert axes.get_ylabel() == "estimated latency per sample (ms)"
    assert axes.get_title() == "m.onnx: 8 points planned, 1 failed"
    labels = [t.get_text() for t in axes.yaxis.get_ticklabels(which="both") if t.get_text()]
    assert labels and not any("10^" in label or "times" in label for label in labels)
    filled, rings = [], []
    for points in axes.collections:
        (filled if points.get_facecolors().size else rings).append(points)
    assert len(filled) == 2 and len(rings) == 2  # a collection per board and policy
    assert all(len(set(points.get_sizes())) == 2 for points in axes.collections)  # 8 and 16 bits
    assert min(rings[0].get_sizes()) > max(filled[0].get_sizes()) / 2  # a ring around a filled point
    legend = [t.get_text() for t in axes.get_legend().get_texts()]
    assert legend == ["pynq-z2", "zcu104", "latency policy", "support policy", "8 bits", "16 bits", "Pareto front"]
