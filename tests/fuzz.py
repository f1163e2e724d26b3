"""A seeded fuzzer of hetdeploy: mutated ONNX models through `plan` and `build`, mutated board files,
damaged build folders and bad inputs through `emulate`, `report` and `config`.

Every case runs `hetdeploy` in a child process (a crash or a hang is caught, not suffered) inside
its own folder, and must end in one of these ways: exit 0 (or 3, emulation out of tolerance), exit 2
with exactly one line on stderr starting ``hetdeploy: error:``, or exit 1 with one line saying that
hls4ml or g++ failed on a unit and naming its log. A traceback, another exit code, a signal, a hang,
or a file written outside the command's output folder is a finding.

    python tests/fuzz.py --cases 1000 --seed 1 --jobs 2    # by hand: prints each finding, then a count
    python tests/fuzz.py --kind model-build|board|path|option|build --cases 300

A case known invalid (no graph outputs, no opset of the default domain, a board file with a list
as a key, a special file as a path, a non-numeric input, a bad number for a numeric option) must be
refused; one known valid (repeated and empty node names) must pass.

``tests/test_faults.py`` runs a bounded number of seeded cases in the test suite.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import re
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import networks  # noqa: E402
import quantized_models  # noqa: E402
from hetdeploy.core.plan import PLAN_FORMAT  # noqa: E402

TIMEOUT_S = 120


@dataclass
class Case:
    name: str  # the mutation, for the finding's line
    # written into the case's folder: bytes, or a special file: "fifo", "folder", "link:TARGET"
    files: dict[str, bytes | str]
    argv: list[str]  # hetdeploy's arguments, paths relative to the case's folder
    # what the input is known to deserve: "refuse" (exit 2, one line), "pass" (exit 0), "any" (either)
    expect: str = "any"


@dataclass
class Outcome:
    case: Case
    code: int
    stderr: str
    finding: str | None  # None: the case ended as it must


def _bases() -> list[onnx.ModelProto]:
    return [networks.jet_tagger_mlp(), networks.small_cnn(), quantized_models.qonnx_mlp()]


def _pick_initializer(model: onnx.ModelProto, rng: random.Random) -> onnx.TensorProto:
    return rng.choice(list(model.graph.initializer))


def _set_float_values(tensor: onnx.TensorProto, value: float, rng: random.Random) -> None:
    array = numpy_helper.to_array(tensor).copy()
    if array.dtype.kind != "f" or array.size == 0:
        return
    array.reshape(-1)[rng.randrange(array.size)] = value
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))


def m_rank0_output(m, rng):
    out = m.graph.output[0]
    del out.type.tensor_type.shape.dim[:]


def m_output_shape_contradicts(m, rng):
    out = m.graph.output[0]
    for dim in out.type.tensor_type.shape.dim:
        dim.Clear()
        dim.dim_value = rng.choice([3, 7, 1000])


def m_output_type_contradicts(m, rng):
    m.graph.output[0].type.tensor_type.elem_type = rng.choice([TensorProto.INT64, TensorProto.STRING,
                                                                TensorProto.BOOL, TensorProto.DOUBLE])


def m_missing_output(m, rng):
    m.graph.output[0].name = "no_such_tensor"


def m_no_outputs(m, rng):
    del m.graph.output[:]


def m_initializer_as_output(m, rng):
    init = _pick_initializer(m, rng)
    m.graph.output.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))


def m_input_as_output(m, rng):
    i = m.graph.input[0]
    m.graph.output.append(copy.deepcopy(i))


def m_sparse_initializer(m, rng):
    init = _pick_initializer(m, rng)
    values = numpy_helper.to_array(init).reshape(-1)
    idx = np.nonzero(values)[0][:4].astype(np.int64)
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(values[idx], init.name),
                                       numpy_helper.from_array(idx, ""), list(init.dims))
    m.graph.initializer.remove(init)
    m.graph.sparse_initializer.append(sparse)


def m_external_location(m, rng):
    init = _pick_initializer(m, rng)
    init.data_location = TensorProto.EXTERNAL
    del init.external_data[:]
    location = rng.choice(["data\0.bin", "../outside.bin", "/etc/passwd", "", "missing.bin", "a" * 5000])
    init.external_data.add(key="location", value=location)
    init.ClearField("raw_data")
    del init.float_data[:]


def m_huge_batch(m, rng):
    dim = m.graph.input[0].type.tensor_type.shape.dim[0]
    dim.Clear()
    dim.dim_value = rng.choice([2 ** 62, 2 ** 40, 100000])


def m_huge_dim(m, rng):
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dim = dims[rng.randrange(len(dims))]
    dim.Clear()
    dim.dim_value = rng.choice([2 ** 31, 2 ** 62, 0])


def m_negative_dim(m, rng):
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[-1].Clear()
    dims[-1].dim_value = -3


def m_input_rank_change(m, rng):
    dims = m.graph.input[0].type.tensor_type.shape.dim
    if rng.random() < 0.5:
        dims.add().dim_value = 2
    else:
        del dims[-1]


def m_attribute(m, rng):
    nodes = [n for n in m.graph.node if n.attribute]
    if not nodes:
        return
    node = rng.choice(nodes)
    attr = rng.choice(list(node.attribute))
    value = rng.choice([-1, 0, 2 ** 40, -(2 ** 40), 7])
    if attr.type == onnx.AttributeProto.INT:
        attr.i = value
    elif attr.type == onnx.AttributeProto.INTS and attr.ints:
        attr.ints[rng.randrange(len(attr.ints))] = value
    elif attr.type == onnx.AttributeProto.FLOAT:
        attr.f = rng.choice([float("inf"), float("nan"), -1.0, 1e30])


def m_conv_group(m, rng):
    convs = [n for n in m.graph.node if n.op_type == "Conv"] or list(m.graph.node)
    node = rng.choice(convs)
    node.attribute.append(helper.make_attribute("group", rng.choice([-1, 0, 3, 2 ** 33])))


def m_weight_nonfinite(m, rng):
    _set_float_values(_pick_initializer(m, rng), rng.choice([float("inf"), float("-inf"), float("nan"), 3e38]), rng)


def m_raw_data_length(m, rng):
    init = _pick_initializer(m, rng)
    raw = numpy_helper.from_array(numpy_helper.to_array(init), init.name).raw_data
    init.ClearField("float_data")
    init.raw_data = raw + b"\0" * rng.choice([1, 4, 64]) if rng.random() < 0.5 else raw[: max(0, len(raw) - 4)]


def m_initializer_dtype(m, rng):
    init = _pick_initializer(m, rng)
    init.data_type = rng.choice([TensorProto.INT8, TensorProto.DOUBLE, TensorProto.STRING, TensorProto.FLOAT16,
                                 TensorProto.UNDEFINED, 99])


def m_initializer_dims(m, rng):
    init = _pick_initializer(m, rng)
    if init.dims:
        init.dims[rng.randrange(len(init.dims))] = rng.choice([0, -1, 2 ** 40, 1])


def m_opset(m, rng):
    m.opset_import[0].version = rng.choice([1, 6, 10, 23, 99, 10 ** 6])


def m_ir_version(m, rng):
    m.ir_version = rng.choice([0, 1, 3, 12, 99, 2 ** 40])


def m_custom_domain(m, rng):
    node = rng.choice(list(m.graph.node))
    node.domain = rng.choice(["com.example", "qonnx.custom_op.general", "ai.onnx.ml"])


def m_op_type(m, rng):
    node = rng.choice(list(m.graph.node))
    node.op_type = rng.choice(["NoSuchOp", "Loop", "If", "Scan", "Relu", "Conv", "Gemm", ""])


def m_dangling_input(m, rng):
    node = rng.choice(list(m.graph.node))
    node.input[rng.randrange(len(node.input))] = "undefined_tensor"


def m_cycle(m, rng):
    nodes = list(m.graph.node)
    if len(nodes) > 1:
        nodes[0].input[0] = nodes[-1].output[0]


def m_self_loop(m, rng):
    node = rng.choice(list(m.graph.node))
    node.input[0] = node.output[0]


def m_duplicate_output(m, rng):
    nodes = list(m.graph.node)
    if len(nodes) > 1:
        nodes[1].output[0] = nodes[0].output[0]


def m_drop_node(m, rng):
    m.graph.node.remove(rng.choice(list(m.graph.node)))


def m_shuffle_nodes(m, rng):
    nodes = list(m.graph.node)
    rng.shuffle(nodes)
    del m.graph.node[:]
    m.graph.node.extend(nodes)


def m_no_inputs(m, rng):
    del m.graph.input[:]


def m_input_dtype(m, rng):
    m.graph.input[0].type.tensor_type.elem_type = rng.choice([TensorProto.STRING, TensorProto.INT8,
                                                               TensorProto.COMPLEX64, TensorProto.UNDEFINED, 99])


def m_names(m, rng):
    node = rng.choice(list(m.graph.node))
    node.name = rng.choice(["", "../../x", "a\nb", "x" * 3000, "\0", "$(touch pwned)", "é名"])


def m_tensor_names(m, rng):
    name = rng.choice(["../../etc/x", "a\nb", "$(touch pwned)", "x" * 500, "名前", "\x7f"])
    old = m.graph.input[0].name
    m.graph.input[0].name = name
    for node in m.graph.node:
        for i, t in enumerate(node.input):
            if t == old:
                node.input[i] = name


def m_value_info_contradicts(m, rng):
    node = rng.choice(list(m.graph.node))
    m.graph.value_info.append(helper.make_tensor_value_info(node.output[0], rng.choice(
        [TensorProto.INT64, TensorProto.FLOAT]), [rng.choice([1, 5, 9])]))


def m_constant_node(m, rng):
    init = _pick_initializer(m, rng)
    m.graph.initializer.remove(init)
    m.graph.node.insert(0, helper.make_node("Constant", [], [init.name], value=init))


def m_quantizer(m, rng):
    """A QONNX quantizer's parameter or attribute out of range (the float models have none)."""
    quants = [n for n in m.graph.node if n.op_type == "Quant"]
    if not quants:
        return
    node = rng.choice(quants)
    if rng.random() < 0.6:
        index = rng.randrange(1, 4)  # scale, zero point, bit width
        init = next(t for t in m.graph.initializer if t.name == node.input[index])
        value = rng.choice([0.0, -1.0, float("nan"), float("inf"), 0.5, 1e9, 64.0, -3.0, 1e-30])
        init.CopyFrom(numpy_helper.from_array(np.full(list(init.dims), value, np.float32), init.name))
    else:
        name, value = rng.choice([("rounding_mode", "SIDEWAYS"), ("signed", 7), ("narrow", -1), ("signed", 0),
                                  ("rounding_mode", "FLOOR")])
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute(name, value)])


def m_old_opset(m, rng):
    m.opset_import[0].version = rng.randint(1, 6)  # before onnxruntime's kernels: converted, or refused


def m_every_opset(m, rng):
    m.opset_import[0].version = rng.randint(1, onnx.defs.onnx_opset_version())


def m_repeated_names(m, rng):
    for node, name in zip(m.graph.node, ["same", "", "same", "same", ""]):  # README: they become <Op>_<index>
        node.name = name


def m_no_default_opset(m, rng):
    kept = [o for o in m.opset_import if o.domain not in ("", "ai.onnx")]
    del m.opset_import[:]
    m.opset_import.extend(kept)  # onnx's checker and onnxruntime refuse it: refused


def m_non_utf8_names(m, rng):
    """Names whose bytes are not UTF-8 (``model_case`` writes the bytes in): valid, they must pass."""
    node = rng.choice(list(m.graph.node))
    node.name = NON_UTF8_MARK + str(rng.randrange(10))
    if rng.random() < 0.5:  # a tensor between two nodes too
        tensor = node.output[0]
        if tensor not in {o.name for o in m.graph.output}:
            for n in m.graph.node:
                for names in (n.input, n.output):
                    for k, name in enumerate(names):
                        if name == tensor:
                            names[k] = NON_UTF8_MARK + "t"


def m_repeated_output(m, rng):
    m.graph.output.append(copy.deepcopy(m.graph.output[0]))  # the same tensor listed twice: valid


def m_sparse_external(m, rng):
    m_sparse_initializer(m, rng)
    values = m.graph.sparse_initializer[-1].values
    values.data_location = TensorProto.EXTERNAL
    values.external_data.add(key="location", value=rng.choice(["/etc/hostname", "../outside.bin", "missing.bin"]))
    values.ClearField("raw_data")
    del values.float_data[:]


def m_subgraph_attr(m, rng):
    node = rng.choice(list(m.graph.node))
    node.attribute.append(helper.make_attribute("body", helper.make_graph([], "g", [], [])))


MUTATIONS = [v for k, v in sorted(globals().items()) if k.startswith("m_")]
# mutations that leave a valid model
VALID_MODELS = {"repeated_names", "non_utf8_names", "repeated_output"}
# what m_non_utf8_names names things; model_case writes bytes that are not UTF-8 in its place
NON_UTF8_MARK = "NONUTF8MARK"


def _model_expectation(model: onnx.ModelProto, names: list[str]) -> str:
    """What the mutated model deserves, read from the model itself (a later mutation may undo an
    earlier one): refused without outputs or without an opset of the default domain, passed where only
    valid mutations were made (an opset before onnxruntime's: onnx's converter may refuse to raise it)."""
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not model.graph.output or not opsets:
        return "refuse"
    return "pass" if names and set(names) <= VALID_MODELS and opsets[0] >= 7 else "any"


def _bytes_mutation(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    data = bytearray(data)
    kind = rng.choice(["truncate", "flip", "zero", "append"])
    if kind == "truncate":
        return kind, bytes(data[: rng.randrange(len(data))])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "zero":
        start = rng.randrange(len(data))
        data[start:start + rng.randint(1, 64)] = b"\0" * len(data[start:start + rng.randint(1, 64)])
    else:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
    return kind, bytes(data)


def model_case(rng: random.Random, command: str = "plan") -> Case:
    """A mutated model through ``command``: plan, or build into ``out``."""
    model = copy.deepcopy(rng.choice(_bases()))
    if rng.random() < 0.1:
        name, data = _bytes_mutation(model.SerializeToString(), rng)
        return Case(f"bytes:{name}", {"model.onnx": data}, _model_argv(command, "latency"))
    names = []
    for mutation in rng.sample(MUTATIONS, rng.choice([1, 1, 1, 2])):
        try:
            mutation(model, rng)
        except (IndexError, ValueError):  # the base has nothing to mutate this way
            continue
        names.append(mutation.__name__[2:])
    data = model.SerializeToString().replace(NON_UTF8_MARK.encode(), b"\xff\xfe\x00/..\xc3\xff\xfe\xfd\xfc")
    return Case("+".join(names), {"model.onnx": data},
                _model_argv(command, rng.choice(["latency", "support"])),
                _model_expectation(model, names))


def _model_argv(command: str, policy: str) -> list[str]:
    output = ["-o", "out", "-q"] if command == "build" else []
    return [command, "model.onnx", "--board", "pynq-z2", "--policy", policy, *output]


BOARD_MUTATIONS = [
    ("name", lambda t, r: t.replace("name: pynq-z2", f"name: {r.choice(['', 'a b', '../x', 'x' * 300, '[1]'])}")),
    ("part", lambda t, r: t.replace("xc7z020clg400-1", r.choice(["x}; exec rm", "[exec id]", "", "a\nb"]))),
    ("number", lambda t, r: t.replace(": 650", f": {r.choice(['-1', '.inf', '.nan', '1e400', '5e-324', '9' * 400])}",
                                      1)),
    ("drop", lambda t, r: "\n".join(line for line in t.splitlines() if r.random() > 0.05)),
    ("indent", lambda t, r: t.replace("\n  ", "\n   ", r.randint(1, 5))),
    ("alias", lambda t, r: "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\n" + t),
    ("tag", lambda t, r: t.replace("devices:", "devices: !custom", 1)),
    ("deep", lambda t, r: t + "\nextra: " + "[" * 5000 + "]" * 5000 + "\n"),
    ("type", lambda t, r: t.replace("kind: fpga", r.choice(["kind: [fpga]", "kind: 3", "kind: FPGA2", "kind:"]))),
    ("binary", lambda t, r: t[: r.randrange(len(t))] + "\0\xff" + t[r.randrange(len(t)):]),
    ("node_kind", lambda t, r: _swap_yaml_node(t, r)),
    ("unhashable_key", lambda t, r: t + r.choice(["\n? [a, b]\n: 1\n", "\n? {a: 1}\n: 1\n"])),
    ("attributes_scalar", lambda t, r: t.replace("attributes: {auto_pad: [NOTSET]}",
                                                 "attributes: {auto_pad: NOTSET, dilations: 1}")),
    ("fuse_repeat", lambda t, r: t.replace("fuse: [BatchNormalization, Relu,", "fuse: [BatchNormalization, Relu, Relu,",
                                           1)),
]
INVALID_BOARDS = {"unhashable_key", "attributes_scalar", "fuse_repeat"}
# what a YAML node of another kind may be: scalars of each type, a list, a mapping, empty ones
_NODES = [None, True, 0, -1, 2 ** 70, 1.5, float("nan"), "", "x", [], [1, "a"], {}, {"a": [1]}, [[[]]]]


def _swap_yaml_node(text: str, rng: random.Random) -> str:
    """The board file with one value, anywhere in it, replaced by a node of another kind."""
    import yaml

    try:
        data = yaml.safe_load(text)
        paths = [p for p, _ in _json_paths(data) if p]
    except (yaml.YAMLError, RecursionError):  # an earlier mutation left no YAML to walk
        return text
    if not paths:
        return text
    path = rng.choice(paths)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = copy.deepcopy(rng.choice(_NODES))
    return yaml.safe_dump(data, sort_keys=False)


def board_case(rng: random.Random) -> Case:
    from hetdeploy.core.board import BOARDS_DIR

    text = (Path(str(BOARDS_DIR)) / "pynq-z2.yaml").read_text()
    names = []
    for name, mutate in rng.sample(BOARD_MUTATIONS, rng.choice([1, 1, 2])):
        text = mutate(text, rng)
        names.append(name)
    model = networks.jet_tagger_mlp() if rng.random() < 0.5 else networks.small_cnn()
    return Case("board:" + "+".join(names),
                {"board.yaml": text.encode("utf-8", "surrogateescape"), "model.onnx": model.SerializeToString()},
                ["plan", "model.onnx", "--board", "board.yaml", "--policy", "support"],
                "refuse" if set(names) & INVALID_BOARDS else "any")


# ------------------------------------------------------------------ special files, numeric options

SPECIAL_FILES = ["fifo", "folder", "link:/dev/zero", "link:/dev/null", "link:no_such_file"]


def path_case(rng: random.Random) -> Case:
    """One of plan's input files a pipe, a device, a folder or a dangling link: refused, never read
    forever."""
    model = networks.jet_tagger_mlp().SerializeToString()
    special = rng.choice(SPECIAL_FILES)
    which = rng.choice(["model", "board", "config", "calibration", "verify_input"])
    files: dict[str, bytes | str] = {"model.onnx": model, "special": special}
    argv = ["plan", "model.onnx", "--board", "pynq-z2"]
    if which == "model":
        argv[1] = "special"
    elif which == "board":
        argv[3] = "special"
    else:
        argv += [f"--{which.replace('_', '-')}", "special"]
    return Case(f"path:{which}:{special}", files, argv, "refuse")


# numeric options of plan and sweep, with values none of them takes, and values some take
NUMERIC_OPTIONS = ["--width", "--batch", "--samples", "--seed", "--target-rate", "--error-budget",
                   "--model-reuse-factor", "--reuse-factor /fc1/Gemm=", "--precision /fc1/Gemm=ap_fixed<{},4>",
                   "--device /fc1/Gemm=", "--strategy /fc1/Gemm=", "--table-size /softmax/Softmax=",
                   "--io-type /fc1/Gemm="]
SWEEP_OPTIONS = ["--workers", "--widths", "--reuse-factors"]
BAD_NUMBERS = ["-1", "-0.5", "nan", "inf", "-inf", "1e400", "x", "", "0x10"]
EDGE_NUMBERS = ["0", "1", "4", "32", "33", "1_0", str(2 ** 31), str(2 ** 63), "1e-300", "0.999999"]


def option_case(rng: random.Random) -> Case:
    value = rng.choice(BAD_NUMBERS + EDGE_NUMBERS)
    model = {"model.onnx": networks.jet_tagger_mlp().SerializeToString()}
    if rng.random() < 0.2:  # the sweep: only values it must refuse, so that no cluster starts
        value = rng.choice(BAD_NUMBERS)
        option = rng.choice(SWEEP_OPTIONS)
        return Case(f"option:sweep {option} {value!r}", model,
                    ["sweep", "model.onnx", "--boards", "pynq-z2", "-o", "out", "-q", option, value], "refuse")
    option = rng.choice(NUMERIC_OPTIONS)
    if "{}" in option:
        words = option.format(value).split(" ", 1)
    elif option.endswith("="):
        words = [option.split()[0], option.split()[1] + value]
    else:
        words = [option, value]
    expect = "refuse" if value in BAD_NUMBERS and not option.startswith("--device") else "any"
    return Case(f"option:{' '.join(words)!r}", model, ["plan", "model.onnx", "--board", "pynq-z2", *words], expect)


# --------------------------------------------------------------- damaged builds and bad inputs

def _json_paths(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _json_paths(v, path + (i,))


def _replace_json(plan: dict, rng: random.Random) -> str:
    paths = [(p, v) for p, v in _json_paths(plan) if p]
    path, value = rng.choice(paths)
    if isinstance(value, bool):
        new = not value
    elif isinstance(value, (int, float)):
        new = rng.choice([-1, 0, 2 ** 62, 1e308, -0.5, "7", None])
    elif isinstance(value, str):
        new = rng.choice(["", "../../../etc/passwd", "/tmp/x.so", "a\nb", "x" * 300, 3, None])
    elif isinstance(value, list):
        new = rng.choice([[], value[:1] * 3, {}, None, "list"])
    else:
        new = rng.choice([{}, [], None, 0])
    target = plan
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return "/".join(map(str, path))


def build_case(rng: random.Random, build: Path) -> Case:
    """A damaged copy of the build folder ``build`` (or a bad input) through emulate, report or
    config. The files are the whole folder, relative to the case's folder."""
    import json

    files = {str(p.relative_to(build.parent)): p.read_bytes() for p in build.rglob("*") if p.is_file()}
    name = build.name
    plan_key = f"{name}/plan.json"
    kind = rng.choice(["plan", "plan", "plan", "foreign", "delete", "truncate", "input", "input", "listed",
                       "listed", "field"])
    extra: list[str] = []
    expect = "any"
    if kind == "plan":
        plan = json.loads(files[plan_key])
        what = _replace_json(plan, rng)
        files[plan_key] = json.dumps(plan).encode()
    elif kind == "foreign":
        what = rng.choice(['{}', '[]', '"x"', '{"format": 1}', f'{{"format": {PLAN_FORMAT}}}',
                           f'{{"format": {PLAN_FORMAT}, "board": 3}}', 'nul\0l', '{"format":'])
        files[plan_key] = what.encode()
    elif kind == "listed":  # a file the build's manifest lists, changed or gone: emulate must refuse it
        listed = sorted(f"{name}/{k}" for k in json.loads(files[f"{name}/manifest.json"])["files"])
        what = rng.choice(listed)
        damage = rng.choice(["empty", "garbage", "flip", "delete"])
        if damage == "delete":
            del files[what]
        else:
            data = bytearray(files[what])
            if damage == "flip" and data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            files[what] = {"empty": b"", "garbage": b"zz,1e999,nan", "flip": bytes(data)}[damage]
        what = f"{what} {damage}"
        expect = "refuse"
    elif kind == "field":  # a plan.json field no build writes: refused on read
        plan = json.loads(files[plan_key])
        fpga = next(s for s in plan["subfunctions"] if s["kind"] == "fpga")
        what = rng.choice(["nan tolerance", "infinite tolerance", "hls null", "zero batch"])
        if what == "hls null":
            fpga["hls"] = None
        elif what == "zero batch":
            fpga["hls"]["max_batch"] = 0
        else:
            plan["relative_tolerance"] = float("nan") if what == "nan tolerance" else float("inf")
        files[plan_key] = json.dumps(plan).encode()
        expect = "refuse"
    elif kind == "delete":
        what = rng.choice(sorted(k for k in files if not k.endswith(".h")))
        del files[what]
    elif kind == "truncate":
        what = rng.choice(sorted(k for k in files if k.endswith((".so", ".onnx", ".json", ".npy"))))
        files[what] = files[what][: rng.randrange(max(1, len(files[what])))]
    else:
        plan = json.loads(files[plan_key])
        shape = [1, *plan["inputs"][0]["shape"][1:]]
        import io

        numeric = rng.random() < 0.5
        dtype = rng.choice(["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                            "float16", "float32", "float64"] if numeric else
                           ["complex64", "complex128", "<U3", "S3", "object", "datetime64[s]", "timedelta64[s]",
                            [("a", "<f4")]])
        with np.errstate(all="ignore"), warnings.catch_warnings():  # nan and 1e30 cast to integers
            warnings.simplefilter("ignore")
            # np.asarray: a scalar cast to object is a Python float, not an array
            array = np.asarray(rng.choice([np.zeros(shape), np.zeros([2, *shape[1:]]), np.zeros([3, 5]),
                                           np.zeros([0, *shape[1:]]), np.full(shape, np.nan), np.full(shape, 1e30),
                                           np.float64(1.0)]).astype(dtype), dtype=dtype)
        buffer = io.BytesIO()
        if rng.random() < 0.3:  # an .npz of it, by the input's name
            np.savez(buffer, **{plan["inputs"][0]["name"]: array}, allow_pickle=True)
        else:
            np.save(buffer, array, allow_pickle=True)
        data = buffer.getvalue()
        damage = rng.choice(["", "", "", "truncated", "empty", "not npy", "special"])
        files["x.npy"] = {"": data, "truncated": data[: rng.randrange(max(1, len(data)))], "empty": b"",
                          "not npy": b"not npy", "special": rng.choice(SPECIAL_FILES)}[damage]
        expect = "any" if numeric and damage == "" else "refuse"
        if rng.random() < 0.2:
            extra = rng.choice([["--seed", rng.choice(BAD_NUMBERS)], ["--batch", rng.choice(BAD_NUMBERS)]])
            expect = "refuse"
        what = f"input {array.dtype} {array.shape} {damage} {extra}"
        extra = [*extra, "--input", "x.npy"]
    command = rng.choice([["emulate", name, *extra], ["emulate", name, *extra], ["report", name], ["config", name]])
    if kind in ("input", "listed", "field"):
        command = ["emulate", name, *extra]
    return Case(f"build:{kind}:{what}"[:120], files, command, expect)


def run_case(case: Case, python: str = sys.executable) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="hetdeploy-fuzz-") as tmp:
        folder = Path(tmp) / "case"
        folder.mkdir()
        for name, data in case.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                path.write_bytes(data)
            elif data == "fifo":
                os.mkfifo(path)
            elif data == "folder":
                path.mkdir()
            else:
                path.symlink_to(data.removeprefix("link:"))
        before = {p: p.lstat().st_mtime_ns for p in folder.rglob("*")}
        try:
            proc = subprocess.run([python, "-m", "hetdeploy", *case.argv], cwd=folder, capture_output=True,
                                  text=True, errors="replace", timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Outcome(case, -1, "", f"hang (over {TIMEOUT_S} s)")
        # what the command may write: report DIR/report.html, build its -o folder (or DIR.failed)
        allowed = [folder / case.argv[1] / "report.html"] if case.argv[0] == "report" else []
        if case.argv[0] == "emulate":  # what a crashed C-simulation printed, kept beside its library
            allowed = list((folder / case.argv[1] / "hls").glob("*/csim_crash.log"))
        if case.argv[0] == "build":
            out = case.argv[case.argv.index("-o") + 1]
            allowed = [folder / out, folder / f"{out}.failed"]
        written = {p.name for p in Path(tmp).iterdir()} - {"case"} | {
            str(p.relative_to(folder)) for p in folder.rglob("*")
            if (p not in before or p.lstat().st_mtime_ns != before[p]) and p.is_file()
            and not any(p == a or p.is_relative_to(a) for a in allowed)}
        lines = proc.stderr.strip().splitlines()
        finding = None
        if proc.returncode < 0:
            finding = f"killed by signal {-proc.returncode}"
        elif "Traceback" in proc.stderr:
            finding = "traceback: " + (lines[-1] if lines else "")
        elif proc.returncode == 1 and len(lines) == 1 and re.match(r"hetdeploy: error: (hls4ml|g\+\+) failed .*; see ",
                                                                    lines[0]):
            finding = None  # a tool's failure on the unit, named with its log, as the project reports them
        elif proc.returncode not in (0, 2, 3):
            finding = f"exit {proc.returncode}: " + (lines[-1] if lines else "")
        elif proc.returncode == 2 and (len(lines) != 1 or not lines[0].startswith("hetdeploy: error:")):
            finding = f"not one error line: {lines[:3]}"
        elif written:
            finding = f"wrote {sorted(written)}"
        elif case.expect == "refuse" and proc.returncode != 2:
            finding = f"accepted (exit {proc.returncode}) an input it must refuse"
        elif case.expect == "pass" and proc.returncode != 0:
            finding = f"refused (exit {proc.returncode}) a valid input: " + (lines[-1] if lines else "")
        elif proc.returncode == 0 and case.argv[0] == "plan" and "estimated latency" not in proc.stdout:
            finding = "exit 0 without a plan"
        return Outcome(case, proc.returncode, proc.stderr, finding)


KINDS = ("model", "model-build", "board", "path", "option", "build")


def cases(kind: str, seed: int, count: int, build: Path | None = None) -> list[Case]:
    """``kind``: model (through plan), model-build (through build), board, path (special files as
    plan's paths), option (bad numbers for every numeric option), or build (damaging the build folder
    ``build``, bad inputs of every dtype to emulate)."""
    rng = random.Random(seed)
    make = {"model": model_case, "model-build": lambda r: model_case(r, "build"), "board": board_case,
            "path": path_case, "option": option_case, "build": lambda r: build_case(r, build)}[kind]
    return [make(rng) for _ in range(count)]


def base_build(folder: Path) -> Path:
    """The jet-tagger MLP built for the PYNQ-Z2's FPGA (support policy) into ``folder``/jet."""
    model = folder / "jet.onnx"
    onnx.save(networks.jet_tagger_mlp(), str(model))
    subprocess.run([sys.executable, "-m", "hetdeploy", "build", str(model), "--board", "pynq-z2", "--policy",
                    "support", "-o", str(folder / "jet"), "-q"], check=True, stdout=subprocess.DEVNULL)
    return folder / "jet"


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args.add_argument("--kind", choices=KINDS, default="model")
    args.add_argument("--cases", type=int, default=200)
    args.add_argument("--seed", type=int, default=0)
    args.add_argument("--jobs", type=int, default=1, help="cases run at once (each in a child process)")
    options = args.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hetdeploy-fuzz-base-"))
    build = base_build(work) if options.kind == "build" else None
    findings, refused, passed = 0, 0, 0
    with ThreadPoolExecutor(options.jobs) as pool:
        for index, outcome in enumerate(pool.map(run_case, cases(options.kind, options.seed, options.cases, build))):
            refused += outcome.code == 2
            passed += outcome.code in (0, 3)
            if outcome.finding:
                findings += 1
                print(f"{index:4d} {outcome.case.name:<40} {outcome.finding[:200]}", flush=True)
    print(f"{findings} finding(s) in {options.cases} {options.kind} case(s), seed {options.seed} "
          f"({refused} refused in one line, {passed} ran to a result)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
