"""The scratch-graph trace behind `op_with_gradient`.

`trace` runs an op function once on placeholders in a throwaway `tf.Graph`
and returns the op TensorFlow creates there (its type, attrs and inputs) and
which op input is which argument; `signature_key` is what a trace is cached
by. Nothing here runs the op for real.
"""

import numpy as np
import tensorflow as tf

from graph_override.errors import GradientContractError

__all__ = ["describe_fn", "is_input", "rebuild", "signature_key", "to_tensor", "trace"]


def is_input(value):
    return tf.is_tensor(value) or isinstance(value, (np.ndarray, tf.Variable))


def signature_key(leaves, tensor_positions, tensors):
    key = []
    for i, leaf in enumerate(leaves):
        if i in tensor_positions:
            t = tensors[tensor_positions.index(i)]
            key.append(("T", t.dtype.name, tuple(t.shape.as_list())
                        if t.shape.rank is not None else None))
        else:
            key.append(("V", type(leaf).__name__, leaf))
    return tuple(key)


def describe_fn(op_fn):
    return getattr(op_fn, "__qualname__", None) or repr(op_fn)


def trace(op_fn, structure, leaves, tensor_positions, tensors):
    """Runs op_fn once on placeholders in a scratch graph.

    Returns:
      (op, slots, structure): the one op op_fn creates; slots[i] is
      ("arg", k) when op input i is argument tensor k, or ("const", ndarray)
      when op_fn made it from a Python value; the nesting of what op_fn
      returns.

    Raises:
      GradientContractError: op_fn creates no op, several ops, or an op whose
        inputs are computed inside it.
    """
    with tf.Graph().as_default():
        holders = [tf.compat.v1.placeholder(t.dtype, t.shape, name="arg%d" % k)
                   for k, t in enumerate(tensors)]
        args, kwargs = rebuild(structure, leaves, tensor_positions, holders)
        result = op_fn(*args, **kwargs)
        outputs = tf.nest.flatten(result)
        where = "op_with_gradient(%s, ...)" % describe_fn(op_fn)
        if not outputs or not all(tf.is_tensor(o) and hasattr(o, "op")
                                  for o in outputs):
            raise GradientContractError(
                "%s: the op function must return the output tensor(s) of one "
                "TensorFlow op, got %r." % (where, outputs))
        op = outputs[0].op
        if op.type == "Placeholder":
            raise GradientContractError(
                "%s: the op function returned its input unchanged; it must "
                "create an op (for example tf.identity)." % where)
        if [o.op for o in outputs] != [op] * len(outputs) or [
                o.value_index for o in outputs] != list(range(len(op.outputs))):
            raise GradientContractError(
                "%s: the op function must return all outputs of exactly one op, "
                "in order; it returned %s. Wrap the single op whose gradient you "
                "replace, and apply the rest outside." % (
                    where, ", ".join("%s:%d (%s)" % (o.op.name, o.value_index,
                                                     o.op.type) for o in outputs)))
        slots = []
        arg_of = {h.ref(): k for k, h in enumerate(holders)}
        for i, t in enumerate(op.inputs):
            if t.ref() in arg_of:
                slots.append(("arg", arg_of[t.ref()]))
            elif t.op.type == "Const":
                slots.append(("const", tf.make_ndarray(t.op.get_attr("value"))))
            else:
                raise GradientContractError(
                    "%s: input %d of the %s op is computed by a %s op inside the "
                    "op function; every input must be an argument or a constant. "
                    "Wrap only the single op whose gradient you replace (compute "
                    "%s outside)." % (where, i, op.type, t.op.type, t.op.name))
        return op, tuple(slots), tf.nest.map_structure(lambda _: 0, result)


def rebuild(structure, leaves, tensor_positions, tensors):
    leaves = list(leaves)
    for pos, t in zip(tensor_positions, tensors):
        leaves[pos] = t
    return tf.nest.pack_sequence_as(structure, leaves)


def to_tensor(value):
    if isinstance(value, tf.Tensor):
        return value
    return tf.convert_to_tensor(value)
