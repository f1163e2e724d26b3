"""Stage 5b: the HLS project of an FPGA subfunction, from our templates in hls/.

Text generation over plan data only (no hls4ml): the top (hls/top.cpp.in) runs the units in
schedule order over the memory plan's buffers; each hls4ml unit gets a wrapper (hls/unit.cpp.in)
that moves its buffers in and out of the hls4ml top function; a Makefile builds the C-simulation
library with g++ and a Tcl script synthesises the whole subfunction as one IP core (not run here).

Every C++ identifier written here is one hetdeploy made (subfunction and unit names, buffer
numbers, hls4ml's own type names): no name from the model reaches the code except in comments,
and those go through ``_comment``.
"""

from __future__ import annotations

import math
import re
import shutil
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from .names import identifier
from .plan import Buffer, ExecutionUnit, HlsPort, MemoryPlan

TEMPLATES = Path(__file__).resolve().parent.parent / "hls"
MAKEFILE, SYNTHESIS_SCRIPT = "Makefile", "build_prj.tcl"


def template(name: str) -> string.Template:
    path = TEMPLATES / name
    if not path.is_file():
        raise RuntimeError(f"{path}: hetdeploy's HLS template is missing (a broken install?)")
    return string.Template(path.read_text())


def _comment(names: list[str]) -> str:
    """Model names for a // comment: as identifiers (plan.json keeps the originals)."""
    return ", ".join(identifier(n) for n in names)


def library_name(top: str) -> str:
    return f"lib{top}.so"


@dataclass
class SubfunctionSource:
    name: str  # the C++ top; a hetdeploy identifier (sf<k>_<device>)
    units: list[ExecutionUnit]
    memory: MemoryPlan
    shapes: dict[str, list[int]]  # ONNX shape of every buffer's tensor
    inputs: list[HlsPort]
    outputs: list[HlsPort]
    part: str
    clock_period_ns: float
    ap_types: Path  # the ap_fixed headers to copy into the project


def write_project(source: SubfunctionSource, project_dir: Path) -> None:
    """Write top, unit wrappers, Makefile and synthesis script into ``project_dir``, where the
    units' hls4ml projects already are (units/<unit>/)."""
    buffers = {b.tensor: b for b in source.memory.buffers}
    shutil.copy(TEMPLATES / "arena.h", project_dir / "arena.h")
    shutil.copytree(source.ap_types, project_dir / "ap_types", dirs_exist_ok=True)
    sub = source.name
    extent = {m: max((b.offset + b.size for b in source.memory.buffers if b.memory == m), default=0)
              for m in ("bram", "reserved", "ddr")}
    arena_bytes, reserve_bytes, ddr_bytes = (max(1, extent[m]) for m in ("bram", "reserved", "ddr"))

    offsets = "\n".join(
        f"// {_comment([b.tensor])}: {b.size} bytes at {b.memory} + {b.offset}, steps {b.first}..{b.last}"
        for b in source.memory.buffers)
    declarations = "\n".join(
        f"void {u.name}_step({_parameters(u)});" for u in source.units if u.hls is not None)
    (project_dir / f"{sub}_units.h").write_text(template("units.h.in").substitute(
        subfunction=sub, guard=sub.upper(), arena_bytes=arena_bytes, reserve_bytes=reserve_bytes,
        ddr_bytes=extent["ddr"], offsets=offsets,
        declarations=declarations))

    for unit in source.units:
        if unit.hls is not None:
            _write_unit(sub, unit, buffers, project_dir)

    types = {b.tensor: f"b{k}_t" for k, b in enumerate(source.memory.buffers)}
    buffer_types = "".join(f"typedef {b.precision} {types[b.tensor]};\n" for b in source.memory.buffers)
    float_ports = ", ".join([f"const float in_{k}[{_values(p.shape)}]" for k, p in enumerate(source.inputs)]
                            + [f"float out_{k}[{_values(p.shape)}]" for k, p in enumerate(source.outputs)])
    names = [f"in_{k}" for k in range(len(source.inputs))] + [f"out_{k}" for k in range(len(source.outputs))]
    ports, ddr_region = float_ports, ""
    if extent["ddr"]:  # DDR buffers: a port the host allocates (a static region in C-simulation)
        ports += f", hetdeploy::byte_t ddr[{ddr_bytes}]"
        names.append("ddr")
        ddr_region = f"    static hetdeploy::byte_t ddr[{ddr_bytes}];\n"
    interface = "".join(f"#pragma HLS INTERFACE m_axi port={name} offset=slave bundle=gmem\n" for name in names)
    interface += "#pragma HLS INTERFACE s_axilite port=return\n"
    base = {"bram": "arena", "reserved": "reserve", "ddr": "ddr"}

    def at(tensor: str) -> str:
        return f"{base[buffers[tensor].memory]} + {buffers[tensor].offset}"

    body = [f"    hetdeploy::from_float<{types[p.tensor]}>(in_{k}, {at(p.tensor)}, {_values(p.shape)});\n"
            for k, p in enumerate(source.inputs)]
    for step, unit in enumerate(source.units):
        body.append(f"    // step {step}: {unit.name} ({unit.pe}): {_comment(unit.nodes)}\n")
        body.append(_run_unit(unit, at, types, source.shapes))
    body += [f"    hetdeploy::to_float<{types[p.tensor]}>({at(p.tensor)}, out_{k}, {_values(p.shape)});\n"
             for k, p in enumerate(source.outputs)]

    entries = [_unit_entry(sub, unit, types, source.shapes) for unit in source.units]
    (project_dir / f"{sub}_top.cpp").write_text(template("top.cpp.in").substitute(
        subfunction=sub, buffer_types=buffer_types, ports=ports, float_ports=float_ports,
        arguments=", ".join(names), interface=interface, ddr_region=ddr_region, arena_bytes=arena_bytes,
        reserve_bytes=reserve_bytes, body="".join(body), unit_entries="\n".join(entries)))

    _write_build_files(source, project_dir)


def _values(shape: list[int]) -> int:
    return int(math.prod(shape))


def _flatten(shape: list[int], element: str, source: str, target: str) -> str:
    """ONNX Flatten(axis=1) of a buffer: channels-last when its rank is >= 3, else a plain copy."""
    channels, pixels = (shape[1], _values(shape[2:])) if len(shape) >= 3 else (1, _values(shape))
    return f"hetdeploy::flatten_channels_last<{element}>({source}, {target}, {pixels}, {channels});"


def _run_unit(unit: ExecutionUnit, at: Callable[[str], str], types: dict[str, str],
              shapes: dict[str, list[int]]) -> str:
    """The line that runs ``unit`` on the buffers ``at(tensor)`` points to."""
    if unit.hls is not None:
        return f"    {unit.name}_step({', '.join(at(t) for t in unit.inputs + unit.outputs)});\n"
    (x,), (y,) = unit.inputs, unit.outputs
    return f"    {_flatten(shapes[x], types[x], at(x), at(y))}\n"


def _parameters(unit: ExecutionUnit) -> str:
    return ", ".join([f"const hetdeploy::byte_t *in_{k}" for k in range(len(unit.inputs))]
                     + [f"hetdeploy::byte_t *out_{k}" for k in range(len(unit.outputs))])


def _write_unit(sub: str, unit: ExecutionUnit, buffers: dict[str, Buffer], project_dir: Path) -> None:
    hls, ns = unit.hls, unit.name
    stream = hls.io_type == "io_stream"
    types, body, streams = [], [], []
    for direction, ports in (("in", hls.inputs), ("out", hls.outputs)):
        for k, port in enumerate(ports):
            var, values = f"{direction}_{k}", _values(port.shape)
            types.append(f"typedef {buffers[port.tensor].precision} {var}_t;\n")
            element = f"{ns}::{port.hls_type}"
            if direction == "in":
                if stream:
                    body.append(
                        f"    hls::stream<{element}> {var}_data(\"{var}\");\n"
                        f"    for (int i = 0; i < {values // port.pack}; i++) {{\n"
                        f"        {element} word;\n"
                        f"        for (int c = 0; c < {port.pack}; c++) {{\n"
                        f"#pragma HLS UNROLL\n"
                        f"            word[c] = hetdeploy::read<{var}_t>({var}, i * {port.pack} + c);\n"
                        f"        }}\n"
                        f"        {var}_data.write(word);\n"
                        f"    }}\n")
                else:
                    body.append(
                        f"    {element} {var}_data[{values}];\n"
                        f"    for (int i = 0; i < {values}; i++) {{\n"
                        f"#pragma HLS PIPELINE\n"
                        f"        {var}_data[i] = hetdeploy::read<{var}_t>({var}, i);\n"
                        f"    }}\n")
            else:
                body.append(f"    hls::stream<{element}> {var}_data(\"{var}\");\n" if stream
                            else f"    {element} {var}_data[{values}];\n")
            streams.append(f"{var}_data")
    body.append(f"    {ns}::{ns}({', '.join(streams)});\n")
    for k, port in enumerate(hls.outputs):
        var, values = f"out_{k}", _values(port.shape)
        if stream:
            body.append(
                f"    for (int i = 0; i < {values // port.pack}; i++) {{\n"
                f"        {ns}::{port.hls_type} word = {var}_data.read();\n"
                f"        for (int c = 0; c < {port.pack}; c++) {{\n"
                f"#pragma HLS UNROLL\n"
                f"            hetdeploy::write<{var}_t>({var}, i * {port.pack} + c, word[c]);\n"
                f"        }}\n"
                f"    }}\n")
        else:
            body.append(
                f"    for (int i = 0; i < {values}; i++) {{\n"
                f"#pragma HLS PIPELINE\n"
                f"        hetdeploy::write<{var}_t>({var}, i, {var}_data[i]);\n"
                f"    }}\n")
    unit_dir = project_dir / "units" / unit.name
    (unit_dir / f"{unit.name}_step.cpp").write_text(template("unit.cpp.in").substitute(
        unit=unit.name, subfunction=sub, io_type=hls.io_type, buffer_types="".join(types),
        parameters=_parameters(unit), body="".join(body)))


def _unit_entry(sub: str, unit: ExecutionUnit, types: dict[str, str], shapes: dict[str, list[int]]) -> str:
    """``<unit>_float``: one unit on float inputs, through a scratch copy of its buffers, for checking
    each unit against onnxruntime on the same input."""
    tensors = unit.inputs + unit.outputs
    names = {t: f"{'in' if k < len(unit.inputs) else 'out'}_{k if k < len(unit.inputs) else k - len(unit.inputs)}"
             for k, t in enumerate(tensors)}
    params = ", ".join([f"const float *{names[t]}" for t in unit.inputs] + [f"float *{names[t]}" for t in unit.outputs])
    lines = [f"void {unit.name}_float({params}) {{\n"]
    lines += [f"    static hetdeploy::byte_t {names[t]}_bytes[{_values(shapes[t])} * "
              f"hetdeploy::stored<{types[t]}>::bytes];\n" for t in tensors]
    lines += [f"    hetdeploy::from_float<{types[t]}>({names[t]}, {names[t]}_bytes, {_values(shapes[t])});\n"
              for t in unit.inputs]
    lines.append(_run_unit(unit, lambda t: f"{names[t]}_bytes", types, shapes))
    lines += [f"    hetdeploy::to_float<{types[t]}>({names[t]}_bytes, {names[t]}, {_values(shapes[t])});\n"
              for t in unit.outputs]
    return "".join(lines) + "}\n"


_FIXED = re.compile(r"ap_u?fixed<\s*(\d+)")


def element_bytes(precision: str) -> int:
    """Bytes an element of C++ type ``precision`` (ap_fixed<W,...>) takes in a buffer (arena.h)."""
    match = _FIXED.match(precision)
    if match is None:
        raise ValueError(f"not an ap_fixed type: {precision}")
    return -(-int(match.group(1)) // 8)


def _write_build_files(source: SubfunctionSource, project_dir: Path) -> None:
    sub = source.name
    objects, rules, add_files = [], [], []
    for unit in (u for u in source.units if u.hls is not None):
        base = f"units/{unit.name}"
        prefix = f"-DHETDEPLOY_WEIGHTS_PREFIX='\"{base}/firmware/weights/\"'"
        for cpp, extra in ((f"{base}/firmware/{unit.name}.cpp", f" {prefix}"), (f"{base}/{unit.name}_step.cpp", "")):
            obj = cpp[:-4] + ".o"
            objects.append(obj)
            rules.append(f"{obj}: {cpp}\n\t$(CXX) $(FLAGS){extra} -c $< -o $@\n")
        add_files.append(f"add_files {base}/firmware/{unit.name}.cpp -cflags \"-std=c++0x -Iap_types -I.\"")
        add_files.append(f"add_files {base}/{unit.name}_step.cpp -cflags \"-std=c++0x -Iap_types -I.\"")
    objects.append(f"{sub}_top.o")
    rules.append(f"{sub}_top.o: {sub}_top.cpp\n\t$(CXX) $(FLAGS) -c $< -o $@\n")
    add_files.append(f"add_files {sub}_top.cpp -cflags \"-std=c++0x -Iap_types -I.\"")
    (project_dir / MAKEFILE).write_text(template("Makefile.in").substitute(
        subfunction=sub, ap_types="ap_types", library=library_name(sub), objects=" ".join(objects),
        rules="\n".join(rules)))
    (project_dir / SYNTHESIS_SCRIPT).write_text(template("build_prj.tcl.in").substitute(
        subfunction=sub, add_files="\n".join(add_files), part=source.part,
        clock_period_ns=f"{source.clock_period_ns:g}"))

