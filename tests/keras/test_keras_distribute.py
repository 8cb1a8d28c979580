"""graph_override.keras.enable_multi_worker_fit: what it replaces in Keras 3's
TensorFlow trainer, that it puts Keras's own functions back, that every
strategy but a multi-worker one runs Keras's own code, and its error when a
Keras lacks what it replaces. model.fit under MultiWorkerMirroredStrategy
itself, with two worker processes, is tests/keras/test_keras_training.py's."""

import importlib

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
from graph_override._tensorflow import compat

KERAS_3 = hasattr(tf.keras, "ops")
keras3 = pytest.mark.skipif(not KERAS_3, reason="Keras 2's trainer needs nothing")


@pytest.fixture
def trainer():
    """Keras 3's TensorFlow trainer module, its own functions put back after."""
    module = importlib.import_module("keras.src.backend.tensorflow.trainer")
    yield module
    lq.disable_multi_worker_fit()


def _own(trainer):
    return (trainer.TensorFlowTrainer.__dict__["_maybe_symbolic_build"],
            trainer.reduce_per_replica)


@keras3
def test_enable_replaces_two_functions_and_disable_puts_them_back(trainer):
    before = _own(trainer)
    assert lq.enable_multi_worker_fit() is True
    during = _own(trainer)
    assert during[0] is not before[0] and during[1] is not before[1]
    assert during[0].__wrapped__ is before[0] and during[1].__wrapped__ is before[1]
    assert lq.enable_multi_worker_fit() is True  # again: the same replacements
    assert _own(trainer) == during
    assert lq.disable_multi_worker_fit() is False
    assert _own(trainer) == before
    assert lq.disable_multi_worker_fit() is False  # again: nothing to put back
    assert _own(trainer) == before


@pytest.mark.skipif(KERAS_3, reason="Keras 2 only")
def test_keras2_needs_nothing():
    assert lq.enable_multi_worker_fit() is False
    assert lq.disable_multi_worker_fit() is False


@keras3
def test_other_strategies_run_keras_s_own_reduction(trainer):
    values = {"loss": tf.constant(2.5), "acc": tf.constant([0.25, 0.75])}
    own = trainer.reduce_per_replica
    lq.enable_multi_worker_fit()
    for strategy in (tf.distribute.get_strategy(),
                     tf.distribute.OneDeviceStrategy("/cpu:0")):
        for reduction in ("auto", "mean", "sum", "first", "concat"):
            got = trainer.reduce_per_replica(values, strategy, reduction)
            want = own(values, strategy, reduction)
            for key in values:
                np.testing.assert_array_equal(got[key], want[key])


def _fit(enabled):
    tf.keras.utils.set_random_seed(3)
    model = tf.keras.Sequential([tf.keras.Input((6,)),
                                 lq.layers.QuantDense(4, input_quantizer="ste_sign",
                                                      kernel_quantizer="ste_sign"),
                                 tf.keras.layers.Activation("softmax")])
    model.compile(tf.keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (32, 6)).astype(np.float32)
    x[0] = 0.0  # exact zeros: ste_sign's tie
    y = rng.randint(0, 4, 32)
    initial = model.get_weights()
    if enabled:
        lq.enable_multi_worker_fit()
    try:
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        return (initial, model.get_weights(), history.history["loss"],
                model.evaluate(x, y, verbose=0))
    finally:
        lq.disable_multi_worker_fit()


@keras3
def test_fit_without_a_strategy_is_bitwise_the_same_enabled(trainer):
    (initial, w0, loss0, ev0), (_, w1, loss1, ev1) = _fit(False), _fit(True)
    for a, b in zip(w0, w1):
        np.testing.assert_array_equal(a, b)
    assert loss0 == loss1 and ev0 == ev1
    assert any(np.abs(a - b).max() > 0 for a, b in zip(w0, initial))


@keras3
def test_a_keras_without_the_replaced_functions_is_named(trainer, monkeypatch):
    monkeypatch.delattr(trainer, "reduce_per_replica")
    monkeypatch.delattr(trainer, "_collective_all_reduce_multi_worker")
    with pytest.raises(RuntimeError) as caught:
        lq.enable_multi_worker_fit()
    message = str(caught.value)
    assert "has no reduce_per_replica, _collective_all_reduce_multi_worker" in message
    assert "TensorFlowTrainer._maybe_symbolic_build" not in message
    assert "custom loop" in message
    assert compat._KERAS_TRAINER_PATCHES == {}  # nothing half replaced
