"""What is explained: the target of each example (a class index, an index
per example, a function of the output, or the argmax), and the baseline.

A target selects one scalar per example out of the model's output; the
attribution is the gradient of that scalar. Examples never mix (a batch of
independent rows), so one gradient of the sum gives every example's own.
"""

import numbers

import numpy as np
import tensorflow as tf

from graph_override.errors import AttributionError

__all__ = ["ARGMAX", "baseline_for", "explained", "resolve", "select", "values"]


ARGMAX = "argmax"  # the target of each example is the argmax of its output


def _class_count(shape, what):
    if len(shape) != 2:
        raise AttributionError(
            "%s: the model's output has shape %s, not (examples, classes); give "
            "target= a callable of the output tensor that returns one scalar per "
            "example, e.g. target=lambda y: y[:, 0, 3]" % (what, tuple(shape)))
    return shape[1]


def resolve(target, shape, n):
    """The target as `ARGMAX`, an int array (one class per example), the
    callable, or None (the output is one scalar per example).

    Args:
      target: None (the argmax of each example's output; the output itself
        when it is one scalar per example), an int class for every example,
        an int array with one class per example, or a callable of the
        output tensor returning one scalar per example.
      shape: the model's output shape (a tuple; the first dimension may be
        None), with the number of classes known.
      n: the number of examples.

    Raises:
      AttributionError: a class out of range, an array of the wrong length,
        a target that is none of these.
    """
    if callable(target):
        return target
    if target is None:
        if len(shape) == 1:
            return None
        _class_count(shape, "target=None")
        return ARGMAX
    if isinstance(target, (bool, np.bool_, float, np.floating, str)):
        raise AttributionError("target=%r: expected a class index (int), one per example, "
                               "or a callable of the output" % (target,))
    classes = _class_count(shape, "target=%r" % (target,))
    if isinstance(target, numbers.Integral):
        indices = np.full(n, int(target))
    else:
        indices = np.asarray(target)
        if indices.dtype.kind not in "iu" or indices.shape != (n,):
            raise AttributionError(
                "target: expected an int class index or an int array of shape (%d,), "
                "one class per example; got shape %s of dtype %s" % (
                    n, indices.shape, indices.dtype))
    bad = (indices < 0) | (indices >= classes)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AttributionError(
            "target: class %d (example %d) is out of range: the output has %d classes, "
            "0 to %d" % (indices[i], i, classes, classes - 1))
    return indices.astype(np.int64)


def select(output, target):
    """One scalar per example out of the output tensor `output`."""
    if target is None:
        return output
    if callable(target):
        scalars = tf.convert_to_tensor(target(output))
        if scalars.shape.rank != 1 or (scalars.shape[0] is not None
                                       and output.shape[0] is not None
                                       and scalars.shape[0] != output.shape[0]):
            raise AttributionError(
                "target: the callable returned shape %s for an output of shape %s; it "
                "must return one scalar per example, shape (%s,)" % (
                    scalars.shape, output.shape, output.shape[0]))
        return scalars
    if isinstance(target, str):  # ARGMAX: the index is a constant of the gradient
        target = tf.argmax(output, axis=1)
    return tf.gather(output, target, axis=1, batch_dims=1)


def values(outputs, target):
    """The outputs (ndarray) at the target (not ARGMAX), one per example."""
    n = outputs.shape[0]
    if target is None:
        return outputs.reshape(n)
    if callable(target):
        return np.asarray(select(tf.constant(outputs), target))
    return outputs[np.arange(n), target]


def explained(outputs, target):
    """What `Attribution.targets` reports: the class per example, or None."""
    if isinstance(target, str):
        return np.argmax(outputs, axis=1)
    return None if target is None or callable(target) else target


def baseline_for(baseline, x, what="baseline"):
    """The baseline as an array of x's shape: None is zeros, a number fills
    it, an array of one example's shape is used for every example."""
    if baseline is None:
        return np.zeros_like(x)
    array = np.asarray(baseline.numpy() if hasattr(baseline, "numpy") else baseline,
                       dtype=x.dtype)
    if array.ndim == 0 or array.shape == x.shape[1:]:
        return np.broadcast_to(array, x.shape).copy()
    if array.shape != x.shape:
        raise AttributionError(
            "%s has shape %s; expected x's shape %s, one example's shape %s, or a "
            "number" % (what, array.shape, x.shape, x.shape[1:]))
    return array
