"""The TensorFlow ops of the attribution rules (guided_relu, deconv_relu,
eps_lrp, deeplift_rescale): gradients of elementwise activations that read
the op they differentiate, its type, its input x and its output y (and
LeakyRelu's alpha), as the rules of DeepExplain, Captum and SHAP do.

The records are in `graph_override.estimators.table`; a record's params hold
the op's type as ``activation`` and LeakyRelu's ``alpha``. The family
functions take them as keywords (the forward they build); a gradient
function registered by name reads them from the op (`op_params`).
"""

import contextlib
import threading

import numpy as np
import tensorflow as tf

from graph_override._tensorflow import compat
from graph_override._console import stderr
from graph_override.errors import RuleError
from graph_override.estimators.ops import const

__all__ = ["ACTIVATIONS", "POOL_ATTRS", "RELUS", "SELU_ALPHA", "SELU_SCALE", "batch_inputs",
           "build", "check_op_type", "deconv", "derivative", "eps_lrp_multiplier", "forward",
           "guided", "op_params", "rescale_multiplier", "separate_ops", "where"]

ACTIVATIONS = ("Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus")
"""The op types eps_lrp and deeplift_rescale cover, in the table's order."""

RELUS = ("Relu", "Relu6", "LeakyRelu")
"""The op types guided_relu and deconv_relu cover."""

POOL_ATTRS = {"MaxPool": ("ksize", "strides", "padding", "data_format", "explicit_paddings")}
"""The attrs a rule on a pooling op reads from it (`op_params`)."""

# tf.nn.selu's constants (tensorflow/core/kernels/relu_op_functor.h).
SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717

_FORWARD = {
    "Relu": lambda x, alpha: tf.nn.relu(x),
    "Relu6": lambda x, alpha: tf.nn.relu6(x),
    "LeakyRelu": lambda x, alpha: tf.nn.leaky_relu(x, alpha=alpha),
    "Elu": lambda x, alpha: tf.nn.elu(x),
    "Selu": lambda x, alpha: tf.nn.selu(x),
    "Sigmoid": lambda x, alpha: tf.sigmoid(x),
    "Tanh": lambda x, alpha: tf.tanh(x),
    "Softplus": lambda x, alpha: tf.nn.softplus(x),
}


def forward(x, params):
    """The activation ``params["activation"]`` on x: one op of that type."""
    return _FORWARD[params["activation"]](x, params["alpha"])


def build(x, params, grad_name, override):
    """The overrides family's build: the activation op under
    ``{activation: grad_name}``."""
    with override({params["activation"]: grad_name}):
        return forward(x, params)


def check_op_type(estimator, op_types, op_type, where, what=""):
    """RuleError unless `op_type` is one the rule covers; `where` names the
    op or node ("op 'dense/Relu'"), `what` the caller ("patch")."""
    if op_type not in op_types:
        raise RuleError(
            "%s%s on %s (op %s): %s is a gradient rule for %s only; it reads the "
            "op's type, its input and its output, so it has no meaning on %s. Map "
            "it to those op types (e.g. --map %s=%s) and leave %s its own gradient." % (
                what + ": " if what else "", estimator, where, op_type, estimator,
                ", ".join(op_types), op_type, op_types[0], estimator, op_type))


def op_params(estimator, op_types, params, op):
    """`params` with the op's type as ``activation`` (and its alpha for
    LeakyRelu); RuleError for an op type the rule does not cover. `op` is a
    tf.Operation or a view of one (`graph_override.legacy.LegacyOp`)."""
    check_op_type(estimator, op_types, op.type, "op %r" % op.name)
    out = dict(params, activation=op.type)
    if op.type == "LeakyRelu":
        out["alpha"] = float(op.get_attr("alpha"))
    if op.type in POOL_ATTRS:  # the pooling window, as MaxPoolGrad takes it
        for attr in POOL_ATTRS[op.type]:
            value = op.get_attr(attr)
            out[attr] = value.decode() if isinstance(value, bytes) else value
    return out


def derivative(op_type, x, y, alpha):
    """f'(x) of the activation, from x and y as TensorFlow's own gradient
    of that op computes it (ReluGrad, EluGrad, SeluGrad read y; Relu6 is 0 at
    0 and at 6; LeakyRelu is alpha at x <= 0; Selu is its scale at 0).

    Each is one or two passes over the tensor: the ReLUs' own gradient
    kernels applied to ones (1 * [mask] and 1 * alpha are exact), a select
    with a scalar branch for Elu and Selu."""
    one = const(1.0, x)
    if op_type in _RELU_GRADS:
        return _RELU_GRADS[op_type](tf.ones_like(x), x, y, alpha)
    if op_type == "Elu":  # EluGrad and SeluGrad: the y < 0 branch below 0 only
        return tf.where(y < const(0.0, y), y + one, one)
    if op_type == "Selu":
        return tf.where(y < const(0.0, y), y + const(SELU_SCALE * SELU_ALPHA, y),
                        const(SELU_SCALE, y))
    if op_type == "Sigmoid":
        return y * (one - y)
    if op_type == "Tanh":
        return one - y * y
    if op_type == "Softplus":
        return tf.sigmoid(x)
    raise ValueError("no derivative for op type %r" % op_type)


# dy * f'(x) of the ReLUs, each TensorFlow's one fused gradient kernel:
# ReluGrad is dy * [y > 0], Relu6Grad dy * [0 < y < 6] (0 < y < 6 exactly
# where 0 < x < 6), LeakyReluGrad dy where x > 0 else dy * alpha (alpha, a
# float32 attr, cast to the op's dtype). Each multiplies, so inf * 0 is NaN
# as in dy * mask.
_RELU_GRADS = {
    "Relu": lambda dy, x, y, alpha: tf.raw_ops.ReluGrad(gradients=dy, features=y),
    "Relu6": lambda dy, x, y, alpha: tf.raw_ops.Relu6Grad(gradients=dy, features=y),
    "LeakyRelu": lambda dy, x, y, alpha: tf.raw_ops.LeakyReluGrad(
        gradients=dy, features=x, alpha=float(np.float32(alpha))),
}


def deconv(x, dy, params, y):  # pylint: disable=unused-argument
    """Deconvnet: dy * [dy > 0], whatever x: +0 where dy <= 0 or is NaN.

    Two passes (a comparison and a select with a scalar 0). tf.nn.relu(dy)
    would be one, but it keeps -0 and NaN, where the rule gives +0."""
    return tf.where(dy > const(0.0, dy), dy, const(0.0, dy))


def guided(x, dy, params, y):
    """Guided backpropagation: the op's own gradient applied to max(dy, 0),
    dy * [dy > 0] * f'(x); for Relu dy * [dy > 0] * [y > 0]. The deconv
    rule's +0 where dy <= 0, then the op's fused gradient kernel: three
    passes."""
    return _RELU_GRADS[params["activation"]](deconv(x, dy, params, y), x, y, params["alpha"])


def _finite(g):
    """g, with +0 where it is not finite (inf / inf, x = +-inf, NaN)."""
    return tf.where(tf.math.is_finite(g), g, const(0.0, g))


def eps_lrp_multiplier(x, params, y):
    """y / (x + epsilon * s(x)), s(x) = +1 where x >= 0 else -1; 0 where
    that is not finite. epsilon * s(x) is +-epsilon exactly, so the
    denominator is x plus a select of two scalars: with the guard, six
    passes."""
    eps = params["epsilon"]
    shift = tf.where(x >= const(0.0, x), const(eps, x), const(-eps, x))
    return _finite(y / (x + shift))


def where(y):
    """The op a rule differentiates, for messages."""
    if tf.executing_eagerly():
        return "its input"
    if y.op.type == "Placeholder":  # the portable form's template, shared by nodes
        return "a node made portable"
    return "op %r" % y.op.name


def batch_inputs(x, site, shared, rule="deeplift_rescale"):
    """N, the inputs of x's batch (axis 0): [inputs; references] of 2N rows,
    or with `shared` [inputs; reference] of N + 1. RuleError now for a
    static batch that does not fit, an Assert op (a
    tf.errors.InvalidArgumentError when run) for one unknown until then.
    `site` names the op, `rule` the rule (DeepLIFT's rules share this)."""
    if shared:
        hint = ("%s(shared_reference=True) needs the inputs and then one "
                "reference in one batch, [inputs; reference] along axis 0 "
                "(tf.concat([x, baseline[None]], 0))" % rule)
        wrong = "fewer than 2 rows"
    else:
        hint = ("%s needs the inputs and their references in one batch, "
                "[inputs; references] along axis 0 (tf.concat([x, baseline], 0))" % rule)
        wrong = "an odd number of rows"
    if x.shape.rank == 0:
        raise RuleError("%s on %s: the input is a scalar, it has no batch "
                        "axis. %s" % (rule, site, hint))
    rows = x.shape[0] if x.shape.rank is not None else None
    if rows is None:
        rows = tf.shape(x, out_type=tf.int32)[0]
        fits = rows >= 2 if shared else tf.equal(tf.math.floormod(rows, 2), 0)
        check = tf.raw_ops.Assert(condition=fits, data=[tf.constant(
            "%s on %s: the batch (axis 0) has %s. %s" % (rule, site, wrong, hint))],
            summarize=1)
        with tf.control_dependencies([check]):
            rows = tf.identity(rows)
    elif (rows < 2) if shared else (rows % 2):
        raise RuleError("%s on %s: the batch (axis 0) has %d rows, %s. %s" % (
            rule, site, rows, "fewer than 2" if shared else "an odd number", hint))
    return _count_inputs(rows, shared)


def _count_inputs(rows, shared):
    """N of a batch of `rows` rows (an int or a scalar tensor)."""
    return rows - 1 if shared else rows // 2


_SMALLEST_NORMAL = {tf.float16: 2.0 ** -14, tf.bfloat16: 2.0 ** -126, tf.float32: 2.0 ** -126,
                    tf.float64: 2.0 ** -1022}


def _at_least(size, threshold):
    """size >= threshold and size > 0 (False for NaN), in one comparison
    where the threshold is a positive normal number of size's dtype (it
    rounds to 0 in float16 for the default 1e-10: size > 0 then)."""
    t = const(threshold, size)
    value = float(tf.get_static_value(t))
    if value >= _SMALLEST_NORMAL[size.dtype.base_dtype]:
        return size >= t
    if value == 0.0:
        return size > t
    return tf.logical_and(size >= t, size > const(0.0, size))


def rescale_multiplier(x, params, y, n=None):
    """The DeepLIFT rescale multipliers of a batch [inputs; references]:
    m = (y[:N] - y[N:]) / (x[:N] - x[N:]) where |x[:N] - x[N:]| >= threshold
    (and is not 0), else f'(x[:N]); 0 where m is not finite. Both halves get
    m (concat([m, m])), as Captum's rule does. With ``shared_reference`` the
    batch is [inputs; reference], N + 1 rows: the last row is r for every
    input (broadcast), and gets 0.

    The halves are views (a slice along axis 0 shares its buffer); the
    quotient is taken everywhere and the select keeps it only where |x - r|
    is big (elsewhere it may be inf or NaN, never used), so one select
    chooses between quotient and gradient and one more drops what is not
    finite. `n`: N, where the caller has checked the batch."""
    shared = params.get("shared_reference", False)
    if n is None:
        n = batch_inputs(x, where(y), shared)
    x_in, x_ref, y_in, y_ref = x[:n], x[n:], y[:n], y[n:]
    delta_x = x_in - x_ref
    big = _at_least(tf.abs(delta_x), params["threshold"])
    m = _finite(tf.where(big, (y_in - y_ref) / delta_x,
                         derivative(params["activation"], x_in, y_in, params["alpha"])))
    return tf.concat([m, tf.zeros_like(x_ref) if shared else m], axis=0)


# --- fused gradients ------------------------------------------------------
#
# eps_lrp's gradient is seven elementwise passes over the activation and
# deeplift_rescale's twelve; TensorFlow runs each op as its own kernel,
# reading and writing the whole tensor each time. Built into a graph (a
# tf.function, a FrozenFunction, a Session graph), float32 and float64 rules
# instead run as one function compiled by XLA (jit_compile), which fuses the
# passes into one loop: the same ops, so the same IEEE results bit for bit
# (XLA's CPU backend neither reassociates nor approximates without fast
# math, which TensorFlow leaves off; tests/test_estimator_rules.py checks
# every rule and op type on zeros, -0, ties, thresholds, subnormals, +-inf
# and NaN). On a whole MobileNetV2 at batch 32, epsilon-LRP went from 1.41x
# to 1.33x the plain gradient; the guided and deconvnet rules (three and two
# passes, the ReLUs' own kernels) were slower compiled (1.02x -> 1.19x: a
# compiled call costs more in the model than its passes save) and keep the
# separate ops (docs/benchmarks.md, section 7).
#
# Also kept separate: float16 and bfloat16 (XLA may compute a chain of ops in
# float32 and round once, where the kernels round after each op), eager
# calls (each new shape would be a compilation), gradients in a TF1
# while_loop or cond (v1 control flow does not carry a function call's
# inputs between its frames), and machines with a GPU (checked on CPU only).

_FUSED_RULES = ("eps_lrp", "deeplift_rescale")
_separate = threading.local()  # .rules: built from separate ops in this thread
_FUSED_DTYPES = (tf.float32, tf.float64)
# DeepLIFT's fallback derivative of Tanh (1 - y * y, which XLA contracts to
# a fused multiply-add) and of Softplus (a sigmoid, which XLA computes its own
# way) comes out an ulp apart compiled: those two keep the separate ops.
_UNFUSED = {("deeplift_rescale", "Tanh"), ("deeplift_rescale", "Softplus")}
_fused_functions = {}
FUSE = True
"""False: every rule's gradient is built from separate ops (read when a
gradient is built, so set it before)."""


def _gpus():
    """Whether TensorFlow sees a GPU (the fused functions' bits are checked
    on CPU only)."""
    if not hasattr(_gpus, "seen"):
        _gpus.seen = bool(tf.config.list_physical_devices("GPU"))
    return _gpus.seen


def _start_xla_quietly():
    """Whether XLA compiles here: one tiny function compiled once per
    process, eagerly (also while a graph is built), with file descriptor 2
    silenced where TF_CPP_MIN_LOG_LEVEL asks for quiet: XLA's first
    compilation in a process writes "Compiled cluster using XLA!" (and absl's
    pre-initialization notice) from native code, past that setting
    (`graph_override._console.stderr`). Where it fails, the rules keep separate ops."""
    if not hasattr(_start_xla_quietly, "works"):
        quiet = (stderr.native_stderr_silenced() if stderr.quiet_requested()
                 else contextlib.nullcontext())
        try:
            with compat.eager_scope(), quiet:
                tf.function(lambda t: t + 1.0, jit_compile=True)(tf.zeros([1]))
            _start_xla_quietly.works = True
        except (tf.errors.OpError, ValueError, NotImplementedError):
            _start_xla_quietly.works = False  # a TensorFlow built without XLA
    return _start_xla_quietly.works


@contextlib.contextmanager
def separate_ops(rules):
    """Within it, this thread builds the gradients of the rules named in
    `rules` from separate ops, not as one XLA-compiled function. The
    attribution fast mode traces its forward and backward pass in it: there
    Grappler optimizes the whole gradient with the model, and a compiled
    call inside it cost more than the passes it fuses (see
    `graph_override.attribution.compiled`)."""
    previous = getattr(_separate, "rules", frozenset())
    _separate.rules = previous | frozenset(rules)
    try:
        yield
    finally:
        _separate.rules = previous


def fused_gradient(spec, x, dy, params, y, plain):
    """`plain` ``(x, dy, params, y) -> dx`` run as one XLA-compiled function
    where that is exact and pays (see above), else None. DeepLIFT's checks of
    its batch run outside the compiled function (XLA drops an Assert)."""
    if (not FUSE or spec.name not in _FUSED_RULES or tf.executing_eagerly()
            or spec.name in getattr(_separate, "rules", ())
            or x.dtype.base_dtype not in _FUSED_DTYPES or dy.dtype != x.dtype
            or (spec.name, params["activation"]) in _UNFUSED or _gpus()
            or compat.in_v1_control_flow(x) or not _start_xla_quietly()):
        return None
    key = (spec.name, tuple(sorted(params.items())))
    function = _fused_functions.get(key)
    if function is None:
        def fused(x, dy, y):
            extra = {}
            if spec.name == "deeplift_rescale":  # checked outside, by _inputs
                extra["n"] = _count_inputs(tf.shape(x, out_type=tf.int32)[0],
                                           params["shared_reference"])
            return plain(x, dy, params, y, **extra)

        function = tf.function(fused, jit_compile=True, autograph=False,
                               reduce_retracing=True)
        _fused_functions[key] = function
    if spec.name == "deeplift_rescale":
        n = batch_inputs(x, where(y), params["shared_reference"])
        if isinstance(n, tf.Tensor):
            with tf.control_dependencies([n]):
                return function(x, dy, y)
    return function(x, dy, y)
