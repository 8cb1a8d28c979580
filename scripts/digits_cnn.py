"""The small CNN of scripts/plot_attribution.py, its training, its randomized
twins and the model-randomization sanity check (Adebayo et al., 2018).

Everything here is a pure function of its arguments: initial weights come
from a seeded numpy generator (Glorot uniform kernels, zero biases, as
Keras's defaults), minibatches from `graph_override.training.data.batches`,
so Keras 3 (TensorFlow 2.21) and Keras 2 (TensorFlow 2.15) train the same
network to the same weights.
"""

import collections
import re

import numpy as np
import tensorflow as tf

from graph_override import attribution
from graph_override.training import data

# Layers from the input up; cascading randomization goes the other way.
LAYERS = ("conv1", "conv2", "dense", "logits")
# The methods drawn and checked, in the order of the figure's columns.
LABELS = collections.OrderedDict([
    ("saliency", "saliency (signed)"),
    ("gradient_input", "gradient x input"),
    ("integrated_gradients", "integrated gradients"),
    ("smoothgrad", "SmoothGrad"),
    ("guided_backprop", "guided backprop"),
    ("deconvnet", "deconvnet"),
    ("eps_lrp", "eps-LRP"),
    ("deeplift", "DeepLIFT"),
    ("grad_cam", "Grad-CAM"),
])
# Settings of the methods that take any (the rest use their defaults).
OPTIONS = {
    "saliency": dict(abs=False),  # signed, so that the signed column means something
    "integrated_gradients": dict(steps=64),
    "smoothgrad": dict(samples=32, stdev_spread=0.15, seed=0),
    "grad_cam": dict(resize=True),  # layer: conv2's ReLU, found by `conv2_relu`
}

SanityCheck = collections.namedtuple("SanityCheck", [
    "methods", "stages", "abs_rho", "signed_rho", "ink_rho", "examples", "accuracy",
    "trained_maps", "random_maps"])
SanityCheck.__doc__ = """The sanity check's figures: for each method, the mean
Spearman correlation of absolute values after each cascading stage
(`abs_rho[name][k]`: the top k + 1 layers re-drawn, `stages[k]` the lowest of
them), with every layer re-drawn: of signed values (`signed_rho[name]`) and of
absolute values on the digit's ink pixels only, x > 0 (`ink_rho[name]`), over
`examples` test digits; the maps of the trained and fully randomized model."""


def glorot_uniform(rng, shape):
    """Keras's default kernel initializer, drawn from numpy's `rng`."""
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape).astype(np.float32)


def initial_weights(model, seed, layers=LAYERS):
    """{layer name: [kernel, bias]} drawn for `layers` of `model`."""
    rng = np.random.RandomState(seed)
    out = {}
    for layer in model.layers:
        if layer.name in layers:
            kernel, bias = layer.get_weights()
            out[layer.name] = [glorot_uniform(rng, kernel.shape), np.zeros_like(bias)]
    return out


def build(seed=0):
    """The CNN on 8x8x1 digits, returning logits, with seeded initial weights."""
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 1)),
        layers.Conv2D(16, 3, padding="same", activation="relu", name="conv1"),
        layers.Conv2D(32, 3, padding="same", activation="relu", name="conv2"),
        layers.MaxPool2D(2, name="pool"),
        layers.Flatten(name="flatten"),
        layers.Dense(64, activation="relu", name="dense"),
        layers.Dense(10, name="logits"),
    ])
    for name, weights in initial_weights(model, seed).items():
        model.get_layer(name).set_weights(weights)
    return model


def train(seed=0, epochs=8, batch_size=32, learning_rate=0.003):
    """Trains `build(seed)` on the digits' training split with Adam.

    Returns:
      (model, `data.Split`, test accuracy).
    """
    split = data.digits_splits()
    model = build(seed)
    optimizer = tf.keras.optimizers.Adam(learning_rate)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    x = split.x_train.reshape(-1, 8, 8, 1)
    for epoch in range(epochs):
        for batch in data.batches(len(x), batch_size, seed, epoch):
            step(tf.constant(x[batch]), tf.constant(split.y_train[batch]))
    logits = model(split.x_test.reshape(-1, 8, 8, 1)).numpy()
    return model, split, float(np.mean(logits.argmax(1) == split.y_test))


def randomized(model, down_to, seed=1):
    """A copy of `model` whose layers from the top down to `down_to` (a name
    in LAYERS) have their weights re-drawn from the initial distribution."""
    top = LAYERS[LAYERS.index(down_to):]
    twin = build()
    twin.set_weights(model.get_weights())
    for name, weights in initial_weights(twin, seed, top).items():
        twin.get_layer(name).set_weights(weights)
    return twin


def rank(values):
    """Ranks 1..n of a 1-D array, ties given the mean of their ranks."""
    values = np.asarray(values, np.float64).ravel()
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(a, b):
    """Spearman's rank correlation of two arrays (flattened), ties averaged:
    Pearson's correlation of their ranks. NaN when either is constant."""
    ra, rb = rank(a), rank(b)
    if ra.shape != rb.shape:
        raise ValueError("spearman: arrays of %d and %d values" % (ra.size, rb.size))
    ra -= ra.mean()
    rb -= rb.mean()
    denominator = np.sqrt(np.sum(ra * ra) * np.sum(rb * rb))
    return float(np.sum(ra * rb) / denominator) if denominator > 0 else float("nan")


def conv2_relu(explainer, x):
    """The tensor name of conv2's ReLU in the model's frozen graph (Keras
    numbers its layers' name scopes, "sequential_3/conv2_1/Relu")."""
    names = [n.name for n in explainer.model_graph(x).graph_def.node
             if n.op == "Relu" and re.search(r"(^|/)conv2(_\d+)?/", n.name)]
    if len(names) != 1:
        raise ValueError("expected one ReLU of layer conv2, found %s" % names)
    return names[0] + ":0"


def maps(model, x, target):
    """{method: maps of `x` (N x 8 x 8 x 1; Grad-CAM N x 8 x 8) for the
    classes `target`} for every method of LABELS."""
    explainer = attribution.Explainer(model)  # freezes the model once
    options = dict(OPTIONS, grad_cam=dict(OPTIONS["grad_cam"], layer=conv2_relu(explainer, x)))
    return {name: explainer.attribute(name, x, target, **options.get(name, {})).maps
            for name in LABELS}


def mean_rho(trained, random, absolute=True, where=None):
    """Mean over examples of the per-example Spearman correlation (of the
    pixels where `where`, a boolean array of the maps' shape, if given);
    examples where either map is constant (no ranking) are left out."""
    f = np.abs if absolute else (lambda v: v)
    if where is None:
        where = np.ones(np.shape(trained), bool)
    rhos = [spearman(f(a)[w], f(b)[w]) for a, b, w in zip(trained, random, where)]
    rhos = [r for r in rhos if not np.isnan(r)]
    return float(np.mean(rhos)) if rhos else float("nan")


def sanity_check(model, x, target, accuracy):
    """The cascading model-randomization check of `model` on `x`.

    Returns:
      A `SanityCheck`.
    """
    trained = maps(model, x, target)
    stages = tuple(reversed(LAYERS))
    abs_rho = {name: [] for name in LABELS}
    for down_to in stages:
        random = maps(randomized(model, down_to), x, target)
        for name in LABELS:
            abs_rho[name].append(mean_rho(trained[name], random[name]))
    signed = {name: mean_rho(trained[name], random[name], absolute=False) for name in LABELS}
    ink = {name: mean_rho(trained[name], random[name],
                          where=(x > 0).reshape(trained[name].shape)) for name in LABELS}
    return SanityCheck(tuple(LABELS), stages, abs_rho, signed, ink, len(x), accuracy,
                       trained, random)
