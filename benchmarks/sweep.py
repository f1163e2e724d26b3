"""The sweep of issue 18: the jet tagger and the small CNN over five boards x three widths x two policies,
once on a local Dask cluster and once on a separately started ``dask scheduler`` with two ``dask worker``
processes on this machine; the two results.json must be identical. Prints a table (points, failed,
wall time per cluster, whether identical) and leaves each sweep's folder (results, pareto.png) under --out.

    python benchmarks/sweep.py [--out DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("jet_tagger_mlp", "small_cnn")
GRID = ["--boards", "kv260,pynq-z2,ultra96-v2,workstation,zcu104", "--widths", "8,12,16",
        "--policies", "latency,support"]


def sweep(model: str, out: Path, *more: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "hetdeploy", "sweep", str(ROOT / "examples" / f"{model}.onnx"), *GRID,
                    "-o", str(out), "-q", *more], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def running_cluster(folder: Path, workers: int) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and ``workers`` worker processes started as a user would, on this machine."""
    scheduler_file = folder / "scheduler.json"
    processes = [subprocess.Popen(["dask", "scheduler", "--scheduler-file", str(scheduler_file), "--host",
                                   "127.0.0.1", "--port", "0", "--dashboard-address", ":0"],
                                  stderr=subprocess.DEVNULL)]
    while not scheduler_file.exists():
        time.sleep(0.2)
    processes += [subprocess.Popen(["dask", "worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1",
                                    "--dashboard-address", ":0"], stderr=subprocess.DEVNULL)
                  for _ in range(workers)]
    return json.loads(scheduler_file.read_text())["address"], processes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where the sweeps' folders stay (default: a temporary folder)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="hetdeploy-sweep-"))
    out.mkdir(parents=True, exist_ok=True)
    address, processes = running_cluster(out, workers=2)
    rows = []
    try:
        for model in MODELS:
            local = sweep(model, out / f"{model}_local", "--workers", "2")
            remote = sweep(model, out / f"{model}_cluster", "--scheduler", address)
            records = json.loads((out / f"{model}_local" / "results.json").read_text())
            same = ((out / f"{model}_local" / "results.json").read_bytes()
                    == (out / f"{model}_cluster" / "results.json").read_bytes())
            on_fpga = sum(r["status"] == "ok" and r["fpga_nodes"] > 0 for r in records)
            rows.append({"model": model, "points": len(records),
                         "failed": sum(r["status"] != "ok" for r in records), "with_fpga": on_fpga,
                         "local_s": round(local, 1), "cluster_s": round(remote, 1), "identical": same,
                         "pareto": str(out / f"{model}_local" / "pareto.png")})
    finally:
        for process in processes:
            process.terminate()
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'model':<16} {'points':>6} {'failed':>6} {'FPGA used':>9} {'local s':>8} {'cluster s':>9}  identical")
    for r in rows:
        print(f"{r['model']:<16} {r['points']:>6} {r['failed']:>6} {r['with_fpga']:>9} {r['local_s']:>8} "
              f"{r['cluster_s']:>9}  {r['identical']}")
    print(f"sweeps in {out}")


if __name__ == "__main__":
    main()
