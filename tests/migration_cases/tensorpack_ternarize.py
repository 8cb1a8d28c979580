"""Trained ternary quantization (TTQ) as tensorpack's DoReFa-Net example
writes it: one scope re-routes Sign to Identity and Mul to Add, and the
ternary tensor it makes is then scaled by two learned weights.

`w` is rebound to the scaled tensor before `w.name` labels its histogram,
so that name is never the scope's output's: the scope converts. The product
in the scope is written tf.multiply, the rewrite that migrate asks for when
it lists the `*` operator there (an operator may create Mul ops the map
re-routes, out of its sight).
"""
import tensorflow.compat.v1 as tf


def ternarize(x, thresh=0.05):
    G = tf.get_default_graph()
    shape = x.get_shape()

    thre_x = tf.stop_gradient(tf.reduce_max(tf.abs(x)) * thresh)

    w_p = tf.get_variable("Wp", initializer=1.25, dtype=tf.float32)
    w_n = tf.get_variable("Wn", initializer=0.75, dtype=tf.float32)

    tf.summary.scalar(w_p.op.name + "-summary", w_p)
    tf.summary.scalar(w_n.op.name + "-summary", w_n)

    mask = tf.ones(shape)
    mask_p = tf.where(x > thre_x, tf.ones(shape) * w_p, mask)
    mask_np = tf.where(x < -thre_x, tf.ones(shape) * w_n, mask_p)
    mask_z = tf.where((x < thre_x) & (x > -thre_x), tf.zeros(shape), mask)

    with G.gradient_override_map({"Sign": "Identity", "Mul": "Add"}):
        w = tf.multiply(tf.sign(x), tf.stop_gradient(mask_z))

    w = w * mask_np

    tf.summary.histogram(w.name, w)
    return w
