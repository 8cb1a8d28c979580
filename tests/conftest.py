"""Shared test setup: quiet TensorFlow, fixtures used across test modules."""

import importlib.util
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Retracing and AutoGraph notices are expected here: every test traces fresh
# functions on purpose. Errors still show.
tf.get_logger().setLevel("ERROR")

# Records each test's setup, body and child-process times for
# tools/suite_time.py (tests/suite_timing.py).
pytest_plugins = ("suite_timing",)


@pytest.fixture
def rng():
    """A seeded numpy RandomState, fresh for every test."""
    return np.random.RandomState(1234)


ROOT = pathlib.Path(__file__).resolve().parent.parent


def _loader(folder):
    def load(name):
        spec = importlib.util.spec_from_file_location(name, ROOT / folder / (name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


@pytest.fixture(scope="session")
def load_script():
    """Imports scripts/NAME.py (a user program) as a module (scripts are not a package)."""
    return _loader("scripts")


@pytest.fixture(scope="session")
def load_tool():
    """Imports tools/NAME.py (a benchmark or fault injection) as a module."""
    return _loader("tools")


@pytest.fixture(params=["c", "python"])
def reader(request, monkeypatch):
    """Runs a test twice: with the C GraphDef reader
    (graph_override.frozen.graphdef._scan) and with the pure-Python one. Where the C
    reader was not built (no C compiler at install) its run is skipped, or
    fails when GRAPH_OVERRIDE_REQUIRE_SPEEDUPS=1 (as in CI)."""
    from graph_override.frozen.graphdef import wire  # pylint: disable=import-outside-toplevel
    if request.param == "python":
        monkeypatch.setattr(wire, "_scan", None)
    elif not wire.speedups():
        if os.environ.get("GRAPH_OVERRIDE_REQUIRE_SPEEDUPS", "") not in ("", "0"):
            pytest.fail("the C reader graph_override.frozen.graphdef._scan is not built")
        pytest.skip("the C reader graph_override.frozen.graphdef._scan is not built")
    return request.param


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Schedules the suite for its workers (pytest.ini: --dist loadgroup).

    - Tests marked slow run first, so that the longest ones start while the
      others fill the remaining time of each worker (the order within each
      part is the files' own).
    - The tests of a module that share a module-scoped fixture (a model
      built, frozen or trained once for the module) run on one worker, which
      builds it once: they get the module as their xdist_group. Tests that
      share an expensive session fixture say so with their own mark.
    """
    del config
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        definitions = getattr(info, "name2fixturedefs", {}) if info is not None else {}
        if any(d.scope in ("module", "class", "package")
               for defs in definitions.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
