"""A module of gradients other modules use by name (shared_user.py): its
registration must survive the migration of any one file."""
import tensorflow.compat.v1 as tf


@tf.RegisterGradient("CaseSharedSign")
def _shared_sign_grad(op, grad):
    """ApproxSign (Liu et al., Bi-Real Net): dy * max(0, 2 - 2|x|)."""
    x = op.inputs[0]
    return grad * tf.maximum(0.0, 2.0 - 2.0 * tf.abs(x))


def binarize(x):
    with tf.get_default_graph().gradient_override_map({"Sign": "CaseSharedSign"}):
        return tf.sign(x)
