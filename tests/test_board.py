import json
import os
from pathlib import Path

import numpy as np
import pytest

from hetdeploy.commands.cli import main
from hetdeploy.core.board import BOARDS_DIR, available_boards, load_board
from hetdeploy.core.errors import UserError
from hetdeploy.core.graph import Node

PYNQ = (load_board("pynq-z2").path)


def board_text():
    with open(PYNQ) as f:
        return f.read()


def write(tmp_path, text):
    path = tmp_path / "custom.yaml"
    path.write_text(text)
    return path


def test_pynq_z2_figures():
    board = load_board("pynq-z2")
    fpga = board.device("fpga")
    assert fpga.kind == "fpga" and fpga.part == "xc7z020clg400-1" and fpga.clock_mhz == 100
    assert fpga.resources == {"lut": 53200, "ff": 106400, "bram18": 280, "dsp": 220, "uram": 0}
    cpu = board.device("arm_cpu")
    assert cpu.kind == "cpu" and cpu.ops is None
    assert [d.name for d in board.devices] == ["fpga", "arm_cpu"]  # preference order
    assert {(link.source, link.target) for link in board.links} == {("arm_cpu", "fpga"), ("fpga", "arm_cpu")}


def test_utilisation_caps_bound_the_budget_per_resource(tmp_path):
    text = (BOARDS_DIR / "pynq-z2.yaml").read_text()
    assert "    reserve_fraction: 0.1" in text
    (tmp_path / "capped.yaml").write_text(text.replace(
        "    reserve_fraction: 0.1", "    reserve_fraction: 0.1\n    utilisation: {lut: 0.7, ff: 0.5, dsp: 0.95}"))
    fpga = load_board(str(tmp_path / "capped.yaml")).device("fpga")
    # the smaller of 1 - reserve and the cap: LUT and FF capped, DSP and BRAM18 at the reserve
    assert fpga.budget() == {"lut": 37240, "ff": 53200, "bram18": 252, "dsp": 198, "uram": 0}
    (tmp_path / "bad.yaml").write_text(text.replace(
        "    reserve_fraction: 0.1", "    reserve_fraction: 0.1\n    utilisation: {lut: 1.5}"))
    with pytest.raises(UserError, match=r"line \d+: devices\[1\]\.utilisation\.lut: expected a fraction above 0 and at most"):
        load_board(str(tmp_path / "bad.yaml"))


def test_board_by_path_equals_by_name():
    assert load_board(PYNQ).devices == load_board("pynq-z2").devices


def test_op_limits():
    fpga = load_board("pynq-z2").device("fpga")
    conv = Node("c", "Conv", ["x"], ["y"], attrs={"kernel_shape": [3, 3], "group": 1}, constants={1: "w"},
                input_shapes=[[1, 3, 8, 8]], output_shapes=[[1, 4, 8, 8]])
    assert fpga.why_not(conv) is None
    assert fpga.pe_for(conv) == "conv"
    # past hls4ml's kernels, grouped and dilated: the engine's alone (its engine_conv PE)
    big = Node("c", "Conv", ["x"], ["y"], attrs={"kernel_shape": [9, 9]}, constants={1: "w"},
               input_shapes=[[1, 3, 8, 8]], output_shapes=[[1, 4, 1, 1]])
    grouped = Node("c", "Conv", ["x"], ["y"], attrs={"kernel_shape": [3, 3], "group": 2}, constants={1: "w"},
                   input_shapes=[[1, 4, 8, 8]], output_shapes=[[1, 8, 8, 8]])
    dilated = Node("c", "Conv", ["x"], ["y"], attrs={"kernel_shape": [3, 3], "dilations": [2, 2]}, constants={1: "w"},
                   input_shapes=[[1, 3, 8, 8]], output_shapes=[[1, 4, 4, 4]])
    for node in (big, grouped, dilated):
        assert fpga.why_not(node) is None and fpga.pe_for(node) == "engine_conv"
    assert fpga.pes["engine_conv"].engine == "engine"
    conv3d = Node("c", "Conv", ["x"], ["y"], attrs={"kernel_shape": [3, 3, 3]}, constants={1: "w"},
                  input_shapes=[[1, 3, 8, 8, 8]], output_shapes=[[1, 4, 6, 6, 6]])
    assert "3-D input" in fpga.why_not(conv3d)
    matmul3 = Node("m", "MatMul", ["x"], ["y"], constants={1: "w"}, input_shapes=[[1, 4, 8]], output_shapes=[[1, 4, 2]])
    assert "rank" in fpga.why_not(matmul3)
    assert "LRN" in fpga.why_not(Node("l", "LRN", ["x"], ["y"], input_shapes=[[1, 4, 8, 8]]))


def test_an_lrn_the_top_cannot_write_stays_off_the_fpga():
    """The KV260's top computes AlexNet's LRN; an LRN of an even size (onnxruntime's reference takes odd ones
    only) or of an infinite or NaN attribute (a C++ literal the top would be given) is not the FPGA's, the
    limit named; the PYNQ-Z2's FPGA runs none."""
    lrn = lambda **attrs: Node("l", "LRN", ["x"], ["y"], attrs=attrs, input_shapes=[[1, 4, 8, 8]],  # noqa: E731
                               output_shapes=[[1, 4, 8, 8]])
    fpga = load_board("kv260").device("fpga")
    assert fpga.why_not(lrn(size=5, alpha=1e-4, beta=0.75, bias=1.0)) is None
    assert fpga.pe_for(lrn(size=5, alpha=1e-4, beta=0.75, bias=1.0)) == "lrn"
    assert "size=4" in fpga.why_not(lrn(size=4, alpha=1e-4))
    assert fpga.why_not(lrn(size=5, alpha=float("inf"))) == "attribute alpha is inf, not a finite number"
    assert "beta is nan" in fpga.why_not(lrn(size=5, beta=float("nan")))
    assert "does not list LRN" in load_board("pynq-z2").device("fpga").why_not(lrn(size=5))


def test_a_node_goes_to_the_first_pe_that_runs_it_within_the_pes_limits():
    """hls4ml's pooling takes a MaxPool whose strides are its kernel; the top's window PE takes ResNet's
    stem (kernel 3, stride 2, padding 1), a 1-D one, and a global average over more than 8 x 8."""
    fpga = load_board("pynq-z2").device("fpga")
    pool = lambda attrs, shape=(1, 4, 8, 8): Node("p", "MaxPool", ["x"], ["y"], attrs=attrs,  # noqa: E731
                                                   input_shapes=[list(shape)], output_shapes=[[1, 4, 4, 4]])
    assert fpga.pe_for(pool({"kernel_shape": [2, 2], "strides": [2, 2]})) == "pool"
    stem = pool({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    assert fpga.why_not(stem) is None and fpga.pe_for(stem) == "window"
    assert fpga.pe_for(pool({"kernel_shape": [2], "strides": [2]}, (1, 4, 8))) == "window"
    gap = lambda side: Node("g", "GlobalAveragePool", ["x"], ["y"], input_shapes=[[1, 4, side, side]],  # noqa: E731
                            output_shapes=[[1, 4, 1, 1]])
    assert (fpga.pe_for(gap(8)), fpga.pe_for(gap(12))) == ("pool", "window")
    # an average over padding hls4ml counts as zeros: its pool's where ONNX counts it too, else the top's
    average = lambda **attrs: Node("a", "AveragePool", ["x"], ["y"], attrs={"kernel_shape": [3, 3], **attrs},  # noqa: E731
                                   input_shapes=[[1, 4, 8, 8]], output_shapes=[[1, 4, 8, 8]])
    assert fpga.pe_for(average(pads=[1, 1, 1, 1], count_include_pad=1)) == "pool"
    assert fpga.pe_for(average(pads=[1, 1, 1, 1])) == "window"
    assert fpga.pe_for(average(kernel_shape=[9, 9])) == "window"
    assert fpga.pes["window"].engine == "top" and fpga.pes["pool"].engine == "hls4ml"
    assert "3-D input" in fpga.why_not(pool({"kernel_shape": [2, 2, 2]}, (1, 4, 8, 8, 8)))
    with_indices = Node("p", "MaxPool", ["x"], ["y", "i"], attrs={"kernel_shape": [2, 2], "strides": [2, 2]},
                        input_shapes=[[1, 4, 8, 8]], output_shapes=[[1, 4, 4, 4], [1, 4, 4, 4]])
    assert fpga.why_not(with_indices) == "2 outputs: an FPGA unit writes one"


def test_a_quant_of_one_scale_and_an_integer_zero_point_over_a_map_goes_to_the_tops_quantizer():
    """onnxruntime's activation quantizer (a float scale, a zero point), over a map or a flat vector: the top's quant
    PE; one whose zero point is no integer (integer_constants) or of a scale per channel (scalar_constants): hls4ml's
    elementwise PE."""
    fpga = load_board("kv260").device("fpga")

    def quant(scale=0.0105, zero_point=3.0, shape=(1, 8, 4, 4)):
        shapes = {1: [] if isinstance(scale, float) else [8], 2: [], 3: []}
        scalars = {k: v for k, v in ((1, scale), (2, zero_point), (3, 8.0)) if isinstance(v, float)}
        return Node("q", "Quant", ["x"], ["y"], input_shapes=[list(shape)], output_shapes=[list(shape)],
                    constants={1: "s", 2: "z", 3: "b"}, constant_shapes=shapes, scalars=scalars)

    assert fpga.pe_for(quant()) == "quant" and fpga.pes["quant"].engine == "top"
    assert fpga.pe_for(quant(zero_point=2.5)) == "elementwise"
    assert fpga.pe_for(quant(scale=[0.01] * 8)) == "elementwise"
    assert fpga.pe_for(quant(shape=(1, 8))) == "quant"


def test_a_selu_of_other_constants_than_onnxs_defaults_stays_off_the_fpga():
    """hls4ml's ONNX front end drops Selu's alpha and gamma and computes ONNX's defaults: onnx's test_selu (alpha 2,
    gamma 3) built for the FPGA C-simulated 5.9 off (benchmarks/onnx_node_models.py --build). Every shipped FPGA
    takes a Selu of the defaults only, given or left out."""
    selu = lambda **attrs: Node("s", "Selu", ["x"], ["y"], attrs=attrs, input_shapes=[[1, 4]],  # noqa: E731
                                output_shapes=[[1, 4]])
    for name in available_boards():
        fpga = next((d for d in load_board(name).devices if d.kind == "fpga"), None)
        if fpga is None:
            continue
        assert fpga.why_not(selu()) is None
        defaults = {"alpha": float(np.float32(1.6732632423543772)), "gamma": float(np.float32(1.0507009873554805))}
        assert fpga.why_not(selu(**defaults)) is None
        assert "alpha=2.0" in fpga.why_not(selu(alpha=2.0, gamma=3.0))
        assert "gamma=3.0" in fpga.why_not(selu(gamma=3.0))


def test_unknown_board_name():
    with pytest.raises(UserError, match="unknown board 'pynq-z9'.*pynq-z2"):
        load_board("pynq-z9")


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("    clock_mhz: 100 ", "    clock_hz: 100 ", r"line \d+: devices\[1\]\.clock_hz: unknown key 'clock_hz'"),
        ("    clock_mhz: 100 ", "    clock_mhz: -100 ", r"line \d+: devices\[1\]\.clock_mhz: expected a positive number from 1e-15 to 1e18, got -100"),
        ("    invocation_overhead_s: 9.0e-4", "    invocation_overhead_s: .inf",
         r"devices\[1\]\.invocation_overhead_s: expected a number >= 0 up to 1e18, got inf"),
        ("    clock_mhz: 100 ", "    clock_mhz: 5e-324 ", r"devices\[1\]\.clock_mhz: expected a positive number from 1e-15"),
        ("    clock_mhz: 100 ", "    clock_mhz: " + "9" * 400 + " ",
         r"devices\[1\]\.clock_mhz: expected a positive number from 1e-15 to 1e18, got 9{57}\.\.\.$"),
        ("    kind: fpga", "    kind: tpu", r"devices\[1\]\.kind: expected one of cpu, gpu, fpga, got 'tpu'"),
        ("{from: arm_cpu, to: fpga,", "{from: arm_cpu, to: dsp0,", r"links\[0\]\.to: link names device 'dsp0'"),
        ("bandwidth_bytes_per_s: 1.2e+9, latency_s: 2.0e-5}\n  - {from: fpga",
         "bandwidth_bytes_per_s: -5.0, latency_s: 9.4e-4}\n  - {from: fpga",
         r"links\[0\]\.bandwidth_bytes_per_s: expected a positive number from 1e-15 to 1e18, got -5\.0"),
        ("bandwidth_bytes_per_s: 1.2e+9}", "bandwidth_bytes_per_s: 1.2e+9, ports: 6}",
         r"devices\[1\]\.memory\.ports: expected a whole number of ports from 1 to 5, got 6"),
        ("bandwidth_bytes_per_s: 2.1e+9}", "bandwidth_bytes_per_s: 2.1e+9, ports: 2}",
         r"devices\[0\]\.memory\.ports: only an fpga device's cores master the DDR through its ports"),
        ("      Relu: {dtypes: [float32]}", "      Rleu: {dtypes: [float32]}", r"devices\[1\]\.ops\.Rleu: unknown ONNX op 'Rleu'"),
        ("limits: {Conv: {max_kernel: 7,", "limits: {Conv: {max_kernel: seven,",
         r"pes\.conv\.limits\.Conv\.max_kernel: expected a positive integer"),
        ("    part: xc7z020clg400-1\n", "", r"devices\[1\]: missing key 'part' \(required for an fpga device\)"),
        ("  - {from: fpga, to: arm_cpu,", "  - {from: fpga, to: fpga,",
         r"links: no link from fpga to arm_cpu; every device exchanges data with the host \(arm_cpu\)"),
        ("{conv: 0.15, dense: 0.058,", "{conv: 1.5, dense: 0.058,",
         r"devices\[0\]\.compute\.efficiency\.conv: expected a number above 0"),
        ("      dtype: float32\n", "      dtype: int8\n",
         r"devices\[0\]\.compute\.peak_ops_per_s: no peak for compute\.dtype 'int8'"),
        ("    clock_mhz: 100 ", "    compute: {per_op_s: 1.0e-7}\n    clock_mhz: 100 ",
         r"devices\[1\]\.compute: an FPGA's time comes from its execution units' estimates at its clock_mhz"),
        ("      dtype: float32\n", "      dtpye: float32\n", r"devices\[0\]\.compute\.dtpye: unknown key 'dtpye'"),
        ("preference: [fpga, arm_cpu]", "host: fpga\npreference: [fpga, arm_cpu]",
         r"line \d+: host: the host must be a device of kind cpu; got 'fpga'"),
        ("    invocation_overhead_s: 9.0e-4\n", "", r"devices\[1\]: missing key 'invocation_overhead_s'"),
        ("      dense: {ops: [Gemm, MatMul],", "      dense: {ops: [Gemm],",
         r"devices\[1\]\.ops\.MatMul: no PE in devices\[1\]\.pes runs MatMul"),
        # a PE's own limits, and who implements its ops
        ("limits: {MaxPool: {spatial_dims", "limits: {Conv: {spatial_dims",
         r"pes\.pool\.limits\.Conv: 'Conv' is not in this PE's ops"),
        ("GlobalAveragePool: {spatial_dims: [2], max_kernel: 8}", "GlobalAveragePool: {max_kernal: 8}",
         r"pes\.pool\.limits\.GlobalAveragePool\.max_kernal: unknown key 'max_kernal'"),
        ("window: {ops: [MaxPool, AveragePool, GlobalAveragePool]",
         "window: {ops: [MaxPool, AveragePool, GlobalAveragePool, Relu]",
         r"pes\.window\.ops\[3\]: 'Relu' is not implemented by the top engine"),
        ("engine_conv: {ops: [Conv], fuse: [BatchNormalization, Relu, Clip]",
         "engine_conv: {ops: [Conv], fuse: [BatchNormalization, Relu, Sigmoid]",
         r"pes\.engine_conv: the engine computes Conv, Gemm, MatMul and fuses BatchNormalization, Relu, Clip after"),
        ("SpaceToDepth, Slice], engine: top}", "SpaceToDepth, Slice]}",
         r"pes\.data\.ops\[0\]: 'Flatten' is not implemented by the hls4ml engine; the top implements Flatten"),
        ("GlobalAveragePool], fuse: [], engine: top}", "GlobalAveragePool], fuse: [Relu], engine: top}",
         r"pes\.window\.fuse: a PE the top implements fuses nothing"),
        ("GlobalAveragePool], fuse: [], engine: top}", "GlobalAveragePool], fuse: [Reshape], engine: top}",
         r"pes\.window\.fuse: a PE the top implements fuses nothing but Relu after Add or BatchNormalization, and "
         r"relayouts after relayouts"),
        ("GlobalAveragePool], fuse: [], engine: top}", "GlobalAveragePool], fuse: [], engine: vivado}",
         r"pes\.window\.engine: expected one of hls4ml, top, engine, got 'vivado'"),
        ("      pool: {ops: [MaxPool,", "      pool: {ops: [MaxPool, LRN,", r"pes\.pool\.ops\[1\]: 'LRN' is not in this device's ops"),
        # names reach C++, Tcl and scripts: nothing but identifiers and part numbers gets through
        ("      pool: {ops:", '      "pool\\n system(\\"touch /tmp/x\\");": {ops:', r"pes: PE kind 'pool\\n system"),
        ("    part: xc7z020clg400-1", "    part: 'xc7z020} [exec touch /tmp/x] {'",
         r"devices\[1\]\.part: expected an FPGA part number"),
        ("  - name: fpga", "  - name: 'fpga`rm -rf x`'", r"devices\[1\]\.name: expected a name of letters"),
        ("name: pynq-z2", "name: 'pynq\\n# evil'", r"line \d+: name: expected a name of letters"),
        # what the fuzzer found accepted: an attribute's allowed values as a scalar, an op fused twice
        ("attributes: {auto_pad: [NOTSET]}", "attributes: {auto_pad: NOTSET, dilations: 1}",
         r"ops\.Conv\.attributes: expected a mapping of attribute name to a list of its allowed values"),
        ("fuse: [BatchNormalization, Relu,", "fuse: [BatchNormalization, Relu, Relu,",
         r"pes\.conv\.fuse: expected a list of ONNX op names, each once"),
        ("constant_range: {3: [1, 32]}", "constant_range: {3: [32, 1]}",
         r"constant_range: expected a mapping of input index to \[lowest, highest\], two numbers in order"),
        ("preference: [fpga, arm_cpu]", "preference: [fpga, fpga, arm_cpu]", r"preference: expected a list of device names, each once"),
        ("    board_part: tul.com.tw:pynq-z2:part0:1.0", "    board_part: 'x [exec id]'",
         r"devices\[1\]\.board_part: expected a Vivado board part"),
        ("    clock_mhz: 650", "    clock_mhz: 650\n    board_part: tul.com.tw:pynq-z2:part0:1.0",
         r"devices\[0\]\.board_part: only an fpga device sits on a Vivado board part"),
        ("    hls_tool: vitis_hls ", "    hls_tool: vitis-hls ",
         r"devices\[1\]\.hls_tool: expected one of vitis_hls, vivado_hls"),
        ("    clock_mhz: 650", "    clock_mhz: 650\n    hls_tool: vivado_hls",
         r"devices\[0\]\.hls_tool: only an fpga device is synthesised by an HLS tool"),
        # the engine pinned: an FPGA's, its values a cycle a power of two up to a word's
        ("    clock_mhz: 650", "    clock_mhz: 650\n    engine: {lanes: 32, values: 4}",
         r"devices\[0\]\.engine: only an fpga device has the layer-sequential engine"),
        ("    hls_tool: vitis_hls ", "    hls_tool: vitis_hls\n    engine: {lanes: 32, values: 3}\n   ",
         r"devices\[1\]\.engine\.values: expected one of 1, 2, 4, 8, 16, got 3"),
        ("    hls_tool: vitis_hls ", "    hls_tool: vitis_hls\n    engine: {lanes: 32}\n   ",
         r"devices\[1\]\.engine: missing key 'values'"),
    ],
)
def test_bad_board_files_name_file_line_and_key(tmp_path, old, new, expected):
    text = board_text()
    assert old in text
    path = write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(UserError, match=expected) as info:
        load_board(str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text, expected", [
    # a kilobyte that would expand to gigabytes
    ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"{chr(98 + k)}: &{chr(98 + k)} [*{chr(97 + k)}, *{chr(97 + k)}, "
                                                        f"*{chr(97 + k)}, *{chr(97 + k)}]\n" for k in range(20)),
     r"line 2: not valid YAML \(aliases \(\*name\) are not allowed\)"),
    ("name: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply to be a board file"),
    ("name: !custom x\n", r"line 1: not valid YAML \(could not determine a constructor for the tag '!custom'\)"),
])
def test_hostile_yaml_is_one_line_and_quick(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(UserError, match=expected):
        load_board(str(path))


@pytest.mark.parametrize("text, expected", [
    ("name: x\n? [a, b]\n: 1\n", r"custom\.yaml: line 2: \?: a key must be a name, not a sequence"),
    ("name: x\ndevices:\n  - {? {a: 1} : 2}\n", r"line 3: devices\[0\]\.\?: a key must be a name, not a mapping"),
])
def test_a_list_or_mapping_as_a_key_is_one_line(tmp_path, text, expected):
    with pytest.raises(UserError, match=expected):
        load_board(str(write(tmp_path, text)))


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/null"])
def test_a_board_path_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, special):
    """A pipe used to block `plan --board` until killed; a device reads forever or as nothing."""
    path = tmp_path / "board.yaml"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(special)
    with pytest.raises(UserError, match=r"board\.yaml: is not a regular file \(a pipe, socket or device\); give "
                                        r"the board file as a file"):
        load_board(str(path))


def test_invalid_yaml_names_line(tmp_path):
    path = write(tmp_path, "name: x\ndevices: [\n")
    with pytest.raises(UserError, match=r"custom\.yaml: line \d+: not valid YAML"):
        load_board(str(path))


def test_boards_command_json(capsys):
    assert main(["boards", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [b["name"] for b in listed] == available_boards()
    pynq = next(b for b in listed if b["name"] == "pynq-z2")
    fpga = next(d for d in pynq["devices"] if d["name"] == "fpga")
    assert fpga["kind"] == "fpga" and fpga["part"] == "xc7z020clg400-1" and fpga["resources"]["dsp"] == 220
    assert fpga["hls_tool"] == "vitis_hls"
    assert pynq["host"] == "arm_cpu" and [d["name"] for d in pynq["devices"]] == ["fpga", "arm_cpu"]
    cpu = next(d for d in pynq["devices"] if d["name"] == "arm_cpu")
    assert cpu["cores"] == 2 and cpu["clock_mhz"] == 650 and cpu["peak_ops_per_s"]["float32"] == 5.2e9
    assert cpu["memory_bytes"] == 512 * 2**20 and "part" not in cpu


def test_boards_command_says_what_each_cpu_and_gpu_is(capsys):
    assert main(["boards"]) == 0
    listed = capsys.readouterr().out
    assert "arm_cpu    cpu, 2x ARM Cortex-A9 at 650 MHz (NEON), runs onnxruntime; 5.2 Gop/s float32 peak; " \
           "0.5 GiB at 2.1 GB/s  (host)" in listed
    assert "gpu        gpu, NVIDIA RTX A6000 (48 GB), onnxruntime's CUDA execution provider; 38.7 Top/s" in listed


def test_board_names_ignore_case_and_a_near_miss_is_suggested():
    assert load_board("PYNQ-Z2").name == "pynq-z2"
    with pytest.raises(UserError, match="unknown board 'pynqz2'; did you mean 'pynq-z2'?"):
        load_board("pynqz2")


def test_an_hls4ml_pe_takes_tensors_of_rank_4_at_most_and_the_tops_any():
    """PyTorch's 3-D PReLU and BatchNorm3d exports that the onnx package ships (5-D tensors): hls4ml's ONNX front
    end (qonnx's channels-last conversion) stops on a rank-5 tensor, so no hls4ml PE takes the PRelu, and the
    reason names it; the top's affine PE (hetdeploy's own C++) takes the BatchNormalization."""
    import onnx as onnx_package

    from hetdeploy.intake.model import load_model

    data = Path(onnx_package.__file__).parent / "backend" / "test" / "data" / "pytorch-converted"
    fpga = load_board("pynq-z2").device("fpga")
    (prelu,) = load_model(data / "test_PReLU_3d" / "model.onnx").graph.nodes
    assert fpga.pe_for(prelu) is None and "rank-5 tensor: hls4ml's ONNX front end" in fpga.why_not(prelu)
    (norm,) = load_model(data / "test_BatchNorm3d_eval" / "model.onnx").graph.nodes
    assert fpga.pe_for(norm) == "affine" and fpga.why_not(norm) is None
