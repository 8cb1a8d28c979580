"""Grad-CAM (Selvaraju et al., ICCV 2017): a layer's activations A (batch,
height, width, channels), each channel weighted by the mean over height and
width of the target's gradient with respect to it,

    cam = relu(sum_k mean_hw(d target / d A_k) * A_k),

one map of the layer's height x width per example (bilinearly resized to the
input's with ``resize=True``, as Captum's ``LayerAttribution.interpolate``
does). The layer is a tensor name of the frozen graph, or by default the last
4-D tensor on the path from the input to the output (for a CNN, the last
convolution's activations or the pooling after them). For a functional or
Sequential Keras model it may also be one of its layers, or a layer's name
(``model.get_layer``): the model is then traced with two outputs, the
layer's and its own (`models.from_keras_layer`), so the layer's output is
found by what Keras knows of it, not by node names, which change with every
trace of the model (``sequential_1/c1_1/Relu``).

The gradient comes from a second function of the same graph, fed at the
layer (and at the input, for any path that bypasses the layer).
"""

import difflib

import numpy as np
import tensorflow as tf

from graph_override.attribution import compiled, methods, models, shared_weights
from graph_override.attribution import targets as target_lib
from graph_override.errors import AttributionError, GraphOverrideError
from graph_override.frozen.tf2.function import FrozenFunction

__all__ = ["grad_cam", "last_4d_tensor"]


def _path_ops(graph, input_name, output_name):
    """The ops on a path from the input tensor (or any of several, a list)
    to the output tensor, in the graph's (topological) creation order."""
    names = [input_name] if isinstance(input_name, str) else list(input_name)
    sources = [graph.get_tensor_by_name(n).op for n in names]
    target = graph.get_tensor_by_name(output_name).op
    ancestors, stack = set(), [target]
    while stack:
        op = stack.pop()
        if op in ancestors:
            continue
        ancestors.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    reach, stack = set(), sources
    while stack:
        op = stack.pop()
        if op in reach or op not in ancestors:
            continue
        reach.add(op)
        stack.extend(c for t in op.outputs for c in t.consumers())
    return [op for op in graph.get_operations() if op in reach]


def last_4d_tensor(graph_def, input_name, output_name):
    """The name of the last 4-D float tensor on the path from the input to
    the output (Grad-CAM's default layer), or None."""
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(graph_def, name="")
    found = None
    for op in _path_ops(graph, input_name, output_name):
        for tensor in op.outputs:
            if (tensor.shape.rank == 4 and tensor.dtype.is_floating
                    and tensor.name not in ([input_name] if isinstance(input_name, str)
                                            else input_name)):
                found = tensor.name
    return found


def _keras_layer(model, layer, graph, what):
    """The Layer of the Keras `model` that `layer` (a Layer or a layer name)
    stands for, or None where `layer` is a tensor name of the frozen graph."""
    if isinstance(layer, str):
        if ":" in layer:
            return None
        try:
            return model.get_layer(layer)
        except ValueError:
            pass
        if any(n.name == layer for n in graph.graph_def.node):
            return None
        names = [lay.name for lay in model.layers]
        close = difflib.get_close_matches(layer, names, n=2, cutoff=0.5)
        raise AttributionError(
            "%s: model %s has no layer %r%s, and its frozen graph no node %r. Pass the "
            "name of one of its layers (%s), one of model.layers, or a tensor name of "
            "the frozen graph (its nodes: [n.name for n in "
            "Explainer(model).model_graph(x).graph_def.node])" % (
                what, model.name, layer,
                " (did you mean %s?)" % " or ".join(repr(c) for c in close) if close else "",
                layer, ", ".join(names)))
    if any(lay is layer for lay in model.layers):
        return layer
    if models.is_keras(layer):
        raise AttributionError(
            "%s: %r is not one of the layers of model %s; pass one of model.layers "
            "(or model.get_layer(NAME)), a layer's name, or a tensor name of the frozen "
            "graph" % (what, getattr(layer, "name", layer), model.name))
    return None


def _resolve(context, x, layer):
    """(ModelGraph, tensor name) of `layer`, a tensor name of the frozen
    graph (a node's name means its output 0), a tensor, or for a Keras model
    one of its layers or a layer's name."""
    graph, model = context.graph, context.explainer.model
    what = "grad_cam(layer=%r)" % (layer if isinstance(layer, str)
                                   else getattr(layer, "name", layer))
    if models.is_keras(model) and hasattr(model, "get_layer"):
        found = _keras_layer(model, layer, graph, what)
        if found is not None and context.packed is not None:
            raise AttributionError(
                "%s: model %s has several inputs; give the layer as a tensor name of the "
                "frozen graph (its nodes: [n.name for n in Explainer(model).model_graph(x, "
                "...).graph_def.node]) or layer=None" % (what, model.name))
        if found is not None:
            return context.explainer.cached(
                (id(graph), "grad_cam keras layer", found.name),
                lambda: models.from_keras_layer(model, found, x, what))
    if not isinstance(layer, str):
        layer = getattr(layer, "name", layer)
    if isinstance(layer, str) and ":" not in layer:
        layer += ":0"
    return graph, layer


def _reads_the_input(graph_def, input_name, tensor_name):
    """Whether the tensor `tensor_name` is computed from the input (a
    weight of the frozen graph, a Const, is not)."""
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(graph_def, name="")
    return bool(_path_ops(graph, input_name, tensor_name))


def _functions(context, graph, layer):
    """(input -> layer, (input, layer) -> output) FrozenFunctions, cached."""

    def make():
        context.explainer.check_runs([layer])  # what the layer needs runs too
        try:
            rules = list(context.explainer.rules)
            if context.explainer.mode == "fast":  # one copy of the weights for both
                weights = shared_weights.shared_weights(context.explainer, graph)
                return (weights.function(graph.names, [layer], rules),
                        weights.function(list(graph.names) + [layer], [graph.output], rules))
            own = dict(rules=rules, on_no_match="ignore")
            return (FrozenFunction(graph.graph_def, list(graph.names), [layer], **own),
                    FrozenFunction(graph.graph_def, list(graph.names) + [layer],
                                   [graph.output], **own))
        except GraphOverrideError as e:
            raise AttributionError("grad_cam(layer=%r): %s" % (layer, e)) from e

    return context.explainer.cached((id(graph), "grad_cam", layer), make, rule_set=True)


def _check_node(graph, layer, asked):
    """Refuses a tensor name whose node the frozen graph does not have,
    naming the closest nodes."""
    node = layer.split(":")[0] if isinstance(layer, str) else None
    names = [n.name for n in graph.graph_def.node]
    if node is None or node in names:
        return
    close = difflib.get_close_matches(node, names, n=3, cutoff=0.5)
    raise AttributionError(
        "grad_cam(layer=%r): %s has no node %r%s; give the name of a 4-D tensor between "
        "%s and %s (the nodes: graph-override inspect MODEL --json, or [n.name for n in "
        "graph_def.node])" % (asked, graph.source, node, " (did you mean %s?)" % " or ".join(
            repr(c) for c in close) if close else "", graph.input, graph.output))


def _check_rank(activations, asked, layer):
    if activations is not None and len(activations.shape) != 4:
        raise AttributionError("grad_cam(layer=%r): the layer has shape %s%s; Grad-CAM needs "
                               "a 4-D (batch, height, width, channels) tensor" % (
                                   asked, activations.shape, "" if asked == layer else
                                   " (tensor %s of the frozen graph)" % layer))


def _layer_forward(to_layer, head):
    """The fast mode's forward: the layer's activations watched, then the head."""
    def forward(inputs, tape):
        activations = to_layer(*inputs)
        tape.watch(activations)
        return head(*inputs, activations), [activations]
    return forward


def grad_cam(context, x, target, *, layer=None, resize=False):
    """Grad-CAM maps of `layer` (a tensor name; for a Keras model also a
    Layer of it or a layer's name; None: `last_4d_tensor`)."""
    graph = context.graph
    if layer is None:
        layer = context.explainer.cached((id(graph), "grad_cam default layer"), lambda: (
            last_4d_tensor(graph.graph_def, graph.names, graph.output)))
        if layer is None:
            raise AttributionError(
                "grad_cam: %s has no 4-D tensor (batch, height, width, channels) between "
                "%s and %s; give layer= a tensor name" % (graph.source, graph.input,
                                                          graph.output))
        asked = layer
    else:
        asked = layer if isinstance(layer, str) else getattr(layer, "name", layer)
        graph, layer = _resolve(context, x, layer)
    _check_node(graph, layer, asked)
    to_layer, head = _functions(context, graph, layer)
    if not context.explainer.cached((id(graph), "grad_cam reads the input", layer),
                                    lambda: _reads_the_input(graph.graph_def, graph.names,
                                                             layer)):
        raise AttributionError(
            "grad_cam(layer=%r): %s is not computed from the input %s (a weight or a "
            "constant of the graph?); Grad-CAM needs the activations of a layer "
            "between %s and %s" % (asked, layer, graph.input, graph.input, graph.output))
    xt = context.feed(x)  # the input tensors
    fast = context.explainer.mode == "fast"
    activations = None if fast else to_layer(*xt)
    shape = head.specs()[1][0].shape
    if fast and (shape.rank is None or None in shape.as_list()[1:]):
        activations = to_layer(*xt)  # the output's shape is known by running it
    _check_rank(activations, asked, layer)
    target = target_lib.resolve(target, tuple(shape.as_list()) if shape.rank is not None and None
                                not in shape.as_list()[1:] else head(*xt, activations).shape,
                                x.shape[0])
    if fast:
        run = context.explainer.cached((id(to_layer), "grad_cam compiled"), lambda: (
            compiled.CompiledGradient(to_layer, _layer_forward(to_layer, head))), owner=to_layer)
        outputs, _, grads, activations = run.run(xt, target)
        grads, activations = grads[0], activations[0]
        _check_rank(activations, asked, layer)
    else:
        with tf.GradientTape() as tape:
            tape.watch(activations)
            outputs = head(*xt, activations)
            scalars = target_lib.select(outputs, target)
        grads = tape.gradient(scalars, activations)
    if grads is None:
        raise AttributionError(
            "grad_cam: the output %s does not depend on the layer %s through ops with a "
            "gradient; give the Explainer rules= for the ops without one (e.g. "
            "rules=['Round=ste_round'])" % (graph.output, layer))
    outputs = np.asarray(outputs)
    weights = tf.reduce_mean(grads, axis=[1, 2], keepdims=True)
    cam = tf.nn.relu(tf.reduce_sum(weights * activations, axis=-1))
    if resize:
        if context.packed is not None:
            raise AttributionError("grad_cam(resize=True): the model has several inputs; "
                                   "resize the maps to the input of your choice")
        if x.ndim != 4:
            raise AttributionError("grad_cam(resize=True) needs 4-D image inputs, x has "
                                   "shape %s" % (x.shape,))
        cam = tf.image.resize(cam[..., None], x.shape[1:3], method="bilinear")[..., 0]
    return methods.Attribution(maps=np.asarray(cam.numpy(), dtype=x.dtype),
                               method=context.spec.name,
                               targets=target_lib.explained(outputs, target),
                               outputs=outputs)
