"""graph_override.keras layers and quantizers under the running Keras (3 or 2),
against numpy and against the plain Keras layers given quantized values:
larq's conventions (sign(±0) = +1, inclusive clips, the ternary threshold to
±1, DoReFa's half-to-even rounding, MagnitudeAwareSign per output channel,
pad_values after quantization), and the errors."""

import inspect
import json
import re

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
from graph_override import tf2
from graph_override.errors import QuantizerError

EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.05, -0.05, 1.5, -1.5, 0.3,
                  1.0 / 6.0, 0.5 / 3.0, 2.5 / 3.0], np.float32)


def _value_and_grad(fn, x, dy=None):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return y.numpy(), tape.gradient(y, x, output_gradients=dy).numpy()


def _sign(x):
    return np.where(np.signbit(x) & (x != 0), -1.0, 1.0).astype(np.float32)


@pytest.mark.parametrize("clip", [1.0, 0.5])
def test_ste_sign_maps_both_zeros_to_one_and_clips_inclusively(clip):
    dy = -np.ones_like(EDGES)  # masked gradients are +0.0 even for dy < 0
    y, g = _value_and_grad(lq.quantizers.SteSign(clip_value=clip), EDGES, dy)
    np.testing.assert_array_equal(y, _sign(EDGES))
    want = np.where(np.abs(EDGES) <= clip, -1.0, 0.0).astype(np.float32)
    np.testing.assert_array_equal(g.view(np.uint32), want.view(np.uint32))


def test_ste_tern_maps_the_threshold_to_plus_minus_one():
    y, _ = _value_and_grad(lq.quantizers.SteTern(threshold_value=0.5), EDGES)
    np.testing.assert_array_equal(y, np.where(EDGES >= 0.5, 1.0, np.where(EDGES <= -0.5, -1.0, 0.0)))
    assert lq.quantizers.get("ste_tern").precision == 2


def test_ste_heaviside_and_approx_sign():
    y, g = _value_and_grad(lq.quantizers.SteHeaviside(), EDGES)
    np.testing.assert_array_equal(y, (EDGES > 0).astype(np.float32))
    np.testing.assert_array_equal(g, (np.abs(EDGES) <= 1.0).astype(np.float32))
    y, g = _value_and_grad(lq.quantizers.ApproxSign(), EDGES)
    np.testing.assert_array_equal(y, _sign(EDGES))
    np.testing.assert_array_equal(g, np.where(np.abs(EDGES) <= 1, (1 - np.abs(EDGES)) * 2, 0))


def test_dorefa_rounds_half_to_even_and_passes_the_gradient_on_0_to_1():
    y, g = _value_and_grad(lq.quantizers.DoReFa(k_bit=2), EDGES)
    n = 3.0
    np.testing.assert_allclose(y, np.round(np.clip(EDGES, 0, 1) * n) / n, rtol=0, atol=1e-7)
    assert y[list(EDGES).index(np.float32(0.5 / 3.0))] == 0.0  # 0.5 rounds to 0
    np.testing.assert_array_equal(g, ((EDGES >= 0) & (EDGES <= 1)).astype(np.float32))
    w, _ = _value_and_grad(lq.quantizers.DoReFa(k_bit=2, mode="weights"), EDGES)
    assert set(np.round(w * 3).tolist()) <= {-3.0, -1.0, 1.0, 3.0} and w.max() == 1.0


def test_magnitude_aware_sign_scales_per_last_axis():
    x = np.array([[-1.0, 0.0], [0.5, -3.0], [0.0, 1.0]], np.float32)
    y, g = _value_and_grad(lq.quantizers.MagnitudeAwareSign(), x)
    scale = np.abs(x).mean(axis=0)
    np.testing.assert_allclose(y, scale * _sign(x), rtol=1e-7)
    np.testing.assert_allclose(g, np.where(np.abs(x) <= 1, scale, 0.0), rtol=1e-7)


def test_noop_keeps_values_and_precision():
    y, g = _value_and_grad(lq.quantizers.NoOp(precision=4), EDGES)
    np.testing.assert_array_equal(y, EDGES)
    assert lq.quantizers.NoOp(precision=4).precision == 4


# --- the layers compute with the quantized input and kernel -----------------

CASES = [
    (lq.layers.QuantDense, tf.keras.layers.Dense, (5,), dict(units=3)),
    (lq.layers.QuantConv1D, tf.keras.layers.Conv1D, (7, 2), dict(filters=3, kernel_size=3)),
    (lq.layers.QuantConv2D, tf.keras.layers.Conv2D, (5, 5, 2),
     dict(filters=3, kernel_size=3, strides=2, padding="same")),
    (lq.layers.QuantConv3D, tf.keras.layers.Conv3D, (4, 4, 4, 2), dict(filters=2, kernel_size=2)),
    (lq.layers.QuantConv2DTranspose, tf.keras.layers.Conv2DTranspose, (3, 3, 2),
     dict(filters=2, kernel_size=3, strides=2)),
    (lq.layers.QuantDepthwiseConv2D, tf.keras.layers.DepthwiseConv2D, (5, 5, 2),
     dict(kernel_size=3, depth_multiplier=2)),
    (lq.layers.QuantSeparableConv1D, tf.keras.layers.SeparableConv1D, (7, 2),
     dict(filters=3, kernel_size=3)),
    (lq.layers.QuantSeparableConv2D, tf.keras.layers.SeparableConv2D, (5, 5, 2),
     dict(filters=3, kernel_size=3)),
]


def _quantizer_args(cls):
    args = {"input_quantizer": "ste_sign"}
    for argument, _ in cls.quantizer_arguments:
        args[argument] = "ste_sign"
    return args


@pytest.mark.parametrize("quant,plain,shape,kwargs", CASES, ids=[c[0].__name__ for c in CASES])
def test_layer_is_the_keras_layer_on_quantized_values(quant, plain, shape, kwargs):
    rng = np.random.RandomState(5)
    x = rng.choice(EDGES, size=(2,) + shape).astype(np.float32)
    ours, ref = quant(**kwargs, **_quantizer_args(quant)), plain(**kwargs)
    ours.build(x.shape)
    ref.build(x.shape)
    latent = [rng.choice(EDGES, size=w.shape).astype(np.float32) for w in ours.get_weights()]
    ours.set_weights(latent)
    quantized = {id(v) for _, v, _ in lq.layers.quantized_weights(ours)}
    assert len(quantized) == len(quant.quantizer_arguments)
    ref.set_weights([_sign(w) if id(v) in quantized else w
                     for w, v in zip(latent, ours.weights)])
    xt = tf.constant(x)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(xt)
        y = ours(xt)
        y_ref = ref(tf.constant(_sign(x)))
    dy = rng.uniform(-1, 1, y.shape).astype(np.float32)
    np.testing.assert_array_equal(y.numpy(), y_ref.numpy())
    grads = tape.gradient(y, [xt] + ours.trainable_weights, output_gradients=dy)
    ref_grads = tape.gradient(y_ref, ref.trainable_weights, output_gradients=dy)
    # The straight-through gradient: the float layer's, where |value| <= 1.
    assert grads[0] is not None
    for g, rg, w, v in zip(grads[1:], ref_grads, latent, ours.trainable_weights):
        want = np.where(np.abs(w) <= 1, rg.numpy(), 0) if id(v) in quantized else rg.numpy()
        np.testing.assert_array_equal(g.numpy(), want)


@pytest.mark.parametrize("layer", ["QuantConv1D", "QuantConv2D", "QuantDepthwiseConv2D"])
def test_pad_values_pads_the_quantized_input(layer):
    x = np.random.RandomState(2).uniform(-2, 2, (1, 6, 6, 2)[: 3 if layer == "QuantConv1D" else 4])
    x = x.astype(np.float32)
    args = dict(kernel_size=3, padding="same", pad_values=1.0, input_quantizer="ste_sign",
                use_bias=False, kernel_initializer="ones")
    if layer == "QuantDepthwiseConv2D":
        args["depthwise_initializer"] = args.pop("kernel_initializer")
    else:
        args["filters"] = 1
    y = getattr(lq.layers, layer)(**args)(x).numpy()
    rank = x.ndim - 2
    padded = np.pad(_sign(x), [(0, 0)] + [(1, 1)] * rank + [(0, 0)], constant_values=1.0)
    window = np.ones((3,) * rank + (x.shape[-1], 1), np.float32)
    if layer == "QuantDepthwiseConv2D":
        want = tf.nn.depthwise_conv2d(padded, window, [1, 1, 1, 1], "VALID").numpy()
    else:
        want = tf.nn.convolution(padded, window, padding="VALID").numpy()
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("layer", ["QuantConv1D", "QuantConv2D", "QuantDepthwiseConv2D",
                                   "QuantSeparableConv2D"])
def test_pad_values_with_spatial_sizes_known_only_at_run_time(layer):
    # A model for images of any size (Input((None, None, 3))), a dataset of
    # varying sizes, an exported signature: the padding is computed from the
    # run-time shape, and gives the padding of the known shape, bit for bit.
    rank = 1 if layer == "QuantConv1D" else 2
    args = dict(kernel_size=3, strides=2, padding="same", pad_values=1.0,
                input_quantizer="ste_sign", use_bias=False)
    if layer != "QuantDepthwiseConv2D":
        args["filters"] = 2
    keras = tf.keras
    inputs = keras.Input((None,) * rank + (3,))
    model = keras.Model(inputs, getattr(lq.layers, layer)(**args)(inputs))
    any_size = tf.function(model, input_signature=[
        tf.TensorSpec((None,) * (rank + 1) + (3,), tf.float32)])
    for size in (5, 6):
        x = np.random.RandomState(size).uniform(-2, 2, (1,) + (size,) * rank + (3,))
        x = x.astype(np.float32)
        x.flat[0] = 0.0
        np.testing.assert_array_equal(any_size(x).numpy(), model(x).numpy())
        assert model(x).shape[1] == (size + 1) // 2


def test_two_layers_keep_their_own_quantizers():
    a = lq.layers.QuantDense(2, kernel_quantizer=lq.quantizers.SteSign(clip_value=0.5))
    b = lq.layers.QuantDense(2, kernel_quantizer="ste_sign")
    assert a.kernel_quantizer.clip_value == 0.5 and b.kernel_quantizer.clip_value == 1.0
    c = lq.layers.QuantDense.from_config(a.get_config())
    assert c.kernel_quantizer.clip_value == 0.5 and c.kernel_quantizer is not a.kernel_quantizer


# --- errors -------------------------------------------------------------------

def test_unknown_quantizer_name_suggests_the_nearest():
    with pytest.raises(QuantizerError, match=r"QuantConv2D\(kernel_quantizer=\.\.\.\): no "
                       r"quantizer named 'ste_sing'\. Did you mean 'ste_sign'"):
        lq.layers.QuantConv2D(2, 3, kernel_quantizer="ste_sing")
    with pytest.raises(QuantizerError, match=r"QuantDepthwiseConv2D\(depthwise_quantizer"):
        lq.layers.QuantDepthwiseConv2D(3, depthwise_quantizer="dorefa")
    with pytest.raises(ValueError, match="input_quantizer.*'approx_sing'"):
        lq.layers.QuantDense(2, input_quantizer="approx_sing")


@pytest.mark.parametrize("bad", [3, lq.quantizers.SteSign, lq.constraints.WeightClip()])
def test_a_quantizer_of_the_wrong_kind_is_refused(bad):
    with pytest.raises(QuantizerError, match=r"QuantDense\(kernel_quantizer=\.\.\.\): .* is "
                       r"not a quantizer"):
        lq.layers.QuantDense(2, kernel_quantizer=bad)


def test_unknown_constraint_and_bad_settings_are_refused():
    with pytest.raises(QuantizerError, match=r"QuantDense\(kernel_constraint=\.\.\.\): no "
                       r"constraint named 'weight_clp'\. Did you mean 'weight_clip'"):
        lq.layers.QuantDense(2, kernel_constraint="weight_clp")
    with pytest.raises(QuantizerError, match="mode is 'activations' or 'weights'"):
        lq.quantizers.DoReFa(mode="weight")
    with pytest.raises(QuantizerError, match="k_bit=0"):
        lq.quantizers.DoReFa(k_bit=0)
    with pytest.raises(QuantizerError, match="flip_ratio"):
        lq.quantizers.SteSign(metrics=["flip_ratio"])
    with pytest.raises(QuantizerError, match="causal padding pads with zeros only"):
        lq.layers.QuantConv1D(2, 3, padding="causal", pad_values=1.0)


@pytest.mark.parametrize("bad", [lq.quantizers.SteSign(), lq.quantizers.ste_sign,
                                 tf2.Estimator("ste_sign")], ids=["object", "function",
                                                                  "estimator"])
def test_a_quantizer_given_as_a_constraint_is_refused(bad):
    # Keras would take any callable, and round the latent weights after each step.
    with pytest.raises(QuantizerError, match=r"QuantDense\(kernel_constraint=\.\.\.\): .* is "
                       r"a quantizer, not a constraint"):
        lq.layers.QuantDense(2, kernel_quantizer="ste_sign", kernel_constraint=bad)


def test_bad_settings_are_refused_where_they_are_given():
    with pytest.raises(QuantizerError, match=r"SteSign\(clip_value=-1\): .* must be >= 0"):
        lq.quantizers.SteSign(clip_value=-1)
    with pytest.raises(QuantizerError, match=r"SwishSign\(beta=0\.0\): .* must be > 0"):
        lq.quantizers.SwishSign(beta=0.0)
    with pytest.raises(QuantizerError, match=r"QuantConv2D\(pad_values='one'\): the value "
                       r"to pad with is a number"):
        lq.layers.QuantConv2D(2, 3, padding="same", pad_values="one")
    assert lq.quantizers.SteSign(clip_value=0.0).clip_value == 0.0  # the boundary is allowed


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"),
                                   np.float32("nan"), tf.constant(float("inf"))],
                         ids=["nan", "inf", "-inf", "numpy-nan", "eager-tensor-inf"])
@pytest.mark.parametrize("layer", ["QuantConv1D", "QuantConv2D", "QuantDepthwiseConv2D"])
def test_pad_values_that_are_not_finite_are_refused(layer, value):
    """NaN or infinite padding makes every output that reads the border
    non-finite; larq takes it without a word."""
    args = (2, 3) if layer != "QuantDepthwiseConv2D" else (3,)
    with pytest.raises(QuantizerError, match=r"^%s\(pad_values=-?(nan|inf)\): the value to "
                       r"pad with is a finite number" % layer):
        getattr(lq.layers, layer)(*args, padding="same", pad_values=value)


@pytest.mark.parametrize("value", [0.0, 1.0, -1.0, 3.5, np.float32(1.0),
                                   np.finfo(np.float32).max, tf.constant(1.0)])
def test_finite_pad_values_are_accepted(value):
    layer = lq.layers.QuantConv2D(2, 3, padding="same", pad_values=value)
    assert np.isfinite(layer.get_config()["pad_values"])


@pytest.mark.parametrize("precision", [0, -1, 65, 1.5, True, "8"])
def test_noop_precision_outside_1_to_64_bits_is_refused(precision):
    with pytest.raises(QuantizerError, match=r"^NoOp\(precision=%s\): the precision is the "
                       r"bits a weight counts as, a whole number from 1 to 64"
                       % re.escape(repr(precision))):
        lq.quantizers.NoOp(precision=precision)


@pytest.mark.parametrize("precision", [None, 1, 2, 32, 64, np.int64(8)])
def test_noop_precision_from_1_to_64_bits_is_accepted(precision):
    """larq 0.13.3 takes any int; 1 (its own docstring's example) is the
    smallest that counts as bits."""
    quantizer = lq.quantizers.NoOp(precision=precision)
    assert quantizer.precision == precision and quantizer.get_config()["precision"] == precision


@pytest.mark.parametrize("config, named", [
    ({"module": "os", "class_name": "system"}, "os.system"),
    ({"module": "os", "class_name": "system", "config": {}}, "os.system"),
    ({"module": "subprocess", "class_name": "run", "config": {},
      "registered_name": "run"}, "subprocess.run"),
    ({"module": "keras.layers", "class_name": "Dense", "config": {"units": 2}},
     "keras.layers.Dense"),
], ids=["os.system", "os.system-config", "subprocess.run", "keras-Dense"])
def test_a_quantizer_config_naming_a_foreign_class_is_refused_at_construction(config, named):
    """Keras hands back the class name as a str for these: the layer would
    fail only at its first call."""
    with pytest.raises(QuantizerError, match=r"^QuantDense\(kernel_quantizer=\.\.\.\): "
                       r"cannot load the quantizer config .*: the config names %s, which "
                       r"is not a quantizer" % re.escape(named)):
        lq.layers.QuantDense(2, kernel_quantizer=config)


def test_a_saved_model_whose_quantizer_names_os_system_is_refused_at_load(tmp_path):
    """The same config in a saved file: refused while loading, naming it, and
    os.system is never called."""
    model = tf.keras.Sequential([tf.keras.Input((3,)),
                                 lq.layers.QuantDense(2, kernel_quantizer="ste_sign")])
    path = tmp_path / "model.h5"
    model.save(str(path))
    import h5py  # pylint: disable=import-outside-toplevel
    with h5py.File(path, "r+") as f:
        config = f.attrs["model_config"]
        config = json.loads(config.decode() if isinstance(config, bytes) else config)
        dense = next(l for l in config["config"]["layers"] if "QuantDense" in l["class_name"])
        dense["config"]["kernel_quantizer"] = {"module": "os", "class_name": "system",
                                               "config": {}}
        f.attrs["model_config"] = json.dumps(config)
    with pytest.raises(Exception) as info:  # pylint: disable=broad-except
        tf.keras.models.load_model(str(path))
    messages = []
    error = info.value
    while error is not None:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    assert any("the config names os.system, which is not a quantizer" in m
               for m in messages), messages


def test_a_non_float_input_is_refused_naming_the_layer():
    layer = lq.layers.QuantDense(2, input_quantizer="ste_sign", name="binary_dense")
    with pytest.raises(QuantizerError, match=r"QuantDense 'binary_dense' \(input_quantizer="
                       r"ste_sign.*\): the input must be a float tensor, got int32"):
        layer(tf.constant([[1, 2, 3]]))


@pytest.mark.parametrize("make, argument", [
    (lambda: lq.layers.QuantConv2D(2, 3, kernel_quantizer="ste_sign",
                                   kernel_constraint="weight_clip", name="q"), "kernel"),
    (lambda: lq.layers.QuantDepthwiseConv2D(3, depthwise_quantizer="ste_sign",
                                            depthwise_constraint="weight_clip", name="q"),
     "depthwise"),
], ids=["conv", "depthwise"])
def test_a_non_float_input_is_refused_with_a_quantized_kernel_only(make, argument):
    with pytest.raises(QuantizerError, match=r"'q' \(%s_quantizer=ste_sign.*\): the input "
                       r"must be a float tensor, got int32" % argument):
        make()(tf.ones([1, 4, 4, 1], tf.int32))


def test_quant_dense_casts_a_non_float_input_as_keras_dense_does():
    layer = lq.layers.QuantDense(2, kernel_quantizer="ste_sign", kernel_constraint="weight_clip",
                                 kernel_initializer="glorot_uniform")
    ints = tf.constant([[1, -2, 0]])
    got = layer(ints)
    assert got.dtype == tf.float32
    np.testing.assert_array_equal(got.numpy(), layer(tf.cast(ints, tf.float32)).numpy())


@pytest.mark.parametrize("name", ["QuantDense", "QuantConv2D", "QuantDepthwiseConv2D",
                                  "QuantSeparableConv1D", "QuantConv3DTranspose"])
def test_signature_shows_the_keras_parameters(name):
    ours = inspect.signature(getattr(lq.layers, name)).parameters
    keras = inspect.signature(getattr(tf.keras.layers, name[len("Quant"):])).parameters
    added = [p for p in ours if p not in keras]
    assert [p for p in ours if p in keras] == list(keras)
    assert all(ours[p].default == keras[p].default for p in keras)
    assert added[0] == "input_quantizer" and all(
        ours[p].kind is inspect.Parameter.KEYWORD_ONLY for p in added)
    assert ("pad_values" in added) == (name not in ("QuantDense", "QuantConv3DTranspose"))


def test_dorefa_checks_a_mode_changed_after_construction():
    quantizer = lq.quantizers.DoReFa(k_bit=2, mode="activations")
    quantizer.mode = "unknown"
    with pytest.raises(QuantizerError, match="DoReFa\\(mode='unknown'\\)"):
        quantizer.call([0.0])
    with pytest.raises(QuantizerError, match="DoReFa\\(mode='unknown'\\)"):
        quantizer.parts()[0](tf.constant([0.5]))


def test_summary_without_macs_keeps_the_tables_mac_columns_as_larq():
    model = tf.keras.Sequential([
        tf.keras.Input((4,)),
        lq.layers.QuantDense(3, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                             kernel_constraint="weight_clip")])
    with_macs, without = [], []
    lq.models.summary(model, print_fn=with_macs.append)
    lq.models.summary(model, print_fn=without.append, include_macs=False)
    assert without[0] == with_macs[0] and "1-bit MACs" in without[0]
    assert "Number of MACs" in with_macs[1] and "MACs" not in without[1]
