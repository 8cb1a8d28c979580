"""GraphDefs built the way real frozen models are made, shared by the
frozen-graph tests.

Each builder returns ``(graph_def, input name, output name)``; the input is
a float32 placeholder ``x`` of shape [3] unless said otherwise.

* `v1_while`: a TF1 ``tf.compat.v1.while_loop`` built with control flow v2
  switched off, as TF1 RNN decoders and CTC beam searches were:
  Enter/Exit/Switch/Merge/NextIteration/LoopCond nodes.
* `v1_cond`: a TF1 ``tf.cond`` (Switch/Merge only), which TensorFlow can
  differentiate after import.
* `v2_while`, `v2_cond`: functional StatelessWhile / StatelessIf with the
  bodies in the GraphDef's function library (control flow v2 in a tf.Graph).
* `frozen_tf_function`: a tf.function holding a while loop, frozen with
  convert_variables_to_constants_v2 (a binarized recurrent cell: the Sign is
  inside the loop body); lowered to TF1 control flow, as that function does
  by default, or kept functional.
* `graph_call`: a tf.function called inside a tf.Graph: a PartitionedCall
  whose body is differentiated by TensorFlow's C++ SymbolicGradient.
* `keras_dense`: a Keras model (Dense, Dropout, Dense) frozen with
  convert_variables_to_constants_v2.
* `keras_lstm`: a Keras LSTM frozen the same way, its loop lowered to TF1
  control flow (the default) or kept functional.
* `fake_quant`: quantization-aware training's FakeQuantWithMinMaxVars.
* `matmul`, `one_hot`, `product`: ops whose output is not their first
  input's shape or dtype, or that are not identities.
"""

import contextlib

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2)
from tensorflow.python.ops import control_flow_util

X_VALUE = np.array([-2.0, 0.5, 0.0], np.float32)


@contextlib.contextmanager
def control_flow_v1():
    """TF1 control flow (Enter/Exit/Switch/Merge) for graphs built inside,
    restored afterwards."""
    was = control_flow_util.ENABLE_CONTROL_FLOW_V2
    tf.compat.v1.disable_control_flow_v2()
    try:
        yield
    finally:
        if was:
            tf.compat.v1.enable_control_flow_v2()


def _loop(x, steps=2):
    """h <- sign(h) + h, `steps` times: dh/dx is 2^steps with the
    straight-through estimator where |h| stays <= 1, 1 with Sign's own."""
    _, h = tf.compat.v1.while_loop(
        lambda i, h: i < steps, lambda i, h: (i + 1, tf.sign(h) + h),
        [tf.constant(0), x])
    return h


def v1_while():
    with control_flow_v1():
        with tf.Graph().as_default() as g:
            x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
            tf.identity(_loop(x), name="y")
    return g.as_graph_def(), "x", "y"


def v1_cond():
    with control_flow_v1():
        with tf.Graph().as_default() as g:
            x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
            p = tf.compat.v1.placeholder_with_default(True, [], name="p")
            tf.identity(tf.cond(p, lambda: tf.sign(x) * 2.0 + x, lambda: x), name="y")
    return g.as_graph_def(), "x", "y"


def v2_while():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.identity(_loop(x), name="y")
    return g.as_graph_def(), "x", "y"


def v2_cond():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        p = tf.compat.v1.placeholder_with_default(True, [], name="p")
        tf.identity(tf.cond(p, lambda: tf.sign(x) * 2.0, lambda: x), name="y")
    return g.as_graph_def(), "x", "y"


def frozen_tf_function(steps=3, seed=0, lower_control_flow=True):
    """A binarized recurrent cell, h <- sign(h W + x), in a tf.function,
    frozen; input x [2, 4]. Returns (graph_def, input, output, W).

    convert_variables_to_constants_v2 lowers the loop to TF1 control flow
    (Enter/Exit/...) by default; with lower_control_flow=False it stays a
    functional While whose body is in the function library."""
    w = tf.Variable(np.random.RandomState(seed).randn(4, 4).astype(np.float32) * 0.3)

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def cell(x):
        _, h = tf.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, tf.sign(tf.matmul(h, w) + x)),
                             [tf.constant(0), x])
        return h

    fn = convert_variables_to_constants_v2(cell.get_concrete_function(),
                                           lower_control_flow=lower_control_flow)
    return fn.graph.as_graph_def(), "x", fn.outputs[0].name.split(":")[0], w.numpy()


def graph_call():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.identity(tf.function(lambda t: tf.sign(t) * 3.0)(x), name="y")
    return g.as_graph_def(), "x", "y"


def keras_dense(seed=0):
    """Dense(8, relu), Dropout(0.5), Dense(2), frozen for inference; input
    x [None, 3]. Returns (graph_def, input, output, model)."""
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((3,)),
                                 tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dropout(0.5),
                                 tf.keras.layers.Dense(2)])
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 3], tf.float32, name="x"))
    frozen_fn = convert_variables_to_constants_v2(fn)
    return (frozen_fn.graph.as_graph_def(), "x",
            frozen_fn.outputs[0].name.split(":")[0], model)


def fake_quant():
    """FakeQuant to 8 bits over [-1, 1]; input x [None]."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        q = tf.quantization.fake_quant_with_min_max_vars(
            x, tf.constant(-1.0), tf.constant(1.0), num_bits=8, name="quant")
        tf.identity(q, name="y")
    return g.as_graph_def(), "x", "y"


def matmul():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
        tf.identity(tf.matmul(x, w, name="dense/MatMul"), name="y")
    return g.as_graph_def(), "x", "y"


def one_hot():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.int32, [3], name="x")
        tf.identity(tf.one_hot(x, 4, name="onehot"), name="y")
    return g.as_graph_def(), "x", "y"


def product():
    """c = a * b, with a the input and b a constant."""
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        b = tf.constant([3.0, -2.0, 0.0])
        tf.identity(tf.multiply(a, b, name="c"), name="y")
    return g.as_graph_def(), "x", "y"


def run(graph_def, x_value=X_VALUE, x="x", y="y", *, importer=None, upstream=None):
    """(y, dy/dx) of the GraphDef in a fresh tf.Graph; dx is None when no
    gradient reaches x. `importer` defaults to TensorFlow's own."""
    importer = importer or tf.compat.v1.import_graph_def
    with tf.Graph().as_default() as g:
        xt, yt = importer(graph_def, return_elements=[x + ":0", y + ":0"], name="")
        dx, = tf.gradients(yt, xt, grad_ys=upstream)
        with tf.compat.v1.Session(graph=g) as sess:
            if dx is None:
                return sess.run(yt, {xt: x_value}), None
            return sess.run([yt, dx], {xt: x_value})


def keras_lstm(lower_control_flow=True, seed=0):
    """A Keras LSTM(4) + Dense(2) on [None, 5, 3] sequences, frozen with
    convert_variables_to_constants_v2: its time loop lowered to TF1
    control flow (the default) or kept a functional While. Returns
    (graph_def, input, output, model)."""
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((5, 3)), tf.keras.layers.LSTM(4),
                                 tf.keras.layers.Dense(2)])
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 5, 3], tf.float32, name="x"))
    frozen_fn = convert_variables_to_constants_v2(fn, lower_control_flow=lower_control_flow)
    return (frozen_fn.graph.as_graph_def(), "x",
            frozen_fn.outputs[0].name.split(":")[0], model)
