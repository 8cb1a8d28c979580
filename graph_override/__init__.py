"""graph_override: safe, interchangeable and verified gradient overrides.

Three families with the same estimator functions:
`graph_override.overrides` (tf.RegisterGradient + gradient_override_map,
graph mode), `graph_override.stopgrad` (the stop_gradient identity, no
registry) and `graph_override.tf2` (tf.custom_gradient).

The registry and scope at the top level replace hand-written
``tf.RegisterGradient`` / ``Graph.gradient_override_map`` code::

    import graph_override as go

    @go.register_gradient
    def sign_ste(op, grad):
        return grad

    with go.override_gradients({"Sign": sign_ste}):
        y = tf.sign(x)

Names are imported on first use (PEP 562), so ``import graph_override`` and
the command line start without loading TensorFlow until it is needed.

The modules beside this one are the library's faces; the subpackages
without a leading underscore are its capabilities (`frozen`, `migrate`,
`attribution`, ...), those with one its private machinery (`_files`,
`_console`, `_tensorflow`, `_trust`, `_families`): docs/architecture.md.
"""

import importlib

__version__ = "0.1.0"

_ERRORS = ("ConcurrentScopeError", "DuplicateGradientError", "EagerModeError", "GradientContractError",
           "GraphDefError", "GraphOverrideError", "NoMatchError",
           "SerializationError", "UnknownGradientError", "UnknownOpTypeError")
_NAMES = dict(
    [(n, "graph_override.errors") for n in _ERRORS]
    + [(n, "graph_override.registry") for n in (
        "RegisteredGradient", "is_resolvable", "register_gradient",
        "registry_size", "resolve")]
    + [(n, "graph_override.scope") for n in ("NoMatchWarning", "override_gradients")])
_SUBMODULES = ("attribution", "errors", "estimators", "frozen", "legacy", "migrate",
               "overrides", "stopgrad", "testing", "tf2", "training", "user_functions")

__all__ = [
    "ConcurrentScopeError",
    "DuplicateGradientError",
    "EagerModeError",
    "GradientContractError",
    "GraphDefError",
    "GraphOverrideError",
    "NoMatchError",
    "NoMatchWarning",
    "RegisteredGradient",
    "SerializationError",
    "UnknownGradientError",
    "UnknownOpTypeError",
    "__version__",
    "attribution",
    "errors",
    "estimators",
    "frozen",
    "is_resolvable",
    "legacy",
    "migrate",
    "override_gradients",
    "overrides",
    "register_gradient",
    "registry_size",
    "resolve",
    "stopgrad",
    "testing",
    "tf2",
    "training",
    "user_functions",
]


def __getattr__(name):
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module("graph_override." + name)
    else:
        raise AttributeError("module 'graph_override' has no attribute %r" % name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(__all__) | set(globals()))
