"""context.quantized_scope(True) against larq 0.13.3 itself (TensorFlow 2.15
only; see tests/keras/test_keras_larq.py): the same layers with the same
weights give the same arrays, bit for bit, from get_weights() in the scope,
and from the files saved there."""

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as gk

if hasattr(tf.keras, "ops"):  # Keras 3
    pytest.skip("larq 0.13 runs on Keras 2 (TensorFlow 2.15) only",
                allow_module_level=True)
lq = pytest.importorskip("larq")

# (layer, arguments, input shape); every quantizer argument of larq's layers.
CASES = [
    ("QuantDense", dict(units=3, kernel_quantizer="ste_sign"), (4,)),
    ("QuantDense", dict(units=3, kernel_quantizer="magnitude_aware_sign"), (4,)),
    ("QuantDense", dict(units=3, kernel_quantizer="ste_tern"), (4,)),
    ("QuantDense", dict(units=3, kernel_quantizer=None), (4,)),
    ("QuantConv1D", dict(filters=2, kernel_size=2, kernel_quantizer="approx_sign"), (5, 3)),
    ("QuantConv2D", dict(filters=2, kernel_size=2, kernel_quantizer="swish_sign",
                         input_quantizer="ste_sign"), (4, 4, 3)),
    ("QuantConv3D", dict(filters=2, kernel_size=2, kernel_quantizer="ste_sign"), (3, 3, 3, 2)),
    ("QuantConv2DTranspose", dict(filters=2, kernel_size=2, kernel_quantizer="ste_sign"),
     (3, 3, 2)),
    ("QuantConv3DTranspose", dict(filters=2, kernel_size=2, kernel_quantizer="ste_heaviside"),
     (2, 2, 2, 2)),
    ("QuantSeparableConv1D", dict(filters=2, kernel_size=2, depthwise_quantizer="ste_sign",
                                  pointwise_quantizer="ste_sign"), (5, 3)),
    ("QuantDepthwiseConv2D", dict(kernel_size=2, depthwise_quantizer="ste_sign"), (4, 4, 3)),
    ("QuantSeparableConv2D", dict(filters=2, kernel_size=2, depthwise_quantizer="ste_sign",
                                  pointwise_quantizer="magnitude_aware_sign"), (4, 4, 3)),
]


def _dorefa(module):
    return module.quantizers.DoReFa(k_bit=2, mode="weights")


def _models(name, arguments, shape):
    """larq's model and ours, with the same weights: exact zeros of both signs
    and the clip boundaries among normal draws."""
    models = []
    for module in (lq, gk):
        inputs = tf.keras.Input(shape)
        layer = getattr(module.layers, name)(**arguments)
        dorefa = module.layers.QuantDense(2, kernel_quantizer=_dorefa(module))
        models.append(tf.keras.Model(inputs, dorefa(tf.keras.layers.Flatten()(layer(inputs)))))
    rng = np.random.default_rng(1)
    weights = [rng.normal(size=w.shape).astype(np.float32) for w in models[0].get_weights()]
    for w in weights:
        w.flat[:4] = [0.0, -0.0, 1.0, -1.0][:w.size]
    for model in models:
        model.set_weights(weights)
    return models, weights


def _assert_bitwise(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("name,arguments,shape", CASES, ids=[
    "%s-%s" % (c[0], "-".join(str(v) for k, v in c[1].items() if "quantizer" in k))
    for c in CASES])
def test_get_weights_in_the_scope_are_larqs(name, arguments, shape):
    (theirs, ours), weights = _models(name, arguments, shape)
    with gk.context.quantized_scope(True), lq.context.quantized_scope(True):
        quantized = ours.get_weights()
        _assert_bitwise(quantized, theirs.get_weights())
        for a, b in zip(ours.layers, theirs.layers):
            _assert_bitwise(a.get_weights(), b.get_weights())
    assert any(not np.array_equal(q, w) for q, w in zip(quantized, weights))
    _assert_bitwise(ours.get_weights(), theirs.get_weights())
    _assert_bitwise(ours.get_weights(), weights)


@pytest.mark.parametrize("name", ["w.h5", "m.h5", "m.keras", "w_checkpoint"])
def test_files_saved_in_the_scope_hold_larqs_arrays(tmp_path, name):
    case = CASES[-1]
    (theirs, ours), _ = _models(*case)
    paths = {}
    for module, model in (("larq", theirs), ("ours", ours)):
        paths[module] = str(tmp_path / (module + "_" + name))
        with gk.context.quantized_scope(True), lq.context.quantized_scope(True):
            if name.startswith("w"):
                model.save_weights(paths[module])
            else:
                model.save(paths[module])
    loaded = []
    for module in ("larq", "ours"):
        # Each file read into a model of ours, out of the scope: the quantized
        # kernels are its latent ones now.
        fresh = _models(*case)[0][1]
        if name.startswith("w"):
            fresh.load_weights(paths[module])
        else:
            fresh.set_weights(tf.keras.models.load_model(paths[module]).get_weights())
        loaded.append(fresh.get_weights())
    _assert_bitwise(loaded[1], loaded[0])
    # TensorFlow checkpoints keep the latent kernels; .h5 and .keras the quantized.
    with lq.context.quantized_scope("checkpoint" not in name):
        _assert_bitwise(loaded[0], theirs.get_weights())
