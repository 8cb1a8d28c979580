"""The networks both sides build from one spec and one set of numpy weights.

A spec is a list of layers (captum_maps.py documents the format); `weights`
draws float32 weights for it in TensorFlow's layouts, `keras_model` builds
the Keras twin, and `request` packs everything captum_maps.py needs. Inputs
are the bundled digits (8x8, pixels in [0, 1], many exact zeros), with an
all-zero image whose zero-bias units sit exactly at 0 (the kink of ReLU, the
boundary of guided backprop's gates) and whose max-pool windows are ties.
"""

import json

import numpy as np
import tensorflow as tf

from graph_override.training.data import digits

N_CLASSES = 10
HIDDEN = 16


def mlp(fn, depth=2):
    """Dense(HIDDEN) + activation, `depth` times, then Dense(N_CLASSES)."""
    layers = []
    for _ in range(depth):
        layers += [{"type": "dense", "units": HIDDEN}, {"type": "act", "fn": fn}]
    return layers + [{"type": "dense", "units": N_CLASSES}]


def cnn(pool="maxpool", padding="valid", order="relu_pool", captum_rule=True):
    """Conv2D(4, 3x3) + ReLU + 2x2 pool + Dense(N_CLASSES) on 8x8x1 digits.

    order "pool_relu" pools before the ReLU (the same function for a max
    pool). captum_rule=False hides the max pool from Captum's DeepLift table.
    """
    pool_layer = {"type": pool, "captum_rule": captum_rule}
    act = {"type": "act", "fn": "relu"}
    middle = [act, pool_layer] if order == "relu_pool" else [pool_layer, act]
    return ([{"type": "conv", "filters": 4, "kernel": 3, "padding": padding}] + middle
            + [{"type": "flatten"}, {"type": "dense", "units": N_CLASSES}])


def _input_shape(layers):
    return (8, 8, 1) if layers[0]["type"] == "conv" else (64,)


def weights(layers, seed=0, zero_bias_units=2, biases=True):
    """{"w{i}", "b{i}"}: Glorot-like kernels, biases of ±0.1 except the
    first `zero_bias_units` units of each layer, whose bias is exactly 0
    (every bias with biases=False)."""
    rng = np.random.RandomState(seed)
    shape = _input_shape(layers)
    arrays = {}
    for i, layer in enumerate(layers):
        if layer["type"] == "conv":
            k = layer["kernel"]
            kernel_shape = (k, k, shape[-1], layer["filters"])
            fan_in = k * k * shape[-1]
            if layer["padding"] == "valid":
                shape = (shape[0] - k + 1, shape[1] - k + 1, layer["filters"])
            else:
                shape = shape[:2] + (layer["filters"],)
        elif layer["type"] == "dense":
            kernel_shape = (int(np.prod(shape)), layer["units"])
            fan_in = kernel_shape[0]
            shape = (layer["units"],)
        else:
            if layer["type"] in ("maxpool", "avgpool"):
                shape = (shape[0] // 2, shape[1] // 2, shape[2])
            elif layer["type"] == "flatten":
                shape = (int(np.prod(shape)),)
            continue
        arrays[f"w{i}"] = (rng.randn(*kernel_shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        bias = rng.choice([-0.1, 0.1], kernel_shape[-1]).astype(np.float32)
        bias[:zero_bias_units if biases else None] = 0.0
        arrays[f"b{i}"] = bias
    return arrays


def keras_model(layers, arrays):
    """The Keras twin: Dense, Conv2D, MaxPooling2D/AveragePooling2D, Flatten, Activation."""
    keras = tf.keras
    built = []
    for i, layer in enumerate(layers):
        kind = layer["type"]
        if kind == "dense":
            built.append(keras.layers.Dense(layer["units"], name=f"dense_{i}"))
        elif kind == "conv":
            built.append(keras.layers.Conv2D(layer["filters"], layer["kernel"],
                                             padding=layer["padding"], name=f"conv_{i}"))
        elif kind == "maxpool":
            built.append(keras.layers.MaxPooling2D(2, name=f"pool_{i}"))
        elif kind == "avgpool":
            built.append(keras.layers.AveragePooling2D(2, name=f"pool_{i}"))
        elif kind == "flatten":
            built.append(keras.layers.Flatten(name=f"flatten_{i}"))
        else:
            built.append(keras.layers.Activation(layer["fn"], name=f"act_{i}"))
    model = keras.Sequential([keras.Input(_input_shape(layers))] + built)
    for i, layer in enumerate(built):
        if f"w{i}" in arrays:
            layer.set_weights([arrays[f"w{i}"], arrays[f"b{i}"]])
    return model


def inputs(layers, n=6):
    """(x, target): n digits, the first one all zeros, targets their labels."""
    images, labels = digits()
    x = images[:n].copy()
    x[0] = 0.0
    return x.reshape((n,) + _input_shape(layers)), labels[:n].astype(np.int64)


def request(path, layers, arrays, x, baseline, target, methods, split=None):
    """Writes the .npz that captum_maps.py reads; `methods` as it documents
    them; `split`: a model of two inputs, x[:, :split] and x[:, split:]."""
    spec = json.dumps(dict({"layers": layers, "methods": methods},
                           **({} if split is None else {"split": split})))
    np.savez(path, spec=spec, x=x, baseline=baseline, target=target, **arrays)
    return path
