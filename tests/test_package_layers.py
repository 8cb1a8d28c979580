"""graph_override/ is layers that import one way (docs/architecture.md, "The
layers"): a module never imports from a layer after its own, not even
inside a function. The root holds the public modules; the machinery lives in
private subpackages (a leading underscore). frozen/'s own four layers are
checked by tests/frozen/test_layers.py."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "graph_override"

# Each entry: the root modules and subpackages of one layer, in import order.
LAYERS = (
    ("errors",),
    ("_console", "_files", "_tensorflow"),   # foundations
    ("_trust",),                             # what a model may run
    ("estimators",),                         # the estimator table
    ("builtin_names", "registry", "scope", "user_functions"),  # the core
    ("_families",),                          # what the families are made of
    ("legacy", "overrides", "stopgrad", "tf2"),  # the families
    ("testing",),
    ("frozen", "keras", "migrate", "training"),  # capabilities
    ("attribution",),                        # on frozen graphs
    ("commands",),
    ("cli",),
    ("__init__", "__main__"),                # the package's face, `python -m`
)
PUBLIC_ROOT_MODULES = {
    "__init__", "__main__", "builtin_names", "cli", "errors", "legacy", "overrides",
    "registry", "scope", "stopgrad", "testing", "tf2", "user_functions"}


def _layer_of(unit):
    return next((i for i, layer in enumerate(LAYERS) if unit in layer), None)


def _unit(path):
    """The root module or subpackage of graph_override that `path` belongs to."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0][:-len(".py")]


def _module_name(path):
    parts = ("graph_override",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree, module_name, is_package):
    """Every module name an `import` or `from ... import` names, at any
    depth, relative ones resolved; for `from graph_override import x`, also
    `graph_override.x`."""
    package = module_name if is_package else module_name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            yield base
            yield from ("%s.%s" % (base, alias.name) for alias in node.names)


def upward_imports(source, module_name, is_package=False):
    """The graph_override names `source` (the module `module_name`) imports
    from a layer after its own."""
    own = _layer_of(module_name.split(".")[1] if "." in module_name else "__init__")
    found = set()
    for name in _imported(ast.parse(source), module_name, is_package):
        parts = name.split(".")
        if parts[0] != "graph_override" or len(parts) < 2:
            continue
        layer = _layer_of(parts[1])
        if layer is not None and layer > own:
            found.add(name)
    return sorted(found)


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_in_a_layer():
    units = {_unit(path) for path in _modules()}
    assert sorted(u for u in units if _layer_of(u) is None) == []
    assert sorted(u for layer in LAYERS for u in layer if u not in units) == []


def test_the_root_holds_the_public_modules_and_private_subpackages():
    """A newcomer tells the library's faces from its machinery by the root
    listing: modules there are public; private helpers live in subpackages
    whose names start with an underscore."""
    root_modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert root_modules == PUBLIC_ROOT_MODULES
    for sub in PACKAGE.iterdir():
        if sub.is_dir() and sub.name.startswith("_") and sub.name != "__pycache__":
            assert (sub / "__init__.py").is_file(), sub.name


@pytest.mark.parametrize("path", _modules(),
                         ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_imports_a_later_layer(path):
    name = _module_name(path)
    assert upward_imports(path.read_text(), name, path.name == "__init__.py") == []


@pytest.mark.parametrize("source, module, expected", [
    ("from graph_override import tf2", "graph_override.registry",
     ["graph_override.tf2"]),
    ("def f():\n    from graph_override.frozen import patch\n", "graph_override.estimators.ops",
     ["graph_override.frozen", "graph_override.frozen.patch"]),
    ("import graph_override.cli", "graph_override._files.atomic", ["graph_override.cli"]),
    ("from graph_override._families import functions", "graph_override._tensorflow.compat",
     ["graph_override._families", "graph_override._families.functions"]),
    ("from ...commands import patch", "graph_override.frozen.patching.engine",
     ["graph_override.commands", "graph_override.commands.patch"]),
    # The same layer, earlier layers and other packages are fine.
    ("from graph_override import legacy, registry, errors\n"
     "from graph_override._tensorflow import compat\nimport tensorflow as tf\n",
     "graph_override.tf2", []),
    ("from graph_override.frozen import patch", "graph_override.attribution.engine", []),
])
def test_the_check_finds_an_upward_import(source, module, expected):
    assert upward_imports(source, module) == expected
