"""The Keras quantizers read the estimator records that `graph_override.tf2`
reads: a record changed in place changes both; the defaults are the
records'; and the three places where the two forms differ on purpose
(docs/guide/keras.md, "One source") hold as documented."""

import inspect

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
from graph_override import estimators, tf2
from graph_override.errors import QuantizerError
from graph_override.estimators import _record

X = np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 2.0], np.float32)
DY = np.array([1.5, -1.0, 0.75, -2.0, 1.0, -0.5, 2.0, 1.0, -1.0], np.float32)


def _gradient(fn, x=X, dy=DY):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return tape.gradient(y, x, output_gradients=tf.constant(dy, x.dtype)).numpy()


@pytest.mark.parametrize("name,cls", [("ste_sign", "SteSign"), ("ste_heaviside", "SteHeaviside"),
                                      ("ste_tern", "SteTern")])
def test_a_changed_record_changes_tf2_and_keras(monkeypatch, name, cls):
    before_keras = _gradient(getattr(lq.quantizers, cls)())
    # The record's mask, changed in place: dy passes where x > 0 only.
    spec = estimators.ESTIMATORS[name]
    monkeypatch.setitem(_record._TABLE, name, spec._replace(mask=lambda x, p: x > 0))
    expected = np.where(X > 0, DY, 0.0)
    keras = _gradient(getattr(lq.quantizers, cls)())
    np.testing.assert_array_equal(_gradient(getattr(tf2, name)), expected)
    np.testing.assert_array_equal(keras, expected)
    assert not np.array_equal(before_keras, keras)
    # larq's select gives +0.0 where dy < 0 is masked (tf2: dy * 0 = -0.0).
    assert not np.signbit(keras[X <= 0]).any()


def test_a_changed_larq_form_changes_keras(monkeypatch):
    spec = estimators.ESTIMATORS["approx_sign"]
    monkeypatch.setitem(_record._TABLE, "approx_sign",
                        spec._replace(larq=lambda x, dy, p: 3.0 * dy))
    np.testing.assert_array_equal(_gradient(lq.quantizers.ApproxSign()), 3.0 * DY)
    np.testing.assert_array_equal(_gradient(lq.quantizers.approx_sign), 3.0 * DY)


def test_defaults_and_names_are_the_records():
    for cls in (lq.quantizers.SteSign, lq.quantizers.SteTern, lq.quantizers.SwishSign,
                lq.quantizers.SteHeaviside, lq.quantizers.ApproxSign):
        record = estimators.ESTIMATORS[cls.estimator]
        assert lq.quantizers.get(cls.estimator).__class__ is cls
        assert {k: v for k, v in cls().get_config().items() if k in dict(record.defaults)} \
            == dict(record.defaults)
        assert list(inspect.signature(getattr(lq.quantizers, cls.estimator)).parameters) \
            == ["x"] + [p.name for p in record.params]
    assert lq.quantizers.DoReFa().precision == dict(
        estimators.ESTIMATORS["dorefa_quantize"].defaults)["k_bit"]


def test_swish_sign_gradient_is_zero_at_infinity_as_tf2():
    # larq's formula gives inf/inf = NaN there (tests/keras/test_keras_larq.py).
    x = np.array([np.inf, -np.inf, 0.0], np.float32)
    dy = np.ones_like(x)
    expected = np.array([0.0, 0.0, 5.0], np.float32)
    np.testing.assert_array_equal(_gradient(lq.quantizers.SwishSign(), x, dy), expected)
    np.testing.assert_array_equal(_gradient(tf2.swish_sign, x, dy), expected)


def test_swish_sign_in_float16_is_larqs_arithmetic_not_tf2s():
    # Documented: the Keras quantizer computes in float16 as larq does, where
    # cosh overflows and the gradient is -0; tf2 computes in float32.
    x = np.array([-3.0, -1.0], np.float16)
    dy = np.ones_like(x)
    keras = _gradient(lq.quantizers.SwishSign(), x, dy)
    ours = _gradient(tf2.swish_sign, x, dy)
    assert keras[0] == 0.0 and np.signbit(keras[0])
    assert ours[0] == np.float16(-3.976e-05)
    np.testing.assert_allclose(keras[1], ours[1], rtol=2e-3)  # float16 rounding apart


def test_dorefa_k_bit_range_is_larqs_not_tf2s():
    # Documented: DoReFa takes larq's 1 to 32 bits (a larq model saved with
    # k_bit=32 loads); tf2.dorefa_quantize stops at 16.
    assert lq.quantizers.DoReFa(k_bit=32).precision == 32
    with pytest.raises(QuantizerError, match="from 1 to 32"):
        lq.quantizers.DoReFa(k_bit=33)
    with pytest.raises(ValueError, match="from 1 to 16"):
        tf2.dorefa_quantize(tf.constant([0.5]), k_bit=17)
