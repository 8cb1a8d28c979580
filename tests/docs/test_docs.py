"""The docstring examples of every module of graph_override run and print
what they say (as Sonnet's doctest_test does: walk the package, doctest
each module), so a new module's examples are run without being listed."""

import doctest
import re
import importlib
import pkgutil

import pytest

import graph_override


def _module_names():
    names = [graph_override.__name__]
    for info in pkgutil.walk_packages(graph_override.__path__, graph_override.__name__ + "."):
        names.append(info.name)
    return sorted(names)


MODULES = _module_names()


def _examples(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module) if t.examples]


def test_the_walk_finds_every_layer():
    assert {"graph_override.registry", "graph_override.frozen.graphdef.checks",
            "graph_override.frozen.patching.patch_file", "graph_override.frozen.tf2.layer",
            "graph_override.migrate.migration", "graph_override.training.loop"} <= set(MODULES)


def test_every_public_estimator_has_an_example():
    names = {t.name.split(".")[-1] for m in ("graph_override.overrides",
                                             "graph_override.stopgrad",
                                             "graph_override.tf2")
             for t in _examples(m)}
    from graph_override._families import functions  # pylint: disable=import-outside-toplevel
    assert set(functions.ESTIMATOR_FUNCTIONS) <= names


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE
                                   | doctest.ELLIPSIS)
    for test in _examples(module_name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "%d docstring example(s) failed in %s" % (
        result.failed, module_name)


def test_estimator_docstrings_hold_no_markdown_reference_link():
    """The API reference renders the docstrings as Markdown, where "[a] [b]"
    (brackets side by side, a space or a line break between) is a reference
    link to "b": ``mkdocs build --strict`` fails on the unresolved target."""
    from graph_override._families import docstrings, functions  # pylint: disable=import-outside-toplevel
    for name in functions.ESTIMATOR_FUNCTIONS:
        for family in ("overrides", "stopgrad", "tf2"):
            prose = docstrings.docstring(name, family).split("  Example:")[0]
            assert not re.search(r"\][ \t]*\n?[ \t]*\[", prose), (name, family, prose)
    assert "Relu dy [dy > 0] * [y > 0]" in docstrings.docstring("guided_relu", "tf2")
