"""Bounds with a helpful gradient, in the style of tensorflow/compression's
math ops: the function opens the override map, makes its op and closes
the map again, so its callers' own ops are never re-routed."""
import tensorflow.compat.v1 as tf


@tf.RegisterGradient("CaseIdentityFirstOfTwo")
def _identity_first_of_two_grad(op, grad):
    del op
    return [grad, None]


@tf.RegisterGradient("CaseLowerBound")
def _lower_bound_grad(op, grad):
    inputs, bound = op.inputs
    pass_through_if = tf.logical_or(inputs >= bound, grad < 0)
    return [tf.cast(pass_through_if, grad.dtype) * grad, None]


def lower_bound(inputs, bound, gradient="identity_if_towards", name=None):
    """Same as tf.maximum, with a gradient that pushes towards the bound."""
    try:
        gradient = {
            "identity_if_towards": "CaseLowerBound",
            "identity": "CaseIdentityFirstOfTwo",
            "disconnected": None,
        }[gradient]
    except KeyError:
        raise ValueError("Invalid value for `gradient`: '{}'.".format(gradient)) from None

    with tf.name_scope(name, "LowerBound", [inputs, bound]) as scope:
        inputs = tf.convert_to_tensor(inputs, name="inputs")
        bound = tf.convert_to_tensor(bound, name="bound", dtype=inputs.dtype)
        if gradient:
            with tf.get_default_graph().gradient_override_map({"Maximum": gradient}):
                return tf.maximum(inputs, bound, name=scope)
        return tf.maximum(inputs, bound, name=scope)
