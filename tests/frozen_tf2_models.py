"""Frozen models for the to_function tests, their Session references and
their twins written with graph_override.tf2.

Every builder returns ``(graph_def, inputs, outputs)``; weights are random
with a fixed seed, and the first binarized kernel holds exact clip
boundaries (+1 and -1), where the straight-through gradient still passes.
"""

import importlib.util
import pathlib

import numpy as np
import tensorflow as tf

from graph_override import frozen, tf2

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _script(folder, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _set_const(graph_def, name, fn):
    for node in graph_def.node:
        if node.name == name:
            value = fn(tf.make_ndarray(node.attr["value"].tensor).copy())
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
            return
    raise KeyError(name)


def binarized_mlp(kind="sign"):
    """scripts/make_frozen_example.py's MLP; x [N, 16] -> logits [N, 4]."""
    graph_def = _script("scripts", "make_frozen_example").build_binarized_mlp(kind)

    def boundaries(w):
        w[0, 0], w[1, 0], w[2, 0] = 1.0, -1.0, 1.5
        return w
    _set_const(graph_def, "dense_0/kernel", boundaries)
    # The tf.custom_gradient names live on in the process that built the
    # graph; give them names that are dead here, as in any other process.
    dead = 0
    for node in graph_def.node:
        if frozen.GRADIENT_ATTR in node.attr:
            dead += 1
            node.attr[frozen.GRADIENT_ATTR].s = b"CustomGradient-9876543%d" % dead
    return graph_def, ["x:0"], ["logits:0"]


def mlp_tf2(x, weights):
    """The binarized MLP written with graph_override.tf2 (the oracle)."""
    h = x
    for i in range(3):
        kernel = weights["dense_%d/kernel" % i]
        last = i == 2
        h = tf.matmul(h, kernel if last else tf2.ste_sign(kernel)) / np.float32(
            np.sqrt(kernel.shape[0])) + weights["dense_%d/bias" % i]
        if not last:
            h = tf2.ste_sign(h)
    return h


def float64_round():
    """A float64 quantized MLP with Round (rule Round=ste_round)."""
    rng = np.random.RandomState(3)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float64, [None, 5], name="x")
        w1 = tf.constant(rng.randn(5, 6), name="w1")
        w2 = tf.constant(rng.randn(6, 2), name="w2")
        h = tf.round(tf.matmul(x, w1) * 4.0, name="quantize") / 4.0
        tf.identity(tf.matmul(tf.tanh(h), w2), name="y")
    return g.as_graph_def(), ["x:0"], ["y:0"]


def float64_tf2(x, weights):
    h = tf2.ste_round(tf.matmul(x, weights["w1"]) * 4.0) / 4.0
    return tf.matmul(tf.tanh(h), weights["w2"])


def fake_quant():
    """Quantization-aware training nodes: FakeQuant with min/max constants
    (their gradients are TensorFlow's own) and fixed-range FakeQuant."""
    rng = np.random.RandomState(4)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        q = tf.quantization.fake_quant_with_min_max_vars(
            x, tf.constant(-1.0, name="act_min"), tf.constant(1.0, name="act_max"),
            num_bits=8, name="act_quant")
        w = tf.quantization.fake_quant_with_min_max_args(
            tf.constant(rng.randn(4, 3).astype(np.float32), name="kernel"),
            min=-2.0, max=2.0, num_bits=4, name="weight_quant")
        tf.identity(tf.nn.relu(tf.matmul(q, w)), name="y")
    return g.as_graph_def(), ["x:0"], ["y:0"]


def while_if():
    """Functional While and If (control flow v2, bodies in the library)."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.constant([0.5, -1.5, 2.0], name="w")
        _, h = tf.while_loop(lambda i, h: i < 3,
                             lambda i, h: (i + 1, tf.sin(h) * w + h),
                             [tf.constant(0), x])
        y = tf.cond(tf.reduce_sum(h) > 0, lambda: h * 2.0, lambda: tf.square(h))
        tf.identity(y, name="y")
    graph_def = g.as_graph_def()
    assert {"StatelessWhile", "StatelessIf"} <= {n.op for n in graph_def.node}
    return graph_def, ["x:0"], ["y:0"]


def v1_while():
    """A tf.compat.v1.while_loop built without control flow v2."""
    tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g:
            x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
            _, h = tf.compat.v1.while_loop(lambda i, h: i < 3,
                                           lambda i, h: (i + 1, h * 2.0),
                                           [tf.constant(0), x])
            tf.identity(h, name="y")
    finally:
        tf.compat.v1.enable_control_flow_v2()
    return g.as_graph_def(), ["x:0"], ["y:0"]


def mobilenet_v2():
    """tools/bench_convert.py's Keras MobileNetV2 (alpha 0.35, 32x32, random
    weights) frozen with convert_variables_to_constants_v2."""
    return _script("tools", "bench_convert").mobilenet_v2()


def weights_of(graph_def, names):
    """{name: ndarray} of Const nodes."""
    return {n.name: tf.make_ndarray(n.attr["value"].tensor)
            for n in graph_def.node if n.name in names}


def session_reference(graph_def, inputs, outputs, feeds, rules=(), weights=(),
                      cotangent_seed=0):
    """Outputs and the gradients of sum(outputs * cotangent) into the inputs
    and into the Const nodes `weights`, from the (patched) graph in a Session.

    Returns:
      (outputs, input gradients, weight gradients), lists of ndarrays.
    """
    if rules:
        graph_def, _ = frozen.patch(graph_def, list(rules))
    with tf.Graph().as_default():
        values = weights_of(graph_def, weights)
        fed = {name + ":0": tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape)
               for name, v in values.items()}
        tensors = frozen.import_graph_def(graph_def, input_map=fed,
                                          return_elements=list(inputs) + list(outputs),
                                          name="")
        xs, ys = tensors[:len(inputs)], tensors[len(inputs):]
        rng = np.random.RandomState(cotangent_seed)
        cot = [tf.compat.v1.placeholder(y.dtype) for y in ys]
        loss = tf.add_n([tf.reduce_sum(y * c) for y, c in zip(ys, cot)])
        wanted = list(xs) + [fed[w + ":0"] for w in weights]
        grads = tf.gradients(loss, wanted)
        with tf.compat.v1.Session() as sess:
            weight_feed = {fed[w + ":0"]: values[w] for w in weights}
            out = sess.run(ys, {**dict(zip(xs, feeds)), **weight_feed})
            cot_values = [rng.randn(*o.shape).astype(o.dtype) for o in out]
            feed = {**dict(zip(xs, feeds)), **dict(zip(cot, cot_values)), **weight_feed}
            # None: no gradient path (FusedBatchNorm's moving statistics).
            grad_values = sess.run([g if g is not None else tf.constant(0)
                                    for g in grads], feed)
            grad_values = [None if g is None else v for g, v in zip(grads, grad_values)]
    return out, grad_values[:len(inputs)], grad_values[len(inputs):], cot_values


def tape_gradients(fn, variables, feeds, cotangents, use_function=False):
    """What `session_reference` computes, through fn(*feeds) under a tape."""
    def run(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            ys = fn(*xs)
            ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
            loss = tf.add_n([tf.reduce_sum(y * c) for y, c in zip(ys, cotangents)])
        return ys, tape.gradient(loss, list(xs) + list(variables))
    if use_function:
        run = tf.function(run)
    ys, grads = run(*[tf.constant(f) for f in feeds])
    grads = [None if g is None else g.numpy() for g in grads]
    return [y.numpy() for y in ys], grads[:len(feeds)], grads[len(feeds):]


# Models made the way TF1 users made them (issue 20): each builder returns
# (graph_def, inputs, outputs).

def relu_mlp(widths=(12, 7, 3)):
    """An MLP whose Relu layers differ in width (x [N, 5] -> logits): a rule
    naming one of TensorFlow's own gradients (Relu=Identity) meets Relu
    nodes of several shapes."""
    rng = np.random.RandomState(5)
    with tf.Graph().as_default() as g:
        h = tf.compat.v1.placeholder(tf.float32, [None, 5], name="x")
        for i, width in enumerate(widths):
            kernel = tf.constant((0.5 * rng.randn(int(h.shape[1]), width)).astype(np.float32),
                                 name="dense_%d/kernel" % i)
            h = tf.matmul(h, kernel, name="dense_%d/MatMul" % i)
            if i < len(widths) - 1:
                h = tf.nn.relu(h, name="dense_%d/Relu" % i)
        tf.identity(h, name="logits")
    return g.as_graph_def(), ["x:0"], ["logits:0"]


def two_placeholders():
    """A graph whose output needs two Placeholders, x and y (a siamese
    distance): the outputs need both fed."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [None, 3], name="y")
        w = tf.constant([[1.0], [-2.0], [0.5]], name="w")
        tf.identity(tf.matmul(x - y, w), name="distance")
    return g.as_graph_def(), ["x:0", "y:0"], ["distance:0"]


def not_frozen(resource=False):
    """A graph saved before freezing: VariableV2 with Assign initializers
    (resource=False, tf.compat.v1 variables without resource variables) or
    VarHandleOp/ReadVariableOp (resource variables)."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        w = tf.compat.v1.get_variable("dense/kernel", [2, 1], use_resource=resource,
                                      initializer=tf.compat.v1.ones_initializer())
        b = tf.compat.v1.get_variable("dense/bias", [1], use_resource=resource,
                                      initializer=tf.compat.v1.zeros_initializer())
        tf.identity(tf.nn.relu(tf.matmul(x, w) + b), name="y")
        tf.compat.v1.global_variables_initializer()
    return g.as_graph_def(), ["x:0"], ["y:0"]


def _freeze(sess, graph, outputs):
    return tf.compat.v1.graph_util.convert_variables_to_constants(
        sess, graph.as_graph_def(), [o.rpartition(":")[0] for o in outputs])


def _conv_block(h, filters, training, keep, name):
    """conv, tf.cond BatchNorm (batch statistics in training, moving ones
    otherwise) and dropout with a fed keep probability, as TF1 CNNs wrote
    them by hand. (A dropout inside a tf.cond branch is left out: TensorFlow's
    own wrap_function + prune cannot differentiate it after import.)"""
    with tf.compat.v1.variable_scope(name):
        kernel = tf.compat.v1.get_variable(
            "kernel", [3, 3, int(h.shape[-1]), filters],
            initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
        h = tf.nn.conv2d(h, kernel, strides=1, padding="SAME")
        mean, var = tf.nn.moments(h, [0, 1, 2])
        moving_mean = tf.compat.v1.get_variable(
            "moving_mean", [filters], initializer=tf.compat.v1.constant_initializer(0.1),
            trainable=False)
        moving_var = tf.compat.v1.get_variable(
            "moving_variance", [filters], initializer=tf.compat.v1.ones_initializer(),
            trainable=False)
        mean, var = tf.compat.v1.cond(training, lambda: (mean, var),
                                      lambda: (moving_mean + 0.0, moving_var + 0.0))
        h = tf.nn.relu(tf.nn.batch_normalization(h, mean, var, None, None, 1e-3))
        h = tf.compat.v1.nn.dropout(h, keep_prob=keep, seed=3)
        return tf.nn.max_pool2d(h, 2, 2, "VALID")


def cond_cnn():
    """A TF1 CNN (x [N, 8, 8, 1] -> logits [N, 3]) whose BatchNorm switches on
    an `is_training` PlaceholderWithDefault through tf.cond and whose dropout
    keeps a `keep_prob` PlaceholderWithDefault(1.0) fraction, built
    without control flow v2 (Switch/Merge, no loop) and frozen with
    convert_variables_to_constants."""
    from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel
    was = control_flow_util.ENABLE_CONTROL_FLOW_V2
    tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g:
            x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
            training = tf.compat.v1.placeholder_with_default(False, [], name="is_training")
            keep = tf.compat.v1.placeholder_with_default(1.0, [], name="keep_prob")
            h = _conv_block(x, 4, training, keep, "block1")
            h = _conv_block(h, 6, training, keep, "block2")
            w = tf.compat.v1.get_variable("fc/kernel", [2 * 2 * 6, 3],
                                          initializer=tf.compat.v1.glorot_uniform_initializer(seed=2))
            tf.identity(tf.matmul(tf.reshape(h, [-1, 24]), w), name="logits")
            with tf.compat.v1.Session() as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                graph_def = _freeze(sess, g, ["logits:0"])
    finally:
        if was:
            tf.compat.v1.enable_control_flow_v2()
    assert {"Switch", "Merge"} <= {n.op for n in graph_def.node}
    return graph_def, ["x:0"], ["logits:0"]


def iterator_cnn():
    """A tf.estimator-style CNN fed by a dataset iterator (IteratorGetNext:
    its input is the iterator's resource), frozen; feed IteratorGetNext:0
    to run it on your own data."""
    rng = np.random.RandomState(6)
    with tf.Graph().as_default() as g:
        images = rng.rand(4, 6, 6, 1).astype(np.float32)
        dataset = tf.compat.v1.data.Dataset.from_tensor_slices(images).batch(2)
        features = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        kernel = tf.compat.v1.get_variable("conv/kernel", [3, 3, 1, 2],
                                           initializer=tf.compat.v1.glorot_uniform_initializer(seed=4))
        h = tf.nn.relu(tf.nn.conv2d(features, kernel, 1, "SAME"))
        tf.identity(tf.reduce_mean(h, axis=[1, 2]), name="logits")
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            graph_def = _freeze(sess, g, ["logits:0"])
    assert "IteratorGetNext" in {n.op for n in graph_def.node}
    return graph_def, ["IteratorGetNext:0"], ["logits:0"]


def cnn_before_loop():
    """A conv feature extractor (x [N, 4, 4, 1] -> features) that feeds a
    TF1 recurrent loop (a GRU-like while_loop, control flow v1): the
    features alone convert, the loop's output does not."""
    from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(8)
    was = control_flow_util.ENABLE_CONTROL_FLOW_V2
    tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g:
            x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="x")
            kernel = tf.constant(rng.randn(3, 3, 1, 2).astype(np.float32), name="conv/kernel")
            h = tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME"))
            features = tf.reshape(h, [-1, 4, 8], name="features")  # 4 time steps
            cell = tf.constant(rng.randn(8, 8).astype(np.float32) * 0.3, name="gru/kernel")
            _, state = tf.compat.v1.while_loop(
                lambda t, s: t < 4,
                lambda t, s: (t + 1, tf.tanh(tf.matmul(features[:, t] + s, cell))),
                [tf.constant(0), tf.zeros_like(features[:, 0])])
            tf.identity(state, name="state")
    finally:
        if was:
            tf.compat.v1.enable_control_flow_v2()
    return g.as_graph_def(), ["x:0"], ["features:0"]


def wrap_prune_reference(graph_def, inputs, outputs, feeds, cotangent_seed=0):
    """TensorFlow's own TF2 route: tf.compat.v1.wrap_function around
    import_graph_def, pruned to inputs -> outputs. Returns (outputs, input
    gradients of sum(outputs * cotangent))."""
    def _import():
        tf.compat.v1.import_graph_def(graph_def, name="")
    wrapped = tf.compat.v1.wrap_function(_import, [])
    pruned = wrapped.prune([wrapped.graph.as_graph_element(n) for n in inputs],
                           [wrapped.graph.as_graph_element(n) for n in outputs])
    xs = [tf.constant(f) for f in feeds]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        ys = pruned(*xs)
        rng = np.random.RandomState(cotangent_seed)
        cot = [rng.randn(*y.shape).astype(y.dtype.as_numpy_dtype) for y in ys]
        loss = tf.add_n([tf.reduce_sum(y * c) for y, c in zip(ys, cot)])
    grads = tape.gradient(loss, xs)
    return [y.numpy() for y in ys], [g.numpy() for g in grads], cot
