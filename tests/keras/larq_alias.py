"""`larq`, resolved to `graph_override.keras`: copied as larq/__init__.py
beside larq 0.13.3's own test files by tests/keras/test_keras_larq_suite.py,
so that their ``import larq as lq``, ``from larq import utils`` and
``from larq.models import ModelProfile`` reach graph_override.keras.

A module or name graph_override.keras does not have resolves to an `Absent`
stand-in that raises on use, so that a test file still collects and each of
its tests fails on its own, naming what it missed (a collection error would
fail a whole file for one name). Only larq's test-support modules (conftest,
testing_utils) and the test files are larq's own.
"""

import importlib
import os
import sys
import types

import graph_override.keras as _keras

SUBMODULES = ("activations", "callbacks", "constraints", "context", "layers", "math",
              "metrics", "models", "optimizers", "quantized_variable", "quantizers",
              "utils")


def _public(attr):
    """A name of larq's API (not a dunder, nor one pytest looks up: its
    hooks and xunit-style setup and teardown functions)."""
    return not attr.startswith(("_", "pytest", "setup", "setUp", "teardown", "tearDown"))


class Absent:
    """A name larq has and graph_override.keras does not: any use raises
    AttributeError naming it."""

    def __init__(self, name):
        self._name = name

    def _fail(self, *args, **kwargs):
        raise AttributeError("%s: graph_override.keras has no such name" % self._name)

    __call__ = _fail

    @property
    def __signature__(self):
        # inspect.signature(stand-in) fails, where it would find __call__'s.
        raise TypeError("%s: graph_override.keras has no such name" % self._name)

    def __getattr__(self, attr):
        if not _public(attr):
            raise AttributeError(attr)
        return Absent("%s.%s" % (self._name, attr))

    def __repr__(self):
        return "Absent(%r)" % self._name


def _alias(name):
    try:
        module = importlib.import_module("graph_override.keras." + name)
    except ImportError:
        module = None
    alias = types.ModuleType("larq." + name)

    def getattr_(attr):
        try:
            return getattr(module, attr)
        except AttributeError:
            if not _public(attr):
                raise
            return Absent("larq.%s.%s" % (name, attr))

    alias.__getattr__ = getattr_
    alias.__file__ = getattr(module, "__file__", None)
    alias.TARGET = module
    return alias


_OWN = {name[:-3] for name in os.listdir(os.path.dirname(os.path.abspath(__file__)))
        if name.endswith(".py")}

for _name in SUBMODULES:
    sys.modules["larq." + _name] = globals()[_name] = _alias(_name)


def __getattr__(attr):
    try:
        return getattr(_keras, attr)
    except AttributeError:
        # larq's own modules beside this file (testing_utils, the tests)
        # import as submodules.
        if not _public(attr) or attr in _OWN:
            raise
        return Absent("larq." + attr)


# larq's layer tests name Keras 2's LocallyConnected layers in their
# parameter lists; Keras 3 removed them. A stand-in lets the file collect (the
# tests that use one fail, on the accepted list of the harness).
import tensorflow as _tf  # noqa: E402

for _name in ("LocallyConnected1D", "LocallyConnected2D"):
    if not hasattr(_tf.keras.layers, _name):
        setattr(_tf.keras.layers, _name, Absent("tf.keras.layers." + _name))
