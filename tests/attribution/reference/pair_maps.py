"""PAIR's `saliency.tf1` maps of a network given as numpy weights, and the frozen graph.

Runs with the TensorFlow under test (2.21 or 2.15) and PAIR's package on its
path (compat/reference_venv.sh puts it in compat/.reference/pair-pyX.Y), as

    PYTHONPATH=PAIR_PATH python pair_maps.py REQUEST.npz RESULT.npz [REQUEST RESULT ...]

REQUEST is the one captum_maps.py reads (its layers; its methods are
ignored). The network is built as a tf.compat.v1 graph with Variables in a
Session, as PAIR's users have it (its GuidedBackprop saves them to a
checkpoint and re-imports the GraphDef under
gradient_override_map({'Relu': 'GuidedRelu'})). RESULT holds PAIR's maps of
each example for its target class, `guided_backprop` and `gradients`
(saliency.tf1.GuidedBackprop, GradientSaliency; GetMask takes one example
at a time), `logits`, and `frozen`: the serialized GraphDef of the same graph
with its Variables frozen to constants (input `x:0`, output `logits:0`).
"""

import json
import os
import sys
import tempfile

import numpy as np
import saliency.tf1 as pair
import tensorflow as tf

tf1 = tf.compat.v1
ACTIVATIONS = {"relu": tf.nn.relu, "tanh": tf.tanh, "sigmoid": tf.sigmoid,
               "softplus": tf.nn.softplus, "elu": tf.nn.elu}


def _layer(i, layer, h, arrays):
    kind = layer["type"]
    if kind in ("dense", "conv"):
        kernel = tf1.Variable(arrays[f"w{i}"], name=f"kernel_{i}")
        bias = tf1.Variable(arrays[f"b{i}"], name=f"bias_{i}")
        if kind == "dense":
            return tf.nn.bias_add(tf.matmul(h, kernel), bias)
        return tf.nn.bias_add(
            tf.nn.conv2d(h, kernel, strides=1, padding=layer["padding"].upper()), bias)
    if kind == "maxpool":
        return tf.nn.max_pool2d(h, 2, 2, "VALID")
    if kind == "avgpool":
        return tf.nn.avg_pool2d(h, 2, 2, "VALID")
    if kind == "flatten":
        return tf.reshape(h, [-1, int(np.prod(h.shape[1:]))])
    if kind == "act":
        return ACTIVATIONS[layer["fn"]](h)
    raise ValueError(f"pair_maps: unknown layer type {kind!r} (layer {i})")


def run(request, checkpoint):
    """PAIR's maps and the frozen GraphDef of one request."""
    spec = json.loads(str(request["spec"]))
    x_value, target = request["x"], request["target"]
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, (None,) + x_value.shape[1:], name="x")
        h = x
        for i, layer in enumerate(spec["layers"]):
            h = _layer(i, layer, h, request)
        logits = tf.identity(h, name="logits")
        neuron = tf1.placeholder(tf.int32, (), name="neuron")
        y = logits[:, neuron]
        session = tf1.Session(graph=graph)
        session.run(tf1.global_variables_initializer())
        guided = pair.GuidedBackprop(graph, session, y, x, tmp_ckpt_path=checkpoint)
        gradients = pair.GradientSaliency(graph, session, y, x)
        result = {"logits": session.run(logits, {x: x_value})}
        for key, method in (("guided_backprop", guided), ("gradients", gradients)):
            result[key] = np.stack([method.GetMask(v, feed_dict={neuron: int(k)})
                                    for v, k in zip(x_value, target)])
        frozen = tf1.graph_util.convert_variables_to_constants(
            session, graph.as_graph_def(), ["logits"])
    result["frozen"] = np.frombuffer(frozen.SerializeToString(), np.uint8)
    return result


def main(argv):
    if len(argv) < 3 or len(argv) % 2 == 0:
        print("usage: pair_maps.py REQUEST.npz RESULT.npz [REQUEST.npz RESULT.npz ...]",
              file=sys.stderr)
        return 2
    for request_path, result_path in zip(argv[1::2], argv[2::2]):
        with np.load(request_path) as request, tempfile.TemporaryDirectory() as scratch:
            result = run(dict(request), os.path.join(scratch, "guided_backprop_ckpt"))
        np.savez(result_path, **result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
