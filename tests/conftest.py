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


# The cross-checks that build other projects' environments or run them in
# processes of their own (Captum, PAIR's saliency, Quantus, Zennit: the torch
# venv and PAIR's folder, built on a fresh machine; iNNvestigate on TensorFlow 2.14, SHAP,
# larq's own test files, larq-zoo on TensorFlow 2.15, larq compute engine,
# Ray), the benchmark's quick run, full-size models and the tools' fault
# injection: marked `heavy` here, in one place.
# README's test command leaves them out (pytest.ini: -m "not heavy"); .ci/run
# runs them in a stage of their own, and compat/run.sh with the rest.
HEAVY_MODULES = (
    "tests/attribution/reference/test_captum.py",
    "tests/attribution/reference/test_pair_saliency.py",
    "tests/attribution/reference/test_quantus.py",
    "tests/attribution/reference/test_zennit.py",
    "tests/attribution/reference/test_innvestigate.py",
    "tests/attribution/reference/test_shap_deep.py",
    "tests/keras/test_keras_larq_suite.py",
    "tests/keras/test_keras_zoo.py",
    "tests/keras/test_keras_zoo_loading.py",
    "tests/keras/test_keras_deploy.py",
    "tests/tools/test_bench.py",
    "tests/tools/test_bench_fast.py",
)
# Modules whose slow tests (and only those) are heavy: scale-out on two
# logical devices and Ray actors, and loopback training clusters (each task a
# process of its own, about 58 s of a worker).
HEAVY_WHEN_SLOW = ("tests/attribution/test_scale_out.py",
                   "tests/training/test_training_cluster.py")
# Tests heavy by one of their parameters: full-size models (ResNet50's maps
# from Keras and from its .pb, about 150 s of a worker) and the fault
# injection of the command-line tools (whole training runs in fresh
# interpreters, about 55 s); MobileNetV2's maps stay in README's command.
HEAVY_PARAMS = {"tests/attribution/test_real_models.py": "resnet50",
                "tests/tools/test_fault_injection.py": None}


def _heavy(item):
    path = item.nodeid.split("::")[0]
    if path in HEAVY_PARAMS:
        param = HEAVY_PARAMS[path]
        callspec = getattr(item, "callspec", None)
        return param is None or (callspec is not None and param in callspec.id.split("-"))
    return path in HEAVY_MODULES or (
        path in HEAVY_WHEN_SLOW and item.get_closest_marker("slow") is not None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks the heavy cross-checks (`HEAVY_MODULES`) and orders the suite
    for its workers (pytest.ini: --dist loadfile, which hands out whole
    modules in the order of their first test here): the tests marked slow
    first, so that the modules holding the longest tests start while the
    others fill each worker's remaining time. The order within each part is
    the files' own. Runs before pytest's own -m selection."""
    del config
    for item in items:
        if _heavy(item):
            item.add_marker(pytest.mark.heavy)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
