"""The estimators as `tf.custom_gradient` functions: the TF2 family.

Works in eager mode, inside `tf.function`, in Keras layers and in graph mode.
It is the migration target of override-map code and the oracle that the
`overrides` and `stopgrad` families are tested against. Non-tensor settings
(clip_value, beta, ...) are captured in a closure around the custom-gradient
function, as larq does.

`op_with_gradient` runs a legacy ``(op, grad)`` gradient function unchanged
under `tf.custom_gradient`; see `graph_override.legacy`.

Keras: importing this module registers every estimator with Keras as
``graph_override>NAME`` (``keras.utils.register_keras_serializable``), and
so are `Estimator` (an estimator with settings other than the defaults, as
one callable) and `OpWithGradient` (what `op_with_gradient` returns). A
model that uses them as an activation, in a Lambda layer or in a layer's
config saves to ``.keras`` (and HDF5 where Keras supports it) and loads
with ``keras.models.load_model`` without ``custom_objects`` in any process
that has imported ``graph_override.tf2``. See docs/guide/tf2.md.
"""

import tensorflow as tf

from graph_override import estimators
from graph_override._families import functions, keras_saving
from graph_override._trust.allowed import allow_op_functions
from graph_override.legacy import OpWithGradient, op_with_gradient

# The estimator functions are made from the table (see functions.define).
__all__ = ["Estimator", "OpWithGradient", "allow_op_functions", "op_with_gradient"] + list(
    functions.ESTIMATOR_FUNCTIONS)


def _apply(estimator, x, name, params):
    params = estimators.normalize(estimator, params)
    with tf.name_scope(name or estimator):
        x = estimators.check_float_input(x, estimator)

        @tf.custom_gradient
        def estimator_op(x):
            y = estimators.forward(estimator, x, params)

            def grad(dy):
                return estimators.gradient(estimator, x, dy, params, y=y)
            return y, grad

        return estimator_op(x)


_FUNCTIONS = functions.define(__name__, "tf2", _apply)
globals().update(_FUNCTIONS)


class Estimator:
    """An estimator with its settings, as one callable object that Keras can
    save by name: ``Estimator("ste_sign", clip_value=0.5)(x)`` is
    ``ste_sign(x, clip_value=0.5)``, the same forward values and gradient.

    Use it where Keras wants a function and the settings are not the
    defaults: ``Dense(..., activation=Estimator("ste_sign", clip_value=0.5))``,
    ``Lambda(Estimator("dorefa_quantize", k_bit=4))``, a quantizer in your own
    layer's config. Keras saves it as ``graph_override>Estimator`` with the
    estimator's name and every parameter (`get_config`), and loads it without
    custom_objects in any process that has imported `graph_override.tf2`.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override import tf2
      >>> binarize = tf2.Estimator("ste_sign", clip_value=0.5)
      >>> binarize
      Estimator('ste_sign', clip_value=0.5)
      >>> x = tf.constant([-1.0, -0.5, 0.0, 0.25, 0.75])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = binarize(x)
      >>> print(y.numpy(), tape.gradient(y, x).numpy())
      [-1. -1.  1.  1.  1.] [0. 1. 1. 1. 0.]
      >>> binarize.get_config()
      {'estimator': 'ste_sign', 'clip_value': 0.5}
      >>> tf2.Estimator.from_config(binarize.get_config()) == binarize
      True

    Args:
      estimator: the name of one of the estimator functions of this module
        ("ste_sign", "ste_tern", "dorefa_quantize", ...).
      **params: its parameters, as the function of that name takes them;
        the others keep their defaults.

    Raises:
      UnknownEstimatorError: `estimator` is not an estimator's name (the
        message suggests the closest); a ValueError.
      ValueError: a parameter is out of range.
      TypeError: a parameter the estimator does not take, or of the wrong
        type; a missing required one (scale_gradient's scale).
    """

    def __init__(self, estimator, **params):
        if not isinstance(estimator, str):
            name = getattr(estimator, "__name__", None)
            raise TypeError("Estimator(estimator, ...): estimator must be the name "
                            "of an estimator, such as %r, got %r" % (
                                name if name in estimators.ESTIMATORS else "ste_sign",
                                estimator))
        spec = estimators.spec(estimator, where="Estimator(%r)" % estimator)  # one look-up
        self._estimator = estimator
        self._params = estimators.normalize(spec, params)

    @property
    def estimator(self):
        """The estimator's name, e.g. "ste_sign"."""
        return self._estimator

    @property
    def params(self):
        """Every parameter of the estimator, defaults filled in (a new dict)."""
        return dict(self._params)

    __name__ = property(keras_saving.no_name)

    def __call__(self, x, name=None):
        """The estimator with its settings applied to `x` (``name``: the name
        scope, default the estimator's name)."""
        return _apply(self._estimator, x, name, dict(self._params))

    def get_config(self):
        """``{"estimator": name, **params}``: what Keras saves."""
        return dict([("estimator", self._estimator)] + list(self._params.items()))

    @classmethod
    def from_config(cls, config):
        """The Estimator a config from `get_config` describes."""
        if not isinstance(config, dict) or "estimator" not in config:
            raise TypeError("an Estimator config is a dict with the key 'estimator' "
                            "and the estimator's parameters, got %r" % (config,))
        params = dict(config)
        return cls(params.pop("estimator"), **params)

    def __eq__(self, other):
        if not isinstance(other, Estimator):
            return NotImplemented
        return self.get_config() == other.get_config()

    def __hash__(self):
        return hash((self._estimator, tuple(self._params.items())))

    def __repr__(self):
        return "Estimator(%s)" % ", ".join([repr(self._estimator)] + [
            "%s=%r" % kv for kv in self._params.items()])


keras_saving.register(list(_FUNCTIONS.values()) + [Estimator])
