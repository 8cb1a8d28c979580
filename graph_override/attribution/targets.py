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

__all__ = ["baseline_for", "resolve", "select"]


def _class_count(output, what):
    if output.ndim != 2:
        raise AttributionError(
            "%s: the model's output has shape %s, not (examples, classes); give "
            "target= a callable of the output tensor that returns one scalar per "
            "example, e.g. target=lambda y: y[:, 0, 3]" % (what, tuple(output.shape)))
    return output.shape[1]


def resolve(target, output):
    """The target as an int array (one class per example), or the callable.

    Args:
      target: None (the argmax of each example's output; the output itself
        when it is one scalar per example), an int class for every example,
        an int array with one class per example, or a callable of the
        output tensor returning one scalar per example.
      output: the model's output for the examples (ndarray).

    Raises:
      AttributionError: a class out of range, an array of the wrong length,
        a target that is none of these.
    """
    n = output.shape[0]
    if callable(target):
        return target
    if target is None:
        if output.ndim == 1:
            return None
        return np.argmax(output.reshape(n, _class_count(output, "target=None")), axis=1)
    if isinstance(target, (bool, np.bool_)) or isinstance(target, float):
        raise AttributionError("target=%r: expected a class index (int), one per example, "
                               "or a callable of the output" % (target,))
    classes = _class_count(output, "target=%r" % (target,))
    if isinstance(target, numbers.Integral):
        indices = np.full(n, int(target))
    else:
        indices = np.asarray(target)
        if indices.dtype.kind not in "iu" or indices.shape != (n,):
            raise AttributionError(
                "target: expected an int class index or an int array of shape (%d,), "
                "one class per example; got %s of dtype %s" % (
                    n, "shape %s" % (indices.shape,), indices.dtype))
    bad = (indices < 0) | (indices >= classes)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AttributionError(
            "target: class %d (example %d) is out of range: the output has %d classes, "
            "0 to %d" % (indices[i], i, classes, classes - 1))
    return indices.astype(np.int64)


def select(output, target):
    """One scalar per example out of the output tensor `output`."""
    n = tf.shape(output)[0]
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
    flat = tf.reshape(output, [n, -1])
    return tf.gather(flat, tf.constant(target), axis=1, batch_dims=1)


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
