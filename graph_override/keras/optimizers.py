"""larq's optimizers for binarized networks on Keras 3 (and Keras 2).

`Bop` flips a binary weight when the moving average of its gradient agrees
with its sign by more than a threshold; `CaseOptimizer` trains each variable
with the optimizer whose predicate claims it (`Bop.is_binary_variable`: the
kernels of the quantized layers with a 1-bit quantizer). larq 0.13 built both
on Keras 2's legacy optimizers, which Keras 3 removed; these are built on the
optimizer API both Kerases share (``build``, ``update_step``,
``apply_gradients``), and give larq's weights bit for bit: Bop's update is
larq's, op for op::

    m    <- m + gamma * (g - m)
    w    <- sign(-sign(w * m - threshold) * w)      (sign(0) = +1)

Both save and load with the model by name (``graph_override>Bop``), work in
``model.fit`` and in custom loops (``apply_gradients``), and under
MirroredStrategy. ``gamma`` and ``threshold`` are variables (or schedules),
which `graph_override.keras.callbacks.HyperparameterScheduler` sets.
"""

import copy
import itertools
import warnings

import tensorflow as tf

from graph_override._families import keras_saving
from graph_override.errors import OptimizerError, OptimizerTypeError
from graph_override.keras import math as lq_math
from graph_override.keras._optimizer_api import KERAS_3 as _KERAS_3
from graph_override.keras._optimizer_api import Base as _Base
from graph_override.keras._optimizer_api import (Hyperparameters, base_arguments,
                                                 deserialize_hyper, serialize_hyper,
                                                 variable_name)
from graph_override.keras._missing import module_getattr

__all__ = ["Bop", "CaseOptimizer"]

# Keras 2 (TensorFlow 2.15) also trains with its legacy optimizers, which larq used.
_OPTIMIZERS = (_Base,) if _KERAS_3 else (_Base, tf.keras.optimizers.legacy.Optimizer)


class Bop(Hyperparameters, _Base):
    """Binary optimizer (Bop): flips a binary weight when the exponential
    moving average ``m`` of its gradient exceeds ``threshold`` with the
    weight's sign.

    ``m_t = m + gamma * (g - m)``;
    ``w_t = sign(-sign(w * m_t - threshold) * w)`` with ``sign(0) = +1``
    (`graph_override.keras.math.sign`), as larq computes it: at
    ``w * m_t == threshold`` exactly the weight becomes +1, and a weight that
    is not +-1 becomes its sign. Use it through `CaseOptimizer` with
    `Bop.is_binary_variable`, so that the float weights get another optimizer.

    Args:
      threshold: how far the average gradient must go to flip a weight; a
        number or a schedule of the step (larq's default 1e-8).
      gamma: the adaptivity rate of the average (larq's default 1e-4).
      name: the optimizer's name.
      **kwargs: the Keras optimizer's other arguments (``clipnorm``, ...).

    Example:
      >>> import numpy as np, tensorflow as tf
      >>> from graph_override.keras import optimizers
      >>> w = tf.Variable([1.0, -1.0, 1.0])
      >>> bop = optimizers.Bop(threshold=0.0, gamma=0.5)
      >>> _ = bop.apply_gradients([(tf.constant([2.0, 2.0, -2.0]), w)])
      >>> w.numpy().tolist()
      [-1.0, -1.0, 1.0]

    Reference: Helwegen et al., "Latent Weights Do Not Exist: Rethinking
    Binarized Neural Network Optimization", NeurIPS 2019.
    """

    def __init__(self, threshold=1e-8, gamma=1e-4, name="Bop", **kwargs):
        super().__init__(name=name, **base_arguments(kwargs))
        if not _KERAS_3:
            self._learning_rate = None  # read by Keras 2's apply_gradients
        self._threshold = self._hyper_variable("threshold", threshold)
        self._gamma = self._hyper_variable("gamma", gamma)

    @property
    def gamma(self):
        """The adaptivity rate: a variable (assign to it), or a schedule."""
        return self._gamma

    @gamma.setter
    def gamma(self, value):
        self._set_hyper_value("_gamma", "gamma", value)

    @property
    def threshold(self):
        """The flipping threshold: a variable (assign to it), or a schedule."""
        return self._threshold

    @threshold.setter
    def threshold(self, value):
        self._set_hyper_value("_threshold", "threshold", value)

    def build(self, var_list):
        if _KERAS_3:
            if self.built:
                return
            super().build(var_list)
        else:
            super().build(var_list)
            if getattr(self, "_built", False):
                return
            self._built = True
        self._m = [self.add_variable_from_reference(v, "m") for v in var_list]

    def _slot(self, variable):
        if _KERAS_3:
            return self._m[self._get_variable_index(variable)]
        return self._m[self._index_dict[self._var_key(variable)]]

    def update_step(self, gradient, variable, learning_rate=None):
        dtype = tf.as_dtype(variable.dtype)
        gamma = self._decayed(self._gamma, dtype)
        threshold = self._decayed(self._threshold, dtype)
        m = self._slot(variable)
        grad = tf.convert_to_tensor(gradient)
        m_old = tf.convert_to_tensor(m)
        m_t = m_old + gamma * (grad - m_old)
        m.assign(m_t)
        w = tf.convert_to_tensor(variable)
        variable.assign(lq_math.sign(-tf.sign(w * m_t - threshold) * w))

    def get_config(self):
        config = super().get_config()
        config.pop("learning_rate", None)
        config.update(threshold=serialize_hyper(self._threshold),
                      gamma=serialize_hyper(self._gamma))
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        for hyper in ("gamma", "threshold"):
            if hyper in config:
                config[hyper] = deserialize_hyper(config[hyper], custom_objects)
        return cls(**config)

    @staticmethod
    def is_binary_variable(var):
        """True for a variable with ``precision == 1``: the kernel of a
        quantized layer whose quantizer is 1-bit (``"ste_sign"``,
        ``NoOp(precision=1)``, ...), as larq's predicate."""
        return getattr(var, "precision", 32) == 1


def _unsaved_predicate(var):
    raise OptimizerError(
        "CaseOptimizer: this one was loaded from a config saved before its first step "
        "(Keras 3's .h5 files keep the config of compile time), and its predicates are "
        "not saved (only Bop.is_binary_variable is, by name), so it cannot tell which "
        "optimizer trains %r. Compile the loaded model with a new CaseOptimizer, or save "
        "it as .keras after a step." % variable_name(var))


_KNOWN_PREDICATES = {"Bop.is_binary_variable": Bop.is_binary_variable}


def _arguments_for(optimizer, kwargs):
    """Keras 2's apply_gradients arguments as `optimizer` takes them: its
    legacy optimizers call skipping the replicas' sum (what a
    LossScaleOptimizer asks) ``experimental_aggregate_gradients=False``."""
    if isinstance(optimizer, _Base) or "skip_gradients_aggregation" not in kwargs:
        return kwargs
    kwargs = dict(kwargs)
    kwargs["experimental_aggregate_gradients"] = not kwargs.pop("skip_gradients_aggregation")
    return kwargs


class CaseOptimizer(_Base):
    """Trains each variable with the optimizer whose predicate claims it.

    Args:
      *predicate_optimizer_pairs: ``(predicate, optimizer)`` pairs; a
        predicate takes a variable and returns whether its optimizer trains
        it. At most one predicate may claim a variable, and each optimizer
        must claim one (else `OptimizerError` at the first step).
      default_optimizer: trains the variables no predicate claims; without
        it they are not trained (with a warning).
      name: the optimizer's name.

    Raises:
      OptimizerTypeError: a predicate that is not callable, or an optimizer
        that is not a Keras optimizer.

    The mapping from variables to optimizers is computed at the first step
    and saved with the model by variable name (predicates are not saved).
    ``optimizers`` lists the optimizers, the default last; ``weights`` their
    variables in that order.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override.keras import optimizers
      >>> case = optimizers.CaseOptimizer(
      ...     (optimizers.Bop.is_binary_variable, optimizers.Bop()),
      ...     default_optimizer=tf.keras.optimizers.Adam(0.01))
      >>> [type(o).__name__ for o in case.optimizers]
      ['Bop', 'Adam']
    """

    def __init__(self, *predicate_optimizer_pairs, default_optimizer=None,
                 name="optimizer_case", **kwargs):
        super().__init__(name=name, **base_arguments(kwargs))
        if not _KERAS_3:
            self._learning_rate = None
        for i, pair in enumerate(predicate_optimizer_pairs):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise OptimizerTypeError(
                    "CaseOptimizer: predicate_optimizer_pairs[%d] is %r, not a "
                    "(predicate, optimizer) pair" % (i, pair))
            predicate, optimizer = pair
            if not callable(predicate):
                raise OptimizerTypeError(
                    "CaseOptimizer: expected a callable predicate at "
                    "predicate_optimizer_pairs[%d][0], got %s" % (i, type(predicate).__name__))
            if not isinstance(optimizer, _OPTIMIZERS):
                raise OptimizerTypeError(
                    "CaseOptimizer: expected a Keras optimizer at "
                    "predicate_optimizer_pairs[%d][1], got %s" % (i, type(optimizer).__name__))
        if default_optimizer is not None and not isinstance(default_optimizer, _OPTIMIZERS):
            raise OptimizerTypeError("CaseOptimizer: expected a Keras optimizer for "
                                     "default_optimizer, got %s"
                                     % type(default_optimizer).__name__)
        self._predicates = [p for p, _ in predicate_optimizer_pairs]
        self.optimizers = [o for _, o in predicate_optimizer_pairs] + (
            [default_optimizer] if default_optimizer is not None else [])
        self._has_default = default_optimizer is not None
        # Which optimizer trains each variable: by name (layer/weight), and by
        # position in the list the optimizer was built with (what a model
        # loaded again matches, as its variables may be named otherwise).
        self.var_opt_mapping = None
        self._saved_order = None
        self._assignment = None  # variable key -> optimizer index, this process

    @property
    def pred_opt_pairs(self):
        return list(zip(self._predicates, self.optimizers))

    @property
    def default(self):
        return self.optimizers[-1] if self._has_default else None

    @property
    def weights(self):
        """The optimizers' variables, in the order of `optimizers`."""
        found = []
        for optimizer in self.optimizers:
            variables = optimizer.variables  # Keras 2's legacy optimizers: a method
            found.extend(variables if isinstance(variables, list) else variables())
        return found

    def _key(self, var):
        return self._var_key(var)

    def _claim(self, var, position, count):
        """The index of the optimizer that trains `var` (at `position` of
        `count` variables), or None."""
        if getattr(self, "_from_config", False):
            order = self._saved_order
            if order is not None and len(order) == count:
                return order[position]
            return (self.var_opt_mapping or {}).get(variable_name(var))
        claimed = [i for i, predicate in enumerate(self._predicates) if predicate(var)]
        if len(claimed) > 1:
            raise OptimizerError("CaseOptimizer %r: variable %r is claimed by optimizers %s; "
                                 "make the predicates exclusive" % (
                                     self.name, variable_name(var), claimed))
        if claimed:
            return claimed[0]
        if self._has_default:
            return len(self.optimizers) - 1
        warnings.warn("CaseOptimizer %r: no default_optimizer to train variable %r; it "
                      "is not trained." % (self.name, variable_name(var)), stacklevel=3)
        return None

    def _assign(self, var_list):
        self._assignment, mapping, order = {}, {}, []
        for position, var in enumerate(var_list):
            index = self._claim(var, position, len(var_list))
            order.append(index)
            if index is not None:
                self._assignment[self._key(var)] = index
                mapping[variable_name(var)] = index
        for index, optimizer in enumerate(self.optimizers[:len(self._predicates)]):
            if index not in order:  # (names may repeat: plain tf.Variables)
                raise OptimizerError("CaseOptimizer %r: optimizer %s (pair %d) claims no "
                                     "variable; check its predicate" % (
                                         self.name, optimizer.name, index))
        if not getattr(self, "_from_config", False):
            self.var_opt_mapping, self._saved_order = mapping, order

    def _split(self, grads_and_vars):
        lists = [[] for _ in self.optimizers]
        for grad, var in grads_and_vars:
            index = self._assignment.get(self._key(var))
            if index is not None:
                lists[index].append((grad, var))
        return lists

    def build(self, var_list):
        var_list = list(var_list)
        if not var_list:  # Keras 3's .h5 loading builds before the model has variables
            return
        if _KERAS_3:
            if self.built:
                return
            super().build(var_list)
        else:
            super().build(var_list)
            if getattr(self, "_built", False):
                return
            self._built = True
        self._assign(var_list)
        # Each optimizer builds its slots now, so that loading a saved model
        # finds them (Keras 2's legacy optimizers create theirs at the first step).
        for optimizer, pairs in zip(self.optimizers, self._split(
                [(None, v) for v in var_list])):
            if pairs and isinstance(optimizer, _Base):
                optimizer.build([v for _, v in pairs])

    if _KERAS_3:
        def apply(self, grads, trainable_variables=None):
            if trainable_variables is None:
                trainable_variables = self._trainable_variables
            trainable_variables = list(trainable_variables)
            if not self.built:
                self.build(trainable_variables)
            for optimizer, pairs in zip(self.optimizers, self._split(
                    zip(grads, trainable_variables))):
                if pairs:
                    optimizer.apply([g for g, _ in pairs], [v for _, v in pairs])
            self._iterations.assign_add(1)
    else:
        def apply_gradients(self, grads_and_vars, name=None, **kwargs):
            grads_and_vars = list(grads_and_vars)
            with tf.init_scope():
                self.build([v for _, v in grads_and_vars])
            for optimizer, pairs in zip(self.optimizers, self._split(grads_and_vars)):
                if pairs:
                    optimizer.apply_gradients(pairs, **_arguments_for(optimizer, kwargs))
            return self.iterations.assign_add(1)

    def get_config(self):
        config = super().get_config()
        config.pop("learning_rate", None)
        def serialize(optimizer):
            config = tf.keras.optimizers.serialize(optimizer)
            if type(optimizer) in (Bop, CaseOptimizer):  # not larq's, which takes "Bop"
                config["class_name"] = "%s>%s" % (keras_saving.PACKAGE, type(optimizer).__name__)
            return config
        config.update(
            optimizer_configs=[serialize(o) for o in self.optimizers[:len(self._predicates)]],
            default_config=serialize(self.default) if self._has_default else None,
            var_opt_mapping=self.var_opt_mapping, var_opt_order=self._saved_order,
            # A predicate is saved by name where it is this package's own.
            predicates=[next((n for n, f in _KNOWN_PREDICATES.items() if f == p), None)
                        for p in self._predicates])
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = copy.deepcopy(config)  # Keras's deserialize changes what it is given
        deserialize = lambda c: tf.keras.optimizers.deserialize(  # noqa: E731
            c, custom_objects=custom_objects)
        names = config.pop("predicates", None) or []
        pairs = [(_KNOWN_PREDICATES.get(name, _unsaved_predicate), deserialize(c))
                 for name, c in itertools.zip_longest(
                     names, config.pop("optimizer_configs"))]
        default = config.pop("default_config", None)
        mapping = config.pop("var_opt_mapping", None)
        order = config.pop("var_opt_order", None)
        case = cls(*pairs, default_optimizer=deserialize(default) if default else None,
                   **config)
        return case.with_saved_assignment(mapping, order)

    def with_saved_assignment(self, mapping, order):
        """This optimizer, set to assign the variables as the saved one did:
        the predicates are not saved, so the variables are found by position
        (or name) in the model they were saved with (`from_config`)."""
        self.var_opt_mapping, self._saved_order = mapping, order
        self._from_config = mapping is not None or order is not None
        return self


keras_saving.register([Bop, CaseOptimizer])

__getattr__ = module_getattr(__name__)
