"""larq-zoo 2.3.2's models under TensorFlow 2.15 (larq 0.13.3), for the tests
of graph_override.keras.zoo: run by that release's python with
compat/reference_zoo.sh's folder on its path.

    python zoo_reference.py summary OUT.json NAME:SIZE[:CLASSES]...
        {"NAME:SIZE:CLASSES": larq.models.summary's text and the parameter
        counts} of each model (weights=None, SIZExSIZEx3 inputs, CLASSES
        classes, default 1000), each built after clear_session (so layer
        names count from 0)
    python zoo_reference.py save OUT_DIR NAME:SIZE[:CLASSES]...
        each model, its weights and batch-norm statistics made random,
        saved as OUT_DIR/NAME.h5, with inputs NAME.x.npy and larq's
        predictions NAME.y.npy; NAME "TFOps" is a small model of ops Keras 2
        records as TFOpLambda layers (tf.nn.relu, x * 2, tf.concat of a
        list, tf.math.multiply with a tensor argument)

Two adjustments run larq-zoo 2.3.2 (written for larq < 0.13.2 and Keras
< 2.13) here, neither of which changes a model: Keras 2.15 keeps
``obtain_input_shape`` only in keras.src, and XNORNet's quantizer, a
function registered with Keras, is given as the function (larq 0.13.3
would build its name as a class).
"""

import contextlib
import io
import json
import os
import sys

import numpy as np


def _zoo():
    import keras.applications.imagenet_utils as public  # pylint: disable=import-outside-toplevel
    import keras.src.applications.imagenet_utils as private  # pylint: disable=import-outside-toplevel
    public.obtain_input_shape = private.obtain_input_shape
    import larq_zoo  # pylint: disable=import-outside-toplevel
    from larq_zoo.literature import xnornet  # pylint: disable=import-outside-toplevel
    xnornet.XNORNetFactory.kernel_quantizer = staticmethod(xnornet.xnor_weight_scale)
    return larq_zoo


def _build(zoo, name, size, classes):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.keras.backend.clear_session()
    if name == "TFOps":
        x = tf.keras.Input((size, size, 3))
        y = tf.nn.relu(x) * 2.0
        z = tf.concat([x, y], axis=-1)
        return tf.keras.Model(x, tf.math.multiply(z, tf.concat([y, x], axis=-1)))
    module = zoo.sota if name.startswith("QuickNet") else zoo.literature
    return getattr(module, name)(weights=None, input_shape=(size, size, 3),
                                 num_classes=classes)


def _specs(args):
    for arg in args:
        name, size, classes = (arg.split(":") + ["1000"])[:3]
        yield "%s:%s:%s" % (name, size, classes), name, int(size), int(classes)


def _counts(model):
    import larq as lq  # pylint: disable=import-outside-toplevel
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        lq.models.summary(model)
    count = lambda ws: int(sum(np.prod(w.shape) for w in ws))  # noqa: E731
    binarized = 0
    for layer in model.layers:
        for w in layer.weights:
            quantizer = getattr(w, "quantizer", None)
            if getattr(quantizer, "precision", None) == 1:
                binarized += int(np.prod(w.shape))
    return dict(text=text.getvalue(), trainable=count(model.trainable_weights),
                non_trainable=count(model.non_trainable_weights), binarized=binarized)


def _randomized(model, seed):
    rng = np.random.RandomState(seed)
    for w in model.weights:
        name = w.name.split("/")[-1]
        value = rng.uniform(-1, 1, w.shape)
        if "moving_variance" in name or "gamma" in name:
            value = rng.uniform(0.5, 1.5, w.shape)
        w.assign(value.astype(w.dtype.as_numpy_dtype))


def main(argv):
    zoo = _zoo()
    command, out, specs = argv[0], argv[1], list(_specs(argv[2:]))
    if command == "summary":
        found = {key: _counts(_build(zoo, name, size, classes))
                 for key, name, size, classes in specs}
        with open(out + ".tmp", "w") as f:
            json.dump(found, f)
        os.replace(out + ".tmp", out)
        return
    for i, (_, name, size, classes) in enumerate(specs):
        model = _build(zoo, name, size, classes)
        _randomized(model, i)
        x = np.random.RandomState(100 + i).uniform(-1, 1, (2, size, size, 3))
        np.save(os.path.join(out, name + ".x.npy"), x.astype(np.float32))
        np.save(os.path.join(out, name + ".y.npy"), model(x, training=False).numpy())
        model.save(os.path.join(out, name + ".h5"))


if __name__ == "__main__":
    main(sys.argv[1:])
