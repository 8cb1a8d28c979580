"""Deployment of a model of quantized layers: `model.export()` to a
SavedModel, then TensorFlow Lite (float and int8, run by TFLite's own
interpreter) and larq compute engine's converter to its bitpacked ops
(LceBconv2d, LceQuantize; the `lce` extra), with the numbers against the
Keras model (docs/guide/keras.md, "Deployment")."""

import json
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
import larq_extras_env
import warm_python


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A binary convolution (padded with 1.0) and a binary dense layer,
    exported; with its inputs and the Keras model's outputs."""
    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((8, 8, 2))
    h = lq.layers.QuantConv2D(8, 3, padding="same", pad_values=1.0, use_bias=False,
                              input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                              kernel_constraint="weight_clip")(inputs)
    h = tf.keras.layers.Flatten()(tf.keras.layers.BatchNormalization()(h))
    outputs = lq.layers.QuantDense(3, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                                   kernel_constraint="weight_clip")(h)
    model = tf.keras.Model(inputs, outputs)
    x = np.random.RandomState(1).uniform(-1, 1, (4, 8, 8, 2)).astype(np.float32)
    x[0, 0, :2] = 0.0  # sign(0) = +1 on every path
    folder = str(tmp_path_factory.mktemp("deploy") / "exported")
    model.export(folder)
    return folder, x, model.predict(x, verbose=0)


def _tflite_outputs(flatbuffer, x):
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    interpreter.allocate_tensors()
    source = interpreter.get_input_details()[0]["index"]
    target = interpreter.get_output_details()[0]["index"]
    outputs = []
    for row in x:
        interpreter.set_tensor(source, row[None])
        interpreter.invoke()
        outputs.append(interpreter.get_tensor(target)[0])
    return np.stack(outputs)


def test_tflite_float_gives_the_keras_models_outputs(exported):
    folder, x, expected = exported
    flatbuffer = tf.lite.TFLiteConverter.from_saved_model(folder).convert()
    np.testing.assert_allclose(_tflite_outputs(flatbuffer, x), expected, rtol=0, atol=1e-5)


def test_tflite_int8_is_within_its_quantization_step(exported):
    folder, x, expected = exported
    converter = tf.lite.TFLiteConverter.from_saved_model(folder)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([row[None]] for row in x)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    outputs = _tflite_outputs(converter.convert(), x)
    # Measured: 0.19 at most where the outputs reach 38 (an int8 step of the
    # output is 1/255 of its range, 0.3 here).
    error = np.abs(outputs - expected).max()
    step = (expected.max() - expected.min()) / 255
    assert 0 < error <= 1.5 * step, (error, step)


LCE = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import larq_compute_engine as lce

flatbuffer = lce.convert_saved_model(sys.argv[2])
result = {"ops": [op for op in ("LceBconv2d", "LceQuantize", "LceDequantize")
                  if op.encode() in flatbuffer], "numpy": np.__version__}
try:
    from larq_compute_engine.tflite.python.interpreter import Interpreter
    result["outputs"] = Interpreter(flatbuffer).predict(np.load(sys.argv[3])).tolist()
except Exception as e:  # where the interpreter stops (numpy 2)
    result["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(result))
'''


@pytest.mark.slow
@pytest.mark.subprocess
def test_larq_compute_engine_converts_to_bitpacked_ops(exported, tmp_path):
    # A process of its own: LCE is a test-only folder, and its converter
    # loads its own TensorFlow op library into the process that imports it.
    folder, x, expected = exported
    lce_path = larq_extras_env.build()["lce_path"]
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "lce.py").write_text(textwrap.dedent(LCE))
    done = warm_python.run([sys.executable, str(tmp_path / "lce.py"), lce_path, folder,
                            str(tmp_path / "x.npy")], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"LceBconv2d", "LceQuantize"} <= set(result["ops"])
    if result["numpy"].startswith("1."):
        np.testing.assert_allclose(np.array(result["outputs"], np.float32), expected,
                                   rtol=0, atol=1e-5)
    else:  # where LCE 0.16.0's interpreter stops (docs/guide/keras.md)
        assert "outputs" not in result and "Expected 512 bytes but got 0" in result["error"]
