"""Checks on what a gradient function returns.

TensorFlow accepts almost anything from a registered gradient function and
fails later, far from the cause ("Num gradients 2 generated for op ..."), or
not at all (a gradient of the wrong shape is broadcast into a wrong result).
`check_gradients` turns each of these into a `GradientContractError` that
names the op, the gradient function, what was expected and what came back.
"""

import tensorflow as tf

from graph_override.errors import GradientContractError

__all__ = ["check_gradients"]

_NO_DTYPE_CHECK = (tf.resource, tf.variant)


def _describe(value):
    return "%s %r" % (type(value).__name__, value) if isinstance(
        value, (int, float, str, bool)) else type(value).__name__


def check_gradients(result, *, op_name, op_type, inputs, gradient_name,
                    function=None):
    """Validates the result of a gradient function and returns it as a list.

    Args:
      result: what the gradient function returned: a tensor (for a one-input
        op), or a list/tuple with one entry per op input; entries may be None.
      op_name: the op's name, for messages.
      op_type: the op's type, for messages.
      inputs: the op's input tensors (anything with `.shape` and `.dtype`).
      gradient_name: the registered gradient name, for messages.
      function: the user's gradient function, for messages.

    Returns:
      A list with one entry (a tensor or None) per op input.

    Raises:
      GradientContractError: wrong count, a non-tensor entry, a static shape
        that does not match the input's, or a dtype that differs from it.
    """
    fn_desc = getattr(function, "__qualname__", None) or repr(function)
    where = "gradient function %s (registered as %r) for op %r (type %s)" % (
        fn_desc, gradient_name, op_name, op_type)
    n = len(inputs)
    if isinstance(result, (list, tuple)):
        grads = list(result)
    else:
        grads = [result]
    if len(grads) != n:
        raise GradientContractError(
            "%s returned %d gradient(s), but the op has %d input(s). Return one "
            "gradient per input, in input order, using None for an input that "
            "gets no gradient." % (where, len(grads), n))
    for i, (grad, inp) in enumerate(zip(grads, inputs)):
        if grad is None:
            continue
        if isinstance(grad, tf.IndexedSlices):
            continue
        if not tf.is_tensor(grad):
            raise GradientContractError(
                "%s returned %s as the gradient of input %d; expected a tf.Tensor "
                "(or None). Wrap constants with tf.constant or tf.zeros_like(op."
                "inputs[%d])." % (where, _describe(grad), i, i))
        in_dtype = getattr(inp, "dtype", None)
        if (in_dtype is not None and in_dtype not in _NO_DTYPE_CHECK
                and grad.dtype.base_dtype != in_dtype.base_dtype):
            raise GradientContractError(
                "%s returned a %s gradient for input %d of dtype %s; a gradient "
                "must have the dtype of its input." % (
                    where, grad.dtype.name, i, in_dtype.name))
        in_shape = getattr(inp, "shape", None)
        if (in_shape is not None and in_dtype not in _NO_DTYPE_CHECK
                and not grad.shape.is_compatible_with(in_shape)):
            raise GradientContractError(
                "%s returned a gradient of shape %s for input %d of shape %s; a "
                "gradient must have its input's shape." % (
                    where, grad.shape, i, in_shape))
    return grads
