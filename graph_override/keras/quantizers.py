"""larq's quantizers on Keras 3 and Keras 2, by larq's names and classes.

A quantizer is a Keras layer that maps a full-precision tensor to a quantized
one with a straight-through gradient; the quantized layers
(`graph_override.keras.layers`) apply one to their input
(``input_quantizer``) and one to each kernel (``kernel_quantizer``). Each is
bitwise larq 0.13.3's, forward and gradient (but SwishSign's 0 at +-inf):
both read from the estimator records, as `graph_override.tf2` does
(`graph_override.keras._functions`). The quantizers:

| name (`get`)             | class                | precision | function               |
|--------------------------|----------------------|-----------|------------------------|
| ``"ste_sign"``           | `SteSign`            | 1         | `ste_sign`             |
| ``"approx_sign"``        | `ApproxSign`         | 1         | `approx_sign`          |
| ``"swish_sign"``         | `SwishSign`          | 1         | `swish_sign`           |
| ``"ste_heaviside"``      | `SteHeaviside`       | 1         | `ste_heaviside`        |
| ``"ste_tern"``           | `SteTern`            | 2         | `ste_tern`             |
| ``"magnitude_aware_sign"`` | `MagnitudeAwareSign` | 1       | `magnitude_aware_sign` |
| ``"dorefa_quantizer"``   | `DoReFa`             | k_bit     | -                      |
| ``"noop"``               | `NoOp`               | as given (32 by name) | -          |

``precision`` is what `graph_override.keras.models.summary` counts a
quantized weight as. Names, quantizer objects, `tf2.Estimator` objects and any
function of one tensor are accepted wherever a quantizer is (`get`).
"""

import difflib
import inspect
import numbers

import tensorflow as tf

from graph_override._families import keras_saving
from graph_override.errors import QuantizerError

__all__ = [
    "ApproxSign", "DoReFa", "DoReFaQuantizer", "MagnitudeAwareSign", "NoOp",
    "NoOpQuantizer", "Quantizer", "SteHeaviside", "SteSign", "SteTern",
    "SwishSign", "approx_sign", "deserialize", "get", "magnitude_aware_sign",
    "serialize", "ste_heaviside", "ste_sign", "ste_tern", "swish_sign",
]

from graph_override.keras import _functions
from graph_override.keras._quantizer_configs import decorated_function_config as _decorated
from graph_override.keras._quantizer_configs import deserialize, function_named


# Each name of a quantizer class (its own, larq's), filled as it is defined; the
# functions by name: a layer given one (``lq.quantizers.ste_sign``) saves its name.
BY_NAME = {}
FUNCTIONS = {}


class Quantizer(tf.keras.layers.Layer):
    """Base class of the quantizers: a Keras layer with a `precision` (the
    bits of its output, for `summary`; None for full precision).

    Args:
      metrics: larq's training metrics; only None or [] (no metrics) is
        supported here.
      **kwargs: the Keras layer's arguments (name, dtype, ...).
    """

    precision = None
    larq_names = ()  # the names `get` knows the class by, beside its own

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Each quantizer class registers its names where it is defined.
        if cls.__module__ == __name__ and not cls.__name__.startswith("_"):
            for name in (cls.__name__,) + tuple(cls.__dict__.get("larq_names", ())):
                BY_NAME[name] = cls

    def __init__(self, metrics=None, **kwargs):
        if metrics:
            raise QuantizerError(
                "%s(metrics=%r): graph_override.keras does not compute larq's "
                "training metrics (flip_ratio); pass metrics=None."
                % (type(self).__name__, metrics))
        # A quantizer computes in the dtype it is given (a mixed-precision
        # layer's float16 input or kernel), not in its own dtype policy's.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        try:  # the settings, checked here rather than at the first call
            self.parts()
        except (TypeError, ValueError) as e:
            raise QuantizerError("%s(%s): %s" % (type(self).__name__, ", ".join(
                "%s=%r" % item for item in self._settings().items()), e)) from None

    def compute_output_shape(self, input_shape):
        return input_shape

    def parts(self):
        """``(value, gradient)``: ``value(x)``, the quantized x, computed by
        ops no tape differentiates, and ``gradient(x, dy)``, x's gradient for
        the output's gradient dy, the same as the quantizer's call gives bit
        for bit. The quantized layers use them to quantize their input again
        in the backward pass. None for a quantizer without them (`NoOp`, and
        this base class)."""
        return None

    def compact(self, dtype):
        """``(keep, restore)``, a smaller form of what the backward pass
        needs of an input of `dtype`, for a quantizer whose outputs are -1,
        0 or +1 and whose gradient is a mask (`SteSign`, `SteHeaviside`,
        `SteTern`) on float32 or float64: a layer keeps the quantized input
        in float16 and the mask, 3 bytes per element
        (`graph_override.keras._functions.compact_parts`). None for the
        others."""
        return None

    def _settings(self):
        return {}

    def get_config(self):
        return dict(super().get_config(), **self._settings())


class NoOp(Quantizer):
    """The identity, marking a weight with a precision (for `summary`).

    Args:
      precision: the bits to count the weight as, a whole number from 1 to
        64, or None (full precision).

    Raises:
      QuantizerError: another precision (0, a fraction, a bool).
    """

    larq_names = ("noop", "NoOpQuantizer")

    def __init__(self, precision=None, **kwargs):
        if precision is not None and (
                isinstance(precision, bool) or not isinstance(precision, numbers.Integral)
                or not 1 <= precision <= 64):
            raise QuantizerError("NoOp(precision=%r): the precision is the bits a weight "
                                 "counts as, a whole number from 1 to 64 (32 for float32), "
                                 "or None for full precision." % (precision,))
        self.precision = None if precision is None else int(precision)
        super().__init__(**kwargs)

    def call(self, inputs):
        return inputs

    def _settings(self):
        return {"precision": self.precision}


class _Estimator(Quantizer):
    """A quantizer that is an estimator record: its settings are the
    record's parameters, with the record's defaults (positionally too, as
    larq's constructors take them), its values tf2's and its gradient larq's
    (`graph_override.keras._functions`)."""

    estimator = None  # the record's name, also the quantizer's name in `get`

    def __init_subclass__(cls, **kwargs):
        if "estimator" in cls.__dict__:
            cls.larq_names = (cls.estimator,)
            FUNCTIONS[cls.estimator] = _functions.function(cls.estimator)
            # What inspect and help show: the record's settings, then Keras's.
            cls.__signature__ = inspect.Signature(
                [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                   default=default)
                 for name, default in _functions.defaults(cls.estimator).items()]
                + [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])
        super().__init_subclass__(**kwargs)

    def __init__(self, *args, **kwargs):
        names = list(_functions.defaults(self.estimator))
        if len(args) > len(names):
            raise QuantizerError("%s takes the settings %s, got %d positional arguments"
                                 % (type(self).__name__, ", ".join(names), len(args)))
        settings = dict(_functions.defaults(self.estimator), **dict(zip(names, args)))
        settings.update((k, kwargs.pop(k)) for k in names if k in kwargs)
        for name, value in settings.items():
            setattr(self, name, value)
        super().__init__(**kwargs)

    def call(self, inputs):
        return FUNCTIONS[self.estimator](inputs, **self._settings())

    def parts(self):
        return _functions.parts(self.estimator, **self._settings())

    def compact(self, dtype):
        return _functions.compact_parts(self.estimator, dtype, **self._settings())

    def _settings(self):
        return {name: getattr(self, name) for name in _functions.defaults(self.estimator)}


class SteSign(_Estimator):
    """Binarization with the straight-through estimator: ``q(x) = -1`` for
    ``x < 0``, ``+1`` for ``x >= 0`` (also for -0.0); ``dq/dx = 1`` where
    ``|x| <= clip_value`` (inclusive; None: everywhere), else 0.

    Reference: Courbariaux et al., "Binarized Neural Networks",
    https://arxiv.org/abs/1602.02830.
    """

    precision = 1
    estimator = "ste_sign"


class ApproxSign(_Estimator):
    """Sign with Bi-Real Net's gradient ``2 - 2|x|`` for ``|x| <= 1``, else 0.

    Reference: Liu et al., "Bi-Real Net", https://arxiv.org/abs/1808.00278.
    """

    precision = 1
    estimator = "approx_sign"


class SteHeaviside(_Estimator):
    """``q(x) = 1`` for ``x > 0``, 0 for ``x <= 0``; ``dq/dx = 1`` where
    ``|x| <= clip_value``, else 0."""

    precision = 1
    estimator = "ste_heaviside"


class SwishSign(_Estimator):
    """Sign with the SignSwish gradient
    ``beta * (2 - beta*x * tanh(beta*x / 2)) / (1 + cosh(beta*x))`` (0 at
    x = +-inf, where larq's formula gives NaN).

    Reference: Darabi et al., "BNN+", https://arxiv.org/abs/1812.11800.
    """

    precision = 1
    estimator = "swish_sign"


class MagnitudeAwareSign(SteSign):
    """``mean(|x|) * ste_sign(x)`` (the mean over every axis but the last) as
    a layer, Bi-Real Net's weight quantizer."""

    larq_names = ("magnitude_aware_sign",)

    def call(self, inputs):
        return magnitude_aware_sign(inputs, **self._settings())

    def parts(self):
        return _functions.magnitude_parts(**self._settings())

    def compact(self, dtype):
        return None


class SteTern(_Estimator):
    """Ternarization: ``q(x) = +1`` for ``x >= t``, ``-1`` for ``x <= -t``, 0
    between (the threshold itself maps to ±1, as in larq); ``t`` is
    `threshold_value`, or ``0.7 * mean(|x|)`` with `ternary_weight_networks`.
    ``dq/dx = 1`` where ``|x| <= clip_value``, else 0.

    Reference: Li et al., "Ternary Weight Networks",
    https://arxiv.org/abs/1605.04711.
    """

    precision = 2
    estimator = "ste_tern"


_DOREFA_K_BIT = _functions.defaults("dorefa_quantize")["k_bit"]


def _check_mode(mode):
    if mode not in ("activations", "weights"):
        raise QuantizerError("DoReFa(mode=%r): the mode is 'activations' or "
                             "'weights'." % (mode,))
    return mode


class DoReFa(Quantizer):
    """DoReFa-Net's k-bit quantizer, rounding half to even.

    ``mode="activations"``: ``q(x) = round(clip(x, 0, 1) * n) / n`` with
    ``n = 2**k_bit - 1``; ``dq/dx = 1`` on ``[0, 1]``, else 0.
    ``mode="weights"``: ``w' = tanh(w) / (2 max|tanh(w)|) + 1/2`` (the max held
    constant), then ``2 q(w') - 1``, in [-1, 1].

    Reference: Zhou et al., "DoReFa-Net", https://arxiv.org/abs/1606.06160.
    """

    larq_names = ("dorefa_quantizer", "DoReFaQuantizer")

    def __init__(self, k_bit=_DOREFA_K_BIT, mode="activations", **kwargs):
        _check_mode(mode)
        if isinstance(k_bit, bool) or not isinstance(k_bit, int) or not 1 <= k_bit <= 32:
            raise QuantizerError("DoReFa(k_bit=%r): the bit width is an integer "
                                 "from 1 to 32." % (k_bit,))
        self.precision = k_bit
        self.mode = mode
        super().__init__(**kwargs)

    def _bounded(self, inputs):
        """The input mapped into [0, 1], before the k-bit step (the mode
        checked again: it is a plain attribute, which may have changed)."""
        if _check_mode(self.mode) == "weights":
            limited = tf.math.tanh(inputs)
            dividend = tf.stop_gradient(tf.math.reduce_max(tf.math.abs(limited)))
            return tf.math.divide_no_nan(limited, 2.0 * dividend) + 0.5
        return tf.clip_by_value(inputs, 0.0, 1.0)

    def _output(self, stepped):
        return 2.0 * stepped - 1.0 if self.mode == "weights" else stepped

    def call(self, inputs):
        return self._output(_functions.dorefa_k_bit(self._bounded(inputs), self.precision))

    def parts(self):
        def value(x):
            return tf.stop_gradient(
                self._output(_functions.k_bit_value(self._bounded(x), self.precision)))

        def gradient(x, dy):
            # The k-bit step's gradient is the identity: the gradient of the
            # ops around it, with the step left out.
            with tf.GradientTape() as tape:
                tape.watch(x)
                output = self._output(self._bounded(x))
            return tape.gradient(output, x, output_gradients=dy)
        return value, gradient

    def _settings(self):
        return {"k_bit": self.precision, "mode": self.mode}


NoOpQuantizer, DoReFaQuantizer = NoOp, DoReFa  # larq's older names of two classes

CLASSES = tuple(sorted(set(BY_NAME.values()), key=lambda c: c.__name__))
keras_saving.register(CLASSES)
ste_sign, approx_sign, swish_sign, ste_heaviside, ste_tern = (
    FUNCTIONS[c.estimator] for c in (SteSign, ApproxSign, SwishSign, SteHeaviside, SteTern))
magnitude_aware_sign = FUNCTIONS["magnitude_aware_sign"] = _functions.magnitude_aware_sign


def serialize(quantizer):
    """The Keras config of a quantizer (None for None)."""
    if quantizer is None:
        return None
    return _decorated(quantizer) or tf.keras.utils.serialize_keras_object(quantizer)


def _where(layer, argument):
    return "%s(%s=...)" % (layer or "quantizer", argument or "quantizer")


def get(identifier, layer=None, argument=None):
    """The quantizer `identifier` names: None, a name of the table above (a
    new object with the default settings), a Keras config, or a callable
    (a `Quantizer`, a `tf2.Estimator`, a function) as it is.

    Example:
      >>> from graph_override.keras import quantizers
      >>> quantizers.get("ste_tern").precision
      2
      >>> quantizers.get("ste_sing", "QuantDense", "kernel_quantizer")
      Traceback (most recent call last):
      ...
      graph_override.errors.QuantizerError: QuantDense(kernel_quantizer=...): no quantizer named 'ste_sing'. Did you mean 'ste_sign' or 'ste_tern'? Quantizers: approx_sign, dorefa_quantizer, magnitude_aware_sign, noop, ste_heaviside, ste_sign, ste_tern, swish_sign.

    Args:
      identifier: what to resolve.
      layer, argument: where it was given, for the error message.

    Raises:
      QuantizerError: an unknown name (the message suggests the closest), or
        something that is not a quantizer.
    """
    if identifier is None:
        return None
    if isinstance(identifier, str):
        cls = BY_NAME.get(identifier)
        user_function = None if cls is not None else function_named(identifier)
        if user_function is not None:  # registered with Keras, or in custom_objects
            return user_function
        if cls is None:
            close = difflib.get_close_matches(identifier, list(BY_NAME), n=2)
            raise QuantizerError("%s: no quantizer named %r.%s Quantizers: %s." % (
                _where(layer, argument), identifier,
                " Did you mean %s?" % " or ".join(repr(c) for c in close) if close else "",
                ", ".join(sorted(n for n in BY_NAME if n.islower()))))
        return cls(precision=32) if cls is NoOp else cls()
    if isinstance(identifier, dict):
        try:
            return deserialize(identifier)
        except (ValueError, TypeError) as e:
            raise QuantizerError("%s: cannot load the quantizer config %r: %s" % (
                _where(layer, argument), identifier, e)) from e
    if callable(identifier) and not isinstance(
            identifier, (type, tf.keras.constraints.Constraint)):
        return identifier
    raise QuantizerError(
        "%s: %r is not a quantizer; give a name such as 'ste_sign', a quantizer "
        "object such as SteSign(clip_value=0.5), or a function of one tensor."
        % (_where(layer, argument), identifier))
