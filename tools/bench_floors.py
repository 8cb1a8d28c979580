"""The floor of an exact epsilon-LRP rule, timed by section 7
(tools/bench_attribution.py) beside the methods.

An exact epsilon-LRP rule reads the op's input x (Relu6's y does not give x
above 6), so x stays alive into the backward pass, Relu6 cannot write its
output over it, and TensorFlow cannot fuse the op into the convolution before
it. The two rules here do only that: dy * x as one multiply that writes into
dy's buffer (the cheapest rule that keeps x), and as one XLA-compiled call,
which returns a new buffer as the compiled epsilon-LRP rule does. Their maps
mean nothing; their time is what any rule keeping x costs on the machine
before its arithmetic. They are gradient functions of the user's own kind,
named ``bench_floors:FUNCTION`` in the rules (tools/ is on the child's path).
"""

from graph_override.estimators.attribution_ops import ACTIVATIONS  # the op types epsilon-LRP covers

_COMPILED = {}


def keep_input(op, dy):
    """A gradient function: dy * x, one multiply."""
    return dy * op.inputs[0]


def keep_input_compiled(op, dy):
    """A gradient function: dy * x in one XLA-compiled call."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if "f" not in _COMPILED:
        _COMPILED["f"] = tf.function(lambda g, x: g * x, jit_compile=True,
                                     autograph=False, reduce_retracing=True)
    return _COMPILED["f"](dy, op.inputs[0])




def floor_rules(function):
    """Rule strings mapping every activation epsilon-LRP covers to `function`
    of this module."""
    return ["%s=bench_floors:%s" % (op, function) for op in ACTIVATIONS]


FLOORS = {"floor: dy * x (keeps x)": floor_rules("keep_input"),
          "floor: dy * x compiled (keeps x, new buffer)": floor_rules("keep_input_compiled")}
"""Section 7's rows: label -> the rules of the plain gradient's function."""


def keep_layer_input(op, dy):
    """A gradient function for a layer op (Conv2D, DepthwiseConv2dNative,
    MatMul): its own input gradient times the op's input x, so x stays alive
    into the backward pass as every LRP layer rule keeps it."""
    from graph_override._tensorflow import compat  # pylint: disable=import-outside-toplevel
    grads = list(compat.lookup_gradient(op.type)(op, dy))
    grads[0] = grads[0] * op.inputs[0]
    return grads


LAYER_FLOOR = {"floor: layer input kept (dx * x)": [
    "%s=bench_floors:keep_layer_input" % op
    for op in ("Conv2D", "DepthwiseConv2dNative", "MatMul")]}
"""Section 8's floor (tools/bench_lrp.py): the plain gradient with every
layer op's gradient times its input."""
