"""Small networks with fixed weights in the three forms the attribution
methods take: a frozen GraphDef, a tf.compat.v1 Session graph with
variables, and a TF2 function / Keras model, all with the same weights."""

import numpy as np
import tensorflow as tf

ACTIVATIONS = {"relu": tf.nn.relu, "tanh": tf.tanh, "sigmoid": tf.sigmoid,
               "softplus": tf.nn.softplus, "elu": tf.nn.elu, None: tf.identity}


def dense_params(sizes, seed, bias=True):
    """[(W, b)] of a dense net with layer sizes `sizes`."""
    rng = np.random.RandomState(seed)
    return [(rng.normal(0, 1.0 / np.sqrt(m), (m, n)).astype("float32"),
             (rng.normal(0, 0.3, n) if bias else np.zeros(n)).astype("float32"))
            for m, n in zip(sizes[:-1], sizes[1:])]


def dense(params, activation, x, *, variables=False):
    """The dense net on x: activation after every layer but the last."""
    act = ACTIVATIONS[activation]
    h = x
    for i, (w, b) in enumerate(params):
        make = tf.compat.v1.Variable if variables else tf.constant
        h = tf.matmul(h, make(w, name="w%d" % i))
        if np.any(b):
            h = tf.nn.bias_add(h, make(b, name="b%d" % i))
        if i < len(params) - 1:
            h = act(h)
    return h


def dense_graph_def(params, activation, batch=None):
    """A frozen GraphDef with input "x:0" and output "logits:0"."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [batch, params[0][0].shape[0]], name="x")
        tf.identity(dense(params, activation, x), name="logits")
    return g.as_graph_def()


def cnn_params(seed):
    """Weights of conv3x3(1->4) relu maxpool conv3x3(4->6) relu flatten dense(3)
    on 8x8x1 images."""
    rng = np.random.RandomState(seed)
    return {"k1": rng.normal(0, 0.5, (3, 3, 1, 4)).astype("float32"),
            "c1": rng.normal(0, 0.1, 4).astype("float32"),
            "k2": rng.normal(0, 0.3, (3, 3, 4, 6)).astype("float32"),
            "c2": rng.normal(0, 0.1, 6).astype("float32"),
            "w": rng.normal(0, 0.2, (4 * 4 * 6, 3)).astype("float32"),
            "b": rng.normal(0, 0.1, 3).astype("float32")}


def cnn(p, x, *, variables=False):
    """The CNN in tf.nn ops; the second Relu is named "features"."""
    make = tf.compat.v1.Variable if variables else tf.constant
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, make(p["k1"]), 1, "SAME"), make(p["c1"])))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, make(p["k2"]), 1, "SAME"), make(p["c2"])),
                   name="features")
    h = tf.reshape(h, [-1, 4 * 4 * 6])
    return tf.nn.bias_add(tf.matmul(h, make(p["w"])), make(p["b"]))


def cnn_graph_def(seed=0):
    """The CNN of `cnn_params(seed)` with Const weights, frozen: input x:0
    (N x 8 x 8 x 1), output logits:0."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        tf.identity(cnn(cnn_params(seed), x), name="logits")
    return g.as_graph_def()


def cnn_session(p):
    """(session, x, logits): the CNN with variables in a Session graph."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        logits = tf.identity(cnn(p, x, variables=True), name="logits")
        session = tf.compat.v1.Session(graph=graph)
        session.run(tf.compat.v1.global_variables_initializer())
    return session, x, logits


def keras_module():
    """Keras 3 under TF 2.16+, tf.keras (Keras 2) under 2.15."""
    try:
        import keras  # pylint: disable=import-outside-toplevel
        if int(keras.__version__.split(".")[0]) >= 3:
            return keras
    except ImportError:  # pragma: no cover
        pass
    return tf.keras


def cnn_keras_model(p):
    """The CNN as a Keras Sequential model with the same weights."""
    keras = keras_module()
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(6, 3, padding="same", activation="relu"),
        layers.Flatten(),
        layers.Dense(3)])
    model.set_weights([p["k1"], p["c1"], p["k2"], p["c2"], p["w"], p["b"]])
    return model


def dense_keras_model(params, activation):
    """The dense net as a Keras Sequential model (activations inside the
    Dense layers)."""
    keras = keras_module()
    layers = [keras.Input((params[0][0].shape[0],))]
    for i, (w, _) in enumerate(params):
        layers.append(keras.layers.Dense(w.shape[1], activation=activation
                                         if i < len(params) - 1 else None))
    model = keras.Sequential(layers)
    model.set_weights([a for pair in params for a in pair])
    return model


def images(n, seed):
    """n 8x8x1 float32 images with exact zeros in them."""
    x = np.random.RandomState(seed).uniform(-1, 1, (n, 8, 8, 1)).astype("float32")
    x[:, :2, :2] = 0.0
    return x
