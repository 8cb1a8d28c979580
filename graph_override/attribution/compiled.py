"""The fast mode: a method's forward and backward pass in one compiled
function.

In the exact mode (the default) the `Explainer` calls the model's
`FrozenFunction` eagerly under a GradientTape: the forward pass and the
backward pass are two function calls, each optimized by Grappler on its own,
and the maps are those of the patched graph in a Session, to float rounding.
In the fast mode the same call, tape and target selection are traced once
into one `tf.function`: TensorFlow inlines both calls into one graph and
Grappler optimizes forward and backward together (it fuses and reorders
across the two: convolutions with their bias and activation, the backward
pass's reuse of forward activations), which is faster and moves the maps by
float rounding of another order of operations (the measured differences are
in the attribution guide's "Fast mode" section). Its function is built on
the model's shared weights (`graph_override.attribution.shared_weights`):
every rule set reads one set of variables, where each held the weights as
constants, several times over.

One `CompiledGradient` serves every method with the same rules (saliency,
gradient x input, Integrated Gradients and SmoothGrad share one) and every
batch size: the input's batch dimension is left free and the target classes
are a tensor argument, so it is traced once per rule set and kind of target
(a class per example, the argmax, a callable, a scalar output), not once per
method, batch or call. `traces` counts its traces.

The rules' gradients are built as in the exact mode, but for eps_lrp's:
where a graph is built, eps_lrp and DeepLIFT's rescale rule run as one
XLA-compiled function each (`attribution_ops.fused_gradient`), which pays
in the exact mode's separate backward function; traced into one function
with the model, eps_lrp's compiled calls cost more than Grappler's own
handling of its separate ops (the same ops, the same bits). Measured side
by side against the user's tf.function gradient: MobileNetV2 224 batch 1,
1.47-1.48x compiled against 1.05-1.09x separate; MobileNetV2 batch 32,
1.15x against 1.08x; ResNet50 batch 32, 1.23x against 1.06x. DeepLIFT's rule stays compiled: ResNet50 batch 32, 1.26x
compiled against 1.92x separate.
"""

import functools
import threading

import tensorflow as tf

from graph_override.attribution import targets as target_lib
from graph_override.estimators import attribution_ops
from graph_override.errors import AttributionError

__all__ = ["MODES", "SEPARATE_RULES", "CompiledGradient", "check_mode", "compiled_gradient",
           "eager_gradient"]

MODES = ("exact", "fast")

SEPARATE_RULES = ("eps_lrp",)
"""The rules whose gradients the fast mode builds from separate ops
(`attribution_ops.separate_ops`)."""


def check_mode(mode):
    """`mode` if it is one of `MODES`, else AttributionError."""
    if not isinstance(mode, str) or mode not in MODES:
        raise AttributionError("mode=%r: expected 'exact' (the forward and backward pass as "
                               "two eager calls, the maps of the patched graph to float "
                               "rounding) or 'fast' (both in one compiled function)" % (mode,))
    return mode


def eager_gradient(function, tensors, target, first=None):
    """The exact mode: (outputs, scalars, [gradient per input]) as ndarrays,
    the `FrozenFunction` called eagerly under a GradientTape (a gradient
    None where the output does not depend on that input); arguments as
    `CompiledGradient.__call__`."""
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        y = function(*tensors)
        scalars = target_lib.select(y if first is None else y[:first], target)
    grads = tape.gradient(scalars, tensors)
    return (y.numpy(), scalars.numpy(),
            [None if g is None else tf.convert_to_tensor(g).numpy() for g in grads])


def _free_batch(spec):
    """`spec` with its first dimension left free (a fixed batch stays)."""
    shape = spec.shape
    if shape.rank is None:
        return tf.TensorSpec(None, spec.dtype)
    return tf.TensorSpec(shape.as_list(), spec.dtype)


def _input_gradient(function):
    def forward(inputs, tape):
        tape.watch(inputs)
        return function(*inputs), inputs
    return forward


class CompiledGradient:
    """(outputs, selected scalars, d scalars / d inputs) of one
    `FrozenFunction` in one `tf.function` per kind of target.

    Args:
      function: the model's (patched) `FrozenFunction`, one output.
      forward: None, or ``forward(inputs, tape)`` returning (the output, the
        tensors to differentiate with respect to, watched on `tape`): what
        Grad-CAM differentiates is a layer's activations, not the inputs
        (`run` returns them).
    """

    def __init__(self, function, forward=None):
        self._forward = forward or _input_gradient(function)
        self._inputs = [_free_batch(spec) for spec in function.specs()[0]]
        self._compiled = {}
        self._disconnected = set()  # (kind, i): no gradient reaches tensor i
        self._lock = threading.Lock()
        self.traces = 0

    def _make(self, kind, callable_target):
        forward = self._forward
        disconnected = self._disconnected

        def gradient(inputs, classes, first):
            self.traces += 1  # runs only while tracing
            with attribution_ops.separate_ops(SEPARATE_RULES):
                return traced(inputs, classes, first)

        def traced(inputs, classes, first):
            with tf.GradientTape() as tape:
                y, wrt = forward(list(inputs), tape)
                head = y[:first]
                if kind == "classes":
                    scalars = target_lib.select(head, classes)
                elif kind == "argmax":
                    scalars = target_lib.select(head, target_lib.ARGMAX)
                elif kind == "callable":
                    scalars = target_lib.select(head, callable_target)
                else:
                    scalars = head
            grads = []
            for i, (tensor, grad) in enumerate(zip(wrt, tape.gradient(scalars, wrt))):
                if grad is None:
                    disconnected.add((kind, i))
                    grad = tf.zeros_like(tensor)
                grads.append(tf.convert_to_tensor(grad))
            return y, scalars, grads, wrt

        # A partial: TensorFlow counts traces per Python code object, and one
        # function per rule set would read as one function retraced.
        return tf.function(functools.partial(gradient), input_signature=[
            self._inputs, tf.TensorSpec([None], tf.int64), tf.TensorSpec([], tf.int32)])

    def __call__(self, tensors, target, first=None):
        """(outputs, scalars, [gradient per input]) as ndarrays; a gradient
        is None where the output does not depend on that input (see `run`)."""
        return self.run(tensors, target, first)[:3]

    def run(self, tensors, target, first=None):
        """(outputs, scalars, [gradient], [what each is of]) as ndarrays; a
        gradient is None where the output does not depend on that tensor.

        Args:
          tensors: the model's input tensors (one per input).
          target: as `targets.resolve` returns it (an int array, ARGMAX, a
            callable, None).
          first: the target selects among the first `first` rows only (None:
            all of them).
        """
        if isinstance(target, str):
            kind, key = "argmax", "argmax"
        elif target is None:
            kind, key = "output", "output"
        elif callable(target):
            kind, key = "callable", target
        else:
            kind, key = "classes", "classes"
        with self._lock:
            if key not in self._compiled:
                self._compiled[key] = self._make(kind, target if kind == "callable" else None)
            compiled = self._compiled[key]
        classes = (tf.constant(target, tf.int64) if kind == "classes"
                   else tf.zeros([0], tf.int64))
        rows = tensors[0].shape[0] if first is None else first
        y, scalars, grads, wrt = compiled(list(tensors), classes, tf.constant(rows, tf.int32))
        return (y.numpy(), scalars.numpy(),
                [None if (kind, i) in self._disconnected else g.numpy()
                 for i, g in enumerate(grads)], [w.numpy() for w in wrt])


def compiled_gradient(explainer, function):
    """The `CompiledGradient` of `function`, made once per Explainer."""
    return explainer.cached((id(function), "compiled gradient"),
                            lambda: CompiledGradient(function), owner=function)
