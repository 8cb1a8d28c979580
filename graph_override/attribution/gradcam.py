"""Grad-CAM (Selvaraju et al., ICCV 2017): a layer's activations A (batch,
height, width, channels), each channel weighted by the mean over height and
width of the target's gradient with respect to it,

    cam = relu(sum_k mean_hw(d target / d A_k) * A_k),

one map of the layer's height x width per example (bilinearly resized to the
input's with ``resize=True``, as Captum's ``LayerAttribution.interpolate``
does). The layer is a tensor name of the frozen graph, or by default the last
4-D tensor on the path from the input to the output (for a CNN, the last
convolution's activations or the pooling after them).

The gradient comes from a second function of the same graph, fed at the
layer (and at the input, for any path that bypasses the layer).
"""

import numpy as np
import tensorflow as tf

from graph_override.attribution import methods
from graph_override.attribution import targets as target_lib
from graph_override.errors import AttributionError, GraphOverrideError
from graph_override.frozen.tf2.function import FrozenFunction

__all__ = ["grad_cam", "last_4d_tensor"]


def _path_ops(graph, input_name, output_name):
    """The ops on a path from the input tensor to the output tensor, in the
    graph's (topological) creation order."""
    source = graph.get_tensor_by_name(input_name).op
    target = graph.get_tensor_by_name(output_name).op
    ancestors, stack = set(), [target]
    while stack:
        op = stack.pop()
        if op in ancestors:
            continue
        ancestors.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    reach, stack = set(), [source]
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
            if tensor.shape.rank == 4 and tensor.dtype.is_floating and tensor.name != input_name:
                found = tensor.name
    return found


def _functions(context, layer):
    """(input -> layer, (input, layer) -> output) FrozenFunctions, cached."""
    graph = context.graph

    def make():
        try:
            return (FrozenFunction(graph.graph_def, [graph.input], [layer]),
                    FrozenFunction(graph.graph_def, [graph.input, layer], [graph.output]))
        except GraphOverrideError as e:
            raise AttributionError("grad_cam(layer=%r): %s" % (layer, e)) from e

    return context.explainer.cached((id(graph), "grad_cam", layer), make)


def grad_cam(context, x, target, *, layer=None, resize=False):
    """Grad-CAM maps of `layer` (a tensor name; None: `last_4d_tensor`)."""
    graph = context.graph
    if layer is None:
        layer = last_4d_tensor(graph.graph_def, graph.input, graph.output)
        if layer is None:
            raise AttributionError(
                "grad_cam: %s has no 4-D tensor (batch, height, width, channels) between "
                "%s and %s; give layer= a tensor name" % (graph.source, graph.input,
                                                          graph.output))
    elif not isinstance(layer, str):
        layer = getattr(layer, "name", layer)
    if isinstance(layer, str) and ":" not in layer:
        layer += ":0"
    to_layer, head = _functions(context, layer)
    xt = tf.constant(x)
    activations = to_layer(xt)
    if activations.shape.rank != 4:
        raise AttributionError("grad_cam(layer=%r): the layer has shape %s; Grad-CAM needs a "
                               "4-D (batch, height, width, channels) tensor" % (
                                   layer, activations.shape))
    shape = head.specs()[1][0].shape
    target = target_lib.resolve(target, tuple(shape.as_list()) if shape.rank is not None and None
                                not in shape.as_list()[1:] else head(xt, activations).shape,
                                x.shape[0])
    with tf.GradientTape() as tape:
        tape.watch(activations)
        outputs = head(xt, activations)
        scalars = target_lib.select(outputs, target)
    grads = tape.gradient(scalars, activations)
    outputs = outputs.numpy()
    weights = tf.reduce_mean(grads, axis=[1, 2], keepdims=True)
    cam = tf.nn.relu(tf.reduce_sum(weights * activations, axis=-1))
    if resize:
        if x.ndim != 4:
            raise AttributionError("grad_cam(resize=True) needs 4-D image inputs, x has "
                                   "shape %s" % (x.shape,))
        cam = tf.image.resize(cam[..., None], x.shape[1:3], method="bilinear")[..., 0]
    return methods.Attribution(maps=np.asarray(cam.numpy(), dtype=x.dtype),
                               method=context.spec.name,
                               targets=target_lib.explained(outputs, target),
                               outputs=outputs)
