"""model.fit under MultiWorkerMirroredStrategy on Keras 3.

Keras 3's TensorFlow trainer fails before the first step of ``model.fit``
under ``tf.distribute.MultiWorkerMirroredStrategy``, for any model
(keras-team/keras#20585, tensorflow/tensorflow#72388). `enable_multi_worker_fit`
replaces the two places where it fails, for multi-worker strategies only;
every other strategy, and ``model.fit`` without one, runs Keras's own code.
Keras 2 (TensorFlow 2.15) needs nothing. See docs/guide/keras.md, 'Scaling out'.
"""

from graph_override._tensorflow import compat

__all__ = ["disable_multi_worker_fit", "enable_multi_worker_fit"]


def enable_multi_worker_fit():
    """Makes ``model.fit`` (and ``evaluate``) work under a multi-worker
    strategy on Keras 3; call it once, on every worker, before ``fit``.

    What changes, under a multi-worker strategy only: the build before the
    first step learns the shapes of a batch from this worker's first replica
    instead of averaging a batch across the workers (which Keras attempts
    eagerly and TensorFlow's collective refuses), and the step's logs (the
    loss, the metrics) are averaged across the replicas as under
    ``MirroredStrategy``, not along an axis 0 that the scalar logs lack. The
    gradients and the weights' updates are Keras's own.

    Returns:
      True when the trainer is patched (again calls change nothing); False on
      Keras 2, whose ``model.fit`` works under the strategy as it is.

    Raises:
      RuntimeError: this Keras's trainer lacks the functions the workaround
        replaces (it knows Keras 3.0 to 3.15); the message says which.
    """
    return compat.keras_multi_worker_fit(True)


def disable_multi_worker_fit():
    """Puts Keras's own trainer functions back (nothing to do when
    `enable_multi_worker_fit` was not called). Returns False."""
    return compat.keras_multi_worker_fit(False)
