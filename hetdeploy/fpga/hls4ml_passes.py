"""What hetdeploy changes in hls4ml, through hls4ml's own extension points only.

hls4ml runs a model through flows (named lists of optimizer passes that require other flows); the
Vivado backend's default flow is ``vivado:ip``. ``register`` copies that flow and every flow it
requires under hetdeploy's names (``hetdeploy_vivado_ip`` ...), with thirteen passes changed, and
returns the names to hand hls4ml: ``Flows`` in the configuration for the conversion, and the
writer's flow for ``ModelGraph.apply_flow``. hls4ml's own flows stay as they were, so nothing
needs a lock and another user of hls4ml in the same process sees hls4ml unchanged.

The passes changed:
- ``fuse_batch_normalization`` merges only a bias (``FuseBiasOnly``);
- the Dense's and the convolutions' (Conv1D, Conv2D, and the pointwise ones hls4ml makes of a 1 x 1) config and
  call templates give a layer the plan folds under the
  xnor_popcount strategy (its layer config's ``HetdeployXnorPopcount``) hetdeploy's XNOR-popcount kernel,
  hls/xnor_popcount.h (``XnorPopcountConfig``, ``XnorPopcountCall``);
- ``vivado:merge_batch_norm_quantized_tanh`` is left out: its threshold is the input type's floor,
  and -bias / scale for a negative scale too (the comparison would have to turn around);
  ``rewrites.batchnorm_before_sign_as_threshold`` makes that step exact instead;
- ``vivado:distributed_arithmetic_codegen`` keeps the weights it consumes (``DistributedArithmeticKeepingWeights``).
And two passes are added at the start of the conversion: ``PReluWithSlope`` and ``ResizeHeightFirst``.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

# Where ``DistributedArithmeticKeepingWeights`` keeps a layer's constants (the layer attribute names).
DA_KEPT = {"weight": "hetdeploy_da_weight", "bias": "hetdeploy_da_bias"}
# The layer config key that gives a Dense the XNOR-popcount kernel (hls4ml sets it as the attribute XNOR_ATTRIBUTE),
# and the kernel's header, which the unit's project carries in firmware/nnet_utils
XNOR_CONFIG_KEY = "HetdeployXnorPopcount"
XNOR_ATTRIBUTE = "hetdeploy_xnor_popcount"
XNOR_HEADER = "xnor_popcount.h"
_PREFIX = "hetdeploy_"


_REGISTERING = threading.Lock()


def register() -> tuple[str, str]:
    """Register hetdeploy's passes and its copies of the Vivado backend's flows (once a process, whichever
    thread comes first); (the conversion's flow, the writer's flow)."""
    with _REGISTERING:
        return _register()


@functools.cache
def _register() -> tuple[str, str]:
    from hls4ml.backends import get_backend
    from hls4ml.backends.fpga.fpga_types import APTypeConverter
    from hls4ml.backends.vivado.passes.convolution_templates import (Conv1DConfigTemplate, Conv1DFunctionTemplate,
                                                                    Conv2DConfigTemplate, Conv2DFunctionTemplate)
    from hls4ml.backends.vivado.passes.core_templates import DenseConfigTemplate, DenseFunctionTemplate
    from hls4ml.backends.vivado.passes.pointwise import (PointwiseConv1DConfigTemplate,
                                                         PointwiseConv1DFunctionTemplate,
                                                         PointwiseConv2DConfigTemplate,
                                                         PointwiseConv2DFunctionTemplate)
    from hls4ml.backends.vivado.passes.distributed_arithmetic import DistributedArithmeticCodegen
    from hls4ml.model.flow import get_flow, register_flow
    from hls4ml.model.optimizer import OptimizerPass, register_pass
    from hls4ml.model.optimizer.passes.bn_fuse import FuseBatchNormalization
    from hls4ml.model.types import IntegerPrecisionType

    class FuseBiasOnly(FuseBatchNormalization):
        """hls4ml's fuse_batchnorm folds a BatchNormalization into the Dense or Conv before it whose result
        precision is "auto", keeping the weights' precision: a quantized layer's integer codes (2 bits)
        would then hold scaled weights. Every BatchNormalization hetdeploy leaves after a layer is one it
        kept on purpose (``rewrites.fold_batchnorm`` folds the others before hls4ml), so only a bias (a
        BatchNormalization of scale 1: hls4ml's form of the Add after a MatMul or Conv) merges. That leaves
        the weights as they are and gives the bias its own type; kept apart, it would round the layer's
        output twice and hold the bias in the model's default type."""

        def match(self, node) -> bool:
            return super().match(node) and bool(np.all(node.weights["scale"].data_unquantized == 1))

    class DistributedArithmeticKeepingWeights(DistributedArithmeticCodegen):
        """hls4ml's distributed_arithmetic pass writes a layer's weights and bias into da4ml's code and
        deletes them from the layer; ``write_arithmetic`` needs them: kept on the layer under DA_KEPT's
        names first."""

        def transform(self, model, node):
            for kind, kept in DA_KEPT.items():
                if node.attributes.get(kind) is not None:
                    node.set_attr(kept, np.array(node.attributes[kind].data, dtype=np.float64))
            return super().transform(model, node)

    class XnorPopcountConfig:
        """A layer config template of hls4ml's (Dense, Conv1D, Conv2D: each names a dense kernel); a layer given the
        XNOR-popcount kernel (XNOR_ATTRIBUTE, under hls4ml's resource strategy at a reuse factor dividing its
        inputs or a multiple of them) names it as its kernel instead of hls4ml's, and holds its weights as their
        sign bits (1: +1, 0: -1; the kernel reads a weight above 0 as +1), a bit each where hls4ml's type of -1
        and +1 takes two."""

        RESOURCE_KERNELS = ("using kernel = nnet::DenseResource_rf_leq_nin<",
                            "using kernel = nnet::DenseResource_rf_gt_nin_rem0<")

        def transform(self, model, node):
            if node.get_attr(XNOR_ATTRIBUTE, False):
                weights = node.get_weights("weight")
                if not np.all(np.abs(weights.data) == 1):
                    raise RuntimeError(f"layer {node.name}: the xnor_popcount kernel takes weights of -1 and +1")
                weights.data = (weights.data > 0).astype(weights.data.dtype)
                weights.update_precision(APTypeConverter().convert(IntegerPrecisionType(width=1, signed=False)))
            return super().transform(model, node)

        def format(self, node) -> str:
            text = super().format(node)
            if not node.get_attr(XNOR_ATTRIBUTE, False):
                return text
            kernel = next((k for k in self.RESOURCE_KERNELS if k in text), None)
            if kernel is None:
                raise RuntimeError(f"layer {node.name}: the xnor_popcount kernel replaces hls4ml's resource kernels, "
                                   f"neither of which its config names")
            return text.replace(kernel, "using kernel = nnet::DenseXnorPopcount<")

    class XnorPopcountCall:
        """A layer call template of hls4ml's; a layer given the XNOR-popcount kernel includes its header too."""

        def transform(self, model, node):
            done = super().transform(model, node)
            if node.get_attr(XNOR_ATTRIBUTE, False):
                node.set_attr("include_header", [*self.include_header, f"nnet_utils/{XNOR_HEADER}"])
            return done

    class ResizeHeightFirst(OptimizerPass):
        """hls4ml's ONNX Resize handler names a channels-last tensor's axes 1 and 2 width and height, the
        reverse of how its C++ walks the stream (rows of ``in_width`` values): put back, and the output
        sized again from them (``_prepare_for_hls4ml`` swapped the scales to match)."""

        def match(self, node) -> bool:
            return node.class_name == "Resize" and len(node.get_input_variable().shape) == 3 and \
                not node.get_attr("hetdeploy_height_first", False)

        def transform(self, model, node) -> bool:
            height, width, _ = node.get_input_variable().shape
            node.set_attr("in_height", height)
            node.set_attr("in_width", width)
            node.initialize()
            node.set_attr("hetdeploy_height_first", True)
            return False  # the graph's layers are the same

    class PReluWithSlope(OptimizerPass):
        """hls4ml 1.3's ONNX PRelu handler makes a plain Activation and loses the slope (the layer then fails
        in later passes): the PReLU layer its C++ needs, with the slope (a Constant layer's value, channels-last
        as the unit's tensors are after ``_sink_transposes``) one per value of a sample in stream order."""

        def match(self, node) -> bool:
            return node.class_name == "Activation" and node.get_attr("activation") == "PReLU"

        def transform(self, model, node) -> bool:
            slope = node.get_input_node(node.inputs[1])
            values = np.broadcast_to(np.asarray(slope.get_attr("value"), dtype=np.float64),
                                     [1, *node.get_input_variable().shape]).reshape(-1).copy()
            node.inputs = node.inputs[:1]  # as hls4ml's own passes take a Constant in: off the layer, then removed
            model.remove_node(slope)
            prelu = model.make_node("PReLU", node.name, {"activation": "prelu", "param_data": values},
                                    node.inputs, list(node.outputs))
            model.replace_node(node, prelu)
            return True

    replaced = {
        "fuse_batch_normalization": register_pass(_PREFIX + "fuse_bias_only", FuseBiasOnly),
        "vivado:merge_batch_norm_quantized_tanh": None,
        "vivado:distributed_arithmetic_codegen": register_pass(
            _PREFIX + "distributed_arithmetic_keeping_weights", DistributedArithmeticKeepingWeights),
    }
    xnor_templates = {XnorPopcountConfig: (DenseConfigTemplate, Conv1DConfigTemplate, Conv2DConfigTemplate,
                                           PointwiseConv1DConfigTemplate, PointwiseConv2DConfigTemplate),
                      XnorPopcountCall: (DenseFunctionTemplate, Conv1DFunctionTemplate, Conv2DFunctionTemplate,
                                         PointwiseConv1DFunctionTemplate, PointwiseConv2DFunctionTemplate)}
    for xnor, templates in xnor_templates.items():
        for template in templates:  # hls4ml's template, the XNOR-popcount kernel's change before it
            name = template().get_name()
            made = type(f"XnorPopcount{template.__name__}", (xnor, template), {})
            replaced[f"vivado:{name}"] = register_pass(_PREFIX + name, made())
    added = [register_pass(_PREFIX + "prelu_with_slope", PReluWithSlope),
             register_pass(_PREFIX + "resize_height_first", ResizeHeightFirst)]
    copies: dict[str, str] = {}

    def copy(name: str) -> str:
        """Register the copy of flow ``name`` (and of the flows it requires) once; its name."""
        if name not in copies:
            flow = get_flow(name)
            requires = [copy(r) for r in flow.requires]
            if not flow.requires:  # the first flow (qonnx's parsing): the added passes first
                optimizers = [*added, *_passes(flow.optimizers, replaced)]
            elif hasattr(flow, "_optimizer_func"):  # a DynamicFlow: the passes its backend lists when it runs
                optimizers = lambda flow=flow: _passes(flow.optimizers, replaced)  # noqa: E731
            else:
                optimizers = _passes(flow.optimizers, replaced)
            copies[name] = register_flow(_PREFIX + name.replace(":", "_"), optimizers, requires=requires)
        return copies[name]

    backend = get_backend("Vivado")
    return copy(backend.get_default_flow()), copy(backend.get_writer_flow())


def _passes(names: list[str], replaced: dict[str, str | None]) -> list[str]:
    """``names`` with each one ``replaced`` maps swapped for its replacement, or left out for None."""
    return [replaced.get(name, name) for name in names if replaced.get(name, name) is not None]
