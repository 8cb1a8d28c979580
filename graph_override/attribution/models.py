"""Every kind of model as one frozen GraphDef with one input and one output
tensor name, the form the attribution engine runs.

* a frozen GraphDef, message or path (``.pb``/``.pbtxt``), with the input and
  output tensor names;
* a `tf.compat.v1` graph in a Session, with its input and output tensors:
  frozen with ``tf.compat.v1.graph_util.convert_variables_to_constants``;
* a TF2 Python callable or Keras model (eager or tf.function): traced with
  tf.function for the input's spec (batch dimension None) and frozen with
  ``convert_variables_to_constants_v2``, functional While/If kept, so the
  ops inside Keras layers, nested tf.functions (inlined by the freezing) and
  loop or branch bodies (in the function library) all carry the method's
  rules.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from graph_override._tensorflow import compat
from graph_override.errors import AttributionError
from graph_override.frozen.graphdef.consts import check_const
from graph_override.frozen.graphdef.io import load
from graph_override.frozen.graphdef.views import ancestors
from graph_override.frozen.inspection.risky import RISKY_OPS, nodes_run
from graph_override.frozen.tf2.graph import check_calls, check_colocation

__all__ = ["ModelGraph", "check_untrusted", "from_callable", "from_graph_def",
           "from_keras_layer", "from_session", "is_graph_model", "is_keras",
           "keras_input_shape", "keras_spec"]


@dataclasses.dataclass(frozen=True)
class ModelGraph:
    """A model reduced to what the engine runs.

    Attributes:
      graph_def: the frozen GraphDef.
      input, output: the tensor names ("node:index").
      source: how messages name the model (a path, "<GraphDef>",
        "<Session graph>", the callable's name).
      inputs: a model of several inputs: their names, in order (`input` is
        the first); () for one.
    """

    graph_def: tf.compat.v1.GraphDef
    input: str
    output: str
    source: str
    inputs: tuple = ()

    @property
    def names(self):
        """The input tensor names, in order."""
        return self.inputs or (self.input,)


def one(value, what):
    """One tensor or tensor name out of `value` (a name, a tensor, or a list
    or tuple holding one)."""
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise AttributionError(
                "%s=%r: attribution explains one %s tensor; give exactly one "
                "(to explain several outputs, pick one with target=...)" % (
                    what, value, what[:-1]))
        value = value[0]
    if value is None:
        raise AttributionError("%s= is required for this model: name its tensor, e.g. "
                               "%s=%r" % (what, what, "x:0" if what == "inputs" else "logits:0"))
    return value


def tensor_name(value, what):
    value = one(value, what)
    name = getattr(value, "name", value)
    if not isinstance(name, str) or not name:
        raise AttributionError("%s=%r: expected a tensor name such as 'x:0' or a tensor"
                               % (what, value))
    return name if ":" in name else name + ":0"


def is_graph_model(model):
    """True for a GraphDef or a path to one."""
    return (isinstance(model, (tf.compat.v1.GraphDef, str, bytes))
            or hasattr(model, "__fspath__"))


def from_graph_def(model, inputs, outputs):
    """A frozen GraphDef (message or path) and its tensor names."""
    if isinstance(model, tf.compat.v1.GraphDef):
        graph_def, source = model, "<GraphDef>"
    else:
        graph_def, source = load(model), os.fsdecode(model)
    return ModelGraph(graph_def, tensor_name(inputs, "inputs"),
                      tensor_name(outputs, "outputs"), source)


def check_untrusted(graph, tensors, allow_ops=()):
    """Refuses what running the `ModelGraph` `graph` (a GraphDef from a file
    or a message: from elsewhere) for the tensor names `tensors` would do
    that the caller did not ask for, before TensorFlow imports or runs
    anything of it:

    * a library function that calls itself (TensorFlow would crash the
      process importing it): ConversionError;
    * a colocation attr naming a missing node, and, among the nodes that
      would run, a Const whose value TensorFlow cannot make (a fill of
      terabytes, a value of another dtype, packed bytes of another length):
      GraphDefError;
    * among the nodes that would run (what the tensors depend on, function
      bodies included; `graph_override.frozen.inspection.risky.nodes_run`),
      an op of `RISKY_OPS` (file reads and writes, PyFunc, network and
      debug dumps) whose type is not in `allow_ops`: AttributionError,
      naming each node, what its op does and how to allow it by name.
    """
    graph_def, source = graph.graph_def, graph.source
    check_calls(graph_def, source)
    check_colocation(graph_def, source)
    allow = frozenset(allow_ops)
    refused = []
    for address, node in nodes_run(graph_def, [t.split(":")[0] for t in tensors]):
        if node.op == "Const":
            check_const(address, node, source)
        elif node.op in RISKY_OPS and node.op not in allow:
            refused.append((address, node.op))
    if refused:
        ops = sorted({op for _, op in refused})
        raise AttributionError(
            "%s: computing %s runs %s: op(s) that reach outside the model, refused in a "
            "graph from elsewhere; nothing was run. If you trust this graph, allow them "
            "by name: allow_ops=%r (CLI: %s)" % (
                source, ", ".join(tensors), "; ".join(
                    "node %r (%s), which %s" % (address, op, RISKY_OPS[op])
                    for address, op in refused[:5]) + (
                        "; and %d more" % (len(refused) - 5) if len(refused) > 5 else ""),
                ops, " ".join("--allow-op " + op for op in ops)))


def from_session(session, inputs, outputs):
    """The graph of `session` with the variables the output reads folded
    into Consts (their values in the session now)."""
    if not isinstance(session, tf.compat.v1.Session):
        raise AttributionError("session=%r: expected a tf.compat.v1.Session" % (session,))
    graph = session.graph
    tensors = []
    for value, what in ((inputs, "inputs"), (outputs, "outputs")):
        value = one(value, what)
        try:
            tensor = (graph.get_tensor_by_name(tensor_name(value, what))
                      if isinstance(value, str) else value)
        except (KeyError, ValueError) as e:
            raise AttributionError("%s=%r is not a tensor of the session's graph: %s"
                                   % (what, value, e)) from None
        if getattr(tensor, "graph", None) is not graph:
            raise AttributionError("%s=%r is not a tensor of the session's graph; pass "
                                   "the tensors the session runs" % (what, value))
        tensors.append(tensor)
    with graph.as_default():
        graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(
            session, graph.as_graph_def(), [tensors[1].op.name])
    return ModelGraph(graph_def, tensors[0].name, tensors[1].name, "<Session graph>")


def is_keras(model):
    """True for an object of Keras (Keras 3, Keras 2 / tf_keras): a model, a
    layer."""
    return any(c.__module__.split(".")[0] in ("keras", "tf_keras")
               or c.__module__.startswith("tensorflow.python.keras")
               for c in type(model).__mro__)


def _keras_inputs(model):
    """A Keras model's symbolic inputs (a list), or None where it has none
    (not Keras, a subclassed model never called)."""
    try:
        inputs = model.inputs if is_keras(model) else None
    except (AttributeError, ValueError):  # Keras 3: a subclassed model has none
        return None
    return list(inputs) if isinstance(inputs, (list, tuple)) else None


def keras_input_shape(model):
    """The shape (a list, None for unknown dimensions) of a Keras model's one
    input, or None where the model does not say (a subclassed model never
    called, several inputs, a model that is not Keras)."""
    inputs = _keras_inputs(model)
    if inputs is None or len(inputs) != 1:
        return None
    try:
        shape = tf.TensorShape(inputs[0].shape)
    except (TypeError, ValueError):
        return None
    return shape.as_list() if shape.rank is not None else None


def _check_keras_input(model, name, x):
    """Refuses an `x` whose rank or non-batch dimensions differ from the
    Keras model's input, before tracing: traced, an image without its batch
    axis would be a batch of rows, and Keras' own error says so in terms of
    its layers."""
    shape = keras_input_shape(model)
    if shape is None or x is None:
        return
    if x.ndim == len(shape) and all(
            want is None or want == got for want, got in zip(shape[1:], x.shape[1:])):
        return
    one = x.ndim == len(shape) - 1 and all(
        want is None or want == got for want, got in zip(shape[1:], x.shape))
    raise AttributionError(
        "x has shape %s; the input of model %s takes %s (first dimension the "
        "examples)%s" % (tuple(x.shape), name, tuple(shape),
                         ": for one example, pass x[None] (shape %s)" % (
                             (1,) + tuple(x.shape),) if one else ""))


def keras_spec(model):
    """A `tf.TensorSpec` (batch dimension None) of a Keras model's one input,
    or None where the model does not say (see `keras_input_shape`)."""
    shape = keras_input_shape(model)
    if shape is None:
        return None
    dtype = getattr(_keras_inputs(model)[0], "dtype", None) or "float32"
    try:
        dtype = tf.as_dtype(getattr(dtype, "name", dtype))
    except TypeError:
        return None
    return tf.TensorSpec([None] + list(shape[1:]), dtype, name="input")


def from_callable(model, x):
    """`model` (a Keras model or a function of one tensor) traced for the
    spec of `x` (an array, or a `tf.TensorSpec` such as `keras_spec` gives)
    with the batch dimension None, and frozen.

    Raises:
      AttributionError: `model` is not callable; x does not fit a Keras
        model's input shape (rank or a non-batch dimension, e.g. one example
        without its batch axis); the model cannot be traced or returns more
        than one tensor.
    """
    if not callable(model):
        raise AttributionError(
            "model=%r is neither a GraphDef, a path to one, nor a callable; pass a "
            "frozen model with inputs= and outputs=, session= with tensors, or a "
            "TF2 function or Keras model" % (model,))
    name = getattr(model, "name", None) or getattr(model, "__name__", type(model).__name__)
    keras = is_keras(model)
    _check_keras_input(model, name, None if isinstance(x, tf.TensorSpec) else x)

    def call(t):
        return model(t, training=False) if keras else model(t)

    concrete = trace(call, name, x)
    outputs = concrete.structured_outputs
    if not isinstance(outputs, tf.Tensor):
        raise AttributionError(
            "model %s returns %s, not one tensor; wrap it so that it returns the "
            "output to explain, e.g. lambda x: model(x)[0]" % (
                name, type(outputs).__name__))
    frozen = compat.freeze_concrete_function(concrete)
    return ModelGraph(frozen.graph.as_graph_def(), frozen.inputs[0].name,
                      frozen.outputs[0].name, "model %s" % name)


def trace(call, name, x):
    """The concrete function of `call` for the spec of `x`, batch dimension None."""
    spec = x if isinstance(x, tf.TensorSpec) else tf.TensorSpec(
        [None] + list(x.shape[1:]), tf.as_dtype(x.dtype), name="input")
    try:
        return tf.function(call).get_concrete_function(spec)
    except (TypeError, ValueError) as e:
        raise AttributionError("model %s cannot be traced for inputs of spec %s: %s"
                               % (name, spec, e)) from e


def _model_class(model):
    """The Keras ``Model`` class `model` derives from (Keras 3's or Keras 2's,
    whichever built it)."""
    return next(c for c in type(model).__mro__ if c.__name__ == "Model")


def _before_identities(graph_def, tensor_name):
    """`tensor_name` traced back through Identity nodes to the tensor they
    pass on: a frozen function's outputs are Identity nodes of their own, off
    the path from the input to the other outputs."""
    nodes = {n.name: n for n in graph_def.node}
    node = nodes.get(tensor_name.split(":")[0])
    while node is not None and node.op == "Identity" and node.input \
            and not node.input[0].startswith("^"):
        tensor_name = node.input[0] if ":" in node.input[0] else node.input[0] + ":0"
        node = nodes.get(tensor_name.split(":")[0])
    return tensor_name


def from_keras_layer(model, layer, x, what="layer"):
    """(`ModelGraph`, tensor name): a functional or Sequential Keras model
    traced for the spec of `x` as a model with two outputs, `layer`'s output
    and its own, and frozen; the tensor name is the layer's output in that
    frozen graph, the output is the model's.

    The layer's output is found by what Keras knows of it (``layer.output``
    in the model's graph of layers), not by node names, which depend on how
    often the model was traced (``sequential_1/c1_1/Relu``). Where that
    record is off the path to the model's output (Keras 3 builds a
    Sequential model rebuilt from its config by calling its layers more than
    once), a Sequential model's layers are applied again to its input.

    Args:
      model: a Keras model with symbolic inputs (functional or Sequential).
      layer: one of ``model.layers``.
      x: the inputs (their spec is traced).
      what: how messages name the argument (``"grad_cam(layer='c1')"``).

    Raises:
      AttributionError: a subclassed model (its layers have no symbolic
        output), or a layer whose output Keras cannot connect to the inputs
        or to the model's output.
    """
    name = model.name
    try:
        inputs, outputs, layer_output = model.inputs, model.outputs, layer.output
    except (AttributeError, ValueError):
        inputs = outputs = layer_output = None
    if not inputs or not outputs or layer_output is None:
        raise AttributionError(
            "%s: model %s is a subclassed Keras model (or was never called on symbolic "
            "inputs), so its layer %r has no symbolic output to find in the frozen "
            "graph; pass a tensor name of the frozen graph instead (its nodes: "
            "[n.name for n in Explainer(model).model_graph(x).graph_def.node]), or "
            "layer=None for the last 4-D tensor" % (what, name, layer.name))
    if len(outputs) != 1:
        raise AttributionError("%s: model %s has %d outputs; attribution explains one"
                               % (what, name, len(outputs)))
    found = _two_output_graph(model, inputs, layer_output, outputs[0], x, what, layer)
    if found is None and _is_sequential(model):
        # Keras's record of the layer's output (``layer.output``, its first call)
        # is not on the path to the model's output: a Sequential rebuilt from
        # its config (load_model, from_config) calls its layers more than once.
        # The layers applied again to the model's input give a path that is.
        applied = inputs[0]
        for each in model.layers:
            applied = each(applied)
            if each is layer:
                layer_output = applied
        found = _two_output_graph(model, inputs, layer_output, applied, x, what, layer)
    if found is None:
        raise AttributionError(
            "%s: Keras's record of the output of layer %r is not on the path to the "
            "output of model %s (the layer was called more than once); pass a tensor "
            "name of the frozen graph instead" % (what, layer.name, name))
    return found


def _is_sequential(model):
    return any(c.__name__ == "Sequential" for c in type(model).__mro__)


def _two_output_graph(model, inputs, layer_output, output, x, what, layer):
    """(`ModelGraph` of `output`, the name of `layer_output`'s tensor), traced
    and frozen as a model of the two outputs; None where the model's output
    does not depend on that tensor."""
    name = model.name
    try:
        both = _model_class(model)(inputs, [layer_output, output])
    except (AttributeError, TypeError, ValueError) as e:
        raise AttributionError("%s: Keras cannot connect the output of layer %r to the "
                               "inputs of model %s (%s); pass a tensor name of the frozen "
                               "graph instead" % (what, layer.name, name, e)) from e
    concrete = trace(lambda t: both(t, training=False), name, x)
    frozen = compat.freeze_concrete_function(concrete)
    graph_def = frozen.graph.as_graph_def()
    tensor = _before_identities(graph_def, frozen.outputs[0].name)
    reached = ancestors({n.name: n.input for n in graph_def.node},
                        [frozen.outputs[1].name.split(":")[0]], control=False)
    if tensor.split(":")[0] not in reached:
        return None
    return (ModelGraph(graph_def, frozen.inputs[0].name, frozen.outputs[1].name,
                       "model %s" % name), tensor)


def as_float_input(x, dtype=None):
    """`x` as a float ndarray of at least one (batch) dimension."""
    try:
        array = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    except (TypeError, ValueError) as e:
        raise AttributionError("x: expected an array of inputs, got %s" % type(x).__name__) from e
    if array.ndim == 0:
        raise AttributionError("x: expected a batch of inputs (first dimension the "
                               "examples), got a scalar; use x[None] for one example")
    if dtype is None:
        if not np.issubdtype(array.dtype, np.floating):
            raise AttributionError("x has dtype %s; attribution needs a float input (cast "
                                   "it, e.g. x.astype('float32'))" % array.dtype)
        return array
    return array.astype(tf.as_dtype(dtype).as_numpy_dtype, copy=False)
