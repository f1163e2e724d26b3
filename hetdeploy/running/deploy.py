"""Stage 7: the deployment package (DIR/deploy/), the bitstream flow inside it.

deploy/ is all a user carries: run.py (hetdeploy/core/board_runtime.py, standalone), plan.json, the CPU
subfunctions' ONNX models, the DDR images of FPGA subfunctions whose weights stay in DDR
(ddr/<subfunction>.bin), a README with the steps, and hardware/: each FPGA subfunction's synthesis
sources with its build_prj.tcl (hls/<subfunction>/ less what C-simulation compiled) and design.tcl,
the block design for the board's Zynq part around the cores they export, which writes design.bit
and design.hwh into deploy/. Neither script runs here unless the vendor tools are on PATH
(``synthesize``); nothing fakes a bitstream.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..core import board_runtime, processes
from ..core.board import Board
from ..core.errors import SynthesisNotRun, ToolError, UserError
from ..core.names import identifier
from ..core.plan import Plan
from ..fpga.hls_top import TOOL_VERSIONS
from ..fpga.top_kinds import engine_port_names
from ..fpga.templates import template
from ..intake.ort_adapter import providers_for
from .runtime import largest_batch

HARDWARE = "hardware"  # deploy/hardware/: what a machine with Vivado needs to make the bitstream
# What C-simulation compiled or logged beside an FPGA subfunction's synthesis sources
_NOT_SYNTHESIS_SOURCES = shutil.ignore_patterns("*.so", "*.o", "*.d", "*.log", "Makefile", "tb_data")

# Zynq processing systems by part family: (IP, automation rule, automation config, clock config, GP master
# port, the slave ports into DDR the cores' bundles take in turn, each with the property enabling it). The
# automation is the one hls4ml's VivadoAccelerator pynq-z2 design and PYNQ's overlays run: the board files' presets
# (DDR, MIO, clocks) where the board names its board_part, the Zynq-7000's DDR and fixed IO made external. The
# slave ports: a Zynq-7000's four HP ports (UG585); a Zynq UltraScale+'s HP0-HP3 (its S_AXI_GP2-GP5), HP1 and HP2
# sharing a DDR controller port of their own, then HPC0 (S_AXI_GP0; UG1085, "PL-PS Interface Specifics").
_PROCESSING_SYSTEMS = {
    "xc7z": ("xilinx.com:ip:processing_system7:5.5", "xilinx.com:bd_rule:processing_system7",
             'make_external "FIXED_IO, DDR" apply_board_preset "%d" Master "Disable" Slave "Disable"',
             "CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ {%g}", "M_AXI_GP0",
             tuple((f"S_AXI_HP{k}", f"PCW_USE_S_AXI_HP{k}") for k in range(4))),
    "xczu": ("xilinx.com:ip:zynq_ultra_ps_e:3.3", "xilinx.com:bd_rule:zynq_ultra_ps_e", 'apply_board_preset "%d"',
             "CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ {%g}", "M_AXI_HPM0_FPD",
             tuple((f"S_AXI_HP{k}_FPD", f"PSU__USE__S_AXI_GP{k + 2}") for k in range(4))
             + (("S_AXI_HPC0_FPD", "PSU__USE__S_AXI_GP0"),)),
}
_PROCESSING_SYSTEMS["xck"] = _PROCESSING_SYSTEMS["xczu"]  # Kria K26: a Zynq UltraScale+ MPSoC

README = """# Deployment package: {model} on {board}

Written by `hetdeploy build`. What was run where it was built: partitioning, hls4ml conversion, g++
C-simulation of every FPGA subfunction and `run.py --emulate` checks. What was NOT run: HLS synthesis, Vivado,
the bitstream, and anything on a real board; {bitstream_state}

## Subfunctions

{table}

## On the board (PYNQ image 3.0 or later, Python 3.10)

{steps}

`--input` takes a `.npy` (one input) or `.npz` (arrays named after the inputs) with N samples stacked on
axis 0. `--batch N` (at most {max_batch}, the build's `--batch`) makes each FPGA call take N samples; with more
than one batch the subfunctions run as a pipeline (`--sequential`: one after another). FPGA buffers, two sets
of a batch per core, are allocated once and reused by every call (a core's DDR region gets its DDR weights,
`ddr/<subfunction>.bin`, once); each FPGA call writes a batch's inputs, its sample count, starts the core,
waits for it (5 s timeout) and reads the outputs.

On a host, from inside the build folder, `python deploy/run.py --input x.npy --emulate` runs the same
script with the FPGA subfunctions in C-simulation; its output equals `hetdeploy emulate`'s.
"""


# What the host has and the board does not: run.py must never need them.
HOST_ONLY_MODULES = ("hetdeploy", "onnx", "qonnx", "hls4ml", "onnxscript", "onnx_ir", "torch", "brevitas")

# Runs run.py (argv[1], its arguments after it) with the host-only modules unimportable.
_AS_ON_THE_BOARD = """
import runpy, sys
class HostOnly:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in %r:
            raise ModuleNotFoundError(f"No module named {name!r} (not on the board)")
sys.meta_path.insert(0, HostOnly())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
"""


def check_package(plan: Plan, build_dir: Path, samples: list[dict[str, np.ndarray]],
                  expected: dict[str, np.ndarray]) -> None:
    """Run the package's own run.py as the board would (a child process, none of HOST_ONLY_MODULES
    importable), with --emulate, on ``samples``; its outputs must equal ``expected`` (the build's
    emulation of the same samples) exactly. Any difference is hetdeploy's bug (RuntimeError)."""
    build_dir = Path(build_dir).resolve()  # the child runs in it
    with tempfile.TemporaryDirectory() as folder:
        inputs = Path(folder) / "x.npz"
        np.savez(inputs, **{spec.name: np.concatenate([s[spec.name] for s in samples]) for spec in plan.inputs})
        result_path = Path(folder) / ("y.npy" if len(plan.outputs) == 1 else "y.npz")
        run = processes.run([sys.executable, "-c", _AS_ON_THE_BOARD % (HOST_ONLY_MODULES,),
                             str(build_dir / "deploy" / "run.py"), "--input", str(inputs), "--output",
                             str(result_path), "--emulate"], cwd=build_dir)
        if run.returncode != 0:
            raise RuntimeError(f"deploy/run.py --emulate, as on the board, ended with exit {run.returncode}:\n"
                               f"{run.stderr[-4000:]}")
        loaded = np.load(result_path)
        got = {plan.outputs[0].name: loaded} if len(plan.outputs) == 1 else dict(loaded)
    # run.py runs GPU subfunctions on the CPU; the build's emulation on CUDA where it has it
    on_cuda = any(s.kind == "gpu" for s in plan.subfunctions) and providers_for("gpu")[0] == "CUDAExecutionProvider"
    for name, want in expected.items():
        allowed = plan.relative_tolerance * float(np.max(np.abs(want))) if on_cuda else 0.0
        if got[name].shape != want.shape or not np.all(np.abs(got[name] - want) <= allowed):
            raise RuntimeError(f"deploy/run.py --emulate gives output '{name}' other than the build's emulation "
                               f"(shapes {list(got[name].shape)} and {list(want.shape)}, allowed difference "
                               f"{allowed:g})")


def write_manifests(plan: Plan, build_dir: Path) -> None:
    """The build folder's manifest (``board_runtime.MANIFEST``: every file emulation reads) and
    deploy/'s (every file run.py reads on the board, and with --emulate the build folder's
    C-simulation files)."""
    simulated = []  # what an FPGA subfunction's C-simulation library loads: itself, its weights, its DDR image
    for sub in plan.subfunctions:
        if sub.hls is not None:
            simulated.append(build_dir / sub.hls.library)
            simulated += sorted(f for u in sub.execution_units if u.hls is not None
                                for f in (build_dir / sub.hls.project / "units" / u.name / "firmware" / "weights")
                                .rglob("*") if f.is_file())
            if sub.hls.ddr_image:
                simulated.append(build_dir / sub.hls.ddr_image)
    models = [plan.model, "source.onnx", *(s.onnx for s in plan.subfunctions),
              *(u.onnx for s in plan.subfunctions for u in s.execution_units)]
    deploy = build_dir / "deploy"
    packaged = sorted(f for f in deploy.rglob("*") if f.is_file() and f.suffix != ".md"  # what run.py reads
                      and f.name != board_runtime.MANIFEST and HARDWARE not in f.relative_to(deploy).parts)
    board_runtime.write_manifest(deploy, [*packaged, *simulated])
    board_runtime.write_manifest(build_dir, [build_dir / "plan.json", *(build_dir / m for m in dict.fromkeys(models)),
                                             *simulated, *packaged, deploy / board_runtime.MANIFEST])


def write_package(plan: Plan, board: Board, build_dir: Path) -> None:
    deploy = build_dir / "deploy"
    (deploy / "models").mkdir(parents=True)
    shutil.copy(board_runtime.__file__, deploy / "run.py")
    for sub in plan.subfunctions:
        if sub.kind != "fpga":
            shutil.copy(build_dir / sub.onnx, deploy / "models" / f"{sub.name}.onnx")
        elif sub.hls is not None and sub.hls.ddr_image:
            (deploy / "ddr").mkdir(exist_ok=True)
            shutil.copy(build_dir / sub.hls.ddr_image, deploy / "ddr" / f"{sub.name}.bin")
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    design = write_hardware(plan, board, build_dir) if fpga else None
    table = "\n".join(f"- `{s.name}` on `{s.device}` ({s.kind}): {len(s.nodes)} node{'s' if len(s.nodes) > 1 else ''}"
                      for s in plan.subfunctions)
    tool = board.device(fpga[0].device).hls_tool if fpga else ""
    hardware = (f"in `{HARDWARE}/`: `(cd <subfunction> && {tool} -f build_prj.tcl)` for each core, then "
                f"`vivado -mode batch -source {design.name}`" if design else
                f"`{HARDWARE}/<subfunction>/build_prj.tcl` exports each core; no block design was written: this "
                f"board's FPGA part has no Zynq processing system here")
    steps = [f"Build the bitstream on a machine with {TOOL_VERSIONS} ({hardware}), or run\n   "
             f"`hetdeploy build ... --synth` there. It writes `design.bit` and `design.hwh` into this folder. "
             f"The scripts\n   were written for those versions and never run where this package was built."] \
        if fpga else []
    on_board = identifier(Path(plan.source_model).stem)  # the folder on the board
    steps += ["Copy this folder to the board"
              + (f", without `{HARDWARE}/` (the board needs none of it), e.g. `rsync -a --exclude {HARDWARE} deploy/ "
                 f"xilinx@pynq:~/{on_board}/`." if fpga else f", e.g. `scp -r deploy xilinx@pynq:~/{on_board}`."),
              "On the board: `pip install onnxruntime numpy`" + (" (pynq comes with the image)." if fpga else "."),
              "`" + ("sudo " if fpga else "") + "python3 run.py --input x.npy --output y.npy [--batch N] [--sequential] "
              "[--benchmark] [--profile profile.json]`"
              + ("\n   (sudo: pynq needs it to map the FPGA's registers and allocate DMA memory)." if fpga else "")
              + "\n   `--profile` records what the run measured; `hetdeploy plan MODEL --profile profile.json` plans "
                "with it."]
    (deploy / "README.md").write_text(README.format(
        steps="\n".join(f"{k}. {step}" for k, step in enumerate(steps, start=1)),
        model=_code_span(plan.source_model), board=_code_span(plan.board), table=table,
        max_batch=largest_batch(plan) or 1,
        bitstream_state="there is no design.bit in this folder until the bitstream flow has run." if fpga
        else "this plan has no FPGA part: no bitstream is needed."))


def _code_span(name: str) -> str:
    """A name from the model or board as Markdown code: printable, no backtick, nothing it could link or run."""
    return "`" + "".join(c for c in name if c.isprintable() and c != "`") + "`"


def write_hardware(plan: Plan, board: Board, build_dir: Path) -> Optional[Path]:
    """deploy/hardware/: each FPGA subfunction's synthesis sources and build_prj.tcl, copied from its
    HLS project less what C-simulation compiled, and the block design over them (``write_block_design``),
    so that deploy/ alone makes the bitstream. Returns the block design's path (None: no Zynq part)."""
    hardware = build_dir / "deploy" / HARDWARE
    for sub in (s for s in plan.subfunctions if s.kind == "fpga"):
        shutil.copytree(build_dir / "hls" / sub.name, hardware / sub.name, ignore=_NOT_SYNTHESIS_SOURCES)
    return write_block_design(plan, board, hardware)


def write_block_design(plan: Plan, board: Board, folder: Path) -> Optional[Path]:
    """``folder``/design.tcl: the board's processing system (its board files' presets where the board
    names a board_part), the core each of the plan's FPGA subfunctions exports from
    ``folder``/<subfunction>/, the AXI wiring and the fabric clock; None where the part has no Zynq
    processing system hetdeploy knows."""
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    device = board.device(fpga[0].device)
    family = next((k for k in _PROCESSING_SYSTEMS if device.part.startswith(k)), None)
    if family is None:
        return None
    ps, rule, automation, clock, master, slaves = _PROCESSING_SYSTEMS[family]
    # the cores' gmem on the first slave port, the engine's weights bundles each on one of the next
    bundles = ["gmem"] + [bundle for _, bundle in engine_port_names(max(
        (u.engine.bundles for s in fpga for u in s.execution_units if u.engine is not None), default=0))]
    if len(bundles) > len(slaves):
        raise UserError(f"board {board.name}: its FPGA's memory.ports asks for {len(bundles)} ports into the DDR; a "
                        f"{device.part} has {len(slaves)} slave ports hetdeploy connects cores to")
    if device.board_part:
        board_part = f"set_property board_part {device.board_part} [current_project]"
        if device.board_connections:
            board_part += f"\nset_property board_connections {{{' '.join(device.board_connections)}}} [current_project]"
    else:
        board_part = (f"# board {identifier(board.name)} names no board_part: the processing system keeps the bare "
                      f"part's defaults;\n# set its DDR and MIO for your board before running (or add board_part "
                      f"to the board file)")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "design.tcl"
    path.write_text(template("design.tcl.in").substitute(
        board=identifier(board.name), part=device.part, clock_mhz=f"{device.clock_mhz:g}", board_part=board_part,
        hls_tool=device.hls_tool,
        ip_repos=" ".join(f"{s.name}/{s.name}_prj/solution1/impl/ip" for s in fpga), tool_versions=TOOL_VERSIONS,
        ps_vlnv=ps, ps_rule=rule, ps_automation=automation % bool(device.board_part),
        ps_config=" ".join([f"CONFIG.{enable} {{1}}" for _, enable in slaves[:len(bundles)]] +
                           [clock % device.clock_mhz]), ps_master=master,
        bundle_slaves=" ".join(f"{bundle} {slave}" for bundle, (slave, _) in zip(bundles, slaves)),
        cores=" ".join(s.name for s in fpga)))
    return path


def _run_tool(command: list[str], folder: Path) -> None:
    """A Vitis/Vivado run, its output in ``folder``/<tool>_run.log; a failure is one line naming it."""
    result = processes.run(command, cwd=folder)
    log = folder / f"{Path(command[0]).name}_run.log"
    log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        raise ToolError(f"{Path(command[0]).name} failed with exit status {result.returncode}; see {log}")


def synthesize(plan: Plan, board: Board, build_dir: Path, progress: Callable[[str], None]) -> str:
    """Run the HLS scripts with the board's HLS tool (its FPGA's ``hls_tool``, which the estimates assumed) and
    the Vivado script when the tools are on PATH; else raise SynthesisNotRun, saying what was written and how to
    run it. Returns the line to show the user."""
    fpga = [s for s in plan.subfunctions if s.kind == "fpga"]
    if not fpga:
        return "--synth: the plan has no FPGA subfunction; nothing to synthesise"
    named = board.device(fpga[0].device).hls_tool
    hls_tool = shutil.which(named)
    vivado = shutil.which("vivado")
    hardware = build_dir / "deploy" / HARDWARE
    if hls_tool is None or vivado is None or not (hardware / "design.tcl").exists():
        missing = " and ".join(t for t, p in ((named, hls_tool), ("vivado", vivado)) if p is None)
        steps = "; ".join(f"(cd {hardware}/{s.name} && {named} -f build_prj.tcl)" for s in fpga)
        raise SynthesisNotRun(f"--synth: {missing or 'a block design for this part'} not available here, so "
                              f"nothing was synthesised (the build itself is complete in {build_dir}); wrote the "
                              f"scripts, for {TOOL_VERSIONS}: {steps}; then (cd {hardware} && vivado -mode batch "
                              f"-source design.tcl)")
    for sub in fpga:
        progress(f"      synthesising {sub.name} with {Path(hls_tool).name}")
        _run_tool([hls_tool, "-f", "build_prj.tcl"], hardware / sub.name)
    progress("      running the Vivado block design to a bitstream")
    _run_tool([vivado, "-mode", "batch", "-source", "design.tcl"], hardware)
    return f"--synth: bitstream written to {build_dir}/deploy/design.bit"

