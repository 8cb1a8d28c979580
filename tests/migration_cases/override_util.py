"""A project's helper module: opens an override map for its callers
(override_user.py)."""
import tensorflow.compat.v1 as tf


def override(mapping):
    return tf.get_default_graph().gradient_override_map(mapping)


@tf.RegisterGradient("CaseUtilClip")
def _clip_grad(op, grad):
    return tf.clip_by_value(grad, -0.5, 0.5)
