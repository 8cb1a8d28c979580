"""iNNvestigate's LRP maps of the network of test_innvestigate.py (its side).

Runs inside compat/.reference/innvestigate (iNNvestigate 2.1.2, TensorFlow
2.14 with eager execution off, Keras 2; no graph_override), as

    python innvestigate_maps.py REQUEST.npz RESULT.npz [REQUEST.npz RESULT.npz ...]

(reference_io.py). REQUEST holds `spec` (JSON: "analyzers", a list of
{"key", "name", "params"} for `innvestigate.create_analyzer`), the inputs
`x` (NHWC), `target` (a class per example) and the weights: `c0_w`,
`c0_b`, `c1_w`, `c1_b` (conv, HWIO), `d0_w`, `d0_b`, `d1_w`, `d1_b`
(dense). The network: Conv2D(4, 3x3, same, relu), MaxPooling2D(2),
Conv2D(6, 3x3, same, relu), AveragePooling2D(2), Flatten, Dense(16, relu),
Dense(10). RESULT holds `logits` and each analyzer's map under its key.
"""

import json
import sys

import numpy as np
import reference_io
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

import innvestigate  # noqa: E402  (after eager execution is off, as it requires)


def build(arrays):
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 1)),
        layers.Conv2D(4, 3, padding="same", activation="relu", name="c0"),
        layers.MaxPooling2D(2),
        layers.Conv2D(6, 3, padding="same", activation="relu", name="c1"),
        layers.AveragePooling2D(2),
        layers.Flatten(),
        layers.Dense(16, activation="relu", name="d0"),
        layers.Dense(10, name="d1")])
    for key in ("c0", "c1", "d0", "d1"):
        model.get_layer(key).set_weights([arrays[key + "_w"], arrays[key + "_b"]])
    return model


def run(request):
    spec = json.loads(str(request["spec"]))
    model = build(request)
    x = request["x"].astype(np.float32)
    target = [int(t) for t in request["target"]]
    result = {"logits": model.predict(x, verbose=0)}
    for analyzer in spec["analyzers"]:
        created = innvestigate.create_analyzer(analyzer["name"], model,
                                               neuron_selection_mode="index",
                                               **analyzer.get("params", {}))
        result[analyzer["key"]] = created.analyze(x, neuron_selection=target)
    return result


if __name__ == "__main__":
    sys.exit(reference_io.main(sys.argv, run))
