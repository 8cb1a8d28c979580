"""`--map OP=MODULE:FUNCTION`: a gradient function of the user's own in
`graph-override patch` and `convert` (graph_override.user_functions)."""

import itertools
import os
import sys
import textwrap

import numpy as np
import pytest

import warm_python
import tensorflow as tf

from graph_override import cli, frozen, user_functions
from graph_override.errors import RuleError, UnknownGradientError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X = np.array([[-2.0, -0.5, 0.0, 0.5, 2.0], [1.0, 0.0, -1.0, 3.0, -3.0]], np.float32)
W = np.array([[-1.0, -1.0], [-2.0, 0.5], [0.0, 1.0], [1.0, 2.0], [-0.5, -0.5]], np.float32)
GUIDED = '''
import tensorflow as tf

def guided(op, grad):
    keep = tf.logical_and(grad > 0, op.outputs[0] > 0)
    return tf.where(keep, grad, tf.zeros_like(grad))

def star(op, *grads):
    return grads[0]

class Rules:
    @staticmethod
    def double(op, grad):
        return 2 * grad

def forward(x):
    return x

def three(op, grad, extra):
    return grad

RATE = 0.5
'''
_names = itertools.count()


@pytest.fixture
def grads_module(tmp_path, monkeypatch):
    """A module of gradient functions in the current directory, under a name
    no other test imported."""
    name = "user_grads_%d_%d" % (os.getpid(), next(_names))
    (tmp_path / (name + ".py")).write_text(GUIDED)
    monkeypatch.chdir(tmp_path)
    return name


def _relu_model():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
        h = tf.nn.relu(tf.matmul(x, tf.constant(W)), name="hidden")
        tf.reduce_sum(h * tf.constant([[1.0, -1.0]]), axis=1, name="y")
    return g.as_graph_def()


def _guided_reference():
    """dy/dx with guided ReLU, by numpy: dy at the ReLU is (1, -1)."""
    pre = X @ W
    dy = np.broadcast_to(np.array([1.0, -1.0], np.float32), pre.shape)
    return (dy * (dy > 0) * (pre > 0)) @ W.T


def _gradient(graph_def):
    with tf.Graph().as_default():
        x, y = frozen.import_graph_def(graph_def, return_elements=["x:0", "y:0"], name="")
        dx, = tf.gradients(y, x)
        with tf.compat.v1.Session() as sess:
            return sess.run(dx, {x: X})


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_user_function_is_imported_registered_under_its_name_and_applied(grads_module):
    spec = grads_module + ":guided"
    rule = frozen.parse_rule("Relu=" + spec)
    assert rule.gradient == spec
    patched, report = frozen.patch(_relu_model(), [rule])
    assert [c.node for c in report.changes] == ["hidden"]
    assert [n.attr[frozen.GRADIENT_ATTR].s.decode() for n in patched.node
            if n.name == "hidden"] == [spec]
    expected = _guided_reference()
    assert (expected == 0).any() and (expected != 0).any()
    np.testing.assert_allclose(_gradient(patched), expected, rtol=1e-6)
    # The plain gradient differs: the rule did something.
    assert not np.allclose(_gradient(_relu_model()), expected)
    # The current directory was put on sys.path for the import only.
    assert os.getcwd() not in sys.path


@pytest.mark.parametrize("function", ["star", "Rules.double"])
def test_star_signatures_and_dotted_attributes_are_gradient_functions(grads_module, function):
    spec = "%s:%s" % (grads_module, function)
    assert frozen.parse_rule("Relu=" + spec).gradient == spec


def test_registering_twice_is_a_no_op(grads_module):
    spec = grads_module + ":guided"
    assert user_functions.register_function(spec) == spec
    assert user_functions.register_function(spec) == spec
    assert frozen.parse_rule("Relu=" + spec).gradient == spec


@pytest.mark.parametrize("action, expected", [
    ("no_such_module_xyz:guided", "cannot import module 'no_such_module_xyz': no module "
                                  "'no_such_module_xyz' on sys.path (the current directory"),
    ("{m}:guidd", "has no attribute 'guidd'. Did you mean 'guided'?"),
    ("{m}:Rules.doubel", "{m}.Rules"),
    ("{m}:RATE", "is float, not a function"),
    ("{m}:Rules", "is a class, not a function"),
    ("{m}:forward", "takes (x), so it cannot be called as f(op, grad)"),
    ("{m}:three", "takes (op, grad, extra), so it cannot be called as f(op, grad)"),
    ("ste_sign:guided", "'ste_sign' is a built-in estimator, so after ':' come its "
                        "parameters"),
    ("graph_override.tf2:flip_gradient", "is the forward estimator flip_gradient(x, ...)"),
])
def test_what_is_not_a_gradient_function_is_refused_clearly(grads_module, action, expected):
    text = "Relu=" + action.format(m=grads_module)
    with pytest.raises(RuleError) as info:
        frozen.parse_rule(text)
    message = str(info.value)
    assert message.startswith("--map %r: " % text)
    assert expected.format(m=grads_module) in message


def test_a_dotted_name_without_colon_gets_the_syntax(grads_module):
    with pytest.raises(RuleError, match="name it MODULE:FUNCTION, e.g. %s:guided"
                       % grads_module):
        frozen.parse_rule("Relu=%s.guided" % grads_module)


def test_a_module_that_fails_on_import_is_named_with_file_and_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken_grads_mod.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    (tmp_path / "needs_missing_dep.py").write_text("import not_installed_dep_xyz\n")
    with pytest.raises(RuleError, match=r"broken_grads_mod.py:2: RuntimeError: boom"):
        frozen.parse_rule("Relu=broken_grads_mod:f")
    with pytest.raises(RuleError, match="it imports 'not_installed_dep_xyz', which is "
                                        "not installed"):
        frozen.parse_rule("Relu=needs_missing_dep:f")


def test_patch_writes_the_name_and_says_how_to_register_it(grads_module, tmp_path, capsys):
    model, out = str(tmp_path / "model.pb"), str(tmp_path / "guided.pb")
    frozen.save(_relu_model(), model)
    spec = grads_module + ":guided"
    code, stdout, _ = _main(capsys, "patch", model, "-o", out, "--map", "Relu=" + spec)
    assert code == 0, stdout
    assert ("graph_override.user_functions.register_function(%r)" % spec) in stdout
    # A fresh process: without the registration the name does not resolve,
    # and the module is NOT imported because the graph names it; with it,
    # the gradient is the user's.
    probe = textwrap.dedent("""
        import sys, numpy as np, tensorflow as tf
        from graph_override import frozen, user_functions
        graph_def = frozen.load(%r)
        try:
            with tf.Graph().as_default():
                frozen.import_graph_def(graph_def, name="")
        except Exception as e:
            print("refused:", type(e).__name__, %r in str(e))
            print(e)
        print("imported by the graph:", %r in sys.modules)
        user_functions.register_function(%r)
        with tf.Graph().as_default():
            x, y = frozen.import_graph_def(graph_def, return_elements=["x:0", "y:0"], name="")
            dx, = tf.gradients(y, x)
            with tf.compat.v1.Session() as sess:
                np.save(%r, sess.run(dx, {x: np.load(%r)}))
    """) % (out, spec, grads_module, spec, str(tmp_path / "dx.npy"), str(tmp_path / "x.npy"))
    np.save(tmp_path / "x.npy", X)
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    result = warm_python.run([sys.executable, "-c", probe], cwd=str(tmp_path), env=env,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "refused: UnknownGradientError True"
    assert ("register them first with graph_override.user_functions.register_function(%r)"
            % spec) in lines[1]
    assert lines[-1] == "imported by the graph: False"
    np.testing.assert_allclose(np.load(tmp_path / "dx.npy"), _guided_reference(), rtol=1e-6)


def test_a_graph_naming_a_module_never_imports_it(tmp_path, monkeypatch):
    """inspect and import_graph_def read a name such as 'evil_mod:f' in a
    GraphDef without importing evil_mod."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "imported.txt"
    (tmp_path / "evil_grads_mod.py").write_text(
        "open(%r, 'w').write('imported')\ndef f(op, grad):\n    return grad\n" % str(marker))
    graph_def = _relu_model()
    for node in graph_def.node:
        if node.name == "hidden":
            node.attr[frozen.GRADIENT_ATTR].s = b"evil_grads_mod:f"
    report = frozen.inspect(graph_def)
    assert not report.ok
    with tf.Graph().as_default(), pytest.raises(
            UnknownGradientError, match="register_function\\('evil_grads_mod:f'\\)"):
        frozen.import_graph_def(graph_def, name="")
    with pytest.raises(UnknownGradientError, match="evil_grads_mod:f"):
        frozen.to_function(graph_def, ["x:0"], ["y:0"])
    assert not marker.exists() and "evil_grads_mod" not in sys.modules


@pytest.mark.parametrize("flag", ["--map", "--select"])
def test_cli_usage_errors_exit_2_and_write_nothing(grads_module, tmp_path, capsys, flag):
    model, out = str(tmp_path / "model.pb"), str(tmp_path / "out.pb")
    frozen.save(_relu_model(), model)
    extra = ["--select", "hidden"] if flag == "--select" else []
    code, _, err = _main(capsys, "patch", model, "-o", out, "--map",
                         "Relu=%s:guidd" % grads_module, *extra)
    assert code == 2 and "Did you mean 'guided'?" in err
    assert not os.path.exists(out)


def test_portable_refuses_a_user_function(grads_module, tmp_path, capsys):
    model, out = str(tmp_path / "model.pb"), str(tmp_path / "out.pb")
    frozen.save(_relu_model(), model)
    code, _, err = _main(capsys, "patch", model, "-o", out, "--portable", "--map",
                         "Relu=%s:guided" % grads_module)
    assert code == 1 and "%s:guided" % grads_module in err
    assert not os.path.exists(out)


def test_convert_refuses_a_user_function_before_any_work(grads_module, tmp_path, capsys):
    model, out = str(tmp_path / "model.pb"), tmp_path / "saved"
    frozen.save(_relu_model(), model)
    code, _, err = _main(capsys, "convert", model, "-o", str(out), "--inputs", "x:0",
                         "--outputs", "y:0", "--map", "Relu=%s:guided" % grads_module)
    assert code == 1
    assert "a SavedModel cannot carry them" in err and "Nothing written" in err
    assert [p for p in os.listdir(tmp_path) if "saved" in p] == []
