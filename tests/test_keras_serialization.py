"""Estimators with settings (`tf2.Estimator`) and `op_with_gradient` wrappers
in Keras models: they save by name to .keras and HDF5, and a fresh process
loads them with the same outputs and gradients, bit for bit, as the original
model and as the tf2 functions called directly. Also what cannot be saved
(a clear error at save time), what a fresh process cannot resolve (a clear
error at load time), and the limits of Keras 2 that no object can lift."""

import functools
import json
import os
import sys
import textwrap

import keras
import numpy as np
import pytest

import warm_python
import tensorflow as tf

import graph_override as go
from graph_override import _compat, registry, testing, tf2
from graph_override.errors import SerializationError, UnknownGradientError
from graph_override.tf2 import Estimator, OpWithGradient, op_with_gradient

KERAS_3 = int(keras.__version__.split(".")[0]) >= 3
FORMATS = ["keras", "h5"]

# Every estimator, with settings other than the defaults where it has any.
SETTINGS = [
    ("ste_sign", {"clip_value": 0.5}),
    ("ste_sign", {"clip_value": None}),
    ("approx_sign", {}),
    ("swish_sign", {"beta": 2.0}),
    ("ste_heaviside", {"clip_value": 0.25}),
    ("ste_tern", {"threshold_value": 0.1}),
    ("ste_tern", {"ternary_weight_networks": True}),
    ("ste_tern", {"threshold_value": 0.2, "clip_value": 0.5}),
    ("ste_round", {}),
    ("ste_floor", {}),
    ("dorefa_quantize", {"k_bit": 4}),
    ("flip_gradient", {"scale": 0.5}),
    ("scale_gradient", {"scale": 0.3}),
    ("clip_gradient", {"clip_value_min": -0.1, "clip_value_max": 0.2}),
]
# What a setting is told apart from: the defaults, or another setting where
# there are none.
OTHER_SETTING = {"scale_gradient": {"scale": 1.0},
                 "clip_gradient": {"clip_value_min": -1.0, "clip_value_max": 1.0}}
SETTING_IDS = ["%s(%s)" % (n, ",".join("%s=%s" % kv for kv in p.items())) for n, p in SETTINGS]

# The user's code, imported from files by both processes.
USER_LAYER = textwrap.dedent('''
    import keras
    import tensorflow as tf


    @keras.utils.register_keras_serializable(package="user")
    class QuantDense(keras.layers.Layer):
        """A layer whose kernel goes through a quantizer kept in its config."""

        def __init__(self, units, kernel_values, kernel_quantizer=None, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.kernel_values = kernel_values
            self.kernel_quantizer = keras.activations.get(kernel_quantizer)

        def build(self, input_shape):
            self.kernel = self.add_weight(
                name="kernel", shape=(int(input_shape[-1]), self.units),
                initializer=keras.initializers.Constant(self.kernel_values))

        def call(self, x):
            return tf.matmul(x, self.kernel_quantizer(self.kernel))

        def get_config(self):
            config = super().get_config()
            config.update(units=self.units, kernel_values=self.kernel_values,
                          kernel_quantizer=keras.activations.serialize(
                              self.kernel_quantizer))
            return config
''')

USER_OPS = textwrap.dedent('''
    """Op functions and gradients of the user's own, registered at import."""
    import tensorflow as tf
    import graph_override as go


    def my_floor(x):
        return tf.floor(x)


    def floor_half(op, grad):
        return grad * tf.constant(0.5, grad.dtype)


    go.register_gradient(floor_half, name="ks_user_ops.FloorHalf")


    @tf.RegisterGradient("ks_user_ops.SignClip")
    def sign_clip(op, grad):
        x = op.inputs[0]
        return grad * tf.cast(tf.abs(x) <= 0.5, grad.dtype)


    def scale_03(op, grad):
        return grad * tf.constant(0.3, grad.dtype)


    SCALE_03 = go.register_gradient(scale_03)  # a RegisteredGradient (a str)
''')

PROBE = textwrap.dedent('''
    import numpy as np
    import tensorflow as tf


    def probe(model, x, upstreams):
        """Per output: its values, and the gradients of the output (with a
        fixed upstream gradient) w.r.t. the input and every weight."""
        x = tf.constant(np.asarray(x, np.float32))
        out = []
        for k, u in enumerate(upstreams):
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = model(x)[k]
            u = tf.constant(np.asarray(u, np.float32))
            dx = tape.gradient(y, x, output_gradients=u)
            dw = tape.gradient(y, model.trainable_weights, output_gradients=u)
            out.append({"y": np.asarray(y).tolist(), "dx": np.asarray(dx).tolist(),
                        "dw": [None if g is None else np.asarray(
                            tf.convert_to_tensor(g)).tolist() for g in dw]})
        return out
''')

FRESH = textwrap.dedent('''
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    folder = sys.argv[1]
    sys.path.insert(0, folder)
    import keras
    import graph_override.tf2  # registers the estimators and classes with Keras
    from graph_override import _compat
    import ks_user_layer
    from ks_probe import probe
    plan = json.load(open(os.path.join(folder, "plan.json")))
    BUILTIN = "graph_override.ste_sign(clip_value=0.5)"
    # The user's op functions are of a module the user allows (not imported yet).
    graph_override.tf2.allow_op_functions("ks_user_ops")
    out = {"builtin_before": _compat.has_gradient_entry(BUILTIN), "early": {}, "loaded": {}}
    # Before the user's module is imported, models that need it do not load.
    for name, path in plan["early"].items():
        try:
            keras.models.load_model(path)
            out["early"][name] = None
        except Exception as e:  # pylint: disable=broad-except
            out["early"][name] = [[c.__name__ for c in type(e).__mro__], str(e)]
    out["user_ops_before"] = "ks_user_ops" in sys.modules
    import ks_user_ops  # registers the user's gradients
    for name, case in plan["cases"].items():
        out["loaded"][name] = {}
        for fmt, path in case["paths"].items():
            model = keras.models.load_model(path)
            out["loaded"][name][fmt] = probe(model, case["x"], case["u"])
    out["builtin_after"] = _compat.has_gradient_entry(BUILTIN)
    print(json.dumps(out))
''')


def boundary_inputs(params):
    """Two rows: exact zeros, +-1, +-2, +-0.5 and +-every numeric setting
    (the clip and threshold boundaries), then random values."""
    row = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1.5, 1.0 / 15]
    for value in params.values():
        if isinstance(value, float) and value not in row:
            row += [value, -value]
    rand = np.random.RandomState(len(row)).uniform(-1.5, 1.5, len(row))
    return np.array([row, rand], np.float32)


def kernel_values(x):
    """A (n, 3) kernel whose entries are boundary values too."""
    return np.stack([x[0], -x[0], x[1]], axis=1).tolist()


def build_model(ks_user_layer, x, fn):
    """Three outputs, each using `fn`: the activation of a Dense layer with an
    identity kernel (so it sees x exactly), a Lambda layer on x (Keras 2:
    Activation, see test_keras2_lambda_*), and the kernel quantizer in the
    config of the user's own layer."""
    n = x.shape[1]
    inputs = keras.Input((n,))
    dense = keras.layers.Dense(n, activation=fn, kernel_initializer="identity",
                               bias_initializer="zeros")(inputs)
    wrap = keras.layers.Lambda if KERAS_3 else keras.layers.Activation
    direct = wrap(fn)(inputs)
    quant = ks_user_layer.QuantDense(3, kernel_values(x), kernel_quantizer=fn)(inputs)
    return keras.Model(inputs, [dense, direct, quant])


def upstreams(x):
    rng = np.random.RandomState(7)
    n = x.shape[1]
    return [rng.uniform(-2, 2, (2, n)).astype(np.float32),
            rng.uniform(-2, 2, (2, n)).astype(np.float32),
            rng.uniform(-2, 2, (2, 3)).astype(np.float32)]


def op_cases(ks_user_ops):
    """name -> (wrapper, numpy forward, numpy dx/dy of the Lambda output)."""
    def sign_clip(x):
        return (np.abs(x) <= 0.5).astype(np.float32)
    return {
        # tf's op, a gradient function registered with tf.RegisterGradient
        "sign/tf-registered-fn": (op_with_gradient(tf.sign, ks_user_ops.sign_clip),
                                  np.sign, sign_clip),
        # tf.math.round (saved as tf.round), TensorFlow's own gradient name
        "round/Identity": (op_with_gradient(tf.math.round, "Identity"),
                           np.round, np.ones_like),
        # the user's module-level op, a function registered with register_gradient
        "user-floor/registered-fn": (op_with_gradient(ks_user_ops.my_floor, ks_user_ops.floor_half),
                                     np.floor, lambda x: np.full_like(x, 0.5)),
        # a built-in estimator name, resolved on demand in the fresh process
        "sign/builtin-name": (op_with_gradient(tf.sign, "graph_override.ste_sign(clip_value=0.5)"),
                              np.sign, sign_clip),
        # a RegisteredGradient returned by register_gradient
        "identity/registered-name": (op_with_gradient(tf.identity, ks_user_ops.SCALE_03),
                                     lambda x: x, lambda x: np.full_like(x, 0.3)),
    }


def op_inputs():
    row = [0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 0.25, -0.7]
    return np.array([row, [-r for r in row]], np.float32)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Builds and saves every model, probes it here, and loads all of them in
    one fresh process, which probes them again."""
    folder = tmp_path_factory.mktemp("keras_serialization")
    for name, text in [("ks_user_layer", USER_LAYER), ("ks_user_ops", USER_OPS), ("ks_probe", PROBE)]:
        (folder / (name + ".py")).write_text(text)
    sys.path.insert(0, str(folder))
    try:
        import ks_probe  # pylint: disable=import-outside-toplevel,import-error
        import ks_user_layer  # pylint: disable=import-outside-toplevel,import-error
        import ks_user_ops  # pylint: disable=import-outside-toplevel,import-error
    finally:
        sys.path.remove(str(folder))
    plan = {"cases": {}, "early": {}}
    here = {}

    def add(name, make, x):
        model = build_model(ks_user_layer, x, make())
        u = upstreams(x)
        paths = {}
        for fmt in FORMATS:
            path = folder / ("%d.%s" % (len(plan["cases"]), fmt))
            model.save(str(path))
            paths[fmt] = str(path)
        plan["cases"][name] = {"paths": paths, "x": x.tolist(), "u": [a.tolist() for a in u]}
        here[name] = model, x, u, ks_probe.probe(model, x, u)

    for sid, (estimator, params) in zip(SETTING_IDS, SETTINGS):
        add(sid, lambda e=estimator, p=params: Estimator(e, **p), boundary_inputs(params))
    ops = op_cases(ks_user_ops)
    for name, (wrapper, _, _) in ops.items():
        add(name, lambda w=wrapper: w, op_inputs())
    # Models loaded before ks_user_ops is imported: plain Dense layers only.
    for name, wrapper in [("op_fn", op_with_gradient(ks_user_ops.my_floor, "Identity")),
                          ("gradient", op_with_gradient(tf.sign, "ks_user_ops.SignClip"))]:
        inputs = keras.Input((4,))
        path = folder / ("early_%s.keras" % name)
        keras.Model(inputs, keras.layers.Dense(2, activation=wrapper)(inputs)).save(str(path))
        plan["early"][name] = str(path)
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "fresh.py").write_text(FRESH)
    proc = warm_python.run([sys.executable, str(folder / "fresh.py"), str(folder)],
                          capture_output=True, text=True, timeout=900, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"here": here, "fresh": fresh, "ops": ops, "ks_user_layer": ks_user_layer,
            "probe": ks_probe.probe}


def assert_bitwise(got, want, what):
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    assert got.shape == want.shape, what
    if got.tobytes() != want.tobytes():
        raise AssertionError("%s differs:\n%r\n%r" % (what, got, want))


def assert_same_probe(got, want, what):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert_bitwise(g["y"], w["y"], "%s output %d" % (what, k))
        assert_bitwise(g["dx"], w["dx"], "%s output %d d/dx" % (what, k))
        assert len(g["dw"]) == len(w["dw"]), what
        for i, (a, b) in enumerate(zip(g["dw"], w["dw"])):
            assert (a is None) == (b is None), (what, k, i)
            if a is not None:
                assert_bitwise(a, b, "%s output %d d/dweight %d" % (what, k, i))


# --- round trips -----------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sid", SETTING_IDS)
def test_estimator_settings_load_in_a_fresh_process(world, sid, fmt):
    _, _, _, here = world["here"][sid]
    assert_same_probe(world["fresh"]["loaded"][sid][fmt], here, "%s .%s" % (sid, fmt))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["sign/tf-registered-fn", "round/Identity",
                                  "user-floor/registered-fn", "sign/builtin-name",
                                  "identity/registered-name"])
def test_op_with_gradient_loads_in_a_fresh_process(world, name, fmt):
    _, _, _, here = world["here"][name]
    assert_same_probe(world["fresh"]["loaded"][name][fmt], here, "%s .%s" % (name, fmt))


def test_a_builtin_gradient_name_resolves_on_demand_in_the_fresh_process(world):
    fresh = world["fresh"]
    assert fresh["builtin_before"] is False
    assert fresh["builtin_after"] is True


@pytest.mark.parametrize("estimator,params", SETTINGS, ids=SETTING_IDS)
def test_estimator_models_compute_what_the_functions_compute(world, estimator, params):
    """The model with Estimator(...) against the same model with a plain
    function calling tf2.NAME(x, **params), bitwise; and the inputs tell the
    setting from the defaults, so a setting lost on the way would show."""
    sid = SETTING_IDS[SETTINGS.index((estimator, params))]
    model, x, u, here = world["here"][sid]
    probe = world["probe"]

    def same_model(fn):
        other = build_model(world["ks_user_layer"], x, fn)
        other.set_weights(model.get_weights())
        return probe(other, x, u)

    function = getattr(tf2, estimator)
    assert_same_probe(here, same_model(lambda t: function(t, **params)), sid)
    # The Lambda (Activation) output is tf2.NAME(x) itself.
    assert_bitwise(here[1]["y"], function(tf.constant(x), **params), sid)
    if params:
        other = OTHER_SETTING.get(estimator, {})
        with pytest.raises(AssertionError):
            assert_same_probe(here, same_model(lambda t: function(t, **other)), sid)


@pytest.mark.parametrize("name", ["sign/tf-registered-fn", "round/Identity",
                                  "user-floor/registered-fn", "sign/builtin-name",
                                  "identity/registered-name"])
def test_op_with_gradient_models_match_numpy(world, name):
    _, x, u, here = world["here"][name]
    _, forward, multiplier = world["ops"][name]
    assert_bitwise(here[1]["y"], forward(x), name)
    assert_bitwise(here[1]["dx"], u[1] * multiplier(x), name)
    # The Dense layer's identity kernel and zero bias hand the op x (+ 0.0,
    # which makes -0.0 +0.0).
    assert_bitwise(here[0]["y"], forward(x + np.float32(0.0)), name)



@pytest.mark.parametrize("part,says", [
    ("op_fn", "needs the op function my_floor from module 'ks_user_ops', which this "
              "process has not imported. Import ks_user_ops before keras.models.load_model"),
    ("gradient", "names the gradient 'ks_user_ops.SignClip', which is not registered in "
                 "this process. Import the module that registers it"),
])
def test_loading_says_which_module_to_import(world, part, says):
    """Before the user's module is imported, a model that needs it fails to
    load with a message that says what to import (Keras re-raises it as a
    TypeError with the message at the end); loading imported nothing."""
    fresh = world["fresh"]
    assert fresh["user_ops_before"] is False
    classes, message = fresh["early"][part]
    assert "TypeError" in classes
    assert says in message


# --- what cannot be saved, and what a file may not name ---------------------

def nested_op():
    def inner_sign(x):
        return tf.sign(x)
    return inner_sign


def unregistered_gradient(op, grad):  # pylint: disable=unused-argument
    return grad


@pytest.mark.parametrize("op_fn,gradient,says,not_says", [
    (lambda x: tf.sign(x), "Identity", ["op_fn: <lambda> is a lambda"], ["gradient:"]),
    (nested_op(), "Identity", ["op_fn: nested_op.<locals>.inner_sign is defined inside "
                               "another function"], ["gradient:"]),
    (tf.sign, unregistered_gradient,
     ["gradient: gradient function unregistered_gradient is registered under no name",
      'register it with graph_override.register_gradient(fn, name="...")'], ["op_fn:"]),
    (lambda x: tf.sign(x), unregistered_gradient, ["op_fn: <lambda>", "gradient: gradient "
                                                   "function unregistered_gradient"], []),
    (functools.partial(tf.sign, name="s"), "Identity", ["is a partial, not a function"], []),
])
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_unnameable_wrapper_fails_at_save(tmp_path, op_fn, gradient,
                                                                 says, not_says, fmt):
    wrapper = op_with_gradient(op_fn, gradient)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2, activation=wrapper)(inputs))
    with pytest.raises(SerializationError) as info:
        model.get_config()  # what Keras saves: fails the same way, writes nothing
    message = str(info.value)
    assert "cannot be saved by name" in message
    for text in says:
        assert text in message
    for text in not_says:
        assert text not in message
    path = tmp_path / ("model." + fmt)
    with pytest.raises(SerializationError, match="cannot be saved by name"):
        model.save(str(path))
    # Keras (but Keras 2 for .keras) opens the file before it asks for the
    # config, so a failed save leaves a file that does not load.
    assert path.exists() == (KERAS_3 or fmt == "h5")
    if path.exists():
        with pytest.raises(Exception):  # pylint: disable=broad-except
            keras.models.load_model(str(path))


def test_a_tensorflow_op_function_without_a_public_name_says_so():
    from tensorflow.python.ops import gen_math_ops  # pylint: disable=import-outside-toplevel
    assert gen_math_ops.sign is not tf.sign
    with pytest.raises(SerializationError, match=r"gen_math_ops.sign has no public name in "
                                                 r"tf.raw_ops or tf, tf.math, tf.nn"):
        op_with_gradient(gen_math_ops.sign, "Identity").get_config()


def test_a_module_function_of_the_standard_library_is_not_an_op_function():
    import shutil  # pylint: disable=import-outside-toplevel
    with pytest.raises(SerializationError, match="shutil.copyfile is a function of shutil, "
                                                 "not a TensorFlow op function"):
        op_with_gradient(shutil.copyfile, "Identity").get_config()


@pytest.mark.parametrize("config,error,says", [
    ({"op_fn": "os:system", "gradient": "Identity"}, SerializationError,
     "names the function system of module 'os', which you have not allowed"),
    ({"op_fn": "subprocess:getoutput", "gradient": "Identity"}, SerializationError,
     "graph_override.tf2.allow_op_functions('subprocess')"),
    ({"op_fn": "builtins:eval", "gradient": "Identity"}, SerializationError,
     "custom_objects={'eval': builtins.eval}"),
    ({"op_fn": "graph_override.frozen.graphdef.io:save", "gradient": "Identity"}, SerializationError,
     "function save of module 'graph_override.frozen.graphdef.io', which you have not allowed"),
    ({"op_fn": "tf.io.gfile.remove", "gradient": "Identity"}, SerializationError,
     "names tf.io.gfile.remove, which is not one of the TensorFlow op functions"),
    ({"op_fn": "tf._api.v2.math.sign", "gradient": "Identity"}, SerializationError,
     "is not one of the TensorFlow op functions"),
    ({"op_fn": "tf.no_such_op", "gradient": "Identity"}, SerializationError,
     "is not one of the TensorFlow op functions"),
    ({"op_fn": "os.path:join", "gradient": "Identity"}, SerializationError,
     "which you have not allowed"),
    ({"op_fn": "sign", "gradient": "Identity"}, SerializationError,
     "neither a TensorFlow op function ('tf.sign') nor 'module:function'"),
    ({"op_fn": "%s:nested_op.<locals>.inner_sign" % __name__, "gradient": "Identity"},
     SerializationError, "neither a TensorFlow op function"),
    ({"op_fn": 3, "gradient": "Identity"}, SerializationError, "must be saved as a name"),
    ({"op_fn": "tf.sign"}, SerializationError, "has the keys 'op_fn' and 'gradient'"),
    ({"op_fn": "tf.sign", "gradient": "Identity", "extra": 1}, SerializationError,
     "has the keys"),
    ({"op_fn": "tf.sign", "gradient": None}, SerializationError,
     "the gradient must be saved as a registered name"),
    ({"op_fn": "tf.sign", "gradient": "graph_override.ste_sing(clip_value=1.0)"},
     UnknownGradientError, "Did you mean 'graph_override.ste_sign(clip_value=1.0)'"),
])
def test_a_saved_wrapper_config_names_only_what_may_run(config, error, says):
    with pytest.raises(error) as info:
        OpWithGradient.from_config(config)
    assert says in str(info.value)


def test_a_module_function_of_the_users_own_resolves_where_the_user_allows_it():
    config = {"op_fn": "%s:nested_op" % __name__, "gradient": "Identity"}
    with pytest.raises(SerializationError, match="which you have not allowed"):
        OpWithGradient.from_config(config)
    with tf2.allow_op_functions(sys.modules[__name__]):
        assert OpWithGradient.from_config(config).op_fn is nested_op
    with tf2.allow_op_functions(__name__.rpartition(".")[0] or __name__):  # its package
        assert OpWithGradient.from_config(config).op_fn is nested_op
    with pytest.raises(SerializationError, match="which you have not allowed"):
        OpWithGradient.from_config(config)  # the allowance ended with the block
    for given in ({"nested_op": nested_op}, {config["op_fn"]: nested_op}):
        with keras.utils.custom_object_scope(given):
            assert OpWithGradient.from_config(config).op_fn is nested_op
    wrapper = op_with_gradient(nested_op, "Identity")
    assert wrapper.get_config() == config


@pytest.mark.parametrize("args,kwargs,error,says", [
    (("ste_sing",), {}, ValueError, "Did you mean 'ste_sign'"),
    (("dorefa_quantise",), {}, ValueError, "Did you mean 'dorefa_quantize'"),
    (("Sign",), {}, ValueError, "Estimators: ste_sign, approx_sign"),
    ((tf2.ste_sign,), {}, TypeError, "such as 'ste_sign', got <function ste_sign"),
    (("ste_sign",), {"clip": 0.5}, TypeError, "got unknown parameter(s) clip; it takes clip_value"),
    (("ste_sign",), {"clip_value": -0.5}, ValueError, "clip_value=...) must be >= 0.0"),
    (("ste_tern",), {"ternary_weight_networks": "yes"}, TypeError, "must be True or False"),
    (("dorefa_quantize",), {"k_bit": 2.5}, ValueError, "integer from 1 to 16"),
    (("scale_gradient",), {}, TypeError, "missing required parameter 'scale'"),
    (("clip_gradient",), {"clip_value_min": 1.0, "clip_value_max": 0.0}, ValueError,
     "min must not exceed max"),
    (("ste_sign",), {"clip_value": tf.constant(0.5)}, TypeError, "must be a Python number"),
])
def test_estimator_refuses_bad_settings_at_construction(args, kwargs, error, says):
    with pytest.raises(error) as info:
        Estimator(*args, **kwargs)
    assert says in str(info.value)


@pytest.mark.parametrize("config,error,says", [
    ({"estimator": "ste_sgn", "clip_value": 0.5}, ValueError, "Did you mean 'ste_sign'"),
    ({"clip_value": 0.5}, TypeError, "with the key 'estimator'"),
    ({"estimator": "ste_sign", "beta": 2.0}, TypeError, "unknown parameter(s) beta"),
])
def test_estimator_from_config_refuses_a_bad_config(config, error, says):
    with pytest.raises(error) as info:
        Estimator.from_config(config)
    assert says in str(info.value)


# --- the objects themselves ------------------------------------------------

@pytest.mark.parametrize("estimator,params", SETTINGS, ids=SETTING_IDS)
@pytest.mark.parametrize("mode", ["graph", "eager", "function"])
def test_an_estimator_is_the_function_with_its_settings(estimator, params, mode):
    x = boundary_inputs(params)
    upstream = np.random.RandomState(3).uniform(-2, 2, x.shape).astype(np.float32)
    got = testing.evaluate(Estimator(estimator, **params), x, mode, upstream=upstream)
    want = testing.evaluate(lambda t: getattr(tf2, estimator)(t, **params), x, mode,
                            upstream=upstream)
    assert_bitwise(got.outputs, want.outputs, estimator)
    assert_bitwise(got.gradients[0], want.gradients[0], estimator)


def test_estimator_config_repr_and_equality():
    e = Estimator("ste_tern", threshold_value=0.1)
    assert e.estimator == "ste_tern"
    assert e.get_config() == {"estimator": "ste_tern", "threshold_value": 0.1,
                              "ternary_weight_networks": False, "clip_value": 1.0}
    assert repr(e) == ("Estimator('ste_tern', threshold_value=0.1, "
                       "ternary_weight_networks=False, clip_value=1.0)")
    assert Estimator.from_config(e.get_config()) == e
    assert hash(Estimator.from_config(e.get_config())) == hash(e)
    assert e != Estimator("ste_tern", threshold_value=0.2)
    e.params["threshold_value"] = 5.0  # a copy: the estimator keeps its own
    assert e.params["threshold_value"] == 0.1
    # k_bit stays an int and ternary_weight_networks a bool in the config.
    assert Estimator("dorefa_quantize", k_bit=4).get_config() == {
        "estimator": "dorefa_quantize", "k_bit": 4}
    assert Estimator("ste_tern", ternary_weight_networks=1).params[
        "ternary_weight_networks"] is True


@pytest.mark.parametrize("obj", [Estimator("ste_sign"), Estimator("scale_gradient", scale=2.0),
                                 op_with_gradient(tf.sign, "Identity")])
def test_the_classes_are_registered_with_keras(obj):
    cls = type(obj)
    key = "graph_override>%s" % cls.__name__
    assert keras.utils.get_registered_object(key) is cls
    config = keras.saving.serialize_keras_object(obj)
    assert config["registered_name"] == key
    assert keras.saving.deserialize_keras_object(config) == obj
    if not KERAS_3:  # Keras 2's HDF5 loader looks classes up by bare name
        assert keras.utils.get_custom_objects()[cls.__name__] is cls


def test_a_gradient_function_is_saved_under_its_registered_name():
    def my_grad(op, grad):  # pylint: disable=unused-argument
        return grad
    assert registry.registered_name(my_grad) is None
    name = go.register_gradient(my_grad, name="test_keras_serialization.MyGrad")
    assert registry.registered_name(my_grad) == name
    assert op_with_gradient(tf.sign, my_grad).get_config()["gradient"] == name
    # TensorFlow's own: the function registered for Identity.
    identity_grad = _compat.lookup_gradient("Identity")
    assert registry.registered_name(identity_grad) is not None
    assert _compat.lookup_gradient(registry.registered_name(identity_grad)) is identity_grad


@pytest.mark.parametrize("op_fn,name", [
    (tf.sign, "tf.sign"), (tf.math.sign, "tf.sign"), (tf.math.round, "tf.round"),
    (tf.identity, "tf.identity"), (tf.nn.relu, "tf.nn.relu"), (tf.raw_ops.Sign, "tf.raw_ops.Sign"),
    (tf.compat.v1.floor, "tf.floor"),
])
def test_tensorflow_op_functions_are_saved_by_their_public_name(op_fn, name):
    config = op_with_gradient(op_fn, "Identity").get_config()
    assert config == {"op_fn": name, "gradient": "Identity"}
    assert OpWithGradient.from_config(config).op_fn is op_fn


def test_a_wrapper_still_calls_like_its_op_function():
    wrapper = op_with_gradient(tf.sign, "Identity")
    assert isinstance(wrapper, OpWithGradient)
    assert repr(wrapper) == "op_with_gradient(tf.sign, 'Identity')"
    assert wrapper.op_fn is tf.sign and wrapper.gradient == "Identity"
    assert not hasattr(wrapper, "__name__")
    assert_bitwise(wrapper(tf.constant([-2.0, 0.0, 3.0])), [-1.0, 0.0, 1.0], "sign")


def test_a_model_with_the_objects_trains():
    """model.fit runs the objects inside Keras' tf.function: the gradients of
    the estimator with its setting and of the legacy function reach the
    weights."""
    inputs = keras.Input((4,))
    h = keras.layers.Dense(4, activation=Estimator("ste_sign", clip_value=2.0),
                           kernel_initializer=keras.initializers.RandomUniform(-1, 1, seed=1))(inputs)
    h = keras.layers.Activation(op_with_gradient(tf.identity, "graph_override.scale_gradient"
                                                 "(scale=0.5)"))(h)
    model = keras.Model(inputs, keras.layers.Dense(1)(h))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    before = [w.numpy().copy() for w in model.trainable_weights]
    x = np.random.RandomState(2).uniform(-1, 1, (16, 4)).astype(np.float32)
    model.fit(x, np.ones((16, 1), np.float32), epochs=1, batch_size=16, verbose=0)
    after = [w.numpy() for w in model.trainable_weights]
    assert not np.array_equal(before[0], after[0])  # the first kernel, through both


# --- Keras 2 limits, pinned so that a release lifting them is noticed --------

KERAS_2_ONLY = pytest.mark.skipif(KERAS_3, reason="a limit of Keras 2 (TensorFlow 2.15)")


def dense_model(activation):
    inputs = keras.Input((3,))
    return keras.Model(inputs, keras.layers.Dense(2, activation=activation)(inputs))


@KERAS_2_ONLY
def test_keras2_hdf5_cannot_load_a_registered_function(tmp_path):
    """Keras 2 saves a registered function to HDF5 as class_name 'function'
    and its HDF5 loader then looks for a class of that name. An Estimator
    with the same (default) setting loads."""
    path = str(tmp_path / "fn.h5")
    dense_model(tf2.ste_sign).save(path)
    with pytest.raises(TypeError, match="Unknown activation function: 'function'"):
        keras.models.load_model(path)
    dense_model(Estimator("ste_sign")).save(path)
    assert keras.models.load_model(path).layers[-1].activation == Estimator("ste_sign")


@KERAS_2_ONLY
@pytest.mark.parametrize("fmt", FORMATS)
def test_keras2_lambda_cannot_save_an_estimator_or_wrapper(tmp_path, fmt):
    """Keras 2's Lambda layer saves a callable object by its __name__ only
    (which could not load back); the objects have none, and say what to use."""
    for obj in [Estimator("ste_sign", clip_value=0.5), op_with_gradient(tf.sign, "Identity")]:
        inputs = keras.Input((3,))
        model = keras.Model(inputs, keras.layers.Lambda(obj)(inputs))
        with pytest.raises(AttributeError, match="use keras.layers.Activation"):
            model.save(str(tmp_path / ("model." + fmt)))


@KERAS_2_ONLY
def test_keras2_lambda_stores_a_registered_function_as_bytecode(tmp_path):
    """Keras 2's Lambda layer stores every Python function as bytecode, which
    load_model refuses in safe mode, registered or not."""
    path = str(tmp_path / "lambda.keras")
    inputs = keras.Input((3,))
    keras.Model(inputs, keras.layers.Lambda(tf2.ste_sign)(inputs)).save(path)
    with pytest.raises(ValueError, match="safe_mode=False"):
        keras.models.load_model(path)
