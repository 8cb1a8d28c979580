"""What a module of `graph_override.keras` says of a name it does not have:
an `UnavailableNameError` (an AttributeError) naming what to use instead, for
larq's names that Keras 3 rules out, and the module's closest names for any
other."""

import difflib
import sys

from graph_override.errors import UnavailableNameError

__all__ = ["module_getattr", "REPLACEMENTS"]

_NO_LOCALLY_CONNECTED = (
    "Keras 3 has no locally connected layers (keras.layers.LocallyConnected1D/2D were "
    "removed), so larq's quantized ones cannot be built on it; use a QuantConv1D/"
    "QuantConv2D, or keep the model on TensorFlow 2.15 with larq")

# (module, larq's name) -> why it is not here and what to use instead.
REPLACEMENTS = {
    ("graph_override.keras", "quantized_variable"): (
        "larq's QuantizedVariable subclasses Keras 2's variables, which Keras 3 does not "
        "allow; here a layer keeps its latent kernel in a plain variable and quantizes it "
        "in call: inside graph_override.keras.context.quantized_scope(True), "
        "layer.get_weights(), model.get_weights() and .h5/.keras saving give the "
        "quantized kernels (kernel.numpy() stays latent), and "
        "graph_override.keras.layers.quantized_weights(layer) gives each kernel with its "
        "quantizer"),
    ("graph_override.keras", "testing_utils"): (
        "larq's test helpers rely on Keras 2 internals (tensorflow.python.keras); build "
        "test models with graph_override.keras.layers"),
    ("graph_override.keras", "conftest"): "larq's pytest fixtures are not part of its API",
    ("graph_override.keras.layers", "QuantLocallyConnected1D"): _NO_LOCALLY_CONNECTED,
    ("graph_override.keras.layers", "QuantLocallyConnected2D"): _NO_LOCALLY_CONNECTED,
    ("graph_override.keras.layers", "BaseLayer"): (
        "larq's layer base classes hook Keras 2's variable getter, which Keras 3 removed; "
        "subclass a graph_override.keras.layers class instead"),
    ("graph_override.keras.layers", "QuantizerBase"): (
        "larq's layer base classes hook Keras 2's variable getter, which Keras 3 removed; "
        "subclass a graph_override.keras.layers class instead"),
    ("graph_override.keras.optimizers", "Optimizer"): (
        "larq's optimizers derived from Keras 2's legacy Optimizer, which Keras 3 removed; "
        "Bop and CaseOptimizer here derive from tf.keras.optimizers.Optimizer"),
}


def module_getattr(module_name):
    """A module ``__getattr__`` for `module_name`."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError("module %r has no attribute %r" % (module_name, name))
        why = REPLACEMENTS.get((module_name, name))
        if why:
            raise UnavailableNameError("%s.%s is not offered: %s." % (module_name, name, why))
        public = list(getattr(sys.modules[module_name], "__all__", ()))
        close = difflib.get_close_matches(name, public, n=2)
        raise UnavailableNameError("module %r has no attribute %r (%sits names: %s)" % (
            module_name, name,
            "did you mean %s? " % " or ".join(repr(c) for c in close) if close else "",
            ", ".join(sorted(public))))
    return __getattr__
