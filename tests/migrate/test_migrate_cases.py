"""The corpus of legacy modules: run in a Session, migrate, run in TF2.

tests/migration_cases/ holds legacy TF1 modules in the style of public code
(straight-through sign and rounding, DoReFa, XNOR and BinaryConnect nets,
gradient reversal with a counter, guided ReLU, feature-visualization
helpers, cross-file registrations and wrappers, tf.compat.v1 aliases). The
whole folder is migrated in one run, as a user would. Each converted
function runs in a tf.compat.v1 Session (legacy) and, migrated, in eager
mode and in tf.function: forward bitwise equal, gradients equal. Each site
the tool leaves must be the one expected, with a true reason. The last test
prints the corpus report (files, sites converted, listed, wrong).
"""

import contextlib
import importlib
import os
import re
import sys

import numpy as np
import pytest

from graph_override import testing
from graph_override.migrate import migrate_paths

CASES_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "migration_cases")
FILES = sorted(f[:-3] for f in os.listdir(CASES_DIR)
               if f.endswith(".py") and f != "conftest.py")

# Exact zeros, the clip boundaries +-1 and rounding ties.
X = np.array([-2.0, -1.0, -0.75, -0.5, -0.25, 0.0, 0.125, 0.25, 0.5, 1.0, 1.5],
             np.float32)
ROW, COL = X.reshape(1, -1), X[::-1].reshape(1, -1) * 0.7

# case: functions converted (run legacy and migrated), converted functions
# that only graph mode runs (`graph_only`: they read .op of a variable;
# legacy and migrated run in a Session), functions whose scopes are listed
# (legacy only, in a Session), and the listed sites: {line: fragments of
# the true reason}.
SPECS = {
    "aliases": dict(converted=[("quantize", X)]),
    "backprop_modifiers": dict(legacy=[("guided", X), ("rectified", X)], listed={
        46: ["gradient name 'backprop_modifier' is not a string"]}),
    "bounds": dict(listed={35: ["gradient name 'gradient' is not a string"]}),
    "bounds_user": dict(legacy=[("gdn", X)]),
    "binary_connect_v1": dict(converted=[("binarize_deterministic", X)]),
    "compat_alias_assign": dict(converted=[("quantized_binary", X)]),
    "dann_flip": dict(converted=[("domain_head", X)]),
    "dorefa_builtin": dict(converted=[("fw", X), ("binarize_ste", X),
                                      ("quantize_k3", X), ("binarize_clipped", X)]),
    "dorefa_compat": dict(converted=[("quantize_activation", X),
                                     ("quantize_weight", X)]),
    "dorefa_factory": dict(converted=[("binary_weight_net", [ROW + 0.4, COL])]),
    "flip_format_counter": dict(converted=[("domain_loss", X)]),
    "guided_backprop_class": dict(legacy=[("saliency", X)], listed={
        20: ["used outside a 'with' statement",
             "GuidedBackprop() is a wrapper around gradient_override_map"],
        28: ["GuidedBackprop(...) calls GuidedBackprop (this file:14)",
             "its __enter__ hands the gradient_override_map context"]}),
    "guided_relu_cm": dict(legacy=[("saliency_net", X)], listed={
        20: ["the override scope yields", "caller of a @contextlib.contextmanager",
             "(Relu)", "guided_relu() is a wrapper around gradient_override_map"],
        24: ["guided_relu(...) calls guided_relu (this file:17)",
             "yields inside the map"]}),
    "keras_layer_scope": dict(listed={
        16: ["Dense(units, use_bias=False) builds a Keras layer",
             "(Sign)", "so do 3 more call(s) in this scope",
             "Activation(\"tanh\") (line 18)", "Dropout(0.2) (line 19)"]}),
    "keras_round": dict(converted=[("round_through", X)]),
    "lazy_generators": dict(legacy=[("binarize_after", X), ("binarize_inside", X)],
                            listed={
        17: ["generator expression '(tf.sign(c) for c in channels)' is made "
             "inside the override scope", "after the scope has closed"],
        25: ["'signs' is a generator expression made before the override scope "
             "(line 23) and consumed inside it"]}),
    "imported_graph": dict(legacy=[("imported_relu", X)], listed={
        23: ["tf.import_graph_def(...) imports a graph", "graph-override patch"]}),
    "lucid_override": dict(legacy=[("render_objective", X)], listed={
        22: ["the override map 'names' is built at run time",
             "gradient_override_map() is a wrapper"],
        27: ["gradient_override_map(...) calls gradient_override_map (this file:17)",
             "yields inside the map"]}),
    "multi_map": dict(converted=[("block", X)]),
    "override_user": dict(legacy=[("clipped_round", X)], listed={
        8: ["override(...) calls override (", "override_util.py:6",
            "its parameter 'mapping'", "(Round: \"CaseUtilClip\")"]}),
    "override_util": dict(listed={7: ["used outside a 'with' statement",
                                     "override() is a wrapper"]}),
    "rounding_family": dict(converted=[("quantize_all", X)]),
    "scale_gradient_counter": dict(converted=[("two_heads", X)]),
    "scaled_gradient_assert": dict(legacy=[("reversed_head", X)], listed={
        21: ["'y.op' looks at the output of tf.identity(...) (line 20)",
             "IdentityN", "eager tensors have no .op"]}),
    "shared_grads": dict(converted=[("binarize", X)]),
    "shared_user": dict(converted=[("binary_conv_input", X)]),
    "sign_ste": dict(converted=[("binary_activation", X), ("binary_dense", [ROW, COL])]),
    "stochastic_sign": dict(converted=[("binary_layer", [ROW, COL])]),
    "tensorpack_ternarize": dict(graph_only=[("ternarize", X)]),
    "surrogate_gradients": dict(converted=[("spike_hard", X)],
                                legacy=[("spike_smooth", X)], listed={
        20: ["_tanh_surrogate calls tf.gradients (line 9)",
             "works only in graph mode", "tf.GradientTape"]}),
    "untouched": dict(listed={
        12: ["the override map 'mapping' is built at run time"],
        18: ["helper(...) is a function defined in this file (line 26)", "(Sign)",
             "wrap each such op inside it"],
        23: ["the operator 'x * y' may create Mul ops"]}),
    "xnor_net": dict(converted=[("xnor_dense", [ROW, COL]), ("binarize_weights", X)]),
}


def _registry():
    from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel
    return ops._gradient_registry  # pylint: disable=protected-access


@contextlib.contextmanager
def _scratch_registry():
    """The migrated modules keep their registrations, and register the same
    names as their legacy twins into TensorFlow's one registry: they do so
    into a scratch copy (the legacy functions stay the ones by name)."""
    registry = _registry()
    saved = registry._registry  # pylint: disable=protected-access
    registry._registry = {k: v for k, v in saved.items() if not k.startswith("Case")}
    try:
        yield
    finally:
        scratch, registry._registry = registry._registry, saved
        for key, value in scratch.items():
            saved.setdefault(key, value)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """case -> (legacy module, migrated module, MigrationResult)."""
    out = tmp_path_factory.mktemp("migrated")
    results = {os.path.basename(r.path)[:-3]: r for r in migrate_paths([CASES_DIR])}
    for case in FILES:
        assert results[case].error is None, results[case].error
        (out / (case + ".py")).write_text(results[case].result.text)
    # Each tree is imported by the modules' own names, so that a module
    # importing a sibling (shared_grads, override_util) gets the sibling of
    # its own tree: legacy with legacy, migrated with migrated.
    legacy = _import_tree(CASES_DIR)
    with _scratch_registry():
        migrated = _import_tree(str(out))
    yield {case: (legacy[case], migrated[case], results[case].result)
           for case in FILES}


def _import_tree(folder):
    sys.path.insert(0, folder)
    try:
        modules = {case: importlib.import_module(case) for case in FILES}
    finally:
        sys.path.remove(folder)
        for case in FILES:
            sys.modules.pop(case, None)
    return modules


def _fn(module, name):
    if name == "quantize_k3":
        return lambda x: module.quantize(x, 3)
    if module.__file__ != os.path.join(CASES_DIR, "dorefa_factory.py") and \
            module.__name__ == "dorefa_factory":
        # The legacy run (always first) registered "CaseFGGrad"; the migrated
        # module must not register it again, exactly as its flag intends.
        module.GRAD_DEFINED = True
    return getattr(module, name)


def _upstream_for(legacy_fn, inputs, seed=7):
    """Random upstream gradients shaped like the output: a gradient that
    merely passes dy through looks different from one that scales it."""
    shape = np.shape(testing.evaluate(legacy_fn, inputs, "graph").outputs)
    return np.random.RandomState(seed).uniform(0.5, 1.5, shape).astype(np.float32)


_OUTCOMES = {}


def _check(corpus, case, name, inputs):
    """None when the migrated function matches the legacy one, else why."""
    if (case, name) not in _OUTCOMES:
        legacy, migrated, _ = corpus[case]
        old, new = _fn(legacy, name), _fn(migrated, name)
        try:
            up = _upstream_for(old, inputs)
            # Gradients: the legacy Session's, in every mode. Forward: bitwise
            # that of the legacy code run the same way (a Session may fold
            # arithmetic differently from op-by-op eager execution).
            testing.assert_same_gradients(old, new, inputs, upstream=up,
                                          modes=[("graph", "function"), "graph"])
            testing.assert_same_gradients(old, new, inputs, upstream=up,
                                          modes=[("graph", "eager")], forward="close")
            eager_old = testing.evaluate(old, inputs, "eager", upstream=up).outputs
            eager_new = testing.evaluate(new, inputs, "eager", upstream=up).outputs
            np.testing.assert_array_equal(
                np.asarray(eager_old).view(np.uint32), np.asarray(eager_new).view(np.uint32),
                err_msg="[eager vs eager] output differs bitwise")
            _OUTCOMES[case, name] = None
        except Exception as e:  # pylint: disable=broad-except
            _OUTCOMES[case, name] = "%s: %s" % (type(e).__name__, e)
    return _OUTCOMES[case, name]


def _listed_problems(case, result):
    """Differences between the sites listed and the ones expected."""
    want = SPECS[case].get("listed", {})
    got = {s.line: s.message for s in result.untouched}
    problems = ["%s:%d listed but not expected: %s" % (case, line, got[line])
                for line in sorted(set(got) - set(want))]
    problems += ["%s:%d expected but not listed" % (case, line)
                 for line in sorted(set(want) - set(got))]
    for line in sorted(set(want) & set(got)):
        problems += ["%s:%d reason lacks %r: %s" % (case, line, f, got[line])
                     for f in want[line] if f not in got[line]]
    return problems


def _params(kind):
    for case in sorted(SPECS):
        for name, inputs in SPECS[case].get(kind, []):
            yield pytest.param(case, name, inputs, id="%s.%s" % (case, name))


def test_every_file_has_a_spec():
    assert sorted(SPECS) == FILES
    assert len(FILES) >= 20


@pytest.mark.parametrize("case,name,inputs", list(_params("converted")))
def test_migrated_matches_legacy_session(corpus, case, name, inputs):
    problem = _check(corpus, case, name, inputs)
    assert problem is None, problem


@pytest.mark.parametrize("case,name,inputs", list(_params("converted")))
def test_legacy_code_run_eagerly_loses_its_gradient(corpus, case, name, inputs):
    """The comparison above can fail: TF2 ignores the legacy map."""
    legacy, _, _ = corpus[case]
    up = _upstream_for(_fn(legacy, name), inputs)
    session = testing.evaluate(_fn(legacy, name), inputs, "graph", upstream=up)
    eager = testing.evaluate(_fn(legacy, name), inputs, "eager", upstream=up)
    assert any(not np.allclose(a, b) for a, b in zip(session.gradients, eager.gradients))


@pytest.mark.parametrize("case", sorted(SPECS))
def test_sites_left_are_the_expected_ones_with_true_reasons(corpus, case):
    _, _, result = corpus[case]
    assert _listed_problems(case, result) == []
    if not SPECS[case].get("converted") and not SPECS[case].get("graph_only"):
        assert result.text == result.original  # nothing half-converted


def _session_run(fn, x, upstream):
    """fn(x) built in a fresh graph, its variables initialized: the output
    and the gradients to x and to each variable, in creation order."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    with tf.Graph().as_default() as graph:
        xt = tf.compat.v1.placeholder(tf.float32, x.shape)
        y = fn(xt)
        variables = tf.compat.v1.global_variables()
        grads = tf.gradients(y, [xt] + variables, grad_ys=tf.constant(upstream))
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return sess.run([y, grads], feed_dict={xt: x})


@pytest.mark.parametrize("case,name,inputs", list(_params("graph_only")))
def test_graph_only_code_migrated_matches_legacy_session(corpus, case, name, inputs):
    legacy, migrated, result = corpus[case]
    assert result.untouched == ()
    up = np.random.RandomState(7).uniform(0.5, 1.5, inputs.shape).astype(np.float32)
    old_y, old_grads = _session_run(_fn(legacy, name), inputs, up)
    new_y, new_grads = _session_run(_fn(migrated, name), inputs, up)
    np.testing.assert_array_equal(np.asarray(old_y).view(np.uint32),
                                  np.asarray(new_y).view(np.uint32))
    assert len(new_grads) == len(old_grads) >= 1
    assert np.all(old_grads[0] != 0)  # TensorFlow's own Sign gradient is 0
    for old, new in zip(old_grads, new_grads):
        np.testing.assert_allclose(new, old, rtol=1e-6, atol=0)


@pytest.mark.parametrize("case,name,inputs", list(_params("legacy")))
def test_listed_code_runs_in_a_session_and_is_kept(corpus, case, name, inputs):
    legacy, migrated, result = corpus[case]
    session = testing.evaluate(_fn(legacy, name), inputs, "graph")
    assert all(np.all(np.isfinite(g)) for g in session.gradients)
    # The listed function is byte for byte the legacy one.
    src = re.search(r"\ndef %s\(.*?(?=\n\S|\Z)" % name, result.original, re.S).group(0)
    assert src in result.text


def test_no_registration_under_a_literal_name_is_removed(corpus):
    for case, (_, _, result) in corpus.items():
        for name in re.findall(r'RegisterGradient\("(\w+)"\)', result.original):
            assert 'RegisterGradient("%s")' % name in result.text, (case, name)


def test_counter_idiom_registers_nothing_after_migration(corpus):
    from graph_override import registry  # pylint: disable=import-outside-toplevel
    _, migrated, result = corpus["dann_flip"]
    before = registry.registry_size()
    for _ in range(3):
        testing.evaluate(migrated.domain_head, X, "eager")
    assert registry.registry_size() == before
    assert "@ops.RegisterGradient" not in result.text
    assert "grad_name" not in result.text


def test_expected_rewrites_of_the_sign_case(corpus):
    text = corpus["sign_ste"][2].text
    assert "return op_with_gradient(tf.sign, _sign_ste_grad)(x)" in text
    assert "from graph_override.tf2 import op_with_gradient" in text
    assert '@tf.RegisterGradient("CaseSignSTE")' in text  # kept: others may use it
    assert "g = tf.compat.v1.get_default_graph()" not in text
    # The comment inside the removed scope survives.
    assert "# forward: sign(x); backward: straight-through, clipped at 1" in text


def test_builtin_gradient_names_stay_names(corpus):
    text = corpus["dorefa_builtin"][2].text
    assert 'op_with_gradient(tf.round, "Identity")(x * n) / n' in text
    assert 'op_with_gradient(tf.math.sign, "Identity")(x)' in text
    assert "G = tf.get_default_graph()" not in text


def test_conditional_registration_and_dead_key(corpus):
    result = corpus["dorefa_factory"][2]
    assert 'op_with_gradient(tf.identity, "CaseFGGrad")(x)' in result.text
    assert '@tf.RegisterGradient("CaseFGGrad")' in result.text  # may not run
    assert "        return tf.round(x * n) / n\n" in result.text  # "Floor" was dead
    assert any("'Floor' matches no op" in s.message for s in result.changed)
    (kept,) = result.kept
    assert "resolve the name at run time" in kept.message
    assert "must stay" in kept.message and "Remove it" not in kept.message


def test_functions_that_close_the_map_inside_are_no_wrappers(corpus):
    """tensorflow/compression's lower_bound and keras-vis's
    modify_model_backprop re-route only their own ops: their callers (in
    the same file or another) have nothing to migrate."""
    assert corpus["bounds_user"][2].untouched == ()
    for case in ("bounds", "backprop_modifiers"):
        (site,) = corpus[case][2].untouched
        assert "wrapper" not in site.message, site.message


def test_keras_session_graph_and_backend_round(corpus):
    text = corpus["keras_round"][2].text
    assert 'return op_with_gradient(K.round, "Identity")(x * 4.0) / 4.0' in text
    assert 'return op_with_gradient(K.round, "Identity")(x)' in text
    assert "K.get_session()" not in text  # Keras 3 has none
    assert "# Keras 2 code asks the session" in text  # its comment stays


def test_a_converted_call_given_a_name_says_the_name_changes(corpus):
    (site,) = [s for s in corpus["scale_gradient_counter"][2].changed
               if "-> op_with_gradient(" in s.message]
    assert 'no longer named by name="scale_gradient"' in site.message


def test_corpus_report(corpus, capsys):
    """Files, sites converted, sites listed, sites wrong (must be 0)."""
    converted = listed = 0
    wrong = []
    for case in FILES:
        _, _, result = corpus[case]
        converted += sum("-> op_with_gradient(" in s.message for s in result.changed)
        listed += len(result.untouched)
        wrong += _listed_problems(case, result)
        for name, inputs in SPECS[case].get("converted", []):
            problem = _check(corpus, case, name, inputs)
            if problem is not None:
                wrong.append("%s.%s: %s" % (case, name, problem))
    with capsys.disabled():
        print("\nmigration corpus: %d files, %d sites converted, %d sites listed, "
              "%d sites wrong" % (len(FILES), converted, listed, len(wrong)))
    assert wrong == []
    assert converted >= 32 and listed >= 8
