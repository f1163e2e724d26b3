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

import dataclasses
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..core.board_runtime import code_words, port_values
from ..core.names import identifier
from ..core.plan import Buffer, ExecutionUnit, HlsPort, MemoryPlan, Top, WeightPort
from ..planning import units
from ..planning.memory import MEMORIES
from .dataflow_top import DataflowSource, TokenStreams, processes_and_calls, unit_tokens
from .engine import stored_window
from .packing import precision_width, unit_weights_path
from .templates import TEMPLATES, line, project_line, statement, template
from .top_kinds import ENGINE, ENGINE_PORT, HLS4ML, WINDOW, Buffers, engine_port_names, top_kind, values_of

MAKEFILE, SYNTHESIS_SCRIPT = "Makefile", "build_prj.tcl"
# The tools the synthesis scripts (build_prj.tcl, design.tcl) are written for, said in each and in
# the package's README. Never run here (no Vivado or Vitis where hetdeploy is tested): the commands
# are those of these versions' documentation and of hls4ml's and PYNQ's own scripts.
TOOL_VERSIONS = "Vitis HLS and Vivado 2022.1 to 2023.2 (PYNQ 3.0's images are built with 2022.1)"
DDR_IMAGE = "ddr_image.bin"  # in a subfunction's project: its DDR region's initial contents
# the top's C++ name of each memory of the plan (memory.MEMORIES; top.cpp.in declares them)
MEMORY_ARRAYS = {"bram": "arena", "uram": "uram", "reserved": "reserve", "ddr": "ddr"}


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
    max_batch: int = 1  # the most samples a call of the top takes
    top: Optional[Top] = None  # the plan's; a dataflow one is written from dataflow_top.cpp.in

    @property
    def dataflow(self) -> bool:
        return self.top is not None and self.top.kind == "dataflow"


def weight_ports(units: list[ExecutionUnit], memory: MemoryPlan) -> list[WeightPort]:
    """The DDR weight arrays of a subfunction's units, as its top's ports, at their DDR offsets."""
    where = {b.tensor: b.offset for b in memory.buffers if b.kind == "weights"}
    return [WeightPort(f"{u.name}_w{k}", u.name, w.precision, w.values, where[f"{u.name}.weights"] + w.offset)
            for u in units if u.hls is not None for k, w in enumerate(u.hls.ddr_weights)]


def write_project(source: SubfunctionSource, project_dir: Path) -> list[WeightPort]:
    """Write top, unit wrappers, Makefile and synthesis script into ``project_dir``, where the
    units' hls4ml projects already are (units/<unit>/), and the DDR image (``DDR_IMAGE``) when
    units keep their weights in DDR; returns those weights' ports."""
    activations = [b for b in source.memory.buffers if b.kind == "activation"]
    buffers = {b.tensor: b for b in activations}
    project_dir.mkdir(parents=True, exist_ok=True)  # no hls4ml unit made it when our top moves everything
    shutil.copy(TEMPLATES / "arena.h", project_dir / "arena.h")
    shutil.copytree(source.ap_types, project_dir / "ap_types", dirs_exist_ok=True)
    sub = source.name
    extent = {m: max((b.offset + b.size for b in source.memory.buffers if b.memory == m), default=0)
              for m in ("bram", "uram", "reserved", "ddr")}
    extent["ddr"] = max(extent["ddr"], source.memory.ddr_bytes)  # (whole reads of the engines' weights port)
    if any(b.offset % units.ARENA_WORD_BYTES or b.size % units.ARENA_WORD_BYTES for b in source.memory.buffers):
        raise RuntimeError(f"{sub}: a buffer of the memory plan is not whole {units.ARENA_WORD_BYTES}-byte words")
    ddr_words = max(1, extent["ddr"] // units.ARENA_WORD_BYTES)
    every_weight = weight_ports(source.units, source.memory)
    ports_of = {u.name: [p for p in every_weight if p.unit == u.name] for u in source.units}
    engines = _engines(sub, source.units, buffers, source.memory)
    engines_ports = engine_ports(source.units, source.memory)

    offsets = "\n".join(statement("buffer_comment", tensor=_comment([b.tensor]), size=b.size, memory=b.memory,
                                   offset=b.offset, first=b.first, last=b.last) for b in source.memory.buffers)
    declarations = "".join(statement("include", header=u.index_table or u.affine) + "\n"
                           for u in source.units if u.index_table or u.affine)
    declarations += "".join(WINDOW.declaration(u) + "\n" for u in source.units if u.window)
    if engines:
        shutil.copy(TEMPLATES / "engine.h", project_dir / "engine.h")
        declarations += statement("include", header="engine.h") + "\n"
        declarations += "".join(ENGINE.declaration(u, engines[u.name].bits[1]) + "\n" for u in source.units if u.engine)
        bundle_words = next(iter(engines.values())).port_words // len(engines_ports)
        declarations += ENGINE.statement("engine_port_type", port=bundle_words, bundles=len(engines_ports),
                                         bits=8 * units.ARENA_WORD_BYTES * bundle_words) + "\n"
        declarations += "".join(ENGINE.statement(
            "engine_function", name=name, lanes=call.lanes, uram_lanes=call.uram_lanes, vector=call.vector,
            pixels=call.pixels, shared=str(call.shared).lower(), stream=call.stream,
            window=call.window, in_bits=call.bits[0], out_bits=call.bits[1], weight_bits=call.bits[2],
            depthwise=str(call.depthwise).lower(), port=call.port_words, bundles=call.bundles,
            listed=", ".join(call.memories),
            parameters=", ".join(statement("word_output", name=m) for m in call.memories),
            engine=_engine_template(call), arguments=", ".join(_engine_memories(call.memories))) + "\n"
            for name, call in sorted(_engine_functions(engines).items()))
    declarations += "".join(statement("typedef", type=p.precision, name=f"{p.port}_t") + "\n" for p in every_weight)
    declarations += "\n".join(HLS4ML.statement("step_declaration", unit=u.name,
                                                parameters=_parameters(u, ports_of[u.name]))
                              for u in source.units if u.hls is not None)
    streams = TokenStreams(source.top, lambda t: buffers[t].precision, source.shapes) if source.dataflow else None
    tokens = {u.name: unit_tokens(u, streams, ports_of[u.name]) for u in source.units
              if streams is not None and u.hls is not None}
    declarations += "".join("\n" + declaration for _, declaration in tokens.values())
    (project_dir / f"{sub}_units.h").write_text(template("units.h.in").substitute(
        subfunction=sub, guard=sub.upper(), arena_bytes=extent["bram"], uram_bytes=extent["uram"],
        reserve_bytes=extent["reserved"],
        ddr_bytes=extent["ddr"], offsets=offsets,
        declarations=declarations))

    for unit in source.units:
        if unit.hls is not None:
            _write_unit(sub, unit, buffers, ports_of[unit.name], project_dir, tokens.get(unit.name, ("",))[0])

    types = {b.tensor: f"b{k}_t" for k, b in enumerate(activations)}
    buffer_types = "".join(statement("typedef", type=b.precision, name=types[b.tensor]) + "\n" for b in activations)
    batch = source.max_batch
    names = [f"in_{k}" for k in range(len(source.inputs))] + [f"out_{k}" for k in range(len(source.outputs))]
    depth = {name: batch * _port_elements(p) for name, p in zip(names, source.inputs + source.outputs)}
    port_parameters = [statement(f"{'codes' if p.codes else 'packed' if p.compressed else 'float'}_{name[:-2]}put",
                                 name=name, values=depth[name], floats=p.floats)
                       for name, p in zip(names, source.inputs + source.outputs)]
    buffer_types += "".join(_codes_table(p, k, types) for k, p in enumerate(source.inputs) if p.codes)
    float_ports = ", ".join(port_parameters)
    ports, csim_memory, load_ddr = [float_ports], "", ""
    if extent["ddr"]:  # a port the host allocates; in C-simulation a static region the host can fill
        ports.append(statement("ddr_parameter", words=ddr_words))
        ports += [statement("array_parameter", type=f"{p.port}_t", name=p.port, values=p.values) for p in every_weight]
        names += ["ddr"] + [p.port for p in every_weight]
        csim_memory = statement("ddr_region", words=ddr_words) + "\n"
        for port in engines_ports:  # in C-simulation one region, which every bundle's pointer reads, as on the board
            ports.append(ENGINE.statement("engine_port", name=port.port, reads=port.values))
            names.append(port.port)
            csim_memory += ENGINE.statement("engine_port_region" if port.port == ENGINE_PORT else "engine_port_alias",
                                            name=port.port, first=ENGINE_PORT, reads=port.values) + "\n"
        load_ddr = template("top_load_ddr.cpp.in").substitute(image=DDR_IMAGE, subfunction=sub,
                                                               bytes=ddr_words * units.ARENA_WORD_BYTES)
    # the engines' weights ports a bundle each: a bundle's ports are one width (UG1448), their reads wider
    bundle_of = dict(engine_port_names(len(engines_ports)))
    m_axi_ports = "".join(template("top_m_axi_port.cpp.in").substitute(
        port=name, bundle=bundle_of.get(name, "gmem"),
        depth=statement("m_axi_depth", values=depth[name]) if name in depth else "") for name in names)
    # C-simulation: the engines' weights port's reads, from the DDR region as the port reads its bytes
    engine_view = ENGINE.line("engine_port_view", port=bundle_words, reads=engines_ports[0].values) if engines else ""
    entries = [_unit_entry(unit, types, source.shapes, ports_of[unit.name], engines.get(unit.name), engine_view)
               for unit in source.units]
    csim = template("top_csim.cpp.in").substitute(
        subfunction=sub, float_ports=float_ports, arguments=", ".join(names), csim_memory=csim_memory,
        load_ddr=load_ddr, load_weights=_load_weights(every_weight) + engine_view, max_batch=batch,
        unit_entries="\n".join(entries))
    if streams is not None:
        processes, fifos, calls = processes_and_calls(DataflowSource(
            sub, source.units, source.inputs, source.outputs, types, source.shapes, ports_of,
            port_parameters[:len(source.inputs)], port_parameters[len(source.inputs):],
            lambda k, target: _sample_in(source.inputs[k], k, types, target),
            lambda k: _sample_of(source.inputs[k], k),
            lambda k, buffer: _sample_out(source.outputs[k], k, types, buffer), batch), streams)
        (project_dir / f"{sub}_top.cpp").write_text(template("dataflow_top.cpp.in").substitute(
            subfunction=sub, buffer_types=buffer_types, processes=processes, ports=", ".join(ports),
            m_axi_ports=m_axi_ports, max_batch=batch, fifos=fifos, calls=calls, csim=csim))
    else:
        _write_sequential_top(source, project_dir, buffers, types, ports_of, engines, ports, names, m_axi_ports,
                              buffer_types, extent, csim)
    _write_ddr_image(source, project_dir)
    _write_build_files(source, project_dir)
    return every_weight + engines_ports


def _write_sequential_top(source: SubfunctionSource, project_dir: Path, buffers: dict[str, Buffer],
                          types: dict[str, str], ports_of: dict[str, list[WeightPort]],
                          engines: dict[str, "EngineCall"], ports: list[str], names: list[str], m_axi_ports: str,
                          buffer_types: str, extent: dict[str, int], csim: str) -> None:
    """top.cpp.in: the units in schedule order over the memory plan's buffers, one sample after another."""
    sub = source.name

    def at_tensor(tensor: str) -> str:
        return at(buffers[tensor])

    body = [_sample_in(p, k, types, at_tensor(p.tensor)) for k, p in enumerate(source.inputs)]
    in_place = frozenset(t for u in source.units for t in u.in_place)
    strides = {b.tensor: source.shapes[b.view_of][1] for b in source.memory.buffers if b.view_of}
    for step, unit in enumerate(source.units):
        body.append(line("step_comment", step=step, unit=unit.name, pe=unit.pe, nodes=_comment(unit.nodes)))
        body.append(top_kind(unit).run(unit, Buffers(at_tensor, types, source.shapes, ports_of[unit.name],
                                                     engines.get(unit.name), in_place, strides)))
    body += [_sample_out(p, k, types, at_tensor(p.tensor)) for k, p in enumerate(source.outputs)]
    body = [textwrap.indent(statements, "    ") for statements in body]  # inside the samples loop

    allocations = "".join(ENGINE.statement("engine_allocation", name=name) + "\n"
                          for name in sorted(_engine_functions(engines)))
    arena_words, reserve_words = (max(1, extent[m] // units.ARENA_WORD_BYTES) for m in ("bram", "reserved"))
    (project_dir / f"{sub}_top.cpp").write_text(template("top.cpp.in").substitute(
        subfunction=sub, buffer_types=buffer_types, ports=", ".join(ports), m_axi_ports=m_axi_ports,
        allocations=allocations, arena_words=arena_words, reserve_words=reserve_words,
        uram=statement("uram_memory", words=extent["uram"] // units.ARENA_WORD_BYTES) + "\n"
        if extent["uram"] else "",
        max_batch=source.max_batch, body="".join(body), csim=csim))


def _sample_in(port: HlsPort, k: int, types: dict[str, str], target: str) -> str:
    """The lines that convert sample ``s`` of port ``in_<k>`` (floats; zero-compressed, or codes, where it is) into
    the buffer of words at ``target``, as its tensor's type rounds and saturates."""
    source = _sample_of(port, k)
    if port.codes:
        return line("from_codes", type=types[port.tensor], bits=port.codes.bits, source=source, table=f"codes_{k}",
                    target=target, values=values_of(port.shape))
    return line("from_zero_compressed" if port.compressed else "from_float_words", type=types[port.tensor],
                source=source, target=target, values=values_of(port.shape), floats=port.floats)


def _sample_of(port: HlsPort, k: int) -> str:
    """Sample ``s`` of input port ``in_<k>``: where its elements start."""
    return statement("sample_of", port=f"in_{k}", values=_port_elements(port))


def _codes_table(port: HlsPort, k: int, types: dict[str, str]) -> str:
    """The table of codes port ``in_<k>``: each code's value (a float32, written as the double it is, so that the
    type converts it as from_float converts the float)."""
    return statement("codes_table", type=types[port.tensor], name=f"codes_{k}", entries=len(port.codes.values),
                     values=", ".join(format(float(np.float32(v)), ".17g") for v in port.codes.values)) + "\n"


def _sample_out(port: HlsPort, k: int, types: dict[str, str], source: str) -> str:
    """... and the buffer of words at ``source`` into sample ``s`` of float port ``out_<k>``."""
    return line("to_zero_compressed" if port.compressed else "to_float_words", type=types[port.tensor], source=source,
                target=statement("sample_of", port=f"out_{k}", values=_port_elements(port)),
                values=values_of(port.shape), floats=port.floats)


def _write_ddr_image(source: SubfunctionSource, project_dir: Path) -> None:
    """``DDR_IMAGE``: the DDR weights of every unit (its ``unit_weights_path``) at its buffer's offset."""
    weights = {b.tensor: b for b in source.memory.buffers if b.kind == "weights"}
    (project_dir / DDR_IMAGE).unlink(missing_ok=True)
    if not weights:
        return
    image = bytearray(max(b.offset + b.size for b in weights.values()))
    for unit in (u for u in source.units if u.weights_in_ddr):
        b = weights[f"{unit.name}.weights"]
        packed = unit_weights_path(project_dir, unit.name).read_bytes()
        if len(packed) != b.size:
            raise RuntimeError(f"{project_dir}: {unit.name}'s DDR weights are {len(packed)} bytes, the plan gives "
                               f"{b.size}")
        image[b.offset : b.offset + b.size] = packed
    (project_dir / DDR_IMAGE).write_bytes(bytes(image))


def _load_weights(ports: list[WeightPort]) -> str:
    """C-simulation: the typed weight arrays, read from the DDR region as an m_axi port would."""
    return "".join(line("static_array", type=f"{p.port}_t", name=p.port, values=p.values) +
                   line("load_array", type=f"{p.port}_t", word=p.offset // units.ARENA_WORD_BYTES, name=p.port,
                         values=p.values) for p in ports)


def _port_elements(port: HlsPort) -> int:
    """The elements of its C array a sample of ``port`` takes: words of ``port.floats`` floats, 32-bit words
    zero-compressed, or 64-bit words of codes."""
    if port.codes:
        return code_words(values_of(port.shape), port.codes.bits)
    return port_values(values_of(port.shape), port.compressed) // port.floats


@dataclass(frozen=True)
class EngineCall:
    """How a unit on the engine calls it: the engine's function for its buffers' and weights' bits (in, out,
    weights), its lanes and those in URAM, the values a lane takes a cycle, its largest window, the unit's weights'
    first read of each of the engines' weights ports (``engine_port_names``, from the DDR region's start: its block
    of the unit's weights, engine.h's layout), whether the function has the depthwise loop (one of its units needs
    it), the DDR words a read of the ports together holds, the top's memories
    the function's calls' buffers lie in (``MEMORY_ARRAYS``' names, in memory.MEMORIES' order: every call passes all
    of them), and where the unit's input (its copy on chip, where it has one) and output lie and, where its input
    lies in DDR and is staged, the staging buffer its rows are staged in, and the residual map it adds ((-1, 0):
    none): (the index of their memory among those, their first word); where its input is copied on chip before it
    runs, the copy's source, target (the top's expressions) and words; the output pixels it computes at once, and
    whether its pairs share their windows among tiles."""

    function: str
    bits: tuple[int, int, int]
    lanes: int
    uram_lanes: int
    vector: int
    window: int
    weights_reads: tuple[int, ...]
    depthwise: bool
    port_words: int
    memories: tuple[str, ...]
    source: tuple[int, int]
    target: tuple[int, int]
    staging: tuple[int, int]
    copy: Optional[tuple[str, str, int]] = None
    pixels: int = 1  # the output pixels the engine computes at once
    bundles: int = 1  # the engines' weights ports (bundles), PORT / bundles DDR words a read each
    residual: tuple[int, int] = (-1, 0)
    shared: bool = False  # its pairs' windows shared among the tiles it holds (engine.h's SHARED)
    stream: int = 0  # the most pairs of a layer whose weights it streams (engine.h's STREAM)
    alone: bool = False  # the unit checked alone, on buffers of its own (engine.h's engine_alone)


def _engines(sub: str, units_of_sub: list[ExecutionUnit], buffers: dict[str, Buffer],
             memory: MemoryPlan) -> dict[str, EngineCall]:
    """Each unit on the engine's call: one engine function per bits of its buffers and weights (all of them one
    when the units are as wide, as the estimate takes it), deep enough for the largest window it computes."""
    weights = {b.tensor: b for b in memory.buffers if b.kind == "weights"}
    on_engine = [u for u in units_of_sub if u.engine is not None]
    bits = {u.name: (precision_width(buffers[u.inputs[0]].precision), precision_width(buffers[u.outputs[0]].precision),
                     precision_width(weights[f"{u.name}.weights"].precision)) for u in on_engine}
    # its buffers as deep as the folding sized them (their largest window, on which its units' cycles count; a dense
    # layer deeper than them runs in chunks)
    window = {b: max(max(units.buffered_window(stored_window(u.engine, b[2]), u.engine.dense),
                         u.engine.buffer_window) for u in on_engine
                     if bits[u.name] == b) for b in bits.values()}
    # a lane's values a cycle lie in one word of inputs and one of weights: at most the wider's a word
    vector = {b: min([u.engine.vector for u in on_engine if bits[u.name] == b] +
                     [units.word_values(max(b[0], b[2]))]) for b in bits.values()}
    depthwise = {b: any(u.engine.depthwise for u in on_engine if bits[u.name] == b) for b in bits.values()}
    # a function whose values are one width, a step's weights one DDR word, has the streaming loop (engine_stream)
    # where the engine has it; the memory plan streams no layer of another
    streams = {b: len({units.element_bytes(n) for n in b}) == 1 and vector[b] == units.word_values(b[2])
               for b in bits.values()}
    if any(u.engine.streamed and not streams[bits[u.name]] for u in on_engine):
        raise RuntimeError(f"{sub}: an engine unit streams its weights, and its values are not one width or a step's "
                           f"weights not a DDR word")
    read_bytes = {u.name: units.ARENA_WORD_BYTES * u.engine.port_words for u in on_engine}
    if any(weights[f"{u.name}.weights"].offset % read_bytes[u.name] for u in on_engine):
        raise RuntimeError(f"{sub}: an engine unit's weights do not begin a read of the engines' weights port")

    def weights_reads(unit: ExecutionUnit) -> tuple[int, ...]:  # each bundle's first read: its block's
        region, bundles = weights[f"{unit.name}.weights"], unit.engine.bundles
        block = region.size // bundles
        return tuple((region.offset + b * block) * bundles // read_bytes[unit.name] for b in range(bundles))

    staging = next((b for b in memory.buffers if b.kind == "staging"), None)
    copies = {b.tensor: b for b in memory.buffers if b.kind == "copy"}
    if any((buffers[u.inputs[0]].memory == "ddr") != (u.engine.staged or u.engine.copied)
           or u.engine.staged and staging is None or u.engine.copied != (f"{u.name}.copy" in copies)
           for u in on_engine):
        raise RuntimeError(f"{sub}: an engine unit's input lies in DDR and is neither staged nor copied, or is staged "
                           f"or copied and does not")
    # where each reads its input: its copy on chip, or its own buffer
    read = {u.name: copies.get(f"{u.name}.copy", buffers[u.inputs[0]]) for u in on_engine}
    # one instance of a function has one set of ports: each engine function takes every memory its calls' buffers
    # (and the staging buffer, where they stage) lie in, at every call
    used = {u.name: [read[u.name], buffers[u.outputs[0]]] + ([buffers[u.residual]] if u.residual is not None else [])
            + ([buffers[u.inputs[0]], staging] if u.engine.staged else []) for u in on_engine}
    memories = {b: tuple(MEMORY_ARRAYS[m] for m in MEMORIES if any(
        buffer.memory == m for u in on_engine if bits[u.name] == b for buffer in used[u.name])) for b in bits.values()}

    def place(unit: ExecutionUnit, buffer: Buffer) -> tuple[int, int]:
        return (memories[bits[unit.name]].index(MEMORY_ARRAYS[buffer.memory]),
                buffer.offset // units.ARENA_WORD_BYTES)

    return {u.name: EngineCall(f"{sub}_engine_{'_'.join(map(str, bits[u.name]))}", bits[u.name], u.engine.lanes,
                               u.engine.uram_lanes, vector[bits[u.name]], window[bits[u.name]],
                               weights_reads(u), depthwise[bits[u.name]],
                               u.engine.port_words, memories[bits[u.name]],
                               place(u, buffers[u.inputs[0]] if u.engine.staged else read[u.name]),
                               place(u, buffers[u.outputs[0]]), place(u, staging) if u.engine.staged else (-1, 0),
                               (at(buffers[u.inputs[0]]), at(read[u.name]), read[u.name].size
                                // units.ARENA_WORD_BYTES) if u.engine.copied else None, u.engine.pixels,
                               u.engine.bundles,
                               place(u, buffers[u.residual]) if u.residual is not None else (-1, 0),
                               u.engine.shared, stream=u.engine.stream if streams[bits[u.name]] else 0)
            for u in on_engine}


def at(buffer: Buffer) -> str:
    """The top's expression of the word a buffer begins at."""
    return statement("at_word", memory=MEMORY_ARRAYS[buffer.memory], word=buffer.offset // units.ARENA_WORD_BYTES)


def _engine_functions(engines: dict[str, EngineCall]) -> dict[str, EngineCall]:
    """The engine functions the calls name: name -> a call of it (its calls differ only in their unit's weights
    and buffers)."""
    return {call.function: call for call in engines.values()}


def _engine_template(call: EngineCall) -> str:
    """engine.h's engine for ``call``'s function, over its memories."""
    ddr = call.memories.index(MEMORY_ARRAYS["ddr"]) if MEMORY_ARRAYS["ddr"] in call.memories else -1
    return ENGINE.statement("engine_template", lanes=call.lanes, uram_lanes=call.uram_lanes, vector=call.vector,
                            window=call.window, in_bits=call.bits[0], out_bits=call.bits[1], weight_bits=call.bits[2],
                            depthwise=str(call.depthwise).lower(), port=call.port_words, memories=len(call.memories),
                            ddr=ddr, pixels=call.pixels, bundles=call.bundles, shared=str(call.shared).lower(),
                            stream=call.stream)


def _engine_memories(memories: tuple[str, ...]) -> tuple[str, ...]:
    """engine.h's four memory arguments: ``memories``, then the first again for each it has not (never used)."""
    return memories + memories[:1] * (4 - len(memories))


def engine_ports(units_of_sub: list[ExecutionUnit], memory: MemoryPlan) -> list[WeightPort]:
    """The engines' weights ports (``engine_port_names``): m_axi ports of bundles of their own that the host points
    at the DDR region's start, each as many of its reads (its share of the port's words) as the region holds (the
    first two stage the engine units' DDR inputs too: engine.h's engine_stage); none without an engine unit."""
    on_engine = [u for u in units_of_sub if u.engine is not None]
    if not on_engine:
        return []
    port, bundles = on_engine[0].engine.port_words, on_engine[0].engine.bundles
    if any((u.engine.port_words, u.engine.bundles) != (port, bundles) for u in on_engine):
        raise RuntimeError("the engine units of a subfunction read their weights through ports of different widths")
    read = port // bundles * units.ARENA_WORD_BYTES
    return [WeightPort(name, "", f"ap_uint<{8 * read}>", -(-memory.ddr_bytes // read), 0)
            for name, _ in engine_port_names(bundles)]


def _parameters(unit: ExecutionUnit, weights: list[WeightPort]) -> str:
    return ", ".join([statement("word_input", name=f"in_{k}") for k in range(len(unit.inputs))]
                     + [statement("word_output", name=f"out_{k}") for k in range(len(unit.outputs))]
                     + [statement("array_parameter", type=f"{p.port}_t", name=p.port, values=p.values)
                        for p in weights])


def _write_unit(sub: str, unit: ExecutionUnit, buffers: dict[str, Buffer], weights: list[WeightPort],
                project_dir: Path, tokens_function: str = "") -> None:
    """Its wrapper: its step on the subfunction's buffers, and (a dataflow top's unit) its ``tokens_function``."""
    hls, ns = unit.hls, unit.name
    stream = hls.io_type == "io_stream"
    types, body, streams = [], [], []
    for direction, ports in (("in", hls.inputs), ("out", hls.outputs)):
        for k, port in enumerate(ports):
            var, values = f"{direction}_{k}", values_of(port.shape)
            types.append(statement("typedef", type=buffers[port.tensor].precision, name=f"{var}_t") + "\n")
            element = f"{ns}::{port.hls_type}"
            if direction == "in":
                if stream:  # a pixel's channels a cycle, from the words they lie in
                    body.append(template("unit_stream_in.cpp.in").substitute(
                        element=element, var=var, words=values // port.pack, pack=port.pack))
                else:
                    body.append(line("unit_array", type=element, name=var, values=values) +
                                line("read_array", name=var, values=values))
            else:
                body.append(line("unit_stream", type=element, name=var) if stream
                            else line("unit_array", type=element, name=var, values=values))
            streams.append(f"{var}_data")
    body.append(line("run_unit", unit=ns, arguments=", ".join(streams + [p.port for p in weights])))
    for k, port in enumerate(hls.outputs):
        var, values = f"out_{k}", values_of(port.shape)
        if stream:  # a pixel's channels a cycle, into the words they lie in
            body.append(template("unit_stream_out.cpp.in").substitute(
                element=f"{ns}::{port.hls_type}", var=var, words=values // port.pack, pack=port.pack))
        else:
            body.append(line("write_array", name=var, values=values))
    unit_dir = project_dir / "units" / unit.name
    (unit_dir / f"{unit.name}_step.cpp").write_text(template("unit.cpp.in").substitute(
        unit=unit.name, subfunction=sub, io_type=hls.io_type, buffer_types="".join(types),
        parameters=_parameters(unit, weights), body="".join(body),
        tokens_function="\n" + tokens_function + "\n" if tokens_function else ""))


def _unit_entry(unit: ExecutionUnit, types: dict[str, str], shapes: dict[str, list[int]],
                weights: list[WeightPort], engine: Optional[EngineCall] = None, engine_view: str = "") -> str:
    """``<unit>_float``: one unit on float inputs, through a scratch copy of its buffers (and its
    weights from the DDR region), for checking each unit against onnxruntime on the same input."""
    tensors = unit.inputs + unit.outputs
    names = {t: f"{'in' if k < len(unit.inputs) else 'out'}_{k if k < len(unit.inputs) else k - len(unit.inputs)}"
             for k, t in enumerate(tensors)}
    params = ", ".join([statement("float_pointer_input", name=names[t]) for t in unit.inputs] +
                       [statement("float_pointer_output", name=names[t]) for t in unit.outputs])
    lines = [line("scratch_words", name=names[t], values=values_of(shapes[t]), type=types[t]) for t in tensors]
    for k, (band, (tensor, values)) in enumerate(unit.band_buffers().items()):
        names[band] = f"band_{k}"
        lines.append(line("scratch_words", name=names[band], values=values, type=types[tensor]))
    lines += [line("from_float", type=types[t], source=names[t], target=f"{names[t]}_words",
                   values=values_of(shapes[t])) for t in unit.inputs]
    lines.append(_load_weights(weights) + (engine_view if engine is not None else ""))
    if engine is not None:  # engine.h itself over the scratch copies, the input's the first memory, the output's
        # the second, a residual's the third where it is not the input (C-simulation only: no instance to share)
        scratch = tuple(f"{names[t]}_words" for t in dict.fromkeys([unit.inputs[0], unit.outputs[0]] + unit.inputs))
        engine = dataclasses.replace(engine, memories=scratch, source=(0, 0), target=(1, 0), staging=(-1, 0),
                                     copy=None, residual=(-1 if unit.residual is None else
                                                          0 if unit.residual == unit.inputs[0] else 2, 0), alone=True)
        engine = dataclasses.replace(engine, function=_engine_template(engine), memories=_engine_memories(scratch))
    lines.append(top_kind(unit).run(unit, Buffers(lambda t: f"{names[t]}_words", types, shapes, weights, engine)))
    lines += [line("to_float", type=types[t], source=f"{names[t]}_words", target=names[t], values=values_of(shapes[t]))
              for t in unit.outputs]
    return statement("unit_float", unit=unit.name, parameters=params, body="".join(lines)) + "\n"


def _write_build_files(source: SubfunctionSource, project_dir: Path) -> None:
    sub = source.name
    objects, rules, add_files = [], [], []
    for unit in (u for u in source.units if u.hls is not None):
        base = f"units/{unit.name}"
        prefix = project_line("weights_prefix", folder=f"{base}/firmware/weights/")
        firmware, step = f"{base}/firmware/{unit.name}.cpp", f"{base}/{unit.name}_step.cpp"
        # one object a unit in C-simulation: its hls4ml project's file and its step compiled as one (g++ parses
        # ap_types, hls4ml's headers and the unit's once, not twice); two files of the synthesis project
        objects.append(step[:-4] + ".o")
        rules.append(project_line("unit_make_rule", object=objects[-1], step=step, firmware=firmware,
                                  flags=prefix) + "\n")
        add_files += [project_line("add_files", source=cpp) for cpp in (firmware, step)]
    objects.append(f"{sub}_top.o")
    rules.append(project_line("make_rule", object=objects[-1], source=f"{sub}_top.cpp", flags="") + "\n")
    add_files.append(project_line("add_files", source=f"{sub}_top.cpp"))
    (project_dir / MAKEFILE).write_text(template("Makefile.in").substitute(
        subfunction=sub, ap_types="ap_types", library=library_name(sub), objects=" ".join(objects),
        rules="\n".join(rules)))
    (project_dir / SYNTHESIS_SCRIPT).write_text(template("build_prj.tcl.in").substitute(
        subfunction=sub, add_files="\n".join(add_files), part=source.part,
        clock_period_ns=f"{source.clock_period_ns:g}", tool_versions=TOOL_VERSIONS))

