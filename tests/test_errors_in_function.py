"""Every error class of the project keeps its class through tf.function,
with AutoGraph on (the default) and off, so ``except EagerModeError`` and
``except KeyError`` catch what they catch in eager code."""

import numpy as np
import pytest
import tensorflow as tf

import graph_override as go
from graph_override import errors, overrides
from graph_override.tf2 import op_with_gradient

ERROR_CLASSES = [getattr(errors, name) for name in errors.__all__]
X = np.array([-1.5, -0.5, 0.0, 0.5, 1.5], np.float32)


def _raiser(cls):
    def helper(x):  # converted by AutoGraph too: a nested user function
        if x.shape.rank is not None:
            raise cls("raised by %s" % cls.__name__)
        return x
    return helper


@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "plain"])
@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_each_class_keeps_its_type_and_message(cls, autograph):
    helper = _raiser(cls)

    @tf.function(autograph=autograph)
    def traced(x):
        return helper(x) * 2.0

    with pytest.raises(cls) as info:
        traced(tf.constant(X))
    assert type(info.value) is cls
    assert str(info.value) == "raised by %s" % cls.__name__
    # The builtin base still catches it.
    builtin = [b for b in cls.__mro__ if b.__module__ == "builtins"][0]
    assert isinstance(info.value, builtin)


@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "plain"])
@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_each_class_raised_by_a_gradient_function_under_a_tape(cls, autograph):
    def bad_gradient(op, dy):
        raise cls("gradient of %s" % op.type)

    fn = op_with_gradient(tf.sign, bad_gradient)

    @tf.function(autograph=autograph)
    def traced(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x)

    with pytest.raises(cls, match="gradient of Sign"):
        traced(tf.constant(X))


@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "plain"])
def test_eager_mode_error_of_a_scope_under_a_tape(autograph):
    @tf.function(autograph=autograph)
    def with_scope(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            with go.override_gradients({"Sign": "Identity"}):
                y = tf.sign(x)
        return tape.gradient(y, x)

    with pytest.raises(go.EagerModeError, match="GradientTape inside tf.function"):
        with_scope(tf.constant(X))

    @tf.function(autograph=autograph)
    def with_family(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = overrides.ste_sign(x)
        return tape.gradient(y, x)

    with pytest.raises(go.EagerModeError, match="GradientTape"):
        with_family(tf.constant(X))


@pytest.mark.parametrize("autograph", [True, False], ids=["autograph", "plain"])
def test_library_errors_raised_while_tracing(autograph):
    @tf.function(autograph=autograph)
    def misspelled(x):
        with go.override_gradients({"sign": "Identity"}):
            return tf.sign(x)

    with pytest.raises(go.UnknownOpTypeError, match="Did you mean 'Sign'"):
        misspelled(tf.constant(X))

    @tf.function(autograph=autograph)
    def unknown(x):
        with go.override_gradients({"Sign": "NoSuchGradientName"}):
            return tf.sign(x)

    with pytest.raises(go.UnknownGradientError):
        unknown(tf.constant(X))

    @tf.function(autograph=autograph)
    def nothing(x):
        with go.override_gradients({"Floor": "Identity"}, on_no_match="raise"):
            return tf.sign(x)

    with pytest.raises(go.NoMatchError):
        nothing(tf.constant(X))

    def too_few(op, dy):
        return dy

    @tf.function(autograph=autograph)
    def contract(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = op_with_gradient(tf.multiply, too_few)(x, x + 1.0)
        return tape.gradient(y, x)

    with pytest.raises(go.GradientContractError, match="returned 1 gradient"):
        contract(tf.constant(X))
