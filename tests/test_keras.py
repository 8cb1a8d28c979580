"""Keras models that use the tf2 estimators save and load by name: in a
fresh process, without custom_objects, with the same forward values and
the same gradients (.keras everywhere, HDF5 where Keras supports it)."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import warm_python
import tensorflow as tf

from graph_override import _keras, tf2

KERAS_3 = int(keras.__version__.split(".")[0]) >= 3
# Keras 2.15 saves a custom activation function to HDF5 in a form its own
# HDF5 loader cannot read back (any registered function, not only these),
# so HDF5 is checked on Keras 3, where it loads.
FORMATS = ["keras", "h5"] if KERAS_3 else ["keras"]

# A user's own layer that takes an estimator in its config, as quantized
# layers do (kernel_quantizer=...). Both processes import it from a file.
USER_LAYER = textwrap.dedent('''
    import keras
    import tensorflow as tf


    @keras.utils.register_keras_serializable(package="user")
    class QuantDense(keras.layers.Layer):
        def __init__(self, units, kernel_quantizer=None, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.kernel_quantizer = keras.activations.get(kernel_quantizer)

        def build(self, input_shape):
            self.kernel = self.add_weight(
                name="kernel", shape=(int(input_shape[-1]), self.units),
                initializer=keras.initializers.RandomUniform(-1.5, 1.5, seed=3))

        def call(self, x):
            return tf.matmul(x, self.kernel_quantizer(self.kernel))

        def get_config(self):
            config = super().get_config()
            config.update(units=self.units, kernel_quantizer=keras.activations.serialize(
                self.kernel_quantizer))
            return config
''')

# What both processes compute: outputs and gradients for fixed inputs.
PROBE = textwrap.dedent('''
    def probe(model, x):
        import numpy as np
        import tensorflow as tf
        x = tf.constant(x)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = model(x)
        dx = tape.gradient(y, x)
        dw = tape.gradient(y, model.trainable_weights)
        return {"y": np.asarray(y).tolist(), "dx": np.asarray(dx).tolist(),
                "dw": [np.asarray(tf.convert_to_tensor(g)).tolist() for g in dw]}
''')

FRESH = textwrap.dedent('''
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import keras
    import graph_override.tf2  # registers the estimators with Keras
    import user_layer  # the user's own layer class
    from probe import probe
    x = np.load(os.path.join(sys.argv[1], "x.npy"))
    out = {}
    for path in sys.argv[2:]:
        model = keras.models.load_model(path)
        out[os.path.splitext(path)[1]] = probe(model, x)
    print(json.dumps(out))
''')


def build_model(user_layer):
    inputs = keras.Input((4,))
    h = keras.layers.Dense(
        3, activation=tf2.approx_sign,
        kernel_initializer=keras.initializers.RandomUniform(-1.0, 1.0, seed=1))(inputs)
    h = user_layer.QuantDense(3, kernel_quantizer=tf2.ste_sign)(h)
    h = keras.layers.Activation(tf2.swish_sign)(h)
    h = keras.layers.Dense(2, kernel_initializer=keras.initializers.RandomUniform(
        -1.0, 1.0, seed=2))(h)
    # Keras 2's Lambda layer stores any Python function as bytecode, which
    # load_model refuses in safe mode; Keras 3 stores a registered one by name.
    wrap = keras.layers.Lambda if KERAS_3 else keras.layers.Activation
    h = wrap(tf2.ste_tern)(h)
    return keras.Model(inputs, keras.layers.Activation(tf2.flip_gradient)(h))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keras_models")
    (folder / "user_layer.py").write_text(USER_LAYER)
    (folder / "probe.py").write_text(PROBE)
    sys.path.insert(0, str(folder))
    try:
        import user_layer  # pylint: disable=import-outside-toplevel,import-error
        import probe  # pylint: disable=import-outside-toplevel,import-error
        model = build_model(user_layer)
        x = np.random.RandomState(5).uniform(-2, 2, (6, 4)).astype(np.float32)
        x[0] = 0.0  # exact zeros
        np.save(folder / "x.npy", x)
        paths = []
        for fmt in FORMATS:
            path = folder / ("model." + fmt)
            model.save(str(path))
            paths.append(str(path))
        here = probe.probe(model, x)
    finally:
        sys.path.remove(str(folder))
    script = folder / "fresh.py"
    script.write_text(FRESH)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = warm_python.run([sys.executable, str(script), str(folder)] + paths,
                          capture_output=True, text=True, timeout=600, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    return here, loaded, model


def test_the_model_uses_the_estimators(saved):
    here, _, model = saved
    # approx_sign/ste_sign/swish_sign give +-1, ste_tern -1, 0 or 1.
    assert set(np.unique(here["y"])) <= {-1.0, 0.0, 1.0}
    # The straight-through gradients reach the input and every weight.
    assert np.any(np.asarray(here["dx"]) != 0)
    assert len(here["dw"]) == len(model.trainable_weights) == 5
    config = json.dumps(model.get_config())
    for name in ("approx_sign", "ste_sign", "swish_sign", "ste_tern", "flip_gradient"):
        assert "graph_override>%s" % name in config, name


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_fresh_process_loads_the_same_model(saved, fmt):
    here, loaded, _ = saved
    got = loaded["." + fmt]
    np.testing.assert_array_equal(got["y"], here["y"])
    np.testing.assert_array_equal(got["dx"], here["dx"])
    assert len(got["dw"]) == len(here["dw"])
    for a, b in zip(got["dw"], here["dw"]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["ste_sign", "ste_tern", "approx_sign", "dorefa_quantize"])
def test_estimators_are_found_by_their_keras_name(name):
    fn = keras.utils.get_registered_object("graph_override>%s" % name)
    assert fn is getattr(tf2, name)
    assert keras.utils.get_registered_name(fn) == "graph_override>%s" % name
    config = keras.activations.serialize(fn)
    assert keras.activations.deserialize(config) is fn


def test_registration_is_repeatable():
    # A second registration (a reloaded module) is a no-op, not an error.
    _keras.register([tf2.ste_sign, tf2.Estimator])
    assert keras.utils.get_registered_object("graph_override>ste_sign") is tf2.ste_sign
    assert keras.utils.get_registered_object("graph_override>Estimator") is tf2.Estimator


def test_import_graph_override_does_not_import_tensorflow():
    code = "import sys, graph_override; print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["False", "False"]


def test_the_model_trains(saved):
    _, _, model = saved
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    before = [w.numpy().copy() for w in model.trainable_weights]
    x = np.random.RandomState(9).uniform(-1, 1, (8, 4)).astype(np.float32)
    model.fit(x, np.ones((8, 2), np.float32), epochs=1, batch_size=8, verbose=0)
    changed = [not np.array_equal(b, w.numpy()) for b, w in zip(before, model.trainable_weights)]
    assert any(changed)
    assert tf.executing_eagerly()
