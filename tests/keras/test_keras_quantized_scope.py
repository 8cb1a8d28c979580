"""context.quantized_scope(True): get_weights() and saving give the quantized
kernels (each layer's own kernel quantizer), as larq's QuantizedVariable
does; outside the scope, and for layers without a kernel quantizer, the
latent weights. Both releases (tests/keras/test_keras_larq_quantized_scope.py
compares with larq itself on TensorFlow 2.15)."""

import threading

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq

KERAS_3 = hasattr(tf.keras, "ops")
# Exact zeros of both signs (larq: sign(0) = sign(-0.0) = +1) and the clip
# boundaries.
KERNEL = np.array([[0.0, -0.0], [1.0, -1.0], [-0.3, 2.0]], np.float32)
BIAS = np.array([0.25, -0.0], np.float32)


def _model(kernel_quantizer="ste_sign"):
    inputs = tf.keras.Input((3,))
    quant = lq.layers.QuantDense(2, kernel_quantizer=kernel_quantizer, name="quant")
    plain = lq.layers.QuantDense(2, kernel_quantizer=None, name="plain")
    model = tf.keras.Model(inputs, plain(quant(inputs)))
    quant.set_weights([KERNEL, BIAS])
    plain.set_weights([KERNEL[:2] * 3.0, BIAS])
    return model, quant, plain


def _sign(x):
    return np.where(x >= 0, 1.0, -1.0).astype(np.float32)


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def test_get_weights_in_the_scope_are_the_sign_of_the_kernel_and_latent_after():
    model, quant, plain = _model()
    with lq.context.quantized_scope(True):
        kernel, bias = quant.get_weights()
        weights = model.get_weights()
        # A variable's own read cannot be intercepted: the latent kernel.
        latent_read = quant.kernel.numpy()
    np.testing.assert_array_equal(_bits(kernel), _bits(_sign(KERNEL)))
    assert _bits(kernel)[0].tolist() == _bits([1.0, 1.0]).tolist()  # sign(+-0) = +1
    np.testing.assert_array_equal(_bits(bias), _bits(BIAS))  # the bias stays latent
    np.testing.assert_array_equal(_bits(weights[0]), _bits(_sign(KERNEL)))
    np.testing.assert_array_equal(_bits(weights[1]), _bits(BIAS))
    # kernel_quantizer=None: unchanged in the scope.
    np.testing.assert_array_equal(_bits(weights[2]), _bits(KERNEL[:2] * 3.0))
    assert plain.get_weights()[0].tolist() == (KERNEL[:2] * 3.0).tolist()
    np.testing.assert_array_equal(_bits(latent_read), _bits(KERNEL))
    # Out of the scope: the latent kernel, bit for bit (-0.0 kept).
    for got in (quant.get_weights()[0], model.get_weights()[0], quant.kernel.numpy()):
        np.testing.assert_array_equal(_bits(got), _bits(KERNEL))


def test_nested_scopes_read_the_innermost_flag():
    model, quant, _ = _model()
    with lq.context.quantized_scope(True):
        with lq.context.quantized_scope(False):
            np.testing.assert_array_equal(_bits(model.get_weights()[0]), _bits(KERNEL))
        np.testing.assert_array_equal(_bits(quant.get_weights()[0]), _bits(_sign(KERNEL)))
        with lq.context.quantized_scope(True):
            np.testing.assert_array_equal(_bits(quant.get_weights()[0]), _bits(_sign(KERNEL)))
    np.testing.assert_array_equal(_bits(quant.get_weights()[0]), _bits(KERNEL))


@pytest.mark.parametrize("quantizer", [
    lq.quantizers.DoReFa(k_bit=2, mode="weights"), lq.quantizers.MagnitudeAwareSign(),
    lq.quantizers.SteTern(ternary_weight_networks=True), "approx_sign"])
def test_the_layers_own_quantizer_gives_the_values(quantizer):
    model, quant, _ = _model(quantizer)
    expected = quant.kernel_quantizer(tf.constant(KERNEL)).numpy()
    with lq.context.quantized_scope(True):
        got = model.get_weights()[0]
    np.testing.assert_array_equal(_bits(got), _bits(expected))
    assert not np.array_equal(got, KERNEL)


class _Store(dict):
    """A weights store that reads what is written (the value of a variable at
    that moment), or fails at the first write."""

    def __init__(self, fail=False):
        super().__init__()
        self.fail = fail

    def __setitem__(self, key, value):
        if self.fail:
            raise RuntimeError("disk full")
        super().__setitem__(key, np.array(value.numpy() if hasattr(value, "numpy") else value))


def _layer_cases():
    return [
        (lq.layers.QuantConv1D(2, 2, kernel_quantizer="ste_sign"), (4, 3), 1),
        (lq.layers.QuantConv2D(2, 2, kernel_quantizer="ste_sign"), (4, 4, 3), 1),
        (lq.layers.QuantConv3D(2, 2, kernel_quantizer="ste_sign"), (3, 3, 3, 2), 1),
        (lq.layers.QuantConv2DTranspose(2, 2, kernel_quantizer="ste_sign"), (3, 3, 2), 1),
        (lq.layers.QuantConv3DTranspose(2, 2, kernel_quantizer="ste_sign"), (2, 2, 2, 2), 1),
        (lq.layers.QuantSeparableConv1D(2, 2, depthwise_quantizer="ste_sign",
                                        pointwise_quantizer="ste_sign"), (4, 3), 2),
        (lq.layers.QuantDepthwiseConv2D(2, depthwise_quantizer="ste_sign"), (4, 4, 3), 1),
        (lq.layers.QuantSeparableConv2D(2, 2, depthwise_quantizer="ste_sign",
                                        pointwise_quantizer="ste_sign"), (4, 4, 3), 2),
    ]


def test_every_quantized_kernel_of_every_layer_kind():
    for layer, shape, quantized in _layer_cases():
        layer.build((None,) + shape)
        rng = np.random.default_rng(0)
        latent = [rng.normal(size=w.shape).astype(np.float32) for w in layer.get_weights()]
        latent[0].flat[0] = 0.0
        layer.set_weights(latent)
        store = _Store()
        with lq.context.quantized_scope(True):
            got = layer.get_weights()
            layer.save_own_variables(store)  # what .keras and .weights.h5 write
        written = [store[str(i)] for i in range(len(store))]
        for i, (ours, saved, value) in enumerate(zip(got, written, latent)):
            expected = _sign(value) if i < quantized else value
            np.testing.assert_array_equal(_bits(ours), _bits(expected), err_msg=layer.name)
            np.testing.assert_array_equal(_bits(saved), _bits(expected), err_msg=layer.name)
        assert len(written) == len(latent)
        for ours, value in zip(layer.get_weights(), latent):
            np.testing.assert_array_equal(_bits(ours), _bits(value), err_msg=layer.name)


def _formats():
    if KERAS_3:
        return [("save_weights", "w.weights.h5"), ("save", "m.keras"), ("save", "m.h5")]
    return [("save_weights", "w.h5"), ("save", "m.keras"), ("save", "m.h5")]


@pytest.mark.parametrize("method,name", _formats())
def test_saving_in_the_scope_writes_the_quantized_kernel(tmp_path, method, name):
    model, quant, _ = _model()
    def saved(path):
        if method == "save":
            return tf.keras.models.load_model(path).get_weights()
        loaded = _model()[0]
        loaded.load_weights(path)
        return loaded.get_weights()

    with lq.context.quantized_scope(True):
        getattr(model, method)(str(tmp_path / name))
        np.testing.assert_array_equal(_bits(quant.kernel.numpy()), _bits(KERNEL))
    np.testing.assert_array_equal(_bits(quant.kernel.numpy()), _bits(KERNEL))
    # Loaded: the quantized kernel becomes the latent one (as with larq).
    weights = saved(str(tmp_path / name))
    np.testing.assert_array_equal(_bits(weights[0]), _bits(_sign(KERNEL)))
    np.testing.assert_array_equal(_bits(weights[1]), _bits(BIAS))
    np.testing.assert_array_equal(_bits(weights[2]), _bits(KERNEL[:2] * 3.0))
    # Saved outside the scope: the latent kernel.
    getattr(model, method)(str(tmp_path / ("out_" + name)))
    np.testing.assert_array_equal(_bits(saved(str(tmp_path / ("out_" + name)))[0]),
                                  _bits(KERNEL))


@pytest.mark.skipif(KERAS_3, reason="Keras 3 saves no TensorFlow checkpoint")
def test_a_tensorflow_checkpoint_keeps_the_latent_kernel_as_larqs_does(tmp_path):
    model, quant, _ = _model()
    with lq.context.quantized_scope(True):
        model.save_weights(str(tmp_path / "ckpt"))
        model.save(str(tmp_path / "saved_model"), save_format="tf")
        np.testing.assert_array_equal(_bits(quant.get_weights()[0]), _bits(_sign(KERNEL)))
    for path in ("ckpt", "saved_model/variables/variables"):
        reader = tf.train.load_checkpoint(str(tmp_path / path))
        kernel = reader.get_tensor("layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE")
        np.testing.assert_array_equal(_bits(kernel), _bits(KERNEL))


def test_a_failed_write_in_the_scope_restores_the_latent_kernel():
    _, quant, plain = _model()
    with lq.context.quantized_scope(True):
        store = _Store()
        quant.save_own_variables(store)
        with pytest.raises(RuntimeError, match="disk full"):
            quant.save_own_variables(_Store(fail=True))
        np.testing.assert_array_equal(_bits(quant.kernel.numpy()), _bits(KERNEL))
        plain_store = _Store()
        plain.save_own_variables(plain_store)
    np.testing.assert_array_equal(_bits(store["0"]), _bits(_sign(KERNEL)))
    np.testing.assert_array_equal(_bits(store["1"]), _bits(BIAS))
    np.testing.assert_array_equal(_bits(plain_store["0"]), _bits(KERNEL[:2] * 3.0))
    np.testing.assert_array_equal(_bits(quant.kernel.numpy()), _bits(KERNEL))


def test_a_model_inside_a_model_reads_and_saves_quantized(tmp_path):
    inner, quant, _ = _model()
    inputs = tf.keras.Input((3,))
    outer = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inner(inputs)))
    name = "w.weights.h5" if KERAS_3 else "w.h5"
    with lq.context.quantized_scope(True):
        got = outer.get_weights()
        outer.save_weights(str(tmp_path / name))
    np.testing.assert_array_equal(_bits(got[0]), _bits(_sign(KERNEL)))
    np.testing.assert_array_equal(_bits(quant.kernel.numpy()), _bits(KERNEL))
    outer.load_weights(str(tmp_path / name))
    np.testing.assert_array_equal(_bits(quant.kernel.numpy()), _bits(_sign(KERNEL)))


def test_mirrored_strategy_model_reads_and_saves_quantized(tmp_path):
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        model, quant, _ = _model()
    with lq.context.quantized_scope(True):
        got = model.get_weights()[0]
        model.save_weights(str(tmp_path / ("w.weights.h5" if KERAS_3 else "w.h5")))
    np.testing.assert_array_equal(_bits(got), _bits(_sign(KERNEL)))
    np.testing.assert_array_equal(_bits(quant.kernel.numpy()), _bits(KERNEL))
    loaded = _model()[0]
    loaded.load_weights(str(tmp_path / ("w.weights.h5" if KERAS_3 else "w.h5")))
    np.testing.assert_array_equal(_bits(loaded.get_weights()[0]), _bits(_sign(KERNEL)))


def test_the_scope_is_the_threads_own():
    model, _, _ = _model()
    seen = {}
    with lq.context.quantized_scope(True):
        thread = threading.Thread(target=lambda: seen.update(other=model.get_weights()[0]))
        thread.start()
        thread.join()
        mine = model.get_weights()[0]
    np.testing.assert_array_equal(_bits(seen["other"]), _bits(KERNEL))
    np.testing.assert_array_equal(_bits(mine), _bits(_sign(KERNEL)))
