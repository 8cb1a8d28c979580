"""The attribution methods, each a function of one call's context (the
model's patched function, see `engine`), the inputs and the target.

Conventions (x the input, b the baseline, g the gradient of the target
under the method's rules, all batched, maps of x's shape):

| method | map | reference |
|---|---|---|
| saliency | abs(g) (``abs=True``, Captum's default); g with ``abs=False``. Simonyan et al.'s image map is ``maps.max(axis=-1)``, the maximum over channels | Simonyan et al., ICLR 2014 |
| gradient_input | g * x | Shrikumar et al., 2016 |
| integrated_gradients | (x - b) * sum_k w_k g(b + a_k (x - b)) | Sundararajan et al., ICML 2017 |
| smoothgrad | mean over samples of g(x + noise), noise ~ N(0, (stdev_spread (max(x) - min(x)))^2) per example; ``magnitude=True``: of g^2 | Smilkov et al., 2017 |
| guided_backprop, deconvnet | g under guided_relu / deconv_relu | Springenberg et al., 2015; Zeiler and Fergus, 2014 |
| eps_lrp | g * x under eps_lrp(epsilon) (DeepExplain's form) | Bach et al., 2015; Ancona et al., ICLR 2018 |
| deeplift | (x - b) * g, g of the batch [x; b] under deeplift_rescale, the target on x's half | Shrikumar et al., ICML 2017 |

Integrated Gradients' Riemann rules, as Captum names them, with n = steps
points a_k and weights w_k: ``riemann_left`` a_k = k/n, ``riemann_right``
(k+1)/n, ``riemann_middle`` (k+1/2)/n, each w_k = 1/n; ``riemann_trapezoid``
a_k = k/(n-1) and w_k = 1/(n-1), halved at both ends (the weights sum to 1).

``delta`` (IG and DeepLIFT) is completeness: the sum of each example's map
minus f(x) - f(b) at its target, zero for an exact attribution.
"""

import dataclasses

import numpy as np

from graph_override.attribution import targets as target_lib
from graph_override.attribution.method_table import RIEMANN_RULES
from graph_override.errors import AttributionError

__all__ = ["Attribution", "RIEMANN_RULES", "deeplift", "gradient_input",
           "integrated_gradients", "modified_gradient", "result", "riemann", "saliency",
           "smoothgrad"]

@dataclasses.dataclass
class Attribution:
    """The result of one method on one batch.

    Attributes:
      maps: the attribution maps, one per example (x's shape; Grad-CAM: the
        layer's spatial shape, or x's with ``resize=True``); for a model of
        several inputs, a list or dict of maps, one per input, as x was given.
      method: the method's name.
      targets: the class explained per example (int array), or None where
        the target was a callable or the output is one scalar per example.
      outputs: the model's output for x.
      delta: completeness per example (integrated_gradients, deeplift), else
        None.
    """

    maps: np.ndarray
    method: str
    targets: np.ndarray = None
    outputs: np.ndarray = None
    delta: np.ndarray = None

    def __array__(self, dtype=None, copy=None):
        return self.maps if dtype is None else self.maps.astype(dtype)


def result(context, maps, outputs, target, delta=None):
    """The `Attribution` of one call: `maps`, the model's `outputs` for x,
    the class per example the (resolved) `target` explains, and `delta`."""
    return Attribution(maps=maps, method=context.spec.name,
                       targets=target_lib.explained(outputs, target), outputs=outputs,
                       delta=delta)


def _fixed(context, x, target):
    """(outputs for x, the target with the argmax made concrete): for the
    methods that differentiate at other points than x (IG, SmoothGrad)."""
    target = context.resolve(target, x)
    outputs = context.outputs(x)
    if isinstance(target, str):
        target = np.argmax(outputs, axis=1)
    return outputs, target


def saliency(context, x, target, *, abs=True):  # pylint: disable=redefined-builtin
    """The gradient of the target; its absolute value with ``abs=True``."""
    target = context.resolve(target, x)
    outputs, _, grads = context.gradient(x, target)
    return result(context, np.abs(grads) if abs else grads, outputs, target)


def gradient_input(context, x, target):
    """Gradient times input."""
    target = context.resolve(target, x)
    outputs, _, grads = context.gradient(x, target)
    return result(context, grads * x, outputs, target)


def modified_gradient(context, x, target):
    """The gradient under the method's rules (guided backprop, deconvnet)."""
    target = context.resolve(target, x)
    outputs, _, grads = context.gradient(x, target)
    return result(context, grads, outputs, target)


def riemann(rule, steps):
    """(points a_k, weights w_k) of an Integrated Gradients rule."""
    if rule not in RIEMANN_RULES:
        raise AttributionError("rule=%r: expected one of %s" % (rule, ", ".join(RIEMANN_RULES)))
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < (
            2 if rule == "riemann_trapezoid" else 1):
        raise AttributionError("steps=%r: expected an int >= %d for %s" % (
            steps, 2 if rule == "riemann_trapezoid" else 1, rule))
    k = np.arange(steps, dtype=np.float64)
    if rule == "riemann_trapezoid":
        weights = np.full(steps, 1.0 / (steps - 1))
        weights[[0, -1]] /= 2.0
        return k / (steps - 1), weights
    offset = {"riemann_left": 0.0, "riemann_right": 1.0, "riemann_middle": 0.5}[rule]
    return (k + offset) / steps, np.full(steps, 1.0 / steps)


def _weighted_gradients(context, inputs, weights, target, internal_batch_size, square=False):
    """sum_k weights[k] * g(inputs(k)) (of g^2 with `square`), in float64;
    `internal_batch_size` rows per model call (several k at once) where the
    model's batch dimension is free, else one k per call."""
    n = context.x.shape[0]
    per_call = 1
    if internal_batch_size is not None:  # checked by the record's option
        shape = context.input_spec.shape
        if not shape.rank or shape[0] is None:
            per_call = max(1, internal_batch_size // n)
    total = np.zeros(context.x.shape, np.float64)
    for start in range(0, len(weights), per_call):
        ks = range(start, min(start + per_call, len(weights)))
        rows = np.concatenate([inputs(k) for k in ks])
        tiled = np.tile(target, len(ks)) if isinstance(target, np.ndarray) else target
        grads = context.gradient(rows, tiled)[2].astype(np.float64)
        for k, g in zip(ks, np.split(grads, len(ks))):
            total += weights[k] * (g * g if square else g)
    return total


def integrated_gradients(context, x, target, *, baseline=None, steps=50,
                         rule="riemann_trapezoid", internal_batch_size=None):
    """Integrated Gradients from `baseline` (zeros by default) in `steps`
    points of the Riemann `rule`; ``delta`` is the completeness gap.
    `internal_batch_size`: rows per model call (None: one step per call)."""
    points, weights = riemann(rule, steps)
    baseline = target_lib.baseline_for(baseline, x)
    outputs, target = _fixed(context, x, target)
    total = _weighted_gradients(
        context, lambda k: (baseline + points[k] * (x - baseline)).astype(x.dtype), weights,
        target, internal_batch_size)
    maps = ((x - baseline) * total).astype(x.dtype)
    delta = _completeness(context, maps, outputs, baseline, target)
    return result(context, maps, outputs, target, delta)


def _per_example(a):
    """`a` as one row per example (also for a batch of none, where
    reshape(0, -1) is ambiguous)."""
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))


def _completeness(context, maps, outputs, baseline, target):
    ref = target_lib.values(context.outputs(baseline), target)
    return _per_example(maps).sum(axis=1, dtype=np.float64) - (
        target_lib.values(outputs, target).astype(np.float64) - ref)


def smoothgrad(context, x, target, *, stdev_spread=0.15, samples=50, seed=None,
               magnitude=False, internal_batch_size=None):
    """SmoothGrad: the gradient averaged over `samples` noisy copies of x,
    the noise's standard deviation `stdev_spread` times each example's value
    range (PAIR saliency's convention; with several inputs, each input's own
    range). `internal_batch_size`: rows per model call (None: one sample per
    call); the noise is the same either way.
    The options are checked by the method's record (`method_table`)."""
    outputs, target = _fixed(context, x, target)
    flat = _per_example(x)
    sigma = (stdev_spread * (flat.max(axis=1) - flat.min(axis=1))).reshape(
        (-1,) + (1,) * (x.ndim - 1))
    if getattr(context, "packed", None) is not None:  # each input's own value range
        sigma = np.concatenate([np.repeat(stdev_spread * (
            flat[:, a:b].max(axis=1, keepdims=True) - flat[:, a:b].min(axis=1, keepdims=True)),
            b - a, axis=1) for a, b in context.packed.segments], axis=1)
    rng = np.random.default_rng(seed)
    noise = (rng.normal(size=x.shape) for _ in range(samples))  # drawn in order k
    total = _weighted_gradients(
        context, lambda k: (x + next(noise) * sigma).astype(x.dtype),
        np.full(samples, 1.0 / samples), target, internal_batch_size, square=magnitude)
    return result(context, total.astype(x.dtype), outputs, target)


def one_reference(baseline, x):
    """Whether every example's baseline is the same, bit for bit (None and
    a number are): DeepLIFT then runs one reference row for all the inputs,
    N + 1 rows instead of 2N (``deeplift_rescale(shared_reference=True)``)."""
    rows = target_lib.baseline_for(baseline, x)
    if rows.shape[0] == 0:
        return False  # no examples: no reference row to run either
    flat = _per_example(rows).view("u%d" % rows.dtype.itemsize)
    return bool(np.all(flat == flat[:1]))


def deeplift(context, x, target, *, baseline=None):
    """DeepLIFT (rescale): inputs and baselines in one batch, the target on
    the inputs' part, maps (x - b) times the inputs' part of the gradient.
    One baseline for all (zeros, a number, one example) is one row after
    the inputs; baselines that differ are N rows."""
    n = x.shape[0]
    baseline = target_lib.baseline_for(baseline, x)
    target = context.resolve(target, x)
    references = baseline[:1] if context.shared_reference else baseline
    both, _, grads = context.gradient(np.concatenate([x, references]), target, first=n)
    outputs, reference_outputs = both[:n], both[n:]
    maps = ((x - baseline) * grads[:n]).astype(x.dtype)
    concrete = np.argmax(outputs, axis=1) if isinstance(target, str) else target
    if context.shared_reference:
        reference_outputs = np.repeat(reference_outputs, n, axis=0)
    delta = _per_example(maps).sum(axis=1, dtype=np.float64) - (
        target_lib.values(outputs, concrete).astype(np.float64)
        - target_lib.values(reference_outputs, concrete))
    return result(context, maps, outputs, target, delta)
