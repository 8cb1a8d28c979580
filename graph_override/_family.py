"""The public signatures of the estimator functions, written once.

`define(module_name, family, apply)` creates the eleven functions of a
family around its ``apply(estimator, x, name, params)``, sets their names and
docstrings, and returns them for the family module to bind by name, so the three families cannot drift apart in names,
parameters or defaults.
"""

from graph_override import _docs

__all__ = ["ESTIMATOR_FUNCTIONS", "define"]

ESTIMATOR_FUNCTIONS = (
    "approx_sign", "clip_gradient", "dorefa_quantize", "flip_gradient",
    "scale_gradient", "ste_floor", "ste_heaviside", "ste_round", "ste_sign",
    "ste_tern", "swish_sign",
)


def _functions(apply):
    def ste_sign(x, clip_value=1.0, name=None):
        return apply("ste_sign", x, name, {"clip_value": clip_value})

    def approx_sign(x, name=None):
        return apply("approx_sign", x, name, {})

    def swish_sign(x, beta=5.0, name=None):
        return apply("swish_sign", x, name, {"beta": beta})

    def ste_heaviside(x, clip_value=1.0, name=None):
        return apply("ste_heaviside", x, name, {"clip_value": clip_value})

    def ste_tern(x, threshold_value=0.05, ternary_weight_networks=False,
                 clip_value=1.0, name=None):
        return apply("ste_tern", x, name, {
            "threshold_value": threshold_value,
            "ternary_weight_networks": ternary_weight_networks,
            "clip_value": clip_value})

    def ste_round(x, name=None):
        return apply("ste_round", x, name, {})

    def ste_floor(x, name=None):
        return apply("ste_floor", x, name, {})

    def dorefa_quantize(x, k_bit=2, name=None):
        return apply("dorefa_quantize", x, name, {"k_bit": k_bit})

    def flip_gradient(x, scale=1.0, name=None):
        return apply("flip_gradient", x, name, {"scale": scale})

    def scale_gradient(x, scale, name=None):
        return apply("scale_gradient", x, name, {"scale": scale})

    def clip_gradient(x, clip_value_min, clip_value_max, name=None):
        return apply("clip_gradient", x, name, {"clip_value_min": clip_value_min,
                                                "clip_value_max": clip_value_max})

    return [ste_sign, approx_sign, swish_sign, ste_heaviside, ste_tern,
            ste_round, ste_floor, dorefa_quantize, flip_gradient,
            scale_gradient, clip_gradient]


def define(module_name, family, apply):
    """The family's estimator functions, in ESTIMATOR_FUNCTIONS order.

    Each family module binds them by name, so the names are visible to
    readers and static tools::

        (approx_sign, clip_gradient, ...) = _family.define(__name__, "tf2", _apply)
    """
    by_name = {}
    for fn in _functions(apply):
        fn.__module__ = module_name
        fn.__qualname__ = fn.__name__
        fn.__doc__ = _docs.docstring(fn.__name__, family)
        by_name[fn.__name__] = fn
    return tuple(by_name[name] for name in ESTIMATOR_FUNCTIONS)
