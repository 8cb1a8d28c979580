"""larq 0.13.3's own test files, run with `import larq` resolved to
graph_override.keras (tests/keras/larq_alias.py).

The files come from the installed larq (TensorFlow 2.15, the `reference`
extra) or else from larq's wheel, which compat/larq_extras.sh downloads and
unpacks (2.21). They run in one pytest process of their own, forked from the
warm TensorFlow server: larq's conftest splits the CPU into three virtual
devices, which a process can do only before TensorFlow starts.

Every test passes, except:
- `KERAS_2`, `KERAS_2_ONLY_ON_KERAS_3`: tests that rely on Keras 2 internals
  or on files larq's wheel does not ship; each must fail, so that a test
  which starts to pass leaves the list at once;
- `PENDING`: tests of larq's API that other modules of graph_override.keras
  provide (optimizers, context, metrics, callbacks, ModelProfile, math,
  utils, __version__); they may fail until those modules are there.
"""

import importlib.util
import pathlib
import re
import shutil
import sys
import textwrap

import pytest
import tensorflow as tf

import larq_extras_env
import warm_python

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KERAS_3 = hasattr(tf.keras, "ops")

_LC = "larq's QuantLocallyConnected layers wrap Keras 2's LocallyConnected, which Keras 3 removed"
KERAS_2 = {
    "larq/layers_test.py::test_layer_kwargs[quant_layer?-*]": _LC,
    "larq/layers_test.py::TestLayers::test_binarization[*-quantized_layer?-*]": _LC,
    "larq/models_test.py::test_*summary": (
        "compares with snapshot files of larq's repository, which its wheel does not "
        "ship (tests/keras/test_keras_larq.py compares summary texts with larq's own)"),
    "larq/quantized_variable_test.py::test_repr[*]": "a snapshot file, as the summary tests",
}
KERAS_2_ONLY_ON_KERAS_3 = {
    **dict.fromkeys(["larq/quantizers_test.py::TestQuantization::test_%s" % t for t in (
        "xnor_binarization[*]", "and_binarization[*]", "ternarization_*",
        "dorefa_quantize[*]")],
        "builds its input with tf.keras.backend.placeholder, which Keras 3 removed"),
    "larq/quantizers_test.py::TestCommonFunctionality::test_layer_as_quantizer[*]": (
        "its quantizer calls add_weight('dummy_weight', ...), a positional name "
        "Keras 3 refuses"),
    "larq/layers_test.py::TestLayers::test_non_zero_padding_shapes[*-True-*]": (
        "reads layer.output_shape, which Keras 3 layers no longer have"),
    "larq/constraints_test.py::test_serialization[weight_clip]": (
        "Keras 3's own constraints.get finds 'weight_clip' only in Keras's global "
        "custom objects, which this package leaves alone (docs/guide/keras.md: give "
        "Keras's layers the object; the quantized layers take the name)"),
    "larq/activations_test.py::test_hard_tanh": "tf.keras.backend.placeholder",
    "larq/activations_test.py::test_leaky_tanh": "tf.keras.backend.placeholder",
}
_CONTEXT = "larq.context (quantized_scope, metrics_scope)"
PENDING = {
    "larq/optimizers_test.py::*": "larq.optimizers (Bop, CaseOptimizer)",
    "larq/callbacks_test.py::*": "larq.callbacks.HyperparameterScheduler",
    "larq/metrics_test.py::*": "larq.metrics.FlipRatio",
    "larq/context_test.py::*": _CONTEXT,
    "larq/conftest_test.py::test_quantize_scope[*]": _CONTEXT,
    "larq/quantized_variable_test.py::*": "larq.quantized_variable",
    "larq/quantizers_test.py::test_metrics[*]": _CONTEXT,
    "larq/layers_test.py::TestLayers::test_binarization[*]": _CONTEXT,
    "larq/layers_test.py::TestLayers::test_depthwise_layers[*]": _CONTEXT,
    "larq/layers_test.py::TestLayers::test_separable_layers[*]": _CONTEXT,
    "larq/quantizers_test.py::test_get_kernel_quantizer_*": _CONTEXT,
    "larq/models_test.py::test_*profile*": "larq.models.ModelProfile",
    "larq/models_test.py::test_number_as_readable_str_large": "larq.models.ModelProfile",
    "larq/models_test.py::test_bitsize_invalid_key": "larq.models.ModelProfile",
    "larq/math_test.py::*": "larq.math",
    "larq/utils_test.py::*": "larq.utils",
    "larq/version_test.py::*": "larq.__version__",
    "larq/activations_test.py::*": "larq.activations (hard_tanh, leaky_tanh), not yet here",
}

# pytest-mock's `mocker`, as much of it as larq's tests use (spy, ANY).
_CONFTEST = '''
from unittest import mock

import pytest


@pytest.fixture
def mocker():
    patches = []

    class Mocker:
        ANY = mock.ANY

        def spy(self, obj, name):
            spy = mock.MagicMock(side_effect=getattr(obj, name))
            patch = mock.patch.object(obj, name, spy)
            patch.start()
            patches.append(patch)
            return spy

    yield Mocker()
    for patch in reversed(patches):
        patch.stop()
'''


def _larq_files():
    """The folder of larq's test files: the installed larq's, else the
    wheel's (compat/larq_extras.sh)."""
    found = importlib.util.find_spec("larq")
    if found is not None and found.submodule_search_locations:
        folder = pathlib.Path(list(found.submodule_search_locations)[0])
        if (folder / "quantizers_test.py").is_file():
            return folder
    return pathlib.Path(larq_extras_env.build()["larq_tests"])


def _outcomes(output):
    """{node id: "PASSED" | "FAILED" | "ERROR"} from pytest's -rA summary."""
    found = {}
    for line in output.splitlines():
        match = re.match(r"(PASSED|FAILED|ERROR) (larq/\S+)", line)
        if match:
            outcome, test = match.groups()
            if found.get(test) != "FAILED":  # a test that failed, then errored in teardown
                found[test] = outcome
    return found


def _glob(pattern):
    """A list entry as a regular expression: ``*`` any text, ``?`` one
    character, all else literal (test ids hold brackets)."""
    return re.compile("".join({"*": ".*", "?": "."}.get(c, re.escape(c)) for c in pattern))


def _matching(tests, patterns):
    patterns = [_glob(p) for p in patterns]
    return {t for t in tests if any(p.fullmatch(t) for p in patterns)}


def _run_larqs_tests(tmp_path):
    package = tmp_path / "larq"
    package.mkdir()
    source = _larq_files()
    for path in sorted(source.glob("*.py")):
        if path.name.endswith("_test.py") or path.name in ("conftest.py", "testing_utils.py"):
            shutil.copy(path, package / path.name)
    shutil.copy(HERE / "larq_alias.py", package / "__init__.py")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(_CONFTEST))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = warm_python.run(
        [sys.executable, "-m", "pytest", "larq", "-q", "-rA", "--tb=line", "-n", "0",
         "-p", "no:cacheprovider", "-W", "ignore"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    outcomes = _outcomes(done.stdout)
    assert outcomes, done.stdout[-3000:] + done.stderr[-3000:]
    return outcomes, done.stdout


@pytest.mark.slow
@pytest.mark.subprocess
def test_larqs_own_tests_pass_but_the_listed(tmp_path):
    outcomes, output = _run_larqs_tests(tmp_path)
    accepted = dict(KERAS_2, **(KERAS_2_ONLY_ON_KERAS_3 if KERAS_3 else {}))
    failed = {t for t, outcome in outcomes.items() if outcome != "PASSED"}
    unexpected = failed - _matching(failed, list(accepted) + list(PENDING))
    # The accepted list cannot go stale: each entry names tests that run and
    # fail.
    stale = [p for p in accepted
             if not _matching(outcomes, [p]) or _matching(outcomes, [p]) - failed]
    pending = sorted(_matching(failed, PENDING) - _matching(failed, accepted))
    print("larq's tests: %d passed, %d failed (%d accepted, %d pending)" % (
        len(outcomes) - len(failed), len(failed), len(_matching(failed, accepted)),
        len(pending)))
    assert not unexpected, "larq's tests failing:\n%s\n\n%s" % (
        "\n".join(sorted(unexpected)),
        "\n".join(line for line in output.splitlines()
                  if any(t in line for t in unexpected))[-6000:])
    assert not stale, ("accepted entries that match no failing test (passing or "
                       "gone): %s" % stale)
