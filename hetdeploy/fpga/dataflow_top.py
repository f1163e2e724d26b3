"""Stage 5b, the dataflow top (plan.json's "top": dataflow): an FPGA subfunction's units as concurrent processes
linked by FIFOs of tokens, from hls/dataflow_top.cpp.in and the statements of hls/dataflow.cpp.in.

The processes are those the planner scheduled (``units.dataflow_processes``), their FIFOs the plan's (``Top.fifos``,
each as deep as the schedule needs): "input" takes the float ports in and writes each input's tokens to its
readers; an hls4ml unit streams its tokens through its project (``unit_tokens``, beside its step in its wrapper
file); each of the top's own ops that computes a token from a token of each input (an Add, a BatchNormalization,
a Concat: its kind's ``token_op``) does so a token a cycle, and each other one copies its input tokens into
buffers of its own, runs as in the sequential top (its kind's statement, ``top_kinds``), and copies its output out
a token at a time; "output" gives the float ports.
A token (arena.h's ``token``) is a pixel's channels, or a flat tensor's values (``units.tokens_of``). Every C++
name here is one hetdeploy made; a model's names reach the code only through ``identifier``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core.board_runtime import code_words
from ..core.names import identifier
from ..core.plan import ExecutionUnit, Fifo, HlsPort, Top, WeightPort
from ..planning import units
from .templates import line, statement
from .top_kinds import Buffers, top_kind, values_of

STATEMENTS = "dataflow.cpp.in"


@dataclass(frozen=True)
class TokenStreams:
    """The FIFOs of a dataflow top: each one's C++ variable (in the order of ``Top.fifos``) and its token type."""

    top: Top
    precision: Callable[[str], str]  # a tensor's C++ element type
    shapes: dict[str, list[int]]

    def var(self, fifo: Fifo) -> str:
        return f"fifo_{self.top.fifos.index(fifo)}"

    def values(self, tensor: str) -> tuple[int, int]:
        """A tensor's tokens and the values of each."""
        return units.tokens_of(self.shapes[tensor])

    def token(self, tensor: str) -> str:
        return statement("token", STATEMENTS, type=self.precision(tensor), values=self.values(tensor)[1])

    def into(self, reader: str, tensor: str) -> Fifo:
        """The FIFO of ``tensor`` to ``reader``."""
        return next(f for f in self.top.fifos if f.reader == reader and f.tensor == tensor)

    def out_of(self, writer: str, tensor: str) -> list[Fifo]:
        """The FIFOs ``writer`` writes ``tensor`` to, one a reader."""
        return [f for f in self.top.fifos if f.writer == writer and f.tensor == tensor]

    def parameter(self, fifo: Fifo, name: str = "") -> str:
        return statement("fifo_parameter", STATEMENTS, token=self.token(fifo.tensor), name=name or self.var(fifo))


def unit_tokens(unit: ExecutionUnit, streams: TokenStreams, weights: list[WeightPort]) -> tuple[str, str]:
    """An hls4ml unit's token function, ``<unit>_tokens``: each input FIFO's tokens into its project's input (a
    stream of pixels, or an array), its project run, its output's tokens to each reader's FIFO (all at once: a
    DATAFLOW region); and its declaration. The buffer types ``in_<k>_t`` and ``out_<k>_t`` are its wrapper's."""
    hls, ns = unit.hls, unit.name
    stream = hls.io_type == "io_stream"
    parameters, body, arguments = [], [], []
    for k, port in enumerate(hls.inputs):
        var, (tokens, values) = f"in_{k}", streams.values(port.tensor)
        parameters.append(streams.parameter(streams.into(unit.name, port.tensor), var))
        body.append(line("stream_from_tokens" if stream else "array_from_tokens", STATEMENTS,
                         element=f"{ns}::{port.hls_type}", var=var, tokens=tokens, values=values, type=f"{var}_t",
                         all=tokens * values))
        arguments.append(f"{var}_data")
    outputs = []
    for k, port in enumerate(hls.outputs):
        var, (tokens, values) = f"out_{k}", streams.values(port.tensor)
        fifos = streams.out_of(unit.name, port.tensor)
        names = [f"{var}_{j}" for j in range(len(fifos))]
        parameters += [streams.parameter(f, name) for f, name in zip(fifos, names)]
        body.append(line("unit_stream", type=f"{ns}::{port.hls_type}", name=var) if stream
                    else line("unit_array", type=f"{ns}::{port.hls_type}", name=var, values=tokens * values))
        arguments.append(f"{var}_data")
        outputs.append(line("stream_to_tokens" if stream else "array_to_tokens", STATEMENTS,
                            element=f"{ns}::{port.hls_type}", var=var, tokens=tokens, values=values,
                            type=f"{var}_t", token=streams.token(port.tensor), writes=_writes(names)))
    parameters += [statement("array_parameter", type=f"{p.port}_t", name=p.port, values=p.values) for p in weights]
    body.append(line("run_unit", unit=ns, arguments=", ".join(arguments + [p.port for p in weights])))
    body += outputs
    joined = ", ".join(parameters)
    return (statement("tokens_function", STATEMENTS, unit=ns, parameters=joined, body="".join(body)),
            statement("tokens_declaration", STATEMENTS, unit=ns, parameters=joined))


def _writes(fifos: list[str]) -> str:
    return "".join(statement("write_token", STATEMENTS, fifo=f) + "\n" for f in fifos)


@dataclass(frozen=True)
class DataflowSource:
    """What the dataflow top is written from (hls_top.write_project's): the subfunction, its units and ports, the
    buffers' typedef names, each unit's DDR weight ports, the float ports' parameters and conversions (the
    sequential top's), and the batch."""

    subfunction: str
    units: list[ExecutionUnit]
    inputs: list[HlsPort]
    outputs: list[HlsPort]
    types: dict[str, str]  # tensor -> its typedef in the top (b<k>_t)
    shapes: dict[str, list[int]]
    weights: dict[str, list[WeightPort]]  # unit -> its DDR weight ports
    input_parameters: list[str]  # in_<k>'s, in order
    output_parameters: list[str]  # out_<k>'s
    sample_in: Callable[[int, str], str]  # sample s of in_<k> into a buffer of words (its C++ expression)
    sample_of: Callable[[int], str]  # where sample s of in_<k> starts (a codes port's, read straight into tokens)
    sample_out: Callable[[int, str], str]  # a buffer of words into sample s of out_<k>
    max_batch: int


def processes_and_calls(source: DataflowSource, streams: TokenStreams) -> tuple[str, str, str]:
    """The dataflow top's process functions, its FIFOs' declarations and its calls of the processes."""
    sub, batch = source.subfunction, source.max_batch
    samples = statement("samples_parameter", STATEMENTS)
    processes, calls = [], []

    def process(name: str, parameters: list[str], arguments: list[str], declarations: str, body: str) -> None:
        processes.append(statement("process", STATEMENTS, name=name, parameters=", ".join([samples, *parameters]),
                                   declarations=declarations, max_batch=batch, body=_indented(body)))
        calls.append(line("call", STATEMENTS, name=name, arguments=", ".join(["samples", *arguments])))

    def scratch(names: dict[str, str]) -> str:
        return "".join(line("scratch_words", name=name, values=values_of(source.shapes[t]), type=source.types[t])
                       for t, name in names.items())

    def tokens_in(tensor: str, reader: str, buffer: str) -> tuple[Fifo, str]:
        fifo = streams.into(reader, tensor)
        tokens, values = streams.values(tensor)
        return fifo, line("tokens_in", STATEMENTS, tokens=tokens, type=source.types[tensor], values=values,
                          fifo=streams.var(fifo), buffer=f"{buffer}_words")

    def tokens_out(tensor: str, writer: str, buffer: str) -> tuple[list[Fifo], str]:
        fifos = streams.out_of(writer, tensor)
        tokens, values = streams.values(tensor)
        return fifos, line("tokens_out", STATEMENTS, tokens=tokens, type=source.types[tensor], values=values,
                           token=streams.token(tensor), buffer=f"{buffer}_words",
                           writes=_writes([streams.var(f) for f in fifos]))

    # the ports in: each float input's sample into a buffer (as the sequential top converts it), then its tokens;
    # a codes input's tokens straight from its words, each code's value from its table (hls_top's codes_<k>)
    names = {p.tensor: f"in_{k}" for k, p in enumerate(source.inputs)}
    codes = {p.tensor for p in source.inputs if p.codes}
    body, written = [], []
    for k, p in enumerate(source.inputs):
        if p.codes:
            fifos = streams.out_of("input", p.tensor)
            values, every = streams.values(p.tensor)[1], values_of(p.shape)
            writes = "".join(" " * 16 + w + "\n" for w in _writes([streams.var(f) for f in fifos]).splitlines())
            body.append(line("codes_tokens", STATEMENTS, token=streams.token(p.tensor),
                             port_words=code_words(every, p.codes.bits), source=source.sample_of(k),
                             bits=p.codes.bits, values=values, all=every, type=source.types[p.tensor],
                             table=f"codes_{k}", writes=writes))
        else:
            body.append(source.sample_in(k, f"{names[p.tensor]}_words"))
            fifos, text = tokens_out(p.tensor, "input", names[p.tensor])
            body.append(text)
        written += fifos
    process(f"{sub}_input", source.input_parameters + [streams.parameter(f) for f in written],
            list(names.values()) + [streams.var(f) for f in written],
            scratch({t: name for t, name in names.items() if t not in codes}), "".join(body))

    for unit in source.units:
        weights = source.weights[unit.name]
        reads = [streams.into(unit.name, t) for t in unit.inputs]
        writes = [f for t in unit.outputs for f in streams.out_of(unit.name, t)]
        parameters = [streams.parameter(f) for f in reads + writes]
        parameters += [statement("array_parameter", type=f"{p.port}_t", name=p.port, values=p.values) for p in weights]
        arguments = [streams.var(f) for f in reads + writes] + [p.port for p in weights]
        if unit.hls is not None:  # its project streams the tokens itself
            process(f"{unit.name}_process", parameters, arguments, "",
                    line("call", STATEMENTS, name=f"{unit.name}_tokens", arguments=", ".join(arguments)))
            continue
        kind, (y,) = top_kind(unit), unit.outputs
        tokens = {t: f"t_{k}" for k, t in enumerate(unit.inputs)}
        expression = kind.token_op(unit, tokens, Buffers(tokens.get, source.types, source.shapes, weights))
        if expression is not None:  # a token of each input in, its output's token out, one each interval
            read_lines = "".join(statement("read_token", STATEMENTS, token=streams.token(t), var=tokens[t],
                                           fifo=streams.var(fifo)) + "\n" for t, fifo in zip(unit.inputs, reads))
            count = streams.values(y)[0]
            process(f"{unit.name}_process", parameters, arguments, "", line(
                "token_loop", STATEMENTS, tokens=count, reads=read_lines, token=streams.token(y),
                interval=kind.token_interval(unit, count), expression=expression,
                writes=_writes([streams.var(f) for f in streams.out_of(unit.name, y)])))
            continue
        buffers = {t: f"x_{k}" for k, t in enumerate(dict.fromkeys(unit.inputs + unit.outputs))}
        body = [tokens_in(t, unit.name, buffers[t])[1] for t in unit.inputs]
        body.append(kind.run(unit, Buffers(lambda t: f"{buffers[t]}_words", source.types, source.shapes, weights)))
        body += [tokens_out(t, unit.name, buffers[t])[1] for t in unit.outputs]
        process(f"{unit.name}_process", parameters, arguments, scratch(buffers), "".join(body))

    # the float ports out: each output's tokens into a buffer, then its sample (as the sequential top converts it)
    names = {p.tensor: f"out_{k}" for k, p in enumerate(source.outputs)}
    body, read = [], []
    for k, p in enumerate(source.outputs):
        fifo, text = tokens_in(p.tensor, "output", names[p.tensor])
        body.append(text)
        read.append(fifo)
        body.append(source.sample_out(k, f"{names[p.tensor]}_words"))
    process(f"{sub}_output", [streams.parameter(f) for f in read] + source.output_parameters,
            [streams.var(f) for f in read] + list(names.values()), scratch(names), "".join(body))

    fifos = "".join(line("fifo", STATEMENTS, token=streams.token(f.tensor), name=streams.var(f), label=streams.var(f),
                         depth=f.depth) for f in streams.top.fifos)
    comments = "".join(f"    // {streams.var(f)}: {identifier(f.tensor)} from {f.writer} to {f.reader}, {f.depth} "
                       f"tokens\n" for f in streams.top.fifos)
    return "\n".join(processes) + "\n", comments + fifos, "".join(calls)


def _indented(body: str) -> str:
    """A process's body, inside its samples loop."""
    return "".join("    " + text + "\n" if text.strip() else "\n" for text in body.rstrip("\n").split("\n"))
