"""Which gradient rules each attribution method applies, and which op types
every method passes through with their own gradient.

An attribution method is a gradient of the model's target output with some
op types' gradients replaced by a rule (an estimator of
`graph_override.estimators`, set on the frozen graph with
`graph_override.frozen.patch`), times the input or not:

| method | rules (op type -> estimator) | baseline |
|---|---|---|
| saliency, gradient_input, integrated_gradients, smoothgrad, grad_cam | none: the model's own gradient | IG only (zeros by default) |
| occlusion | none: no gradient (the model's outputs on occluded copies) | the occluded patches' value (zeros by default) |
| guided_backprop | Relu, Relu6, LeakyRelu -> guided_relu | no |
| deconvnet | Relu, Relu6, LeakyRelu -> deconv_relu | no |
| eps_lrp | the nonlinear ops -> eps_lrp(epsilon) | no |
| deeplift | the nonlinear ops -> deeplift_rescale | yes (zeros by default) |

The nonlinear ops (`NONLINEAR_OPS`) are Relu, Relu6, LeakyRelu, Elu, Selu,
Sigmoid, Tanh and Softplus. Any other op on the path from the input to the
output is either in `LINEAR_OPS`, whose own gradient is what every method
uses, or not covered: the coverage report (`graph_override.attribution.coverage`)
lists those before a run.

MaxPool keeps its gradient here (the gradient goes to the window's maximum),
as it does in DeepExplain. The references differ on it, and so do their
DeepLIFT numbers on a network with max pooling:

| library | MaxPool under DeepLIFT |
|---|---|
| graph_override | its gradient: dy to the argmax of the window of x |
| DeepExplain (Ancona et al.) | its gradient: only Relu, Elu, Sigmoid, Tanh and Softplus are overridden; Relu6, CRelu and Softsign raise a warning |
| Captum (`captum/attr/_core/deep_lift.py`, `maxpool`) | a rescale-like rule: the output difference max(y, y_ref) - y_ref and y - max(y, y_ref) is unpooled to the argmax positions of x and of the reference and divided by x - r (the gradient where abs(x - r) < 1e-10); measured with Captum 0.8.0 (tests/attribution/reference): it takes effect only where the pool's input does not come straight from a ReLU module, so a Conv, ReLU, MaxPool stack gets MaxPool's gradient there as here |
| SHAP DeepExplainer (`deep_tf.py`, `op_handlers["MaxPool"] = maxpool`) | the same cross-max rescale as Captum |

With the gradient, DeepLIFT's summation to delta holds exactly on networks
without MaxPool; with it, it holds only where each window's argmax is the same
for the input and the reference. Captum's and SHAP's rule keeps the summation
in more cases; DeepExplain's numbers and ours agree.

FusedBatchNorm(V3) is linear (an affine map of its input) only in inference
mode, ``is_training=False``, as in every frozen model; in training mode it
normalizes by the batch's own statistics, and DeepLIFT's batch of inputs and
references would mix them. Mul and RealDiv are listed because in a frozen graph
one operand is a constant (a folded batch norm, a scale); a product of two
activations is not linear, and every method then uses its plain gradient
(the convention of DeepExplain and Captum for ops they do not know).

Example:
  >>> from graph_override.attribution import method_table
  >>> method_table.rule_strings("eps_lrp", epsilon=0.01)[:2]
  ['Relu=eps_lrp:epsilon=0.01', 'Relu6=eps_lrp:epsilon=0.01']
  >>> method_table.METHODS["deeplift"].baseline
  True
"""

import dataclasses
import difflib
import types

from graph_override.errors import AttributionError

__all__ = [
    "LINEAR_OPS",
    "METHODS",
    "MethodSpec",
    "NONLINEAR_OPS",
    "RELU_OPS",
    "RIEMANN_RULES",
    "method_spec",
    "rule_strings",
]

# Integrated Gradients' Riemann rules (`methods.riemann`), Captum's names
RIEMANN_RULES = ("riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid")

RELU_OPS = ("Relu", "Relu6", "LeakyRelu")
NONLINEAR_OPS = RELU_OPS + ("Elu", "Selu", "Sigmoid", "Tanh", "Softplus")

LINEAR_OPS = frozenset({
    # products with weights
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv1D", "Conv2D",
    "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInputV2",
    "Einsum",
    # sums, differences, scaling by constants (see the module docstring)
    "BiasAdd", "Add", "AddV2", "AddN", "Sub", "Neg", "Mul", "RealDiv",
    # inference-mode batch normalization
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
    # pooling and reductions (MaxPool keeps its gradient: see above)
    "AvgPool", "AvgPool3D", "MaxPool", "MaxPoolV2", "MaxPool3D", "Mean", "Sum",
    # shape and data movement
    "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "Transpose",
    "Pad", "PadV2", "MirrorPad", "ConcatV2", "Concat", "Pack", "Unpack", "Split",
    "SplitV", "Slice", "StridedSlice", "Tile", "GatherV2", "GatherNd", "ResizeBilinear",
    "ResizeNearestNeighbor", "DepthToSpace", "SpaceToDepth", "SpaceToBatchND",
    "BatchToSpaceND", "ReverseV2", "Roll", "BroadcastTo", "EnsureShape", "Snapshot", "Cast",
    # running sums (the axis is an int input: no gradient path)
    "Cumsum",
    # TF1 tf.cond's routing: the gradient goes back along the branch taken
    # (a TF1 while loop's Enter/Exit/NextIteration are another matter:
    # `coverage` reports them)
    "Switch", "Merge",
    # no gradient path to the input, or the input itself
    "Placeholder", "PlaceholderWithDefault", "Const", "NoOp", "Shape",
    "StopGradient",
})


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """One attribution method.

    Attributes:
      name: its name, as `attribution.attribute` and ``--method`` take it.
      rules: op type -> (estimator name, parameters); the parameters given
        are defaults that `rule_strings` may override (epsilon).
      baseline: whether the method compares the input with a baseline
        (reference) input, zeros unless given.
      times_input: whether the map is the (rule) gradient times the input,
        or times (input - baseline).
      summary: one line for listings.
    """

    name: str
    rules: types.MappingProxyType
    baseline: bool
    times_input: bool
    summary: str

    @property
    def options(self):
        """The rule parameters `rule_strings` takes (e.g. ``("epsilon",)``);
        DeepLIFT's ``shared_reference`` is set by the engine from the baseline."""
        return tuple(sorted({k for _, params in self.rules.values() for k in params}))


def _spec(name, estimator, ops, params, baseline, times_input, summary, more=()):
    """A `MethodSpec`: `estimator` on `ops`, and each (estimator, ops) of
    `more` (DeepLIFT's MaxPool and Softmax rules), all with `params`."""
    rules = {op: (e, types.MappingProxyType(dict(params)))
             for e, group in ((estimator, ops),) + tuple(more) for op in group}
    return MethodSpec(name, types.MappingProxyType(rules), baseline, times_input, summary)


METHODS = types.MappingProxyType({s.name: s for s in (
    _spec("saliency", None, (), {}, False, False,
          "gradient of the target (absolute value by default; Simonyan et al., 2014)"),
    _spec("gradient_input", None, (), {}, False, True,
          "gradient times input (Shrikumar et al., 2016)"),
    _spec("integrated_gradients", None, (), {}, True, True,
          "path integral of the gradient from the baseline (Sundararajan et al., 2017)"),
    _spec("smoothgrad", None, (), {}, False, False,
          "gradient averaged over noisy copies of the input (Smilkov et al., 2017)"),
    _spec("grad_cam", None, (), {}, False, False,
          "ReLU of a layer's activations weighted by their mean gradient "
          "(Selvaraju et al., 2017)"),
    _spec("occlusion", None, (), {}, True, False,
          "fall of the target when a sliding patch is set to the baseline, averaged "
          "over the patches (Zeiler and Fergus, 2014)"),
    _spec("guided_backprop", "guided_relu", RELU_OPS, {}, False, False,
          "gradient passing only positive signals through ReLUs "
          "(Springenberg et al., 2015)"),
    _spec("deconvnet", "deconv_relu", RELU_OPS, {}, False, False,
          "ReLU backward passes positive gradients (Zeiler and Fergus, 2014)"),
    _spec("eps_lrp", "eps_lrp", NONLINEAR_OPS, {"epsilon": 1e-4}, False, True,
          "epsilon-LRP as a modified gradient times input (Bach et al., 2015; "
          "Ancona et al., 2018)"),
    _spec("deeplift", "deeplift_rescale", NONLINEAR_OPS, {"shared_reference": False}, True,
          True,
          "DeepLIFT, rescale rule, times (input - baseline) (Shrikumar et al., 2017)",
          more=(("deeplift_maxpool", ("MaxPool",)), ("deeplift_softmax", ("Softmax",)))),
)})


def method_spec(name):
    """The `MethodSpec` of `name`.

    Raises:
      AttributionError: no such method (the message suggests the nearest).
    """
    spec = METHODS.get(name) if isinstance(name, str) else None
    if spec is None:
        close = difflib.get_close_matches(str(name), list(METHODS), n=2, cutoff=0.5)
        raise AttributionError(
            "method=%r is not an attribution method.%s Methods: %s." % (
                name, (" Did you mean %s?" % " or ".join(repr(c) for c in close))
                if close else "", ", ".join(METHODS)))
    return spec


def rule_strings(method, **params):
    """The method's rules as ``frozen.patch`` rule strings, in op-type order.

    Args:
      method: a method name.
      **params: rule parameters overriding the defaults (e.g. ``epsilon``).

    Raises:
      AttributionError: unknown method, or a parameter the method's rules
        do not take.
    """
    spec = method_spec(method)
    unknown = set(params) - set(spec.options)
    if unknown:
        raise AttributionError(
            "method %r takes no rule parameter %s; it takes %s." % (
                method, ", ".join(sorted(unknown)),
                ", ".join(spec.options) or "none"))
    out = []
    for op, (estimator, defaults) in spec.rules.items():
        merged = dict(defaults, **params)
        text = ",".join("%s=%r" % kv for kv in sorted(merged.items()))
        out.append("%s=%s%s" % (op, estimator, ":" + text if text else ""))
    return out
