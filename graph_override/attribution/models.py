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

from graph_override import _compat
from graph_override.errors import AttributionError
from graph_override.frozen.graphdef.io import load

__all__ = ["ModelGraph", "from_callable", "from_graph_def", "from_session", "is_graph_model"]


@dataclasses.dataclass(frozen=True)
class ModelGraph:
    """A model reduced to what the engine runs.

    Attributes:
      graph_def: the frozen GraphDef.
      input, output: the tensor names ("node:index").
      source: how messages name the model (a path, "<GraphDef>",
        "<Session graph>", the callable's name).
    """

    graph_def: tf.compat.v1.GraphDef
    input: str
    output: str
    source: str


def _one(value, what):
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


def _tensor_name(value, what):
    value = _one(value, what)
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
    return ModelGraph(graph_def, _tensor_name(inputs, "inputs"),
                      _tensor_name(outputs, "outputs"), source)


def from_session(session, inputs, outputs):
    """The graph of `session` with the variables the output reads folded
    into Consts (their values in the session now)."""
    if not isinstance(session, tf.compat.v1.Session):
        raise AttributionError("session=%r: expected a tf.compat.v1.Session" % (session,))
    graph = session.graph
    tensors = []
    for value, what in ((inputs, "inputs"), (outputs, "outputs")):
        value = _one(value, what)
        try:
            tensor = (graph.get_tensor_by_name(_tensor_name(value, what))
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


def _is_keras(model):
    return any(c.__module__.split(".")[0] in ("keras", "tf_keras")
               or c.__module__.startswith("tensorflow.python.keras")
               for c in type(model).__mro__)


def from_callable(model, x):
    """`model` (a Keras model or a function of one tensor) traced for the
    spec of `x` with the batch dimension None, and frozen."""
    if not callable(model):
        raise AttributionError(
            "model=%r is neither a GraphDef, a path to one, nor a callable; pass a "
            "frozen model with inputs= and outputs=, session= with tensors, or a "
            "TF2 function or Keras model" % (model,))
    name = getattr(model, "name", None) or getattr(model, "__name__", type(model).__name__)
    keras = _is_keras(model)

    def call(t):
        return model(t, training=False) if keras else model(t)

    spec = tf.TensorSpec([None] + list(x.shape[1:]), tf.as_dtype(x.dtype), name="input")
    try:
        concrete = tf.function(call).get_concrete_function(spec)
    except (TypeError, ValueError) as e:
        raise AttributionError("model %s cannot be traced for inputs of spec %s: %s"
                               % (name, spec, e)) from e
    outputs = concrete.structured_outputs
    if not isinstance(outputs, tf.Tensor):
        raise AttributionError(
            "model %s returns %s, not one tensor; wrap it so that it returns the "
            "output to explain, e.g. lambda x: model(x)[0]" % (
                name, type(outputs).__name__))
    frozen = _compat.freeze_concrete_function(concrete)
    return ModelGraph(frozen.graph.as_graph_def(), frozen.inputs[0].name,
                      frozen.outputs[0].name, "model %s" % name)


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
