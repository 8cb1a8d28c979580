"""FrozenFunction.save and `graph-override convert`: SavedModels checked in a
fresh process without graph_override, atomic writes, refusals, exit codes."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

import warm_python
import tensorflow as tf

import frozen_graphs
import frozen_tf2_models as models
from graph_override import cli, frozen
from graph_override import scope as frozen_rules
from graph_override.errors import ConversionError

HERE = pathlib.Path(__file__).resolve().parent.parent  # the shared helpers

CASES = {
    # name: (builder, rules, trainable, tf2 twin)
    "mlp": (lambda: models.binarized_mlp("sign"), ["Sign=ste_sign"], "kernel|bias",
            models.mlp_tf2),
    "custom": (lambda: models.binarized_mlp("custom"),
               ["gradient:CustomGradient-*=ste_sign"], "kernel|bias", models.mlp_tf2),
    "float64": (models.float64_round, ["Round=ste_round"], "^w", models.float64_tf2),
    "while_if": (models.while_if, [], "^w$", None),
    "fake_quant": (models.fake_quant, [], "act_min|act_max|kernel", None),
    # TensorFlow's own gradient on Relu nodes of three widths: a SavedModel
    # that stored one traced gradient per name failed on the second width.
    "relu_identity": (models.relu_mlp, ["Relu=Identity"], "kernel", None),
    # TF1 tf.cond (Switch/Merge without a loop) differentiates after import.
    "cond_cnn": (models.cond_cnn, [], "kernel", None),
    # A rule on a Sign inside a functional While body.
    "while_body": (lambda: _as_lists(frozen_graphs.frozen_tf_function(lower_control_flow=False)),
                   ["Sign=ste_sign"], 16, None),
}


def _as_lists(built):
    graph_def, x, y, _ = built
    return graph_def, [x + ":0"], [y + ":0"]


def _feed(name, graph_def, inputs):
    rng = np.random.RandomState(7)
    with tf.Graph().as_default() as g:
        tf.compat.v1.import_graph_def(graph_def, name="")
        spec = g.get_tensor_by_name(inputs[0])
    shape = [3 if d is None else d for d in spec.shape.as_list()]
    x = (2 * rng.randn(*shape)).astype(spec.dtype.as_numpy_dtype)
    x.flat[0] = 0.0
    x.flat[1] = 1.0
    return x


def _save_and_check(folder, cases_spec):
    """Saves every case, then loads and runs them in ONE fresh process with
    plain TensorFlow; returns (references, results of that process)."""
    cases, arrays, refs = [], {}, {}
    for name, (build, rules, trainable, twin) in cases_spec.items():
        graph_def, inputs, outputs = build()
        pb = str(folder / (name + ".pb"))
        frozen.save(graph_def, pb)
        fn = frozen.to_function(pb, inputs, outputs, rules=rules, trainable=trainable)
        x = _feed(name, graph_def, inputs)
        out, dx, dw, cot = models.session_reference(
            graph_def, inputs, outputs, [x], rules=rules, weights=fn.weight_names)
        twin_grads = None
        if twin is not None:
            variables = {n: tf.Variable(v) for n, v in fn.initial_values().items()}
            _, t_dx, t_dw = models.tape_gradients(
                lambda x, twin=twin, v=variables: twin(x, v),
                [variables[n] for n in fn.weight_names], [x], cot)
            twin_grads = t_dx + t_dw
        refs[name] = dict(out=out, grads=dx + dw, twin=twin_grads, fn=fn)
        fn.save(str(folder / name))
        arrays["%s/feed_0" % name] = x
        for i, c in enumerate(cot):
            arrays["%s/cot_%d" % (name, i)] = c
        cases.append(dict(name=name, dir=str(folder / name), pb=pb, inputs=inputs,
                          outputs=outputs, input_keys=[s.name for s in fn.input_specs],
                          output_keys=[_output_key(o) for o in outputs]))
    np.savez(folder / "arrays.npz", **arrays)
    (folder / "spec.json").write_text(json.dumps(
        {"cases": cases, "arrays": str(folder / "arrays.npz")}))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # plain TensorFlow: graph_override not on the path
    proc = warm_python.run(
        [sys.executable, str(HERE / "frozen_plain_check.py"), str(folder / "spec.json"),
         str(folder / "out.npz")], capture_output=True, text=True, env=env, cwd=str(folder),
        timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return refs, dict(np.load(folder / "out.npz")), folder


def _output_key(name):
    return name[:-2] if name.endswith(":0") else name


def _compare(refs, results, name):
    assert not results["graph_override_imported"]
    ref = refs[name]
    for i, expected in enumerate(ref["out"]):
        session = results["%s/session_%d" % (name, i)]  # the ORIGINAL GraphDef
        for got in (results["%s/out_%d" % (name, i)], results["%s/serve_%d" % (name, i)]):
            assert got.dtype == session.dtype
            assert np.array_equal(got.view(np.uint8), session.view(np.uint8))
        assert np.array_equal(expected, session)
    for oracle in (ref["grads"], ref["twin"]):
        if oracle is None:
            continue
        for i, expected in enumerate(oracle):
            key = "%s/grad_%d" % (name, i)
            assert (expected is None) == (key not in results), key
            if expected is not None:
                np.testing.assert_allclose(results[key], expected, rtol=1e-5, atol=1e-6)
    assert any(np.any(results.get("%s/grad_%d" % (name, i), 0))
               for i in range(1, 1 + len(ref["fn"].weights)))


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    return _save_and_check(tmp_path_factory.mktemp("saved"), CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_saved_model_in_plain_tensorflow(checked, name):
    refs, results, _ = checked
    _compare(refs, results, name)


@pytest.mark.slow
def test_mobilenet_v2_saved_model_in_plain_tensorflow(tmp_path):
    refs, results, _ = _save_and_check(
        tmp_path, {"mobilenet": (models.mobilenet_v2, [], 1000, None)})
    assert len(refs["mobilenet"]["fn"].weights) > 30
    _compare(refs, results, "mobilenet")


def test_saved_model_cli_lists_the_signature(checked):
    _, _, folder = checked
    proc = warm_python.run(
        [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli", "show",
         "--dir", str(folder / "mlp"), "--all"], capture_output=True, text=True,
        timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for text in ("signature_def['serving_default']", "inputs['x'] tensor_info",
                 "shape: (-1, 16)", "outputs['logits'] tensor_info"):
        assert text in proc.stdout


def _mlp_function(trainable="kernel"):
    graph_def, inputs, outputs = models.binarized_mlp("sign")
    return frozen.to_function(graph_def, inputs, outputs, rules=["Sign=ste_sign"],
                              trainable=trainable)


def test_existing_directory_is_refused_then_replaced(tmp_path):
    fn = _mlp_function()
    target = tmp_path / "saved"
    target.mkdir()
    (target / "saved_model.pb").write_bytes(b"old")
    with pytest.raises(ConversionError, match="exists already; pass overwrite=True"):
        fn.save(str(target))
    assert (target / "saved_model.pb").read_bytes() == b"old"
    fn.save(str(target), overwrite=True)
    loaded = tf.saved_model.load(str(target))
    x = np.ones((2, 16), np.float32)
    np.testing.assert_array_equal(loaded.serve(x)["logits"].numpy(), fn(x).numpy())
    assert sorted(os.listdir(tmp_path)) == ["saved"]  # no temporary folder left


def test_folder_that_is_no_saved_model_is_never_replaced(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("keep me")
    with pytest.raises(ConversionError, match="holds no SavedModel"):
        _mlp_function().save(str(tmp_path / "data"), overwrite=True)
    assert (tmp_path / "data" / "notes.txt").read_text() == "keep me"


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    fn = _mlp_function()

    def broken(module, path, signatures=None, options=None):
        os.makedirs(os.path.join(path, "variables"))
        raise OSError("disk full")
    monkeypatch.setattr(tf.saved_model, "save", broken)
    with pytest.raises(ConversionError, match=r"saved: the SavedModel could not be "
                                              r"written \(OSError: disk full\)"):
        fn.save(str(tmp_path / "saved"))
    assert os.listdir(tmp_path) == []


def test_the_check_after_writing_differentiates_the_model(tmp_path, monkeypatch):
    """Saved the way TensorFlow saves by default (one traced gradient per
    gradient name), Relu=Identity on Relu nodes of two widths does not
    differentiate: the check after writing builds the gradient and refuses."""
    graph_def, inputs, outputs = models.relu_mlp()
    fn = frozen.to_function(graph_def, inputs, outputs, rules=["Relu=Identity"])
    options = tf.saved_model.SaveOptions
    monkeypatch.setattr(tf.saved_model, "SaveOptions",
                        lambda **kwargs: options(experimental_custom_gradients=True))
    with pytest.raises(ConversionError, match=r"saved: the SavedModel written from "
                                              r"<GraphDef> does not differentiate in "
                                              r"plain TensorFlow \(.*shape"):
        fn.save(str(tmp_path / "saved"))
    assert os.listdir(tmp_path) == []


def test_clip_gradient_has_no_portable_form(tmp_path):
    graph_def, inputs, outputs = models.binarized_mlp("sign")
    rules = ["Identity=clip_gradient:clip_value_min=-0.5,clip_value_max=0.5"]
    fn = frozen.to_function(graph_def, inputs, outputs, rules=rules)
    x = np.random.RandomState(0).randn(3, 16).astype(np.float32)
    ref_out, ref_dx, _, cot = models.session_reference(graph_def, inputs, outputs, [x],
                                                       rules=rules)
    out, dx, _ = models.tape_gradients(fn, [], [x], cot)  # works live
    np.testing.assert_array_equal(out[0], ref_out[0])
    np.testing.assert_allclose(dx[0], ref_dx[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ConversionError, match="clip_gradient.*no stop_gradient form"):
        fn.save(str(tmp_path / "saved"))
    assert os.listdir(tmp_path) == []


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("convert")
    frozen.save(models.binarized_mlp("sign")[0], str(folder / "model.pb"))
    frozen.save(models.binarized_mlp("custom")[0], str(folder / "custom.pb"))
    return folder


def test_convert_command(pbs, tmp_path, capsys):
    out_dir = str(tmp_path / "saved")
    args = ["convert", str(pbs / "model.pb"), "-o", out_dir, "--inputs", "x:0",
            "--outputs", "logits:0", "--map", "Sign=ste_sign", "--trainable", "kernel|bias"]
    code, out, err = _main(capsys, *args)
    assert code == 0, err
    assert "4 node(s) changed" in out
    assert ("signature 'serving_default' (x float32 (None, 16) -> 'logits' (logits:0)), 6 trainable "
            "variable(s) of 1732 element(s)") in out
    loaded = tf.saved_model.load(out_dir)
    assert len(loaded.weights) == 6
    stamp = os.stat(os.path.join(out_dir, "saved_model.pb")).st_mtime_ns
    code, _, err = _main(capsys, *args)  # exists: bad usage, nothing touched
    assert code == 2 and "exists already" in err and "--force" in err
    assert os.stat(os.path.join(out_dir, "saved_model.pb")).st_mtime_ns == stamp
    code, _, err = _main(capsys, *args, "--force")
    assert code == 0, err


@pytest.mark.parametrize("extra, code, message", [
    (["--inputs", "xx", "--outputs", "logits"], 2, "Did you mean 'x:0'"),
    (["--inputs", "x", "--outputs", "logits", "--trainable", "nope"], 2,
     "selects no float Const"),
    (["--inputs", "x", "--outputs", "logits", "--map", "sign=ste_sign"], 2,
     "Did you mean 'Sign'"),
    (["--inputs", "x", "--outputs", "logits", "--map", "Round=ste_round"], 1,
     "selected no node"),
    (["--inputs", "x", "--outputs", "logits", "--map",
      "Identity=clip_gradient:clip_value_min=-1,clip_value_max=1"], 1, "no stop_gradient form"),
])
def test_convert_refusals(pbs, tmp_path, capsys, extra, code, message):
    got, _, err = _main(capsys, "convert", str(pbs / "model.pb"), "-o",
                        str(tmp_path / "saved"), *extra)
    assert got == code and message in err
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def user_pbs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user_models")
    for name, build in [("two.pb", models.two_placeholders), ("vars.pb", models.not_frozen),
                        ("relu.pb", models.relu_mlp)]:
        frozen.save(build()[0], str(folder / name))
    return folder


@pytest.mark.parametrize("model, extra, code, message", [
    ("two.pb", ["--inputs", "x", "--outputs", "distance"], 2,
     "output distance:0 depends on Placeholder y: add 'y:0' to inputs (CLI: --inputs)"),
    ("vars.pb", ["--inputs", "x", "--outputs", "y"], 1,
     "not frozen: the outputs read 2 variable(s), dense/bias (VariableV2), dense/kernel"),
    ("relu.pb", ["--inputs", "x", "--outputs", "logits", "--map", "Relu=Identity",
                 "--map", "Relu6=Identity"], 1, "or allow it (on_no_match='ignore', "
                                                "--allow-no-match)"),
])
def test_convert_refuses_user_models(user_pbs, tmp_path, capsys, model, extra, code, message):
    got, _, err = _main(capsys, "convert", str(user_pbs / model), "-o",
                        str(tmp_path / "saved"), *extra)
    assert got == code and message in err and "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_convert_allow_no_match_and_output_keys(user_pbs, tmp_path, capsys):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="obs")
        a, b = tf.split(tf.nn.relu(x), 2, axis=1, name="policy/split")
        tf.identity(a, name="policy/output")
    frozen.save(g.as_graph_def(), str(tmp_path / "policy.pb"))
    out_dir = str(tmp_path / "saved")
    code, out, err = _main(capsys, "convert", str(tmp_path / "policy.pb"), "-o", out_dir,
                           "--inputs", "obs", "--outputs", "policy/output", "policy/split:1",
                           "--map", "Relu=Identity", "--map", "Relu6=Identity",
                           "--allow-no-match")
    assert code == 0, err
    assert "-> 'policy/output' (policy/output:0), 'policy/split:1' (policy/split:1))" in out
    result = tf.saved_model.load(out_dir).signatures["serving_default"](
        obs=tf.constant([[1.0, -2.0]]))
    assert sorted(result) == ["policy/output", "policy/split:1"]
    assert result["policy/split:1"].numpy().tolist() == [[0.0]]
    with pytest.warns(frozen_rules.NoMatchWarning, match="op type Relu6 -> Identity"):
        frozen.to_function(str(tmp_path / "policy.pb"), ["obs"], ["policy/output"],
                           rules=["Relu=Identity", "Relu6=Identity"], on_no_match="warn")


def test_convert_dead_names_and_unreadable_model(pbs, tmp_path, capsys):
    out_dir = str(tmp_path / "saved")
    code, _, err = _main(capsys, "convert", str(pbs / "custom.pb"), "-o", out_dir,
                         "--inputs", "x", "--outputs", "logits")
    assert code == 1 and "--map 'gradient:CustomGradient-*=ste_sign'" in err
    code, _, err = _main(capsys, "convert", str(pbs / "custom.pb"), "-o", out_dir,
                         "--inputs", "x", "--outputs", "logits",
                         "--map", "gradient:CustomGradient-*=ste_sign")
    assert code == 0, err
    code, _, err = _main(capsys, "convert", str(tmp_path / "missing.pb"), "-o",
                         str(tmp_path / "other"), "--inputs", "x", "--outputs", "y")
    assert code == 2 and "no such file" in err


def test_convert_imports_the_graph_once(pbs, tmp_path, capsys, monkeypatch):
    """convert never calls the live function: it imports the portable form
    only (once), and reads the specs from that import."""
    from graph_override.frozen.tf2 import graph as function_graph  # pylint: disable=import-outside-toplevel
    calls = []
    wrap = function_graph.wrap
    monkeypatch.setattr(function_graph, "wrap", lambda *a: calls.append(1) or wrap(*a))
    code, out, err = _main(capsys, "convert", str(pbs / "model.pb"), "-o",
                           str(tmp_path / "saved"), "--inputs", "x", "--outputs", "logits",
                           "--map", "Sign=ste_sign", "--trainable", "kernel")
    assert code == 0, err
    assert len(calls) == 1 and "(x float32 (None, 16) -> 'logits' (logits:0))" in out
    fn = frozen.FrozenFunction(str(pbs / "model.pb"), ["x"], ["logits"], build=False)
    assert fn.input_specs is None and len(calls) == 1
    assert fn(np.zeros((2, 16), np.float32)).shape == (2, 4)
    assert len(calls) == 2 and fn.input_specs[0].shape.as_list() == [None, 16]
