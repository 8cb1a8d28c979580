"""larq's callbacks (``larq.callbacks``): `HyperparameterScheduler`."""

import numpy as np
import tensorflow as tf

from graph_override.errors import OptimizerError

from graph_override.keras._missing import module_getattr

__all__ = ["HyperparameterScheduler"]


def _value(hyperparameter):
    if hasattr(hyperparameter, "numpy"):
        return hyperparameter.numpy()
    return np.asarray(hyperparameter)


class HyperparameterScheduler(tf.keras.callbacks.Callback):
    """Sets an optimizer's hyperparameter from a schedule, each epoch or step.

    Args:
      schedule: ``schedule(t)`` or ``schedule(t, current_value)``, the new
        value at epoch (or step) ``t``, counted from 0.
      hyperparameter: the attribute of the optimizer to set (``"gamma"``,
        ``"threshold"`` of `optimizers.Bop`; ``"learning_rate"``; ``"lr"``,
        which Keras 3 calls ``learning_rate``).
      optimizer: the optimizer holding it (default: the model's).
      update_freq: ``"epoch"`` (default) or ``"step"`` (``t`` is then the
        optimizer's iteration count).
      verbose: 1 prints each new value.
      log_name: the name it is logged under at each epoch's end (default:
        `hyperparameter`).

    Raises:
      OptimizerError: another `update_freq` (a ValueError, as larq's); when
        training starts, an optimizer without that hyperparameter.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override.keras import callbacks, optimizers
      >>> bop = optimizers.Bop(threshold=1e-6, gamma=1e-3)
      >>> scheduler = callbacks.HyperparameterScheduler(
      ...     lambda epoch: 1e-3 * 0.1 ** (epoch // 30), "gamma", bop)
    """

    def __init__(self, schedule, hyperparameter, optimizer=None, update_freq="epoch",
                 verbose=0, log_name=None):
        super().__init__()
        if update_freq not in ("epoch", "step"):
            raise OptimizerError("HyperparameterScheduler.update_freq can only be 'step' "
                                 "or 'epoch'. Received value '%s'" % (update_freq,))
        self.optimizer = optimizer
        self.schedule = schedule
        self.hyperparameter = hyperparameter
        self.log_name = log_name or hyperparameter
        self.verbose = verbose
        self.update_freq = update_freq

    def _attribute(self):
        name = self.hyperparameter
        if name == "lr" and not hasattr(self.optimizer, "lr"):
            return "learning_rate"
        return name

    def set_model(self, model):
        super().set_model(model)
        if self.optimizer is None:
            self.optimizer = model.optimizer
        if not hasattr(self.optimizer, self._attribute()):
            raise OptimizerError('Optimizer must have a "%s" attribute; %s has none.'
                                 % (self.hyperparameter, type(self.optimizer).__name__))

    def set_hyperparameter(self, t):
        """Sets the value for `t` and returns the hyperparameter."""
        name = self._attribute()
        current = getattr(self.optimizer, name)
        try:
            value = self.schedule(t, _value(current))
        except TypeError:  # larq's older form, schedule(t)
            value = self.schedule(t)
        if hasattr(current, "assign"):
            current.assign(value)
        else:
            setattr(self.optimizer, name, value)
        return getattr(self.optimizer, name)

    def on_batch_begin(self, batch, logs=None):
        if self.update_freq != "step":
            return
        # The optimizer's step count, as larq: batch counts within an epoch.
        step = int(_value(self.optimizer.iterations))
        hp = self.set_hyperparameter(step)
        if self.verbose > 0:
            print(f"Batch {step}: {self.log_name} is now {_value(hp)}.")

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_epoch_begin(self, epoch, logs=None):
        if self.update_freq != "epoch":
            return
        hp = self.set_hyperparameter(epoch)
        if self.verbose > 0:
            print(f"Epoch {epoch}: {self.log_name} is now {_value(hp)}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs[self.log_name] = _value(getattr(self.optimizer, self._attribute()))

__getattr__ = module_getattr(__name__)
