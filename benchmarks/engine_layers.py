"""Where a CNN's time on the FPGA's engine goes: each unit the engine runs, its cycles against its bounds.

Run by hand (prints a table; nothing here is a test):

    .venv/bin/python benchmarks/engine_layers.py                       # the model zoo's ResNet-50, KV260, 8 bits
    .venv/bin/python benchmarks/engine_layers.py --model light_densenet121 --board zcu104 --width 16
    .venv/bin/python benchmarks/engine_layers.py --model mine.onnx --json

--model: a file of the model zoo the `onnx` package ships (onnx/backend/test/data/light/, by its name:
light_resnet50, ...), an architecture of benchmarks/graphs.py at 224 x 224 (resnet50, densenet121, ...), or an ONNX
file. It is planned as `hetdeploy plan` plans it (the latency policy). For each unit of an FPGA subfunction's engine
(plan.json's units of strategy "engine"), in the plan's order: its layer (kernel, input channels, filters, output
rows x columns, stride, groups, whether it adds a residual map), its cycles (the unit's estimate, `latency_cycles`:
the cost model's engine_cycles, which tests/test_engine.py holds within 2 % of the engine's C-simulation count on
ResNet-50's and MobileNetV2's layer shapes at a reduced map), the cycles its multiply-accumulates take with every
multiplier of the engine busy (its MACs over lanes x values a lane a cycle x output pixels at once), the cycles its
weights region (fpga/engine.py's weights_bytes: each filter's words and its bias, as the build writes them to DDR)
takes at the weights port's bytes a cycle (the engine loads a tile's weights before it computes on them, not
beside), and its efficiency (the MAC bound over its cycles). Then the engine's units together, in ms at the FPGA's
clock, and the memory plan's DDR time (its spilled maps and the engine's staging of its inputs from DDR). Estimates
of hetdeploy's cost model at the board file's clock, not measurements: no synthesis ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import graphs  # noqa: E402

from hetdeploy.core.errors import UserError  # noqa: E402
from hetdeploy.fpga.engine import weights_bytes  # noqa: E402
from hetdeploy.planning.config import BuildOptions  # noqa: E402
from hetdeploy.planning.units.costs import ARENA_WORD_BYTES  # noqa: E402
from hetdeploy.steps.build import plan_stages  # noqa: E402

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def model_file(name: str, folder: Path) -> Path:
    """The ONNX file --model names: a model-zoo file, a graphs.py architecture (written into ``folder``), a path."""
    if (ZOO / f"{name}.onnx").exists():
        return ZOO / f"{name}.onnx"
    if name in graphs.ARCHITECTURES:
        path = folder / f"{name}.onnx"
        onnx.save(graphs.to_onnx(graphs.ARCHITECTURES[name]()), str(path))
        return path
    return Path(name)


def layers(model: Path, board_name: str, width: int, folder: Path) -> dict:
    """The engine's units of ``model`` planned for ``board_name`` at ``width`` bits, and their totals."""
    _, board, plan = plan_stages(BuildOptions(model=model, board=board_name, out_dir=folder, policy="latency",
                                              width=width), lambda k, what: None)
    clock = next(d for d in board.devices if d.kind == "fpga").clock_mhz * 1e6
    rows, ddr_s, staging_s = [], 0.0, 0.0
    for sub in plan.subfunctions:
        if sub.memory is not None:
            ddr_s += sub.memory.ddr_transfer_s
            staging_s += sub.memory.engine_staging_s
        for unit in sub.execution_units:
            g = unit.engine
            if g is None:
                continue
            window = g.kernel[0] * g.kernel[1] * g.channels // g.groups
            macs = g.output[0] * g.output[1] * g.filters * window
            rows.append({
                "unit": unit.name, "kernel": g.kernel[0], "channels": g.channels, "filters": g.filters,
                "output": f"{g.output[0]}x{g.output[1]}", "stride": g.strides[0], "groups": g.groups,
                "residual": g.residual, "cycles": unit.estimate["latency_cycles"],
                "mac_bound_cycles": -(-macs // (g.lanes * g.vector * g.pixels)),
                "weight_cycles": -(-weights_bytes(g, width) // (g.port_words * ARENA_WORD_BYTES)),
                "engine": f"{g.lanes}x{g.vector}{'x2' if g.pixels == 2 else ''}"})
    total = {key: sum(row[key] for row in rows) for key in ("cycles", "mac_bound_cycles", "weight_cycles")}
    return {"model": model.stem, "board": board_name, "width": width, "latency_ms": plan.estimate.latency_s * 1e3,
            "engine_ms": total["cycles"] / clock * 1e3, "mac_bound_ms": total["mac_bound_cycles"] / clock * 1e3,
            "weight_ms": total["weight_cycles"] / clock * 1e3, "ddr_ms": ddr_s * 1e3, "staging_ms": staging_s * 1e3,
            "layers": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="light_resnet50",
                        help="a model-zoo file's name, a graphs.py architecture or an ONNX file (default: "
                             "light_resnet50)")
    parser.add_argument("--board", default="kv260", help="a board's name (default: kv260)")
    parser.add_argument("--width", type=int, default=8, help="the fixed-point bits (default: 8)")
    parser.add_argument("--json", action="store_true", help="one JSON object of the totals and the units")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        try:
            result = layers(model_file(args.model, Path(folder)), args.board, args.width, Path(folder))
        except UserError as error:
            sys.exit(f"engine_layers: {error}")
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{'unit':16s} {'k':>2s} {'in':>5s} {'out':>5s} {'map':>7s} {'s':>1s} {'g':>4s} {'res':>3s} "
          f"{'cycles':>8s} {'MAC bound':>9s} {'weights':>8s} {'eff':>5s}")
    for row in result["layers"]:
        print(f"{row['unit']:16s} {row['kernel']:2d} {row['channels']:5d} {row['filters']:5d} {row['output']:>7s} "
              f"{row['stride']:1d} {row['groups']:4d} {'yes' if row['residual'] else '':>3s} {row['cycles']:8d} "
              f"{row['mac_bound_cycles']:9d} {row['weight_cycles']:8d} "
              f"{row['mac_bound_cycles'] / max(1, row['cycles']):5.2f}")
    engine = result["layers"][0]["engine"] if result["layers"] else "none"
    print(f"\n{result['model']} on {result['board']} at {result['width']} bits (engine {engine}): "
          f"{result['latency_ms']:.2f} ms in all; the engine's units {result['engine_ms']:.2f} ms, their MAC bound "
          f"{result['mac_bound_ms']:.2f} ms, their weights at the port's rate {result['weight_ms']:.2f} ms (within "
          f"the units' ms); the memory plan's DDR time {result['ddr_ms']:.2f} ms, {result['staging_ms']:.2f} of it the "
          f"engine's staging of its inputs. Estimates at the board file's clock; no synthesis ran.")


if __name__ == "__main__":
    main()
