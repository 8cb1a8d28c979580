"""graph_override.testing: evaluate and assert_same_gradients must catch what
they are meant to catch."""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import testing, tf2


def _two_in_two_out(a, b):
    return [a * b, a + 2.0 * b]


@pytest.mark.parametrize("mode", testing.MODES)
def test_evaluate_several_inputs_and_outputs(mode):
    a = np.array([1.0, -2.0, 0.0], np.float32)
    b = np.array([3.0, 0.5, -1.0], np.float32)
    up = [np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, 0.0, -1.0], np.float32)]
    result = testing.evaluate(_two_in_two_out, [a, b], mode, upstream=up)
    np.testing.assert_array_equal(result.outputs[0], a * b)
    np.testing.assert_array_equal(result.outputs[1], a + 2 * b)
    np.testing.assert_allclose(result.gradients[0], up[0] * b + up[1])
    np.testing.assert_allclose(result.gradients[1], up[0] * a + 2 * up[1])


@pytest.mark.parametrize("mode", testing.MODES)
def test_unconnected_inputs_get_zeros(mode):
    result = testing.evaluate(lambda a, b: a * 3.0, [np.ones(2, np.float32)] * 2, mode)
    np.testing.assert_array_equal(result.gradients[1], [0.0, 0.0])


def test_evaluate_rejects_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        testing.evaluate(tf.identity, np.ones(2), "session")
    with pytest.raises(ValueError, match="upstream"):
        testing.evaluate(tf.identity, np.ones(2, np.float32), "eager",
                         upstream=[np.ones(2), np.ones(2)])


def test_assert_same_gradients_passes_for_the_same_function():
    x = np.linspace(-2, 2, 9).astype(np.float32)
    testing.assert_same_gradients(tf2.ste_sign, tf2.ste_sign, x,
                                  modes=["eager", ("graph", "function")])


def test_it_catches_a_different_gradient():
    x = np.linspace(-2, 2, 9).astype(np.float32)
    with pytest.raises(AssertionError, match=r"\[eager vs eager\] gradient of input 0"):
        # same forward, TensorFlow's own (zero) Sign gradient
        testing.assert_same_gradients(
            tf2.ste_sign, lambda t: tf.sign(tf.sign(t) + 0.1), x, modes=["eager"])


def test_it_catches_a_one_bit_forward_difference_and_signed_zero():
    x = np.array([1.0, 2.0], np.float32)
    nudged = lambda t: t * (1 + 2.0 ** -23)  # noqa: E731
    with pytest.raises(AssertionError, match="differ bitwise at 2 of 2"):
        testing.assert_same_gradients(tf.identity, nudged, x, modes=["eager"])
    testing.assert_same_gradients(tf.identity, nudged, x, modes=["eager"], forward="close")
    z = np.array([0.0], np.float32)
    with pytest.raises(AssertionError, match="bitwise"):
        testing.assert_same_gradients(tf.identity, lambda t: -t, z, modes=["eager"],
                                      forward="bitwise")


def test_nan_equals_nan_in_the_forward_check():
    x = np.array([np.nan, 1.0], np.float32)
    testing.assert_same_gradients(tf.identity, lambda t: t + 0.0, x, modes=["eager"])


def test_bad_forward_option():
    with pytest.raises(ValueError, match="forward"):
        testing.assert_same_gradients(tf.identity, tf.identity, np.ones(1), forward="yes")


@pytest.mark.parametrize("mode", testing.MODES)
def test_sparse_gradients_come_back_dense(mode):
    params = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    result = testing.evaluate(lambda p: tf.gather(p, [0, 2, 2]), params, mode)
    np.testing.assert_array_equal(result.gradients[0], [1.0, 0.0, 2.0, 0.0])


@pytest.mark.parametrize("given", [[0.5, -0.5], (1.0, 2.0, 3.0), [1, 0]])
def test_a_list_of_python_numbers_is_refused_with_both_spellings(given):
    with pytest.raises(TypeError) as info:
        testing.evaluate(tf2.ste_sign, given, "eager")
    message = str(info.value)
    assert repr(given) in message
    assert "np.array(%r, np.float32)" % list(given) in message
    assert "%d scalar inputs" % len(given) in message
    assert "clip_value" not in message


@pytest.mark.parametrize("mode", testing.MODES)
def test_what_the_message_suggests_works(mode):
    one = testing.evaluate(tf2.ste_sign, np.array([0.5, -0.5], np.float32), mode)
    np.testing.assert_array_equal(one.outputs, [1.0, -1.0])
    two = testing.evaluate(lambda a, b: a * b, [np.float32(v) for v in [0.5, -0.5]], mode)
    np.testing.assert_array_equal(two.gradients, [-0.5, 0.5])
    # numpy scalars and arrays in a list stay one input each.
    mixed = testing.evaluate(lambda a, b: a + b, [np.float32(2.0), np.ones(2, np.float32)], mode)
    np.testing.assert_array_equal(mixed.outputs, [3.0, 3.0])
