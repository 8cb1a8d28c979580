"""A quantizer of the user's own, written with ``@tf.custom_gradient`` (larq's
recipe), saves by its name and loads in a new process: by `custom_objects`,
or registered with Keras. TensorFlow makes such a function a callable object
(``Bind``), which Keras would save by that class name."""

import json
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
import warm_python

USER_MODULE = '''
import tensorflow as tf


@tf.custom_gradient
def clipped_sign(x):
    def grad(dy):
        return dy * tf.cast(tf.abs(x) <= 0.5, dy.dtype)
    return tf.sign(x), grad


@tf.keras.utils.register_keras_serializable(package="userq")
@tf.custom_gradient
def halved_sign(x):
    return tf.sign(x), lambda dy: 0.5 * dy
'''

LOAD = '''
import json, sys
import numpy as np, tensorflow as tf
import graph_override.keras  # noqa: F401  (registers the layers)
import userq

path = sys.argv[1]
try:
    tf.keras.models.load_model(path)
    without = "loaded"
except Exception as e:  # the error a user sees without custom_objects
    without = "%s: %s" % (type(e).__name__, e)
model = tf.keras.models.load_model(path, custom_objects={"clipped_sign": userq.clipped_sign})
x = tf.constant(INPUTS, tf.float32)
with tf.GradientTape() as tape:
    tape.watch(x)
    y = model(x)
print(json.dumps({"y": y.numpy().tolist(), "dx": tape.gradient(y, x).numpy().tolist(),
                  "quantizers": [model.layers[0].input_quantizer is userq.clipped_sign,
                                 model.layers[0].kernel_quantizer is userq.halved_sign],
                  "without": without}))
'''

X = [[-1.0, -0.5, -0.25, 0.0, 0.25, 0.75]]


@pytest.mark.subprocess
def test_custom_gradient_quantizer_saves_by_name_and_loads_in_a_new_process(tmp_path,
                                                                          monkeypatch):
    (tmp_path / "userq.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import userq  # pylint: disable=import-error,import-outside-toplevel
    model = tf.keras.Sequential([tf.keras.Input((6,)), lq.layers.QuantDense(
        2, input_quantizer=userq.clipped_sign, kernel_quantizer=userq.halved_sign,
        kernel_initializer="glorot_uniform")])
    config = json.dumps(model.get_config())
    assert "Bind" not in config and "clipped_sign" in config and "userq>halved_sign" in config
    path = str(tmp_path / "model.keras")
    model.save(path)
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = model(x)
    expected_dx = tape.gradient(y, x).numpy()

    (tmp_path / "load.py").write_text(textwrap.dedent(LOAD.replace("INPUTS", repr(X))))
    done = warm_python.run([sys.executable, str(tmp_path / "load.py"), path], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.array(loaded["y"], np.float32), y.numpy())
    np.testing.assert_array_equal(np.array(loaded["dx"], np.float32), expected_dx)
    assert loaded["quantizers"] == [True, True]
    # Without custom_objects the unregistered one is named, with the remedy.
    assert "clipped_sign" in loaded["without"] and "custom_objects" in loaded["without"]
