"""larq's quantized layers on Keras 3 and Keras 2.

Each layer is the Keras layer of the same name without ``Quant`` (its
arguments, weights and config), plus:

- ``input_quantizer``: applied to the input before anything else;
- ``kernel_quantizer`` (`QuantDepthwiseConv2D`: ``depthwise_quantizer``;
  the separable layers: ``depthwise_quantizer`` and ``pointwise_quantizer``):
  applied to the kernel at every call, so the layer computes with the
  quantized kernel and trains the full-precision one it keeps (its
  gradient is the quantizer's straight-through gradient);
- ``pad_values`` (the convolutions that have it in larq): with
  ``padding="same"``, the value the quantized input is padded with.

With one of `graph_override.keras.quantizers`' own quantizers on its input,
a layer keeps less for the backward pass than TensorFlow would (the quantized
input and the quantizer's mask): with ste_sign, ste_heaviside or ste_tern on
a float32 input, the quantized input in float16 and the mask, 3 bytes per
element where the float layer keeps its input (4); with the others, its
input, quantized again there. The values are the same bit for bit.

Quantizers are given by name (``"ste_sign"``), as objects
(``SteSign(clip_value=0.5)``) or as any function of one tensor; constraints
by name (``"weight_clip"``) or object (`graph_override.keras.quantizers`,
`graph_override.keras.constraints`). Models save and load by name
(``graph_override>QuantDense``) in ``.keras`` and ``.h5`` with no
``custom_objects`` once `graph_override.keras` is imported.
"""

import contextlib
import inspect
import logging
import numbers

import numpy as np
import tensorflow as tf

from graph_override._families import keras_saving
from graph_override.errors import QuantizerError
from graph_override.keras import constraints, quantizers

__all__ = [
    "QuantConv1D", "QuantConv2D", "QuantConv2DTranspose", "QuantConv3D",
    "QuantConv3DTranspose", "QuantDense", "QuantDepthwiseConv2D",
    "QuantSeparableConv1D", "QuantSeparableConv2D", "quantized_weights",
]

_log = logging.getLogger(__name__)
_K = tf.keras.layers


@contextlib.contextmanager
def _replaced(obj, values):
    """Sets attributes of `obj` (bypassing Keras's tracking) and restores
    them on exit."""
    saved = []
    try:
        for name, value in values:
            saved.append((name, getattr(obj, name)))
            object.__setattr__(obj, name, value)
        yield
    finally:
        for name, value in reversed(saved):
            object.__setattr__(obj, name, value)


def _slot(layer, attribute):
    """Where `layer` keeps the variable it reads as `attribute` (Keras 3's
    Dense reads ``kernel`` through a property of ``_kernel``)."""
    if isinstance(inspect.getattr_static(type(layer), attribute, None), property):
        return "_" + attribute
    return attribute


def quantized_weights(layer):
    """``[(slot, variable, quantizer)]``: each weight of a quantized layer
    with its quantizer (none for a layer that is not one of these, or a
    kernel without quantizer)."""
    found = []
    for argument, attributes in getattr(layer, "quantizer_arguments", ()):
        quantizer = getattr(layer, argument, None)
        for attribute in attributes:
            slot = _slot(layer, attribute)
            variable = getattr(layer, slot, None)
            if quantizer is not None and variable is not None:
                found.append((slot, variable, quantizer))
                break
    return found


def _is_binary(quantizer):
    return (getattr(quantizer, "precision", None) == 1
            and not isinstance(quantizer, quantizers.NoOp))


def _recomputable(quantizer):
    """`quantizer.parts()` where `quantizer` is one of
    `graph_override.keras.quantizers`' own classes with parts (a function of
    its input alone, which the backward pass can compute again; a quantizer
    of the user's own may draw random numbers), else None."""
    return quantizer.parts() if type(quantizer) in quantizers.CLASSES else None


def _keeping_the_input(layer, call, inputs, replaced, parts):
    """``call(input_quantizer(inputs))`` with the quantized weights
    `replaced` (`parts`: the input quantizer's), whose gradient keeps less of
    the input. Left to itself, TensorFlow keeps the quantized input (4 bytes
    per element, for the kernel's gradient) and the quantizer's mask (1 byte,
    for the input's) from the forward pass to the backward one, where the float layer keeps
    only its input (4 bytes). Here the gradient keeps the quantizer's compact
    form where it has one (`Quantizer.compact`: the quantized input in
    float16 and the mask, 3 bytes), else `inputs`, quantized again once dy is
    there. The values are the same bit for bit; the layer's op is not run
    again: its gradient does not read its output, so TensorFlow drops it from
    the backward graph (eagerly it runs twice). The backward pass applies the
    quantizer's value and gradient (`Quantizer.parts`) itself: a custom
    gradient inside the gradient function would be lost when the model is
    saved (TensorFlow warns so on loading)."""
    slots = [slot for slot, _ in replaced]
    value, input_gradient = parts
    inputs = tf.convert_to_tensor(inputs)
    compact = layer.input_quantizer.compact(inputs.dtype)

    def forward(x, values):
        with _replaced(layer, list(zip(slots, values))):
            return call(x)

    @tf.custom_gradient
    def quantized_call(x, *values):
        quantized = layer.input_quantizer(x)
        # Kept: the quantizer's compact form (the quantized input in float16
        # and the mask), or else x itself.
        kept = compact[0](x, quantized) if compact else None

        def gradient(dy, variables=None):
            if compact:
                with tf.control_dependencies([dy]):  # not before the backward pass
                    codes = [tf.identity(k) for k in kept]
                again, dx = compact[1](codes)
            else:
                with tf.control_dependencies([dy]):
                    inputs_again = tf.identity(x)
                again = value(inputs_again)
                dx = lambda dq: input_gradient(inputs_again, dq)  # noqa: E731
            sources = [again] + list(values)
            with tf.GradientTape() as tape:
                tape.watch(sources)
                y = forward(again, values)
            grads = tape.gradient(y, sources + list(variables or ()), output_gradients=dy)
            grads[0] = dx(grads[0])
            if variables is None:
                return grads
            return grads[:len(sources)], grads[len(sources):]
        return forward(quantized, values), gradient

    return quantized_call(inputs, *[v for _, v in replaced])


class _QuantizedLayer:
    """The quantizer arguments, resolved, checked, applied and saved."""

    # Each quantizer argument with the attribute names of its weight, Keras 2's
    # first (Keras 3 calls the depthwise kernel "kernel").
    quantizer_arguments = (("kernel_quantizer", ("kernel",)),)
    # Whether the Keras layer casts a non-float input to its dtype (Dense does).
    casts_its_input = False

    def __init__(self, *args, input_quantizer=None, **kwargs):
        name = type(self).__name__
        resolved = [("input_quantizer", quantizers.get(input_quantizer, name, "input_quantizer"))]
        for argument, _ in self.quantizer_arguments:
            resolved.append((argument, quantizers.get(kwargs.pop(argument, None), name, argument)))
        for key in [k for k in kwargs if k.endswith("_constraint")]:
            kwargs[key] = constraints.get(kwargs[key], name, key)
        super().__init__(*args, **kwargs)
        for argument, quantizer in resolved:
            setattr(self, argument, quantizer)
            constraint = argument.replace("_quantizer", "_constraint")
            if (argument != "input_quantizer" and _is_binary(quantizer)
                    and not getattr(self, constraint, None)):
                _log.warning("%s: a binary %s without %s may leave weights starved "
                             "(their gradient always zero); larq uses "
                             "%s=\"weight_clip\".", name, argument, constraint, constraint)

    def _check_float_input(self, inputs):
        """Refuses a non-float input where a quantizer would meet it (the
        input quantizer) or the Keras layer would fail on it with TensorFlow's
        own error (a convolution with a quantized kernel); Keras's Dense casts
        its input itself."""
        dtype = tf.as_dtype(inputs.dtype)
        if dtype.is_floating:
            return
        arguments = ["input_quantizer"] + [a for a, _ in self.quantizer_arguments]
        if self.input_quantizer is None and (self.casts_its_input or not any(
                getattr(self, a, None) is not None for a in arguments)):
            return
        argument = next(a for a in arguments if getattr(self, a, None) is not None)
        quantizer = getattr(self, argument)
        raise QuantizerError(
            "%s %r (%s=%s): the input must be a float tensor, got %s; cast it "
            "first, e.g. tf.cast(x, tf.float32)." % (
                type(self).__name__, self.name, argument,
                getattr(quantizer, "name", getattr(quantizer, "__name__", quantizer)),
                dtype.name))

    def call(self, inputs):
        self._check_float_input(inputs)
        replaced = [(slot, quantizer(tf.convert_to_tensor(variable)))
                    for slot, variable, quantizer in quantized_weights(self)]
        call = super().call
        parts = _recomputable(self.input_quantizer)
        if parts is not None:
            # The bias too is read here, where Keras casts it for the layer's
            # dtype policy: the backward pass runs outside the layer's call.
            if getattr(self, "bias", None) is not None:
                replaced.append(("bias", tf.convert_to_tensor(self.bias)))
            return _keeping_the_input(self, call, inputs, replaced, parts)
        if self.input_quantizer is not None:
            inputs = self.input_quantizer(inputs)
        with _replaced(self, replaced):
            return call(inputs)

    def get_config(self):
        config = super().get_config()
        config["input_quantizer"] = quantizers.serialize(self.input_quantizer)
        for argument, _ in self.quantizer_arguments:
            config[argument] = quantizers.serialize(getattr(self, argument))
        return config


def _padding(stride, dilation, size, kernel):
    """larq's "same" padding (before, after) of one spatial axis, and the
    padded size."""
    if size is None:
        return None, None
    effective = (kernel - 1) * dilation + 1
    output = (size + stride - 1) // stride
    padded = (output - 1) * stride + effective
    padded = tf.math.maximum(padded, size) if tf.is_tensor(size) else max(padded, size)
    total = padded - size
    return (total // 2, total // 2 + total % 2), padded


def _check_pad_values(layer, pad_values):
    """A finite real number, or a tensor (whose value is checked when it is
    known now: an eager one)."""
    if tf.is_tensor(pad_values):
        value = getattr(pad_values, "numpy", None)
        try:
            value = value() if callable(value) else None
        except Exception:  # pylint: disable=broad-except
            value = None  # a symbolic tensor or variable: its value comes later
    elif isinstance(pad_values, numbers.Real):
        value = pad_values
    else:
        raise QuantizerError("%s(pad_values=%r): the value to pad with is a number "
                             "(larq's are 0.0 and 1.0)" % (layer, pad_values))
    if value is not None and not np.all(np.isfinite(value)):
        raise QuantizerError("%s(pad_values=%r): the value to pad with is a finite "
                             "number (larq's are 0.0 and 1.0); padding with NaN or "
                             "infinity makes the outputs near the border non-finite."
                             % (layer, np.asarray(value).tolist()))


class _PadValues:
    """``pad_values``: "same" padding with a value other than 0, applied to
    the (quantized) input before a "valid" convolution, as larq does."""

    def __init__(self, *args, pad_values=0.0, **kwargs):
        _check_pad_values(type(self).__name__, pad_values)
        super().__init__(*args, **kwargs)
        self.pad_values = pad_values
        zero = not tf.is_tensor(pad_values) and pad_values == 0.0
        self._native_padding = self.padding != "same" or zero
        if self.padding == "causal" and not zero:
            raise QuantizerError("%s(padding='causal', pad_values=%r): causal padding "
                                 "pads with zeros only." % (type(self).__name__, pad_values))

    def _spatial(self, shape):
        return shape[1:-1] if self.data_format == "channels_last" else shape[2:]

    def _paddings(self, sizes):
        return [_padding(s, d, n, k) for s, d, n, k in zip(
            self.strides, self.dilation_rate, sizes, self.kernel_size)]

    def build(self, input_shape):
        if self._native_padding:
            return super().build(input_shape)
        shape = list(tf.TensorShape(input_shape).as_list())
        padded = [p for _, p in self._paddings(self._spatial(shape))]
        shape = ([shape[0]] + padded + [shape[-1]] if self.data_format == "channels_last"
                 else shape[:2] + padded)
        with _replaced(self, [("padding", "valid")]):
            return super().build(tuple(shape))

    def call(self, inputs):
        if self._native_padding:
            return super().call(inputs)
        # Each spatial size, static where known, else read at run time (a
        # model for images of any size, a dataset of varying sizes).
        shape = inputs.shape.as_list()
        if not all(shape[1:]):
            dynamic = tf.shape(inputs)
            shape = [n if n is not None else dynamic[axis] for axis, n in enumerate(shape)]
        pads = [list(p) for p, _ in self._paddings(self._spatial(shape))]
        pads = ([[0, 0]] + pads + [[0, 0]] if self.data_format == "channels_last"
                else [[0, 0], [0, 0]] + pads)
        inputs = tf.pad(inputs, pads, constant_values=self.pad_values)
        with _replaced(self, [("padding", "valid")]):
            return super().call(inputs)

    def get_config(self):
        return dict(super().get_config(), pad_values=float(
            tf.keras.backend.get_value(self.pad_values)))


class QuantDense(_QuantizedLayer, _K.Dense):
    """`keras.layers.Dense` computing
    ``activation(input_quantizer(x) @ kernel_quantizer(kernel) + bias)``.

    Example:
      >>> import numpy as np
      >>> from graph_override.keras import layers
      >>> layer = layers.QuantDense(2, input_quantizer="ste_sign",
      ...                           kernel_quantizer="ste_sign",
      ...                           kernel_constraint="weight_clip",
      ...                           kernel_initializer="ones")
      >>> layer(np.array([[0.0, -0.3, 0.7]], np.float32)).numpy().tolist()
      [[1.0, 1.0]]
    """

    casts_its_input = True


class QuantConv1D(_QuantizedLayer, _PadValues, _K.Conv1D):
    """`keras.layers.Conv1D` with quantized input and kernel, and `pad_values`."""


class QuantConv2D(_QuantizedLayer, _PadValues, _K.Conv2D):
    """`keras.layers.Conv2D` with quantized input and kernel, and `pad_values`."""


class QuantConv3D(_QuantizedLayer, _PadValues, _K.Conv3D):
    """`keras.layers.Conv3D` with quantized input and kernel, and `pad_values`."""


class QuantConv2DTranspose(_QuantizedLayer, _K.Conv2DTranspose):
    """`keras.layers.Conv2DTranspose` with quantized input and kernel."""


class QuantConv3DTranspose(_QuantizedLayer, _K.Conv3DTranspose):
    """`keras.layers.Conv3DTranspose` with quantized input and kernel."""


class QuantDepthwiseConv2D(_QuantizedLayer, _PadValues, _K.DepthwiseConv2D):
    """`keras.layers.DepthwiseConv2D` with quantized input and depthwise
    kernel (``depthwise_quantizer``, ``depthwise_constraint``), and
    `pad_values`."""

    quantizer_arguments = (("depthwise_quantizer", ("depthwise_kernel", "kernel")),)


class QuantSeparableConv1D(_QuantizedLayer, _PadValues, _K.SeparableConv1D):
    """`keras.layers.SeparableConv1D` with quantized input, depthwise and
    pointwise kernels, and `pad_values`."""

    quantizer_arguments = (("depthwise_quantizer", ("depthwise_kernel",)),
                            ("pointwise_quantizer", ("pointwise_kernel",)))


class QuantSeparableConv2D(_QuantizedLayer, _PadValues, _K.SeparableConv2D):
    """`keras.layers.SeparableConv2D` with quantized input, depthwise and
    pointwise kernels, and `pad_values`."""

    quantizer_arguments = QuantSeparableConv1D.quantizer_arguments


def _signature(cls):
    """What inspect, help and IDEs show for `cls` (whose ``__init__`` takes
    ``*args, input_quantizer, **kwargs``): the Keras layer's signature, the
    quantizer arguments (and ``pad_values``) keyword-only before ``**kwargs``."""
    keras_layer = next(c for c in cls.__mro__ if c.__module__.startswith(("keras", "tf")))
    params = list(inspect.signature(keras_layer.__init__).parameters.values())[1:]
    added = ["input_quantizer"] + [a for a, _ in cls.quantizer_arguments] + (
        ["pad_values"] if issubclass(cls, _PadValues) else [])
    return inspect.Signature([p for p in params if p.kind != p.VAR_KEYWORD] + [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                          default=0.0 if name == "pad_values" else None) for name in added]
        + [p for p in params if p.kind == p.VAR_KEYWORD])


LAYERS = (QuantConv1D, QuantConv2D, QuantConv2DTranspose, QuantConv3D,
          QuantConv3DTranspose, QuantDense, QuantDepthwiseConv2D,
          QuantSeparableConv1D, QuantSeparableConv2D)

for _layer in LAYERS:
    _layer.__signature__ = _signature(_layer)
keras_saving.register(LAYERS)
