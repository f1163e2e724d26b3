"""The --error-budget search's fixed-point simulation against the build's C-simulation (issue 44): for each
build folder, the simulation at the widths the build ended with, its types sized on the build's sizing
samples and run on its verification samples, beside the C-simulation's error on those samples.

    .venv/bin/python benchmarks/budget_fidelity.py BUILD_DIR [BUILD_DIR ...] [--json]

A build whose whole model is one FPGA subfunction (`--policy support` on a model the FPGA runs entirely),
built with or without --error-budget. Prints, per build, the simulated and the C-simulated relative error
(max abs error over the output's peak, the largest over outputs) and their difference; they are equal when
the simulation models every op of the model bit for bit (the table activations, Sigmoid, Tanh, ..., are
rounded at their output only: ``budget``'s docstring).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hetdeploy.core.plan import Plan  # noqa: E402
from hetdeploy.intake.model import load_model  # noqa: E402
from hetdeploy.intake.ort_adapter import run_in_memory  # noqa: E402
from hetdeploy.planning.config import BuildOptions, settle_options  # noqa: E402
from hetdeploy.running import budget, runtime  # noqa: E402
from hetdeploy.running.samples import build_samples  # noqa: E402


def fidelity(build_dir: Path) -> dict:
    plan = Plan.load(build_dir / "plan.json")
    if len(plan.subfunctions) != 1 or plan.subfunctions[0].kind != "fpga":
        sys.exit(f"{build_dir}: not one FPGA subfunction (build with --policy support a model the FPGA runs whole)")
    sub = plan.subfunctions[0]
    config = plan.config
    options = BuildOptions(model=Path(config["model"]), board=config["board"], out_dir=build_dir,
                           calibration=config.get("calibration"), verify_input=config.get("verify_input"),
                           samples=config.get("samples", 4), seed=config.get("seed", 0))
    options = settle_options(options)
    loaded = load_model(options.model)
    samples = build_samples(options, loaded.inputs)
    sizing, verification = ([runtime.model_feeds(loaded.input_reshapes, s) for s in chosen]
                            for chosen in (samples.sizing, samples.verification))
    groups, widths, table_sizes = budget.built_layers(sub.execution_units)
    simulated = budget.error_function(loaded.model, groups, sizing, run_in_memory, measured_on=verification,
                                      table_sizes=table_sizes)(widths)
    built = max(o.max_abs_error / o.peak for o in sub.verification.outputs)
    return {"build": str(build_dir), "model": str(options.model), "board": options.board, "widths": widths,
            "simulated_error": simulated, "c_simulation_error": built, "difference": simulated - built}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", type=Path, metavar="BUILD_DIR")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [fidelity(b) for b in args.builds]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'build':<28} {'simulated':>12} {'C-simulated':>12} {'difference':>11}  widths")
    for r in rows:
        print(f"{Path(r['build']).name:<28} {r['simulated_error']:>12.6g} {r['c_simulation_error']:>12.6g} "
              f"{r['difference']:>11.2g}  {', '.join(str(w) for w in r['widths'].values())}")


if __name__ == "__main__":
    main()
