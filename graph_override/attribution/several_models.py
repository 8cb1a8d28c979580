"""Models of several inputs as one frozen GraphDef with their input names
(`ModelGraph.inputs`): a frozen GraphDef or a Session graph with a list of
input tensors, a Keras model of several inputs (functional, a list or a
dict of inputs), a TF2 callable of several tensors. The engine packs the
inputs into one array (`graph_override.attribution.several`) and feeds
each input its part."""

import os

import numpy as np
import tensorflow as tf

from graph_override._tensorflow import compat
from graph_override.attribution import models, several, targets
from graph_override.attribution.several import plain_name
from graph_override.errors import AttributionError
from graph_override.frozen.graphdef.io import load

__all__ = ["arrange", "from_callable", "from_graph_def", "from_session", "input_names",
           "is_several_names", "packed_spec", "unpacked"]


def is_several_names(inputs):
    """True for `inputs` naming two or more tensors (a list or tuple)."""
    return isinstance(inputs, (list, tuple)) and len(inputs) > 1


def _names(inputs):
    names = [models.tensor_name(value, "inputs") for value in inputs]
    if len(set(names)) != len(names):
        raise AttributionError("inputs=%r names a tensor twice; give each input once"
                               % (list(inputs),))
    return tuple(names)


def from_graph_def(model, inputs, outputs):
    """A frozen GraphDef (message or path) with several input names."""
    if isinstance(model, tf.compat.v1.GraphDef):
        graph_def, source = model, "<GraphDef>"
    else:
        graph_def, source = load(model), os.fsdecode(model)
    names = _names(inputs)
    return models.ModelGraph(graph_def, names[0], models.tensor_name(outputs, "outputs"),
                             source, names)


def from_session(session, inputs, outputs):
    """The graph of `session`, its variables folded, with several inputs."""
    if not isinstance(session, tf.compat.v1.Session):
        raise AttributionError("session=%r: expected a tf.compat.v1.Session" % (session,))
    graph = session.graph
    tensors = []
    for value, what in [(v, "inputs") for v in inputs] + [(models.one(outputs, "outputs"),
                                                            "outputs")]:
        try:
            tensor = (graph.get_tensor_by_name(models.tensor_name(value, what))
                      if isinstance(value, str) else value)
        except (KeyError, ValueError) as e:
            raise AttributionError("%s=%r is not a tensor of the session's graph: %s"
                                   % (what, value, e)) from None
        if getattr(tensor, "graph", None) is not graph:
            raise AttributionError("%s=%r is not a tensor of the session's graph; pass "
                                   "the tensors the session runs" % (what, value))
        tensors.append(tensor)
    names = _names([t.name for t in tensors[:-1]])
    with graph.as_default():
        graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(
            session, graph.as_graph_def(), [tensors[-1].op.name])
    return models.ModelGraph(graph_def, names[0], tensors[-1].name, "<Session graph>",
                             names)


def input_names(model):
    """The input names of a Keras model of several inputs (without ":0"),
    or None (one input, a plain callable, a subclassed model)."""
    inputs = models._keras_inputs(model)  # pylint: disable=protected-access
    if inputs is None or len(inputs) < 2:
        return None
    return [plain_name(getattr(t, "name", "input_%d" % i)) for i, t in enumerate(inputs)]


def _check_keras_shapes(model, name, packed):
    """Refuses inputs whose rank or dimensions differ from the Keras
    model's inputs, naming the input."""
    inputs = models._keras_inputs(model)  # pylint: disable=protected-access
    if inputs is None:
        return
    if len(inputs) != len(packed.names):
        raise AttributionError("model %s has %d input(s) (%s); x gives %d" % (
            name, len(inputs), ", ".join(input_names(model) or ["?"]), len(packed.names)))
    for tensor, input_name, shape in zip(inputs, packed.names, packed.shapes):
        want = tf.TensorShape(tensor.shape)
        if want.rank is not None and not want[1:].is_compatible_with(shape):
            raise AttributionError(
                "x for the input %s has shape %s per example; the input of model %s takes "
                "%s (first dimension the examples)" % (input_name, tuple(shape), name,
                                                       tuple(want.as_list())))


def from_callable(model, packed):
    """`model` (a Keras model of several inputs, or a function of several
    tensors) traced for the inputs `packed` describes and frozen. A Keras
    model is called with a list of the inputs (a dict where the caller gave
    one); a function with the tensors as positional arguments (keyword
    arguments for a dict)."""
    if not callable(model):
        models.from_callable(model, None)  # raises the error for non-callables
    name = getattr(model, "name", None) or getattr(model, "__name__", type(model).__name__)
    keras = models.is_keras(model)
    if keras:
        _check_keras_shapes(model, name, packed)

    def call(*tensors):
        if keras:
            given = (list(tensors) if packed.keys is None
                     else dict(zip(packed.names, tensors)))
            return model(given, training=False)
        if packed.keys is None:
            return model(*tensors)
        return model(**dict(zip(packed.keys, tensors)))

    specs = [tf.TensorSpec((None,) + shape, tf.as_dtype(packed.dtype),
                           name="input_%d" % i) for i, shape in enumerate(packed.shapes)]
    try:
        concrete = tf.function(call).get_concrete_function(*specs)
    except (TypeError, ValueError) as e:
        raise AttributionError("model %s cannot be traced for the inputs %s: %s" % (
            name, ", ".join("%s %s" % (n, s) for n, s in zip(packed.names, specs)),
            e)) from e
    if not isinstance(concrete.structured_outputs, tf.Tensor):
        raise AttributionError(
            "model %s returns %s, not one tensor; wrap it so that it returns the output "
            "to explain" % (name, type(concrete.structured_outputs).__name__))
    frozen = compat.freeze_concrete_function(concrete)
    names = tuple(t.name for t in frozen.inputs[:len(specs)])
    return models.ModelGraph(frozen.graph.as_graph_def(), names[0], frozen.outputs[0].name,
                             "model %s" % name, names)


def arrange(explainer, x, spec, options):
    """(`several.Packed` or None, the batch as one float array) for the
    inputs `x` of `explainer`'s model; for several inputs, a baseline
    option of `spec` packed like them (``options`` updated)."""
    if not several.is_several(x) and len(explainer.input_names(x)) == 1:
        return None, models.as_float_input(x)
    packed, arrays = several.arrange(x, explainer.input_names(x),
                                     lambda value, what: _as_float(value, what))
    if spec.baseline:
        options["baseline"] = packed.baseline(options.get("baseline"), arrays,
                                              targets.baseline_for)
    return packed, packed.pack(arrays)


def _as_float(value, what):
    try:
        return models.as_float_input(value)
    except AttributionError as e:
        raise AttributionError("%s: %s" % (what, e)) from None


def packed_spec(graph, function, packed):
    """A `tf.TensorSpec` of the packed batch: [batch, total] with the
    inputs' fixed batch dimension (None where it is free), after checking
    each input's shape against the model's; the message names the input."""
    specs = function.specs()[0]
    fixed = set()
    for name, shape, spec in zip(graph.names, packed.shapes, specs):
        want = spec.shape
        if want.rank is not None and (want.rank != len(shape) + 1
                                      or not want[1:].is_compatible_with(shape)):
            raise AttributionError(
                "the input %s has shape %s per example; the model's input %s takes %s "
                "(first dimension the examples)" % (name, tuple(shape), name, want))
        if want.rank and want[0] is not None:
            fixed.add(want[0])
    if len(fixed) > 1:
        raise AttributionError("%s: the inputs have different fixed batch dimensions %s"
                               % (graph.source, sorted(fixed)))
    total = packed.segments[-1][1] if packed.segments else 0
    return tf.TensorSpec([fixed.pop() if fixed else None, total], specs[0].dtype)


def unpacked(result, context):
    """`result` with its maps in the structure of the inputs (a list or a
    dict), for several inputs; Grad-CAM's maps (of a layer) as they are."""
    packed = context.packed
    if packed is None or np.shape(result.maps) != context.x.shape:
        return result
    result.maps = packed.structure(packed.unpack(np.asarray(result.maps)))
    return result
