"""frozen.FrozenLayer in model.fit (Keras 3 on TF 2.21, Keras 2 on TF 2.15)."""

import numpy as np
import pytest
import tensorflow as tf

import frozen_tf2_models as models
from graph_override import frozen

keras = tf.keras


@pytest.fixture(scope="module")
def mlp():
    return models.binarized_mlp("sign")


def _data():
    rng = np.random.RandomState(0)
    x = rng.randn(256, 16).astype(np.float32)
    return x, np.argmax(x[:, :4], axis=1)


def _fit(layer, epochs=6):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((16,))
    model = keras.Model(inputs, layer(keras.layers.Dense(16)(inputs)))
    model.compile(keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = _data()
    history = model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=False)
    return model, history.history["loss"]


@pytest.mark.parametrize("trainable", [True, False])
def test_fit_trains_or_keeps_the_frozen_weights(mlp, trainable):
    fn = frozen.to_function(*mlp, rules=["Sign=ste_sign"], trainable="kernel|bias")
    layer = frozen.FrozenLayer(fn, trainable=trainable)
    assert len(layer.weights) == 6
    before = [np.array(w.numpy()) for w in layer.weights]
    for value, initial in zip(before, fn.initial_values().values()):
        assert np.array_equal(value.view(np.uint32), initial.view(np.uint32))
    _, losses = _fit(layer)
    assert losses[-1] < 0.8 * losses[0]  # the Dense layer learns through ste_sign
    after = [w.numpy() for w in layer.weights]
    changed = [not np.array_equal(a, b) for a, b in zip(before, after)]
    if trainable:
        assert len(layer.trainable_weights) == 6 and all(changed)
    else:
        assert len(layer.trainable_weights) == 0 and not any(changed)


def test_layer_matches_the_function_and_exports_its_weights(mlp):
    fn = frozen.to_function(*mlp, rules=["Sign=ste_sign"], trainable="kernel")
    layer = frozen.FrozenLayer(fn)
    x = np.random.RandomState(2).randn(5, 16).astype(np.float32)
    np.testing.assert_array_equal(layer(x).numpy(), fn(x).numpy())
    _fit(layer, epochs=2)
    assert not np.array_equal(layer(x).numpy(), fn(x).numpy())
    exported = layer.export_function()
    assert exported is fn
    np.testing.assert_array_equal(layer(x).numpy(), fn(x).numpy())


def test_layer_refuses_other_objects_and_config():
    with pytest.raises(TypeError, match="needs a FrozenFunction"):
        frozen.FrozenLayer("model.pb")
    graph_def, inputs, outputs = models.float64_round()
    layer = frozen.FrozenLayer(frozen.to_function(graph_def, inputs, outputs))
    assert layer.dtype == "float64"  # Keras must not cast float64 inputs
    x = np.ones((2, 5))
    assert layer(x).dtype == tf.float64
    with pytest.raises(NotImplementedError, match="export_function"):
        layer.get_config()
