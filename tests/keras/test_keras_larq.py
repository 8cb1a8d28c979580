"""graph_override.keras against larq 0.13.3 itself: bitwise forward values and
gradients of every quantizer and layer, and summary's numbers.

larq runs on Keras 2 only (TensorFlow 2.15, where compat/run.sh installs it
from setup.py's `reference` extra); under Keras 3 these tests are skipped
without importing larq, since a failed `import larq` leaves its class names in
Keras's registry for the rest of the process.
"""

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as gk

if hasattr(tf.keras, "ops"):  # Keras 3
    pytest.skip("larq 0.13 runs on Keras 2 (TensorFlow 2.15) only",
                allow_module_level=True)
lq = pytest.importorskip("larq")

# Exact zeros (both signs), the clip boundaries (±1, ±0.5), the default
# ternary threshold (±0.05) and 0.3, DoReFa's rounding ties (1/6, 0.5) and
# values beyond every boundary.
EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.05, -0.05, 0.3, -0.3,
                  1.0 / 6.0, 0.25, 0.75, 1.5, -1.5, 2.0, -2.0, 0.999, -1.001,
                  0.0499, 0.0501, 0.7, -0.7, 0.1], np.float32)


def _run(fn, x, dy, function):
    """Forward values and the gradient of sum(fn(x) * dy) w.r.t. x."""
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return y, tape.gradient(y, x, output_gradients=dy)
    if function:
        step = tf.function(step)
    y, g = step(tf.constant(x))
    return y.numpy(), g.numpy()


def _assert_bitwise(a, b):
    for ours, theirs in zip(a, b):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


QUANTIZERS = [
    ("SteSign", {}), ("SteSign", {"clip_value": 0.5}), ("SteSign", {"clip_value": None}),
    ("ApproxSign", {}), ("SwishSign", {}), ("SwishSign", {"beta": 2.0}),
    ("SteHeaviside", {}), ("SteHeaviside", {"clip_value": 0.5}),
    ("SteTern", {}), ("SteTern", {"threshold_value": 0.3}),
    ("SteTern", {"ternary_weight_networks": True}), ("SteTern", {"clip_value": 0.5}),
    ("MagnitudeAwareSign", {}), ("MagnitudeAwareSign", {"clip_value": 0.5}),
    ("DoReFa", {}), ("DoReFa", {"k_bit": 1}), ("DoReFa", {"k_bit": 3}),
    ("DoReFa", {"k_bit": 2, "mode": "weights"}), ("DoReFa", {"k_bit": 4, "mode": "weights"}),
    ("NoOp", {"precision": 1}),
]


@pytest.mark.parametrize("function", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("cls,params", QUANTIZERS,
                         ids=["%s%s" % (c, p or "") for c, p in QUANTIZERS])
def test_quantizer_is_bitwise_larq(cls, params, function):
    x = np.stack([EDGES, EDGES[::-1] * 0.8, -EDGES * 1.2], axis=1)  # 24 x 3
    # dy of both signs and exact zeros: a masked gradient is +0.0 in larq
    # (a select), where dy * 0 would give -0.0 for dy < 0.
    dy = np.random.RandomState(0).uniform(-1.5, 1.5, x.shape).astype(np.float32)
    dy[::5] = 0.0
    ours = getattr(gk.quantizers, cls)(**params)
    theirs = getattr(lq.quantizers, cls)(**params)
    _assert_bitwise(_run(ours, x, dy, function), _run(theirs, x, dy, function))
    assert ours.precision == theirs.precision


@pytest.mark.parametrize("name", ["ste_sign", "approx_sign", "swish_sign", "ste_heaviside",
                                  "ste_tern", "magnitude_aware_sign", "dorefa_quantizer"])
def test_quantizer_names_are_larqs(name):
    x = np.stack([EDGES, -EDGES], axis=1)
    dy = np.ones_like(x)
    ours, theirs = gk.quantizers.get(name), lq.quantizers.get(name)
    assert type(ours).__name__ == type(theirs).__name__
    drop_name = lambda config: {k: v for k, v in config.items() if k != "name"}
    assert drop_name(ours.get_config()) == drop_name(theirs.get_config())
    _assert_bitwise(_run(ours, x, dy, False), _run(theirs, x, dy, False))


@pytest.mark.parametrize("fn", ["ste_sign", "approx_sign", "swish_sign", "ste_heaviside",
                                "ste_tern"])
def test_quantizer_functions_are_larqs(fn):
    dy = np.linspace(0.5, 1.5, EDGES.size).astype(np.float32)
    _assert_bitwise(_run(getattr(gk.quantizers, fn), EDGES, dy, False),
                    _run(getattr(lq.quantizers, fn), EDGES, dy, False))


def test_weight_clip_is_larqs():
    for clip in (1, 0.5):
        x = tf.constant(EDGES)
        _assert_bitwise([gk.constraints.WeightClip(clip)(x).numpy()],
                        [lq.constraints.WeightClip(clip)(x).numpy()])
    assert gk.constraints.get("weight_clip").get_config() == {"clip_value": 1}


LAYERS = [
    ("QuantDense", (7,), dict(units=5, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                              kernel_constraint="weight_clip")),
    ("QuantDense", (7,), dict(units=4, input_quantizer="ste_tern", kernel_quantizer="ste_tern",
                              activation="relu")),
    ("QuantDense", (7,), dict(units=3, input_quantizer="dorefa_quantizer",
                              kernel_quantizer="magnitude_aware_sign")),
    ("QuantConv1D", (9, 3), dict(filters=4, kernel_size=3, padding="same", pad_values=1.0,
                                 input_quantizer="ste_sign", kernel_quantizer="ste_sign")),
    ("QuantConv1D", (9, 3), dict(filters=4, kernel_size=3, strides=2, padding="causal",
                                 input_quantizer="approx_sign", kernel_quantizer="swish_sign")),
    ("QuantConv2D", (6, 6, 3), dict(filters=4, kernel_size=3, padding="same", pad_values=1.0,
                                    strides=2, input_quantizer="ste_sign",
                                    kernel_quantizer="ste_sign")),
    ("QuantConv2D", (6, 6, 3), dict(filters=4, kernel_size=(2, 3), dilation_rate=2,
                                    padding="same", input_quantizer="ste_heaviside",
                                    kernel_quantizer="magnitude_aware_sign")),
    ("QuantConv3D", (4, 4, 4, 2), dict(filters=3, kernel_size=2, padding="same",
                                       pad_values=-1.0, input_quantizer="ste_sign",
                                       kernel_quantizer="ste_tern")),
    ("QuantConv2DTranspose", (4, 4, 3), dict(filters=2, kernel_size=3, strides=2,
                                             input_quantizer="ste_sign",
                                             kernel_quantizer="ste_sign")),
    ("QuantConv3DTranspose", (3, 3, 3, 2), dict(filters=2, kernel_size=2,
                                                input_quantizer="ste_sign",
                                                kernel_quantizer="ste_sign")),
    ("QuantDepthwiseConv2D", (6, 6, 3), dict(kernel_size=3, padding="same", pad_values=1.0,
                                             depth_multiplier=2, input_quantizer="ste_sign",
                                             depthwise_quantizer="ste_sign")),
    ("QuantSeparableConv1D", (9, 3), dict(filters=4, kernel_size=3, padding="same",
                                          pad_values=1.0, input_quantizer="ste_sign",
                                          depthwise_quantizer="ste_sign",
                                          pointwise_quantizer="ste_tern")),
    ("QuantSeparableConv2D", (6, 6, 3), dict(filters=4, kernel_size=3, padding="same",
                                             pad_values=1.0, input_quantizer="ste_sign",
                                             depthwise_quantizer="ste_sign",
                                             pointwise_quantizer="dorefa_quantizer")),
]


def _layer_run(layer, x, dy, weights):
    layer.build(x.shape)
    layer.set_weights(weights)
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    grads = tape.gradient(y, [x] + layer.trainable_weights, output_gradients=dy)
    return [y.numpy()] + [g.numpy() for g in grads]


@pytest.mark.parametrize("cls,shape,kwargs", LAYERS,
                         ids=["%s-%d" % (c, i) for i, (c, _, _) in enumerate(LAYERS)])
def test_layer_is_bitwise_larq(cls, shape, kwargs):
    rng = np.random.RandomState(7)
    x = rng.choice(EDGES, size=(2,) + shape).astype(np.float32)
    theirs = getattr(lq.layers, cls)(**kwargs)
    theirs.build(x.shape)
    # Kernels on the quantizers' boundaries too: zeros, ±1, the threshold.
    weights = [rng.choice(EDGES, size=w.shape).astype(np.float32) for w in theirs.get_weights()]
    y = theirs(tf.constant(x))
    dy = rng.uniform(0.5, 1.5, y.shape).astype(np.float32)
    ours = getattr(gk.layers, cls)(**kwargs)
    want = _layer_run(theirs, x, dy, weights)
    got = _layer_run(ours, x, dy, weights)
    assert len(got) == len(want) == 2 + len(weights)
    _assert_bitwise(got, want)
    assert [w.name for w in ours.weights] == [w.name.replace(theirs.name, ours.name)
                                              for w in theirs.weights]


def _summary_model(layers_module):
    m = layers_module
    return tf.keras.Sequential([
        m.QuantConv2D(8, 3, input_quantizer=None, kernel_quantizer="ste_sign",
                      kernel_constraint="weight_clip", use_bias=False,
                      input_shape=(8, 8, 1), name="conv_a"),
        tf.keras.layers.BatchNormalization(name="bn_a"),
        tf.keras.layers.MaxPool2D(2, name="pool_a"),
        m.QuantDepthwiseConv2D(3, padding="same", input_quantizer="ste_sign",
                               depthwise_quantizer="ste_tern", name="dw_b"),
        m.QuantSeparableConv2D(4, 3, input_quantizer="ste_sign",
                               depthwise_quantizer="ste_sign",
                               pointwise_quantizer=gk_or_lq(layers_module).DoReFa(k_bit=4),
                               name="sep_c"),
        tf.keras.layers.Flatten(name="flat"),
        m.QuantDense(10, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                     kernel_constraint="weight_clip", name="dense_d"),
        tf.keras.layers.Dense(3, name="dense_e"),
    ], name="summary_model")


def gk_or_lq(layers_module):
    return gk.quantizers if layers_module is gk.layers else lq.quantizers


@pytest.mark.parametrize("include_macs", [True, False])
def test_summary_is_larqs(include_macs):
    lines_ours, lines_theirs = [], []
    gk.models.summary(_summary_model(gk.layers), print_fn=lines_ours.append,
                      include_macs=include_macs)
    lq.models.summary(_summary_model(lq.layers), print_fn=lines_theirs.append,
                      include_macs=include_macs)
    assert lines_ours == lines_theirs
    # larq keeps the table's MAC columns without include_macs; only the
    # summary's MAC rows go.
    assert "1-bit MACs" in lines_ours[0]
    assert ("Ratio of MACs that are binarized" in lines_ours[1]) == include_macs


def test_swish_sign_at_infinity_is_zero_where_larqs_is_nan():
    # The one documented difference from larq's gradients (docs/guide/keras.md).
    x = tf.constant([np.inf, -np.inf, 0.5], tf.float32)
    ours, theirs = (_run(q, x.numpy(), np.ones(3, np.float32), False)[1]
                    for q in (gk.quantizers.SwishSign(), lq.quantizers.SwishSign()))
    assert np.isnan(theirs[:2]).all() and (ours[:2] == 0).all()
    np.testing.assert_array_equal(ours[2:].view(np.uint32), theirs[2:].view(np.uint32))
