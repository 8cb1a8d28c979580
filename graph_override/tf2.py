"""The estimators as `tf.custom_gradient` functions: the TF2 family.

Works in eager mode, inside `tf.function`, in Keras layers and in graph mode.
It is the migration target of override-map code and the oracle that the
`overrides` and `stopgrad` families are tested against. Non-tensor settings
(clip_value, beta, ...) are captured in a closure around the custom-gradient
function, as larq does.

`op_with_gradient` runs a legacy ``(op, grad)`` gradient function unchanged
under `tf.custom_gradient`; see `graph_override.legacy`.

Keras: importing this module registers every estimator with Keras as
``graph_override>NAME`` (``keras.utils.register_keras_serializable``), so a
model that uses one as an activation, in a Lambda layer or in a layer's
config saves to ``.keras`` (and HDF5 where Keras supports it) and loads
with ``keras.models.load_model`` without ``custom_objects`` in any process
that has imported ``graph_override.tf2``. See docs/guide/tf2.md.
"""

import importlib

import tensorflow as tf

from graph_override import _family, estimators

__all__ = [
    "approx_sign",
    "clip_gradient",
    "dorefa_quantize",
    "flip_gradient",
    "op_with_gradient",
    "scale_gradient",
    "ste_floor",
    "ste_heaviside",
    "ste_round",
    "ste_sign",
    "ste_tern",
    "swish_sign",
]


def _apply(estimator, x, name, params):
    params = estimators.normalize(estimator, params)
    with tf.name_scope(name or estimator):
        x = estimators.check_float_input(x, estimator)

        @tf.custom_gradient
        def estimator_op(x):
            def grad(dy):
                return estimators.gradient(estimator, x, dy, params)
            return estimators.forward(estimator, x, params), grad

        return estimator_op(x)


(approx_sign, clip_gradient, dorefa_quantize, flip_gradient, scale_gradient,
 ste_floor, ste_heaviside, ste_round, ste_sign, ste_tern,
 swish_sign) = _family.define(__name__, "tf2", _apply)


_KERAS_PACKAGE = "graph_override"


def _keras_registries():
    """The register_keras_serializable functions of the Keras modules in
    use: `keras`, and `tf.keras` where that is another module (tf_keras)."""
    found = []
    for load in (lambda: importlib.import_module("keras"), lambda: tf.keras):
        try:
            utils = load().utils
        except (ImportError, AttributeError):  # pragma: no cover - no Keras
            continue
        if all(utils.get_registered_object is not f.get_registered_object
               for f in found):
            found.append(utils)
    return found


def _register_with_keras(functions):
    """Registers each function as ``graph_override>NAME``, so Keras saves a
    model that uses it (as an activation, in a Lambda layer or in a layer's
    config) by name, and loads it without custom_objects in any process that
    has imported graph_override.tf2. Importing TensorFlow imports Keras
    already, so this costs no import time."""
    for utils in _keras_registries():
        for fn in functions:
            key = "%s>%s" % (_KERAS_PACKAGE, fn.__name__)
            if utils.get_registered_object(key) is None:
                utils.register_keras_serializable(
                    package=_KERAS_PACKAGE, name=fn.__name__)(fn)


_register_with_keras([approx_sign, clip_gradient, dorefa_quantize, flip_gradient,
                      scale_gradient, ste_floor, ste_heaviside, ste_round,
                      ste_sign, ste_tern, swish_sign])


def op_with_gradient(op_fn, gradient):
    """See `graph_override.legacy.op_with_gradient`."""
    from graph_override import legacy  # pylint: disable=import-outside-toplevel
    return legacy.op_with_gradient(op_fn, gradient)
