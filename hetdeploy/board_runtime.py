"""run.py of a deployment package: the plan executed on the board, or emulated on a host.

This file is copied as DIR/deploy/run.py and runs there on its own: it needs numpy and onnxruntime,
and on the board pynq; never hetdeploy, onnx or hls4ml.

    python run.py --input X.npy --output Y.npy [--batch N] [--benchmark] [--emulate]

CPU subfunctions run on onnxruntime (the board's ARM cores). FPGA subfunctions run on their HLS core
through pynq: the overlay is loaded once, every port's buffer (and the DDR region of the memory
plan) is allocated once with pynq.allocate and its physical address written to the core's control
registers once, as are the DDR weights (written into the DDR region, each array's port pointed at
it); a call copies a sample in, starts the core (ap_start), waits for ap_done and copies the result
out. A batch is streamed through those same buffers sample by sample. With --emulate the
FPGA subfunctions run through their C-simulation libraries (../hls/<name>/lib<name>.so) instead.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
AP_START, AP_DONE = 0x1, 0x2
DONE_TIMEOUT_S = 5.0


def channels_last(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1)) if x.ndim >= 3 else x


def channels_first(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, -1, 1)) if x.ndim >= 3 else x


def stored_shape(shape: list[int]) -> list[int]:
    """The layout of an FPGA port: rank >= 3 is channels-last."""
    return [1, *shape[2:], shape[1]] if len(shape) >= 3 else [1, *shape[1:]]


def ddr_image(sub: dict) -> np.ndarray:
    """The DDR weights of an FPGA subfunction, as its core reads them (bytes from the region's start)."""
    return np.fromfile(HERE / "ddr" / f"{sub['name']}.bin", dtype=np.uint8)


class CpuSubfunction:
    def __init__(self, sub: dict):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(str(HERE / "models" / f"{sub['name']}.onnx"), options,
                                                    providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [i.name for i in self.session.get_inputs()]
        return dict(zip(self.outputs, self.session.run(None, {n: feeds[n] for n in names})))


class FpgaSubfunction:
    """One HLS core of the overlay, driven through its control registers (s_axilite)."""

    def __init__(self, sub: dict, overlay):
        import pynq

        self.sub = sub
        self.core = getattr(overlay, sub["hls"]["top"])
        ports = [(f"in_{k}", p) for k, p in enumerate(sub["hls"]["inputs"])]
        ports += [(f"out_{k}", p) for k, p in enumerate(sub["hls"]["outputs"])]
        self.buffers = {name: pynq.allocate(shape=(int(np.prod(p["shape"])),), dtype=np.float32)
                        for name, p in ports}
        ddr = sub["memory"]["ddr_bytes"]
        if ddr:
            self.buffers["ddr"] = pynq.allocate(shape=(ddr,), dtype=np.uint8)
        for name, buffer in self.buffers.items():  # addresses once: the buffers are reused by every call
            self._write_address(name, buffer.physical_address)
        if sub["hls"]["weight_ports"]:  # DDR weights: written once, each array's port at its offset
            image = ddr_image(sub)
            self.buffers["ddr"][: image.size] = image
            self.buffers["ddr"].flush()
            for port in sub["hls"]["weight_ports"]:
                self._write_address(port["port"], self.buffers["ddr"].physical_address + port["offset"])

    def _write_address(self, port: str, address: int) -> None:
        """A pointer argument's register(s), by the names the overlay's hardware handoff gives them:
        one 32-bit register, or <port>_1 (low word) and <port>_2 (high word)."""
        registers = self.core.register_map
        if hasattr(registers, f"{port}_1"):
            setattr(registers, f"{port}_1", address & 0xFFFFFFFF)
            setattr(registers, f"{port}_2", address >> 32)
        else:
            setattr(registers, port, address)

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for k, port in enumerate(self.sub["hls"]["inputs"]):
            self.buffers[f"in_{k}"][:] = channels_last(feeds[port["tensor"]]).reshape(-1)
            self.buffers[f"in_{k}"].flush()
        self.core.write(0x00, AP_START)
        started = time.monotonic()
        while not self.core.read(0x00) & AP_DONE:
            if time.monotonic() - started > DONE_TIMEOUT_S:
                raise RuntimeError(f"{self.sub['name']}: the core did not finish in {DONE_TIMEOUT_S} s "
                                   f"(bitstream and plan from different builds?)")
        results = {}
        for k, port in enumerate(self.sub["hls"]["outputs"]):
            self.buffers[f"out_{k}"].invalidate()
            flat = np.array(self.buffers[f"out_{k}"])
            results[port["tensor"]] = channels_first(flat.reshape(stored_shape(port["shape"])))
        return results


class EmulatedFpgaSubfunction:
    """The same subfunction through its C-simulation library, on a host."""

    def __init__(self, sub: dict):
        self.sub = sub
        self.project = (HERE.parent / sub["hls"]["project"]).resolve()
        library = ctypes.CDLL(str((HERE.parent / sub["hls"]["library"]).resolve()), mode=os.RTLD_LOCAL)
        self.entry = getattr(library, f"{sub['hls']['top']}_float")
        if sub["hls"]["weight_ports"]:
            image = ddr_image(sub).tobytes()
            load = getattr(library, f"{sub['hls']['top']}_load_ddr")
            load.argtypes, load.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
            if load(image, len(image)) != 0:
                raise RuntimeError(f"ddr/{sub['name']}.bin: larger than the core's DDR region")

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = [np.ascontiguousarray(channels_last(feeds[p["tensor"]]), dtype=np.float32).reshape(-1)
                  for p in self.sub["hls"]["inputs"]]
        outs = [np.zeros(int(np.prod(p["shape"])), dtype=np.float32) for p in self.sub["hls"]["outputs"]]
        previous = os.getcwd()
        os.chdir(self.project)  # the library reads its weights relative to its project
        try:
            self.entry(*[a.ctypes.data_as(ctypes.c_void_p) for a in arrays + outs])
        finally:
            os.chdir(previous)
        return {p["tensor"]: channels_first(flat.reshape(stored_shape(p["shape"])))
                for p, flat in zip(self.sub["hls"]["outputs"], outs)}


class Problem(Exception):
    """A mistake in how run.py was called: one line, exit 2."""


def read_inputs(path: str, specs: list[dict]) -> dict[str, np.ndarray]:
    """The samples in ``path`` by input name, each (N, *its shape without the batch axis), checked
    against the plan before anything reads them (a C core would read past a short buffer)."""
    try:
        loaded = np.load(path)
    except (OSError, ValueError) as err:
        raise Problem(f"{path}: cannot read it as .npy or .npz ({err})") from None
    arrays = {specs[0]["name"]: loaded} if isinstance(loaded, np.ndarray) else dict(loaded)
    names = [spec["name"] for spec in specs]
    if sorted(arrays) != sorted(names):
        raise Problem(f"{path}: holds {sorted(arrays)}, the model takes {names}")
    counts = set()
    for spec in specs:
        array, sample = arrays[spec["name"]], list(spec["shape"][1:])
        if array.ndim == len(sample):  # one sample without its batch axis
            array = arrays[spec["name"]] = array[None]
        if list(array.shape[1:]) != sample or len(array) == 0:
            raise Problem(f"{path}: input '{spec['name']}' has shape {list(array.shape)}, the model takes "
                          f"{[1, *sample]} (or N samples stacked on axis 0)")
        counts.add(len(array))
    if len(counts) > 1:
        raise Problem(f"{path}: the inputs hold different numbers of samples ({sorted(counts)})")
    return arrays


def load(emulate: bool) -> tuple[dict, list]:
    plan = json.loads((HERE / "plan.json").read_text())
    overlay = None
    if not emulate and any(s["kind"] == "fpga" for s in plan["subfunctions"]):
        try:
            import pynq
        except ImportError:
            raise Problem("pynq is not installed here: on the board, install it; on a host, add --emulate "
                          "(C-simulation in the build folder)") from None
        overlay = pynq.Overlay(str(HERE / "design.bit"))
    runners = []
    for sub in plan["subfunctions"]:
        if sub["kind"] != "fpga":
            runners.append(CpuSubfunction(sub))
        elif emulate:
            runners.append(EmulatedFpgaSubfunction(sub))
        else:
            runners.append(FpgaSubfunction(sub, overlay))
    return plan, runners


def run_sample(plan: dict, runners: list, feeds: dict[str, np.ndarray], times: list[list[float]]) -> dict:
    env = dict(feeds)
    for r in plan["input_reshapes"]:
        env[r["tensor"]["name"]] = env.pop(r["original"]["name"]).reshape(r["tensor"]["shape"])
    for k, (sub, runner) in enumerate(zip(plan["subfunctions"], runners)):
        started = time.perf_counter()
        env.update(runner({t: env[t] for t in sub["inputs"]}))
        times[k].append(time.perf_counter() - started)
    return {o["name"]: env[o["name"]] for o in plan["outputs"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a hetdeploy plan on the board (or --emulate on a host).")
    parser.add_argument("--input", required=True, metavar="X.npy", help="inputs: .npy (one input) or .npz by name, "
                        "N samples stacked on axis 0")
    parser.add_argument("--output", metavar="Y.npy", help="where to save the outputs (.npy, or .npz by name)")
    parser.add_argument("--batch", type=int, default=1, help="samples per batch (streamed through the same buffers)")
    parser.add_argument("--benchmark", action="store_true", help="print latency percentiles and throughput per "
                        "subfunction and end to end")
    parser.add_argument("--emulate", action="store_true", help="FPGA subfunctions through their C-simulation "
                        "libraries (a host with the build folder), not pynq")
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error(f"argument --batch: '{args.batch}': expected a whole number of at least 1")
    try:
        plan, runners = load(args.emulate)
        arrays = read_inputs(args.input, plan["inputs"])
    except Problem as problem:
        print(f"run.py: error: {problem}", file=sys.stderr)
        return 2
    count = len(next(iter(arrays.values())))
    dtypes = {spec["name"]: spec.get("dtype", "float32") for spec in plan["inputs"]}
    times: list[list[float]] = [[] for _ in runners]
    totals, results = [], {o["name"]: [] for o in plan["outputs"]}
    for start in range(0, count, args.batch):
        for i in range(start, min(count, start + args.batch)):
            began = time.perf_counter()
            out = run_sample(plan, runners, {k: np.ascontiguousarray(v[i:i + 1], dtype=dtypes.get(k, "float32"))
                                             for k, v in arrays.items()}, times)
            totals.append(time.perf_counter() - began)
            for name, value in out.items():
                results[name].append(value)
    outputs = {k: np.concatenate(v) for k, v in results.items()}
    if args.output:
        if len(outputs) == 1:
            np.save(args.output, next(iter(outputs.values())))
        else:
            np.savez(args.output, **outputs)
    if args.benchmark:
        print(f"{'stage':<20} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} {'per s':>10}")
        rows = [(s["name"], t) for s, t in zip(plan["subfunctions"], times)] + [("end to end", totals)]
        for name, samples in rows:
            p50, p90, p99 = (np.percentile(samples, q) * 1e3 for q in (50, 90, 99))
            print(f"{name:<20} {p50:>9.3f} {p90:>9.3f} {p99:>9.3f} {len(samples) / sum(samples):>10.1f}")
        print(f"{count} samples, batch {args.batch}{', emulated' if args.emulate else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
