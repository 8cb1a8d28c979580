"""frozen/ is four layers that import one way: graphdef <- inspection <-
patching <- tf2. A module never imports a layer above its own, not even
inside a function."""

import ast
import pathlib

import pytest

FROZEN = pathlib.Path(__file__).resolve().parents[2] / "graph_override" / "frozen"
LAYERS = ("graphdef", "inspection", "patching", "tf2")
PACKAGE = "graph_override.frozen"


def _imported(tree):
    """Every module name an `import` or `from ... import` names, at any depth;
    for `from graph_override.frozen import x`, also `graph_override.frozen.x`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from ("%s.%s" % (node.module, alias.name) for alias in node.names)


def _layer(module_name):
    """The index in LAYERS of a graph_override.frozen.<layer>... name, or None."""
    parts = module_name.split(".")
    if parts[:2] == PACKAGE.split(".") and len(parts) > 2 and parts[2] in LAYERS:
        return LAYERS.index(parts[2])
    return None


def upward_imports(source, layer):
    """The names `source` (a module of `layer`) imports from a higher layer."""
    own = LAYERS.index(layer)
    return sorted({name for name in _imported(ast.parse(source))
                   if (_layer(name) or 0) > own})


def _modules():
    return sorted(path for layer in LAYERS for path in (FROZEN / layer).glob("*.py"))


def test_every_layer_has_modules():
    assert {path.parent.name for path in _modules()} == set(LAYERS)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: "%s/%s" % (p.parent.name, p.name))
def test_no_module_imports_a_higher_layer(path):
    assert upward_imports(path.read_text(), path.parent.name) == []


@pytest.mark.parametrize("source, layer, expected", [
    ("from graph_override.frozen.patching import patch_rules", "graphdef",
     ["graph_override.frozen.patching", "graph_override.frozen.patching.patch_rules"]),
    ("def f():\n    from graph_override.frozen.tf2.function import to_function\n",
     "patching", ["graph_override.frozen.tf2.function",
                  "graph_override.frozen.tf2.function.to_function"]),
    ("import graph_override.frozen.inspection.inspector", "graphdef",
     ["graph_override.frozen.inspection.inspector"]),
    ("from graph_override.frozen import tf2", "inspection", ["graph_override.frozen.tf2"]),
    # Same layer, lower layers and the rest of the package are fine.
    ("from graph_override.frozen.graphdef import wire\n"
     "from graph_override.frozen.inspection.report import table\n"
     "from graph_override import registry\nimport tensorflow as tf\n", "inspection", []),
    ("from graph_override.frozen.tf2 import graph", "tf2", []),
])
def test_the_check_finds_an_upward_import(source, layer, expected):
    assert upward_imports(source, layer) == expected
