"""Real frozen models, patched here and differentiated in a fresh process.

Two architectures, frozen with TensorFlow's own utilities and random weights:
a binarized MLP (tf.sign on weights and activations; also a variant whose
straight-through estimator is a tf.custom_gradient) built in a tf.compat.v1
Session and frozen with tf.compat.v1.graph_util.convert_variables_to_constants,
and Keras' MobileNetV2 (alpha=0.35, 32x32) frozen with
convert_variables_to_constants_v2. The patched files are differentiated in new
Python processes: one that imports graph_override (patch), one that must not
(make_portable); their gradients are compared with the same models built
with the tf2 family in this process.
"""

import json
import os
import sys

import numpy as np
import pytest

import warm_python
import tensorflow as tf

import frozen_graphs
from graph_override import frozen, testing, tf2

pytestmark = pytest.mark.slow

SIZES = (16, 32, 32, 4)

WORKER = r'''
import json, os, sys
import numpy as np
import tensorflow as tf

plain = sys.argv[1] == "plain"
jobs = json.load(open(sys.argv[2]))
if not plain:
    from graph_override import frozen
results = {}
for job in jobs:
    data = open(job["file"], "rb").read()
    graph_def = tf.compat.v1.GraphDef.FromString(data)
    x_value = np.load(job["x"])
    up_value = np.load(job["up"])
    with tf.Graph().as_default() as g:
        try:
            if plain:
                x, y = tf.compat.v1.import_graph_def(
                    graph_def, return_elements=[job["input"], job["output"]], name="")
            else:
                x, y = frozen.import_graph_def(
                    frozen.load(job["file"]), return_elements=[job["input"], job["output"]],
                    name="")
            dx, = tf.gradients(y, x, grad_ys=tf.constant(up_value))
        except Exception as e:
            results[job["name"]] = {"error": type(e).__name__, "message": str(e)}
            continue
        with tf.compat.v1.Session(graph=g) as sess:
            if dx is None:
                out = sess.run(y, {x: x_value})
                grad = np.zeros_like(x_value)
            else:
                out, grad = sess.run([y, dx], {x: x_value})
    np.save(job["out"] + "_y.npy", out)
    np.save(job["out"] + "_dx.npy", grad)
    results[job["name"]] = {"ok": True}
results["graph_override_imported"] = "graph_override" in sys.modules
print(json.dumps(results))
'''


def _mlp_weights(seed=0):
    rng = np.random.RandomState(seed)
    return [(rng.randn(n_in, n_out).astype(np.float32),
             0.1 * rng.randn(n_out).astype(np.float32))
            for n_in, n_out in zip(SIZES[:-1], SIZES[1:])]


def _mlp(x, weights, binarize):
    h = x
    for i, (w, b) in enumerate(weights):
        last = i == len(weights) - 1
        kernel = tf.constant(w) if last else tf.sign(tf.constant(w))
        h = tf.matmul(h, kernel) / np.float32(np.sqrt(w.shape[0])) + b
        if not last:
            h = binarize(h)
    return h


def _custom_sign():
    @tf.custom_gradient
    def ste(x):
        return tf.sign(x), lambda dy: dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)
    return ste


def _freeze_mlp(weights, kind):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, SIZES[0]], name="x")
        binarize = _custom_sign() if kind == "custom" else tf.sign
        h = x
        for i, (w, b) in enumerate(weights):
            last = i == len(weights) - 1
            wv = tf.compat.v1.get_variable("dense_%d/kernel" % i, initializer=w)
            bv = tf.compat.v1.get_variable("dense_%d/bias" % i, initializer=b)
            kernel = wv if last else binarize(wv)
            h = tf.matmul(h, kernel) / np.float32(np.sqrt(w.shape[0])) + bv
            if not last:
                h = binarize(h)
        tf.identity(h, name="logits")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return tf.compat.v1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), ["logits"])


def _freeze_mobilenet():
    from tensorflow.python.framework.convert_to_constants import (  # pylint: disable=import-outside-toplevel
        convert_variables_to_constants_v2)
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.MobileNetV2(
        input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10)
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 32, 32, 3], tf.float32, name="x"))
    frozen_fn = convert_variables_to_constants_v2(fn)
    assert [t.name for t in frozen_fn.inputs] == ["x:0"]
    assert [t.name for t in frozen_fn.outputs] == ["Identity:0"]
    return model, frozen_fn.graph.as_graph_def()


def _run_fresh(folder, mode, jobs):
    spec = folder / ("%s_jobs.json" % mode)
    spec.write_text(json.dumps(jobs))
    worker = folder / "worker.py"
    worker.write_text(WORKER)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = warm_python.run([sys.executable, str(worker), mode, str(spec)],
                          capture_output=True, text=True, env=env, timeout=600,
                          check=False, cwd=str(folder))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Frozen and patched models on disk, the fresh processes' results, and
    the tf2-family references."""
    folder = tmp_path_factory.mktemp("frozen_models")
    rng = np.random.RandomState(3)
    weights = _mlp_weights()
    x_mlp = rng.randn(8, SIZES[0]).astype(np.float32)
    x_mlp[0, :4] = [0.0, -0.0, 1.0, -1.0]
    up_mlp = rng.randn(8, SIZES[-1]).astype(np.float32)
    model, mobilenet = _freeze_mobilenet()
    x_mn = rng.rand(2, 32, 32, 3).astype(np.float32)
    up_mn = rng.randn(2, 10).astype(np.float32)
    for name, value in (("x_mlp", x_mlp), ("up_mlp", up_mlp), ("x_mn", x_mn),
                        ("up_mn", up_mn)):
        np.save(folder / (name + ".npy"), value)

    graphs = {"mlp": _freeze_mlp(weights, "sign"), "mlp_custom": _freeze_mlp(weights, "custom"),
              "mobilenet": mobilenet}
    reports = {}
    graphs["mlp_patched"], reports["mlp_patched"] = frozen.patch(graphs["mlp"], "Sign=ste_sign")
    graphs["mlp_portable"], reports["mlp_portable"] = frozen.make_portable(
        graphs["mlp"], "Sign=ste_sign")
    graphs["mlp_custom_patched"], reports["mlp_custom_patched"] = frozen.patch(
        graphs["mlp_custom"], "gradient:CustomGradient-*=ste_sign")
    output_rule = frozen.parse_rule("Identity=flip_gradient:scale=0.5", name_regex="^Identity$")
    graphs["mobilenet_patched"], reports["mobilenet_patched"] = frozen.patch(
        mobilenet, [output_rule])
    graphs["mobilenet_portable"], reports["mobilenet_portable"] = frozen.make_portable(
        mobilenet, [output_rule])
    graphs["mobilenet_relu6_portable"], reports["mobilenet_relu6_portable"] = (
        frozen.make_portable(mobilenet, "Relu6=ste_round"))
    # A binarized recurrent cell whose Sign is inside a While body.
    rnn, _, rnn_output, rnn_w = frozen_graphs.frozen_tf_function(lower_control_flow=False)
    x_rnn = rng.randn(2, 4).astype(np.float32)
    up_rnn = rng.randn(2, 4).astype(np.float32)
    np.save(folder / "x_rnn.npy", x_rnn)
    np.save(folder / "up_rnn.npy", up_rnn)
    # clip_value=1.5: a gradient name no other job of the worker registers.
    rule = "Sign=ste_sign:clip_value=1.5"
    graphs["rnn_patched"], reports["rnn_patched"] = frozen.patch(rnn, rule)
    graphs["rnn_portable"], reports["rnn_portable"] = frozen.make_portable(rnn, rule)
    for name, graph_def in graphs.items():
        frozen.save(graph_def, folder / (name + ".pb"))

    def job(name, kind):
        family = name.split("_")[0]
        data = {"mlp": "mlp", "mobilenet": "mn", "rnn": "rnn"}[family]
        return {"name": name, "file": str(folder / (name + ".pb")), "input": "x:0",
                "output": {"mlp": "logits:0", "mobilenet": "Identity:0",
                           "rnn": rnn_output + ":0"}[family],
                "x": str(folder / ("x_%s.npy" % data)),
                "up": str(folder / ("up_%s.npy" % data)),
                "out": str(folder / (name + "_" + kind))}

    patched = ["mlp_patched", "mlp_custom_patched", "mobilenet_patched", "mlp_custom",
               "rnn_patched"]
    plain = ["mlp", "mlp_portable", "mlp_custom_patched", "mobilenet",
             "mobilenet_portable", "mobilenet_relu6_portable", "rnn_portable"]
    fresh = {"patched": _run_fresh(folder, "patched", [job(n, "patched") for n in patched]),
             "plain": _run_fresh(folder, "plain", [job(n, "plain") for n in plain])}

    def load(name, kind):
        base = str(folder / (name + "_" + kind))
        return np.load(base + "_y.npy"), np.load(base + "_dx.npy")

    mlp_ref = testing.evaluate(lambda t: _mlp(t, weights, tf2.ste_sign), x_mlp, "eager",
                               upstream=up_mlp)
    mn_ref = testing.evaluate(
        lambda t: tf2.flip_gradient(model(t, training=False), scale=0.5), x_mn, "eager",
        upstream=up_mn)
    def rnn_fn(t):
        h = t
        for _ in range(3):
            h = tf2.ste_sign(tf.matmul(h, rnn_w) + t, clip_value=1.5)
        return h

    rnn_ref = testing.evaluate(rnn_fn, x_rnn, "eager", upstream=up_rnn)
    return {"fresh": fresh, "load": load, "reports": reports, "graphs": graphs,
            "mlp_ref": mlp_ref, "mn_ref": mn_ref, "rnn_ref": rnn_ref}


def test_fresh_processes_ran_as_intended(world):
    assert world["fresh"]["patched"]["graph_override_imported"] is True
    assert world["fresh"]["plain"]["graph_override_imported"] is False


def test_unpatched_binarized_mlp_has_zero_gradient(world):
    _, dx = world["load"]("mlp", "plain")
    np.testing.assert_array_equal(dx, 0.0)
    # The two activations; the two binarized weights are constants.
    assert len(frozen.inspect(world["graphs"]["mlp"]).zero_gradients) == 2


@pytest.mark.parametrize("name, kind", [
    ("mlp_patched", "patched"),          # registry names, resolved by graph_override
    ("mlp_portable", "plain"),           # stop_gradient form, no graph_override
    ("mlp_custom_patched", "patched"),   # repaired tf.custom_gradient names
    ("mlp_custom_patched", "plain"),
])
def test_binarized_mlp_gradients_match_the_tf2_family(world, name, kind):
    y, dx = world["load"](name, kind)
    ref = world["mlp_ref"]
    np.testing.assert_allclose(y, ref.outputs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, ref.gradients[0], rtol=1e-5, atol=1e-6)
    assert np.count_nonzero(dx) > dx.size // 2


def test_dead_custom_gradient_name_fails_early_in_a_fresh_process(world):
    result = world["fresh"]["patched"]["mlp_custom"]
    assert result["error"] == "UnknownGradientError"
    assert "CustomGradient-" in result["message"] and "IdentityN" in result["message"]
    report = world["reports"]["mlp_custom_patched"]
    assert [c.op for c in report.changes] == ["IdentityN"] * 4  # 2 weights, 2 activations


def test_portable_mlp_forward_is_bitwise_identical(world):
    y0, _ = world["load"]("mlp", "plain")
    y1, _ = world["load"]("mlp_portable", "plain")
    np.testing.assert_array_equal(y0.view(np.uint32), y1.view(np.uint32))


@pytest.mark.parametrize("name, kind", [("mobilenet_patched", "patched"),
                                        ("mobilenet_portable", "plain")])
def test_mobilenet_gradients_match_the_tf2_family(world, name, kind):
    y, dx = world["load"](name, kind)
    ref = world["mn_ref"]
    np.testing.assert_allclose(y, ref.outputs, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(dx, ref.gradients[0], rtol=1e-3, atol=1e-6)
    # The flip is there: the unpatched gradient is -2 times this one.
    _, dx_plain = world["load"]("mobilenet", "plain")
    np.testing.assert_allclose(dx, -0.5 * dx_plain, rtol=1e-5, atol=1e-7)
    assert [c.node for c in world["reports"][name].changes] == ["Identity"]


@pytest.mark.parametrize("name", ["mobilenet_portable", "mobilenet_relu6_portable"])
def test_portable_mobilenet_forward_is_bitwise_identical(world, name):
    y0, _ = world["load"]("mobilenet", "plain")
    y1, _ = world["load"](name, "plain")
    np.testing.assert_array_equal(y0.view(np.uint32), y1.view(np.uint32))


def test_relu6_rewrite_covers_every_relu6(world):
    report = world["reports"]["mobilenet_relu6_portable"]
    assert len(report.changes) == 35
    assert report.unresolved_left == []
    assert frozen.inspect(world["graphs"]["mobilenet_relu6_portable"]).ok


@pytest.mark.parametrize("name, kind", [("rnn_patched", "patched"), ("rnn_portable", "plain")])
def test_sign_in_a_while_body_differentiates_in_a_fresh_process(world, name, kind):
    """The gradient names inside function bodies are resolved by
    frozen.import_graph_def in a new process; the portable form needs no
    graph_override at all."""
    assert world["fresh"][kind][name] == {"ok": True}
    y, dx = world["load"](name, kind)
    ref = world["rnn_ref"]
    np.testing.assert_allclose(y, ref.outputs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, ref.gradients[0], rtol=1e-5, atol=1e-6)
    assert np.count_nonzero(dx) > 0
