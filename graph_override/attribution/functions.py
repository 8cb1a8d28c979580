"""One call per method: ``attribution.saliency(model, x)`` and the like.

Each is `attribution.attribute(model, METHOD, x, ...)`: `model` is a frozen
GraphDef or path (with `inputs` and `outputs` names), None with `session` and
its tensors, a TF2 callable or Keras model, or an `Explainer` (which keeps the
frozen and patched model between calls). `rules` are patch rules of the
caller's own, applied before the method's, and `allow_ops` the op types a
GraphDef may run although they read or write files or reach elsewhere
(see `Explainer`). `batch_size` examples go through the model per call
(None: chosen from the model's input size; see
`graph_override.attribution.batching`); ``progress=True`` draws a progress
bar on stderr. `target` is None (the argmax per
example), an int class for all, an int array per example, or a callable of
the output tensor. Each returns an `Attribution` (``.maps``, ``.targets``,
``.outputs``, ``.delta``). See `graph_override.attribution.methods` for the
formulas and conventions.
"""

from graph_override.attribution.engine import attribute

__all__ = ["deconvnet", "deeplift", "eps_lrp", "grad_cam", "gradient_input", "guided_backprop",
           "integrated_gradients", "saliency", "smoothgrad"]


def saliency(model, x, target=None, *, inputs=None, outputs=None, session=None, rules=(),
             allow_ops=(), batch_size=None,
             progress=False, abs=True):  # pylint: disable=redefined-builtin
    """The gradient of the target; its absolute value with ``abs=True``
    (Captum's default). Simonyan et al.'s map is ``maps.max(axis=-1)``.

    Example:
      >>> import numpy as np, tensorflow as tf
      >>> from graph_override import attribution
      >>> f = lambda x: tf.matmul(x, tf.constant([[2.0], [-3.0]]))
      >>> attribution.saliency(f, np.ones((1, 2), "float32")).maps
      array([[2., 3.]], dtype=float32)
    """
    return attribute(model, "saliency", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress, abs=abs)


def gradient_input(model, x, target=None, *, inputs=None, outputs=None, session=None,
                   rules=(), allow_ops=(), batch_size=None,
                   progress=False):
    """Gradient times input (Shrikumar et al., 2016)."""
    return attribute(model, "gradient_input", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress)


def integrated_gradients(model, x, target=None, *, inputs=None, outputs=None, session=None,
                         rules=(), allow_ops=(), batch_size=None,
                         progress=False, baseline=None, steps=50, rule="riemann_trapezoid",
                         internal_batch_size=None):
    """Integrated Gradients (Sundararajan et al., 2017) from `baseline`
    (zeros; a number; one example's shape; x's shape) with `steps` points of
    `rule` (riemann_left, riemann_right, riemann_middle, riemann_trapezoid);
    ``.delta`` is the completeness gap per example, which falls as `steps`
    grows. `internal_batch_size` rows go through the model per call (None:
    one step of the batch per call; Captum's name)."""
    return attribute(model, "integrated_gradients", x, target, inputs=inputs,
                     outputs=outputs, session=session, rules=rules, allow_ops=allow_ops,
                     batch_size=batch_size, progress=progress, baseline=baseline, steps=steps,
                     rule=rule,
                     internal_batch_size=internal_batch_size)


def smoothgrad(model, x, target=None, *, inputs=None, outputs=None, session=None,
               rules=(), allow_ops=(), batch_size=None,
               progress=False, stdev_spread=0.15, samples=50, seed=None, magnitude=False,
               internal_batch_size=None):
    """SmoothGrad (Smilkov et al., 2017): the gradient averaged over `samples`
    copies of x with Gaussian noise of standard deviation `stdev_spread`
    times each example's value range; `seed` makes it repeatable;
    ``magnitude=True`` averages the squared gradient; `internal_batch_size`
    as in `integrated_gradients`."""
    return attribute(model, "smoothgrad", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress, stdev_spread=stdev_spread,
                     samples=samples, seed=seed, magnitude=magnitude,
                     internal_batch_size=internal_batch_size)


def guided_backprop(model, x, target=None, *, inputs=None, outputs=None, session=None,
                    rules=(), allow_ops=(), batch_size=None,
                    progress=False):
    """Guided backpropagation (Springenberg et al., 2015): the gradient with
    Relu, Relu6 and LeakyRelu passing dy where dy > 0 and y > 0."""
    return attribute(model, "guided_backprop", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress)


def deconvnet(model, x, target=None, *, inputs=None, outputs=None, session=None,
              rules=(), allow_ops=(), batch_size=None,
              progress=False):
    """Deconvnet (Zeiler and Fergus, 2014): the gradient with Relu, Relu6
    and LeakyRelu passing dy where dy > 0."""
    return attribute(model, "deconvnet", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress)


def eps_lrp(model, x, target=None, *, inputs=None, outputs=None, session=None,
            rules=(), allow_ops=(), batch_size=None,
            progress=False, epsilon=1e-4):
    """epsilon-LRP (Bach et al., 2015) as DeepExplain computes it: the
    gradient under the eps_lrp rule (dy * y / (x + epsilon * sign(x)) at each
    nonlinearity) times the input."""
    return attribute(model, "eps_lrp", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress, epsilon=epsilon)


def deeplift(model, x, target=None, *, inputs=None, outputs=None, session=None,
             rules=(), allow_ops=(), batch_size=None,
             progress=False, baseline=None):
    """DeepLIFT with the rescale rule (Shrikumar et al., 2017): inputs and
    baselines run in one batch [x; baseline] (the model's batch dimension
    must be free), maps (x - baseline) times the rescaled gradient; ``.delta``
    is the summation-to-delta gap."""
    return attribute(model, "deeplift", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress, baseline=baseline)


def grad_cam(model, x, target=None, *, inputs=None, outputs=None, session=None, rules=(),
             allow_ops=(), batch_size=None,
             progress=False, layer=None, resize=False):
    """Grad-CAM (Selvaraju et al., 2017) of `layer` (a tensor name; None:
    the last 4-D tensor before the output), resized to x's height and width
    with ``resize=True``."""
    return attribute(model, "grad_cam", x, target, inputs=inputs, outputs=outputs,
                     session=session, rules=rules, allow_ops=allow_ops, batch_size=batch_size,
                     progress=progress, layer=layer,
                     resize=resize)
