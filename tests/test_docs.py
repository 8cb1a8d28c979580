"""Every docstring example of the public modules runs and prints what it says."""

import doctest
import importlib

import pytest

MODULES = ["graph_override.registry", "graph_override.scope", "graph_override.overrides",
           "graph_override.stopgrad", "graph_override.tf2", "graph_override.legacy",
           "graph_override.testing",
           "graph_override.estimators", "graph_override.keras.quantizers",
           "graph_override.keras.constraints", "graph_override.keras.layers",
           "graph_override.keras.models"]


def _examples(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module) if t.examples]


def test_every_public_estimator_has_an_example():
    names = {t.name.split(".")[-1] for m in ("graph_override.overrides",
                                             "graph_override.stopgrad",
                                             "graph_override.tf2")
             for t in _examples(m)}
    from graph_override import _family  # pylint: disable=import-outside-toplevel
    assert set(_family.ESTIMATOR_FUNCTIONS) <= names


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = _examples(module_name)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "%d docstring example(s) failed in %s" % (
        result.failed, module_name)
    assert result.attempted > 0 or module_name == "graph_override.estimators"
