"""Trained ternary quantization (TTQ) as tensorpack's DoReFa-Net example
writes it in its ternarize(): one scope re-routes Sign to Identity and Mul to
Add, and the ternary tensor made there is then scaled by two learned
weights, one for the positive values and one for the negative.

`w` is bound to the scaled tensor before `w.name` labels its histogram, so
that name is never the scope's output's: the scope converts. The product in
the scope is an explicit tf.multiply, the rewrite migrate asks for when it
lists a `*` there (an operator may create Mul ops the map re-routes, out of
its sight).
"""
import tensorflow.compat.v1 as tf


def ternarize(x, thresh=0.05):
    graph = tf.get_default_graph()
    shape = x.get_shape()
    cut = tf.stop_gradient(thresh * tf.reduce_max(tf.abs(x)))

    positive = tf.get_variable("Wp", initializer=1.25, dtype=tf.float32)
    negative = tf.get_variable("Wn", initializer=0.75, dtype=tf.float32)
    for weight in (positive, negative):
        tf.summary.scalar(weight.op.name + "-summary", weight)

    ones = tf.ones(shape)
    scale = tf.where(x > cut, positive * tf.ones(shape), ones)
    scale = tf.where(x < -cut, negative * tf.ones(shape), scale)
    keep = tf.where(tf.logical_and(x > -cut, x < cut), tf.zeros(shape), ones)

    with graph.gradient_override_map({"Sign": "Identity", "Mul": "Add"}):
        w = tf.multiply(tf.sign(x), tf.stop_gradient(keep))

    w = w * scale

    tf.summary.histogram(w.name, w)
    return w
