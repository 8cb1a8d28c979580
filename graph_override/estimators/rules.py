"""The TensorFlow ops of the attribution rules (guided_relu, deconv_relu,
eps_lrp, deeplift_rescale): gradients of elementwise activations that read
the op they differentiate, its type, its input x and its output y (and
LeakyRelu's alpha), as the rules of DeepExplain, Captum and SHAP do.

The records are in `graph_override.estimators.table`; a record's params hold
the op's type as ``activation`` and LeakyRelu's ``alpha``. The family
functions take them as keywords (the forward they build); a gradient
function registered by name reads them from the op (`op_params`).
"""

import numpy as np
import tensorflow as tf

from graph_override.errors import RuleError
from graph_override.estimators.ops import const, mask

__all__ = ["ACTIVATIONS", "RELUS", "SELU_ALPHA", "SELU_SCALE", "build", "check_op_type",
           "deconv", "derivative", "eps_lrp_multiplier", "forward", "guided", "op_params",
           "rescale_multiplier"]

ACTIVATIONS = ("Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus")
"""The op types eps_lrp and deeplift_rescale cover, in the table's order."""

RELUS = ("Relu", "Relu6", "LeakyRelu")
"""The op types guided_relu and deconv_relu cover."""

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
    return out


def derivative(op_type, x, y, alpha):
    """f'(x) of the activation, from x and y as TensorFlow's own gradient
    of that op computes it (ReluGrad, EluGrad, SeluGrad read y; Relu6 is 0 at
    0 and at 6; LeakyRelu is alpha at x <= 0; Selu is its scale at 0)."""
    one = const(1.0, x)
    if op_type == "Relu":
        return mask(y > const(0.0, y), x)
    if op_type == "Relu6":
        return mask(tf.logical_and(y > const(0.0, y), y < const(6.0, y)), x)
    if op_type == "LeakyRelu":  # alpha is a float32 attr, also on a float64 op
        slope = const(float(np.float32(alpha)), x)
        return tf.where(x > const(0.0, x), tf.ones_like(x), tf.fill(tf.shape(x), slope))
    if op_type == "Elu":  # EluGrad and SeluGrad: the y < 0 branch below 0 only
        return tf.where(y < const(0.0, y), y + one, tf.ones_like(y))
    if op_type == "Selu":
        return tf.where(y < const(0.0, y), y + const(SELU_SCALE * SELU_ALPHA, y),
                        tf.fill(tf.shape(y), const(SELU_SCALE, y)))
    if op_type == "Sigmoid":
        return y * (one - y)
    if op_type == "Tanh":
        return one - y * y
    if op_type == "Softplus":
        return tf.sigmoid(x)
    raise ValueError("no derivative for op type %r" % op_type)


def _positive_part(dy, g):
    """dy * g where dy > 0, else +0."""
    return tf.where(dy > const(0.0, dy), dy * g, tf.zeros_like(dy))


def guided(x, dy, params, y):
    """Guided backpropagation: the op's own gradient applied to max(dy, 0),
    dy * [dy > 0] * f'(x); for Relu dy * [dy > 0] * [y > 0]."""
    return _positive_part(dy, derivative(params["activation"], x, y, params["alpha"]))


def deconv(x, dy, params, y):  # pylint: disable=unused-argument
    """Deconvnet: dy * [dy > 0], whatever x."""
    return tf.where(dy > const(0.0, dy), dy, tf.zeros_like(dy))


def _finite(g):
    """g, with 0 where it is not finite (inf / inf, x = +-inf, NaN)."""
    return tf.where(tf.math.is_finite(g), g, tf.zeros_like(g))


def eps_lrp_multiplier(x, params, y):
    """y / (x + epsilon * s(x)), s(x) = +1 where x >= 0 else -1; 0 where
    that is not finite."""
    zero, one = const(0.0, x), const(1.0, x)
    s = tf.where(x >= zero, tf.fill(tf.shape(x), one), tf.fill(tf.shape(x), -one))
    return _finite(y / (x + const(params["epsilon"], x) * s))


def _halves(x, where):
    """N with x's batch (axis 0) holding 2N rows: RuleError now for a
    static odd batch, an Assert op (a tf.errors.InvalidArgumentError when
    run) for one unknown until then."""
    hint = ("deeplift_rescale needs the inputs and their references in one batch, "
            "[inputs; references] along axis 0 (tf.concat([x, baseline], 0))")
    if x.shape.rank == 0:
        raise RuleError("deeplift_rescale on %s: the input is a scalar, it has no batch "
                        "axis. %s" % (where, hint))
    rows = x.shape[0] if x.shape.rank is not None else None
    if rows is not None:
        if rows % 2:
            raise RuleError("deeplift_rescale on %s: the batch (axis 0) has %d rows, an "
                            "odd number. %s" % (where, rows, hint))
        return rows // 2
    rows = tf.shape(x, out_type=tf.int32)[0]
    even = tf.equal(tf.math.floormod(rows, 2), 0)
    check = tf.raw_ops.Assert(condition=even, data=[tf.constant(
        "deeplift_rescale on %s: the batch (axis 0) has an odd number of rows. %s"
        % (where, hint))], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(rows // 2)


def rescale_multiplier(x, params, y):
    """The DeepLIFT rescale multipliers of a batch [inputs; references]:
    m = (y[:N] - y[N:]) / (x[:N] - x[N:]) where |x[:N] - x[N:]| >= threshold
    (and is not 0), else f'(x[:N]); 0 where m is not finite. Both halves get
    m (concat([m, m])), as Captum's rule does."""
    where = "its input" if tf.executing_eagerly() else "op %r" % y.op.name
    n = _halves(x, where)
    x_in, x_ref, y_in, y_ref = x[:n], x[n:], y[:n], y[n:]
    delta_x, delta_y = x_in - x_ref, y_in - y_ref
    size = tf.abs(delta_x)
    big = tf.logical_and(size >= const(params["threshold"], x), size > const(0.0, x))
    ratio = delta_y / tf.where(big, delta_x, tf.ones_like(delta_x))
    m = _finite(tf.where(big, ratio, derivative(params["activation"], x_in, y_in,
                                                params["alpha"])))
    return tf.concat([m, m], axis=0)
