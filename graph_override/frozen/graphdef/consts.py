"""What a Const claims: the bytes its value takes once made an array.

A TensorProto may hold fewer values than its shape has elements: one value
fills the whole shape (how tf.zeros and tf.fill freeze). So a Const of a
few bytes in the file can claim terabytes, which TensorFlow and numpy
allocate as soon as the value is made an array (tf.make_ndarray, a
variable for fine-tuning). `check_claim` bounds the claim from the shape
alone, before anything is allocated.
"""

from graph_override.errors import GraphDefError

__all__ = ["MAX_FILL_BYTES", "MAX_VALUE_BYTES", "check_claim", "check_const", "claimed_bytes"]

# The most a Const may claim: what one GraphDef can hold (protobuf's 2 GB).
MAX_VALUE_BYTES = 2 ** 31 - 1
# The most a Const may claim beyond what it stores (a fill): far above any
# weight frozen this way (zero-initialized biases), far below the memory a
# filled 4 TiB or 1 GiB value takes.
MAX_FILL_BYTES = 1 << 26

# Bytes per element of the DataType enums (types.proto); others count 8.
_ITEM_BYTES = {1: 4, 2: 8, 3: 4, 4: 1, 5: 2, 6: 1, 8: 8, 9: 8, 10: 1, 11: 1, 12: 1, 13: 4,
               14: 2, 15: 2, 16: 2, 17: 2, 18: 16, 19: 2, 22: 4, 23: 8}


def claimed_bytes(tensor):
    """(bytes the value takes as an array, bytes the proto stores), from the
    shape alone; None for the first if the shape is not a valid fixed one
    (a negative or unknown dimension)."""
    if tensor.tensor_shape.unknown_rank:
        return None, tensor.ByteSize()
    elements = 1
    for dim in tensor.tensor_shape.dim:
        if dim.size < 0:
            return None, tensor.ByteSize()
        elements *= dim.size
    return elements * _ITEM_BYTES.get(tensor.dtype, 8), tensor.ByteSize()


def check_claim(name, tensor, source, *, limit=MAX_VALUE_BYTES, fill_limit=MAX_FILL_BYTES):
    """Raises GraphDefError if the Const `name` of `source` claims more than
    `limit` bytes, or more than `fill_limit` beyond what it stores.

    Example:
      >>> from tensorflow.core.framework import tensor_pb2
      >>> t = tensor_pb2.TensorProto(dtype=1, float_val=[1.0])
      >>> _ = t.tensor_shape.dim.add(size=2 ** 40)
      >>> check_claim("w", t, "model.pb")
      Traceback (most recent call last):
      ...
      graph_override.errors.GraphDefError: model.pb: Const 'w' claims 4398046511104 bytes (shape [1099511627776]) from 19 stored, more than a GraphDef can hold (2147483647); the file is damaged or hostile. Nothing was allocated.
    """
    claimed, stored = claimed_bytes(tensor)
    shape = [d.size for d in tensor.tensor_shape.dim]
    if claimed is None:
        raise GraphDefError("%s: Const %r has the shape %s, which no value has; the file "
                            "is damaged or hostile." % (source, name, shape))
    if claimed > limit:
        raise GraphDefError(
            "%s: Const %r claims %d bytes (shape %s) from %d stored, more than a "
            "GraphDef can hold (%d); the file is damaged or hostile. Nothing was "
            "allocated." % (source, name, claimed, shape, stored, limit))
    if claimed - stored > fill_limit:
        raise GraphDefError(
            "%s: Const %r fills %d bytes (shape %s) from %d stored, more than %d; "
            "refusing to allocate it. Store such a weight's values in the graph, or "
            "leave it out of trainable." % (source, name, claimed, shape, stored,
                                            fill_limit))


def _dtype_name(enum):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    try:
        return tf.dtypes.as_dtype(enum).name
    except TypeError:
        return "DataType %d" % enum


def check_const(name, node, source):
    """Raises GraphDefError if the Const node `node` (named `name` in
    messages) holds a value TensorFlow cannot make: a claim `check_claim`
    refuses, a value of another dtype than the node's ``dtype`` attr
    (TensorFlow aborts the process on that: a CHECK failure), or packed
    bytes (``tensor_content``) of another length than the shape takes.
    Only the proto is read; nothing is allocated.
    """
    tensor = node.attr["value"].tensor
    check_claim(name, tensor, source)
    declared = node.attr["dtype"].type if "dtype" in node.attr else tensor.dtype
    if declared != tensor.dtype:
        raise GraphDefError(
            "%s: Const %r is declared %s but its value is %s; TensorFlow would abort the "
            "process on it. The file is damaged or hostile." % (
                source, name, _dtype_name(declared), _dtype_name(tensor.dtype)))
    if tensor.tensor_content and tensor.dtype in _ITEM_BYTES:
        claimed, _ = claimed_bytes(tensor)
        if len(tensor.tensor_content) != claimed:
            raise GraphDefError(
                "%s: Const %r packs %d bytes for shape %s of %d bytes; the file is "
                "damaged or hostile." % (source, name, len(tensor.tensor_content),
                                         [d.size for d in tensor.tensor_shape.dim], claimed))
