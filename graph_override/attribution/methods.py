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
from graph_override.errors import AttributionError

__all__ = ["Attribution", "RIEMANN_RULES", "deeplift", "eps_lrp", "gradient_input",
           "integrated_gradients", "modified_gradient", "riemann", "saliency", "smoothgrad"]

RIEMANN_RULES = ("riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid")


@dataclasses.dataclass
class Attribution:
    """The result of one method on one batch.

    Attributes:
      maps: the attribution maps, one per example (x's shape; Grad-CAM: the
        layer's spatial shape, or x's with ``resize=True``).
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


def _target_values(outputs, target):
    """f at the target, one value per example, from output arrays."""
    if target is None:
        return outputs.reshape(outputs.shape[0])
    if callable(target):
        return np.asarray(target_lib.select(outputs, target))
    return outputs.reshape(outputs.shape[0], -1)[np.arange(outputs.shape[0]), target]


def _resolved(context, x, target):
    outputs = context.outputs(x)
    return outputs, target_lib.resolve(target, outputs)


def _result(context, maps, target, outputs, delta=None):
    return Attribution(maps=maps, method=context.spec.name,
                       targets=None if callable(target) else target,
                       outputs=outputs, delta=delta)


def saliency(context, x, target, *, abs=True):  # pylint: disable=redefined-builtin
    """The gradient of the target; its absolute value with ``abs=True``."""
    outputs, target = _resolved(context, x, target)
    _, _, grads = context.gradient(x, target)
    return _result(context, np.abs(grads) if abs else grads, target, outputs)


def gradient_input(context, x, target):
    """Gradient times input."""
    outputs, target = _resolved(context, x, target)
    return _result(context, context.gradient(x, target)[2] * x, target, outputs)


def modified_gradient(context, x, target):
    """The gradient under the method's rules (guided backprop, deconvnet)."""
    outputs, target = _resolved(context, x, target)
    return _result(context, context.gradient(x, target)[2], target, outputs)


def eps_lrp(context, x, target, *, epsilon=1e-4):  # pylint: disable=unused-argument
    """epsilon-LRP: the gradient under eps_lrp(epsilon) times the input (the
    rule's epsilon is set by the engine from `epsilon`)."""
    return gradient_input(context, x, target)


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


def integrated_gradients(context, x, target, *, baseline=None, steps=50,
                         rule="riemann_trapezoid"):
    """Integrated Gradients from `baseline` (zeros by default) in `steps`
    points of the Riemann `rule`; ``delta`` is the completeness gap."""
    points, weights = riemann(rule, steps)
    baseline = target_lib.baseline_for(baseline, x)
    outputs, target = _resolved(context, x, target)
    total = np.zeros(x.shape, np.float64)
    for alpha, weight in zip(points, weights):
        path = (baseline + alpha * (x - baseline)).astype(x.dtype)
        total += weight * context.gradient(path, target)[2]
    maps = ((x - baseline) * total).astype(x.dtype)
    delta = _completeness(context, maps, outputs, baseline, target)
    return _result(context, maps, target, outputs, delta)


def _completeness(context, maps, outputs, baseline, target):
    ref = _target_values(context.outputs(baseline), target)
    return maps.reshape(maps.shape[0], -1).sum(axis=1, dtype=np.float64) - (
        _target_values(outputs, target).astype(np.float64) - ref)


def smoothgrad(context, x, target, *, stdev_spread=0.15, samples=50, seed=None,
               magnitude=False):
    """SmoothGrad: the gradient averaged over `samples` noisy copies of x,
    the noise's standard deviation `stdev_spread` times each example's value
    range (PAIR saliency's convention)."""
    if not isinstance(samples, (int, np.integer)) or isinstance(samples, bool) or samples < 1:
        raise AttributionError("samples=%r: expected an int >= 1" % (samples,))
    if not stdev_spread >= 0:
        raise AttributionError("stdev_spread=%r: expected a number >= 0" % (stdev_spread,))
    outputs, target = _resolved(context, x, target)
    flat = x.reshape(x.shape[0], -1)
    sigma = (stdev_spread * (flat.max(axis=1) - flat.min(axis=1))).reshape(
        (-1,) + (1,) * (x.ndim - 1))
    rng = np.random.default_rng(seed)
    total = np.zeros(x.shape, np.float64)
    for _ in range(samples):
        noisy = (x + rng.normal(size=x.shape) * sigma).astype(x.dtype)
        grads = context.gradient(noisy, target)[2].astype(np.float64)
        total += grads * grads if magnitude else grads
    return _result(context, (total / samples).astype(x.dtype), target, outputs)


def deeplift(context, x, target, *, baseline=None):
    """DeepLIFT (rescale): inputs and baselines in one batch, the target on
    the inputs' half, maps (x - b) times the inputs' half of the gradient."""
    n = x.shape[0]
    context.check_doubling(n)
    baseline = target_lib.baseline_for(baseline, x)
    outputs, target = _resolved(context, x, target)
    both, _, grads = context.gradient(np.concatenate([x, baseline]), target, first=n)
    maps = ((x - baseline) * grads[:n]).astype(x.dtype)
    delta = maps.reshape(n, -1).sum(axis=1, dtype=np.float64) - (
        _target_values(both[:n], target).astype(np.float64)
        - _target_values(both[n:], target))
    return _result(context, maps, target, outputs, delta)
