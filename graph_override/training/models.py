"""Graph builders of the training scripts: BNN, DANN and DoReFa networks.

Each builder writes a `tf.compat.v1` graph into the default graph (so a
`tf.compat.v1.train.replica_device_setter` scope places it on a cluster) and
takes the estimator `family` as an argument: `graph_override.overrides`
(gradient override maps), `graph_override.stopgrad` (stop_gradient
identities) or `graph_override.tf2` (tf.custom_gradient), or their names.
The families compute the same forward bit for bit and the same gradients, so
the same seed gives the same training run with any of them.

No Keras: dense layers are `tf.compat.v1.get_variable` + `tf.matmul`, batch
normalization is `tf.nn.moments` + `tf.nn.batch_normalization` with moving
averages updated by the train op. Every initializer has an explicit seed, so
the weights do not depend on how many ops a family creates before them.
"""

import collections
import importlib
import types

import numpy as np
import tensorflow as tf

from graph_override.training.data import N_CLASSES, N_FEATURES
from graph_override.training.errors import UnknownFamilyError

__all__ = ["FAMILIES", "Model", "build_bnn", "build_dann", "build_dorefa",
           "resolve_family"]

FAMILIES = ("overrides", "stopgrad", "tf2")

Model = collections.namedtuple("Model", [
    "name", "inputs", "training", "loss", "accuracy", "train_op",
    "global_step", "probes", "metrics"])
Model.__doc__ = """A built training graph.

Attributes:
  name: the model's variable scope ("bnn", "dann", "dorefa").
  inputs: {name: placeholder} fed by the training loop.
  training: bool placeholder (default False): batch statistics and moving
    average updates when True, moving averages when False.
  loss: scalar training loss.
  accuracy: scalar accuracy of the labelled batch fed.
  train_op: one optimizer step; also increments `global_step`.
  global_step: int64 step counter (saved in checkpoints).
  probes: {name: scalar} diagnostics computed with each train step, e.g.
    the norm of the gradient that reaches the first layer's latent weights
    through the straight-through estimators (0 if they were not applied).
  metrics: {name: scalar} extra evaluation tensors (DANN: domain accuracy).
"""


def resolve_family(family):
    """The family module for a name or module.

    Example:
      >>> resolve_family("stopgrad").__name__
      'graph_override.stopgrad'

    Raises:
      UnknownFamilyError: not one of overrides, stopgrad, tf2.
    """
    if isinstance(family, types.ModuleType):
        name = family.__name__.rsplit(".", 1)[-1]
        if family.__name__ == "graph_override." + name and name in FAMILIES:
            return family
        raise UnknownFamilyError(
            "family module %r is not one of graph_override's estimator "
            "families (graph_override.%s)" % (family.__name__,
                                              ", graph_override.".join(FAMILIES)))
    if family not in FAMILIES:
        raise UnknownFamilyError(
            "unknown family %r: use one of %s (the estimator families of "
            "graph_override)" % (family, ", ".join(FAMILIES)))
    return importlib.import_module("graph_override." + family)


def _variable(name, shape, seed=None, init="glorot", trainable=True):
    initializer = {
        "glorot": lambda: tf.compat.v1.glorot_uniform_initializer(seed=seed),
        "zeros": tf.compat.v1.zeros_initializer,
        "ones": tf.compat.v1.ones_initializer,
    }[init]()
    return tf.compat.v1.get_variable(name, shape, initializer=initializer,
                                     trainable=trainable)


class _Builder:
    """Shared pieces: placeholders, batch norm, optimizer with clipping."""

    def __init__(self, seed):
        self.seed = int(seed)
        self.n_vars = 0
        self.updates = []  # moving-average updates, run by the train op
        self.training = tf.compat.v1.placeholder_with_default(False, [], "training")

    def weight(self, name, shape):
        self.n_vars += 1
        return _variable(name, shape, seed=self.seed * 1000 + self.n_vars)

    def batch_norm(self, h, name, decay=0.9, epsilon=1e-4):
        """tf.nn batch normalization; moving averages for evaluation."""
        n = h.shape[-1]
        with tf.compat.v1.variable_scope(name):
            gamma = _variable("gamma", [n], init="ones")
            beta = _variable("beta", [n], init="zeros")
            mov_mean = _variable("moving_mean", [n], init="zeros", trainable=False)
            mov_var = _variable("moving_variance", [n], init="ones", trainable=False)
        mean, var = tf.nn.moments(h, axes=[0])
        self.updates += [
            tf.compat.v1.assign_sub(mov_mean, (mov_mean - mean) * (1 - decay)),
            tf.compat.v1.assign_sub(mov_var, (mov_var - var) * (1 - decay))]
        mean, var = tf.cond(self.training, lambda: (mean, var),
                            lambda: (tf.identity(mov_mean), tf.identity(mov_var)))
        return tf.nn.batch_normalization(h, mean, var, beta, gamma, epsilon)

    def train_op(self, loss, learning_rate, global_step, clip=()):
        """Adam step, then the moving averages and latent-weight clipping."""
        opt = tf.compat.v1.train.AdamOptimizer(learning_rate)
        grads_and_vars = opt.compute_gradients(loss)
        step = opt.apply_gradients(grads_and_vars, global_step=global_step)
        with tf.control_dependencies([step]):
            after = [tf.compat.v1.assign(w, tf.clip_by_value(w, -1.0, 1.0))
                     for w in clip] + self.updates
            op = tf.group(*after, name="train_op")
        return op, dict((v.op.name, g) for g, v in grads_and_vars)


def _global_step():
    return tf.compat.v1.train.get_or_create_global_step()


def _classification(logits, labels):
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    correct = tf.equal(tf.argmax(logits, axis=1), labels)
    return loss, tf.reduce_mean(tf.cast(correct, tf.float32))


def _grad_norm(grads, name):
    g = grads.get(name)
    return tf.constant(0.0) if g is None else tf.norm(g)


def _quantized_mlp(name, *, preprocess, quantize_weight, activation, clip_latent,
                   hidden, learning_rate, decay_steps, seed):
    """The network of BNN and DoReFa: quantized dense layers, each followed by
    batch normalization, quantized hidden activations, Adam with a halving
    learning rate, and optionally latent weights clipped to [-1, 1].

    Args:
      name: the variable scope and the `Model`'s name.
      preprocess: ``preprocess(x)``, the input of the first layer.
      quantize_weight: ``quantize_weight(w, i)``, the weights layer i uses.
      activation: ``activation(h, i)``, the quantized hidden activation i.
      clip_latent: clip the latent weights after every step.
      hidden, learning_rate, decay_steps, seed: as in `build_bnn`.
    """
    with tf.compat.v1.variable_scope(name):
        b = _Builder(seed)
        x = tf.compat.v1.placeholder(tf.float32, [None, N_FEATURES], "x")
        y = tf.compat.v1.placeholder(tf.int64, [None], "y")
        h, latent = preprocess(x), []
        widths = (N_FEATURES,) + tuple(hidden) + (N_CLASSES,)
        for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
            w = b.weight("dense%d/kernel" % i, [n_in, n_out])
            latent.append(w)
            h = b.batch_norm(tf.matmul(h, quantize_weight(w, i)), "bn%d" % i)
            if i < len(widths) - 2:
                h = activation(h, i)
        loss, acc = _classification(h, y)
        gs = _global_step()
        lr = tf.compat.v1.train.exponential_decay(learning_rate, gs, decay_steps, 0.5)
        op, grads = b.train_op(loss, lr, gs, clip=latent if clip_latent else ())
    return Model(name, {"x": x, "y": y}, b.training, loss, acc, op, gs,
                 {"ste_grad_norm": _grad_norm(grads, latent[0].op.name)}, {})


def build_bnn(family, *, hidden=(256, 256), learning_rate=0.005,
              decay_steps=200, seed=0):
    """A binarized network (BinaryNet recipe) on 8x8 digits.

    Every layer multiplies by binary weights ``ste_sign(W)`` (latent real
    weights W, clipped to [-1, 1] after each Adam step); hidden activations
    are ``ste_sign(batch_norm(h))``; the output is a batch-normalized binary
    layer. Gradients reach W through the straight-through estimator
    ``dy * [|x| <= 1]``; TensorFlow's own Sign gradient is zero.
    Courbariaux et al. 2016, "Binarized Neural Networks".

    Example:
      >>> with tf.Graph().as_default():
      ...     m = build_bnn("overrides", hidden=(32,))
      ...     sorted(m.inputs), m.name
      (['x', 'y'], 'bnn')

    Args:
      family: "overrides", "stopgrad", "tf2" or the module.
      hidden: widths of the hidden layers.
      learning_rate: initial Adam learning rate (halved every `decay_steps`).
      decay_steps: steps per halving of the learning rate.
      seed: seed of the weight initializers.

    Returns:
      A `Model`; probes["ste_grad_norm"] is the norm of the gradient of the
      first layer's latent weights.
    """
    fam = resolve_family(family)
    return _quantized_mlp(
        "bnn", preprocess=lambda x: 2.0 * x - 1.0,
        quantize_weight=lambda w, i: fam.ste_sign(w, name="binary_kernel%d" % i),
        activation=lambda h, i: fam.ste_sign(h, name="binary_activation%d" % i),
        clip_latent=True, hidden=hidden, learning_rate=learning_rate,
        decay_steps=decay_steps, seed=seed)


def build_dorefa(family, *, weight_bits=1, activation_bits=2, hidden=(256, 256),
                 learning_rate=0.005, decay_steps=200, seed=0):
    """A DoReFa network: k-bit activations, binary or k-bit weights.

    Activations: ``dorefa_quantize(batch_norm(h), activation_bits)``, that is
    round(clip(h, 0, 1) n) / n with n = 2^k - 1 and gradient dy on [0, 1].
    Weights: with 1 bit, ``ste_sign(W) * mean|W|``; with k > 1 bits,
    ``2 dorefa_quantize(tanh W / (2 max|tanh W|) + 1/2, k) - 1``.
    The first layer reads the real-valued pixels; the last layer's
    batch-normalized output gives the logits. Zhou et al. 2016, "DoReFa-Net".

    Example:
      >>> with tf.Graph().as_default():
      ...     m = build_dorefa("stopgrad", weight_bits=2, hidden=(16,))
      ...     m.name
      'dorefa'
    """
    fam = resolve_family(family)
    for what, bits in (("weight_bits", weight_bits), ("activation_bits", activation_bits)):
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits < 1:
            raise ValueError("build_dorefa(%s=%r): use a whole number of bits >= 1"
                             % (what, bits))

    def quantize_weight(w, _):
        if weight_bits == 1:
            return fam.ste_sign(w) * tf.stop_gradient(tf.reduce_mean(tf.abs(w)))
        t = tf.tanh(w)
        t = t / (2.0 * tf.stop_gradient(tf.reduce_max(tf.abs(t)))) + 0.5
        return 2.0 * fam.dorefa_quantize(t, k_bit=int(weight_bits)) - 1.0

    return _quantized_mlp(
        "dorefa", preprocess=lambda x: x, quantize_weight=quantize_weight,
        activation=lambda h, i: fam.dorefa_quantize(
            h, k_bit=int(activation_bits), name="quantized_activation%d" % i),
        clip_latent=weight_bits == 1, hidden=hidden, learning_rate=learning_rate,
        decay_steps=decay_steps, seed=seed)


def build_dann(family, *, domain_weight=1.0, reversal_scale=1.0, hidden=(128, 64),
               learning_rate=0.01, total_steps=None, seed=0):
    """Domain-adversarial network (DANN) with a gradient reversal layer.

    A feature extractor (dense + ReLU) feeds a label classifier trained on
    labelled source images and, through ``flip_gradient(features,
    reversal_scale)``, a domain classifier that tells source from target
    images. The reversal makes the extractor maximize the domain loss, so
    the features stop telling the domains apart. ``domain_weight=0`` gives
    the source-only baseline with the same architecture and steps.

    As in the paper, with `total_steps` the reversed gradient is ramped in
    by lambda_p = 2 / (1 + exp(-10 p)) - 1 (p: training progress) and
    momentum SGD anneals its rate as lr / (1 + 10 p)^0.75. Adam did not
    work here (target accuracy 0.10-0.37, below source-only, even with
    reversal_scale=0.1), presumably because it scales every weight's step
    to the same size, so weights of background pixels, which get no label
    gradient on the dark source images, take full steps along the small
    reversed gradient alone.
    Ganin & Lempitsky 2015, "Unsupervised Domain Adaptation by
    Backpropagation".

    Example:
      >>> with tf.Graph().as_default():
      ...     m = build_dann("overrides", hidden=(16, 8))
      ...     sorted(m.inputs)
      ['x', 'x_target', 'y']

    Returns:
      A `Model` whose `accuracy` is the label accuracy of the images fed as
      "x"; metrics hold the domain classifier's accuracy and both losses;
      probes["reversed_grad_norm"] is the norm of the gradient that the
      domain loss sends into the features (0 for the source-only model).
    """
    fam = resolve_family(family)
    with tf.compat.v1.variable_scope("dann"):
        b = _Builder(seed)
        x = tf.compat.v1.placeholder(tf.float32, [None, N_FEATURES], "x")
        y = tf.compat.v1.placeholder(tf.int64, [None], "y")
        x_t = tf.compat.v1.placeholder_with_default(
            tf.zeros([0, N_FEATURES]), [None, N_FEATURES], "x_target")
        n_s = tf.shape(x)[0]
        h = tf.concat([x, x_t], axis=0)
        widths = (N_FEATURES,) + tuple(hidden)
        for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
            w = b.weight("features%d/kernel" % i, [n_in, n_out])
            bias = _variable("features%d/bias" % i, [n_out], init="zeros")
            h = tf.nn.relu(tf.matmul(h, w) + bias)
        features = h
        w_y = b.weight("label/kernel", [widths[-1], N_CLASSES])
        logits = tf.matmul(features[:n_s], w_y) + _variable(
            "label/bias", [N_CLASSES], init="zeros")
        label_loss, acc = _classification(logits, y)
        gs = _global_step()
        progress = tf.minimum(tf.cast(gs, tf.float32) / float(total_steps or 1), 1.0)
        reversed_features = fam.flip_gradient(features, scale=reversal_scale,
                                              name="gradient_reversal")
        if total_steps:
            # The forward stays `reversed_features`; its gradient is scaled.
            lam = 2.0 / (1.0 + tf.exp(-10.0 * progress)) - 1.0
            reversed_features = (lam * reversed_features
                                 + tf.stop_gradient((1.0 - lam) * reversed_features))
        w_d1 = b.weight("domain0/kernel", [widths[-1], 64])
        d = tf.nn.relu(tf.matmul(reversed_features, w_d1)
                       + _variable("domain0/bias", [64], init="zeros"))
        w_d2 = b.weight("domain1/kernel", [64, 1])
        d_logit = tf.squeeze(tf.matmul(d, w_d2)
                             + _variable("domain1/bias", [1], init="zeros"), 1)
        d_label = tf.concat([tf.zeros([n_s]), tf.ones([tf.shape(x_t)[0]])], 0)
        domain_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=d_label, logits=d_logit))
        domain_acc = tf.reduce_mean(tf.cast(
            tf.equal(tf.cast(d_logit > 0, tf.float32), d_label), tf.float32))
        loss = label_loss + float(domain_weight) * domain_loss
        lr = learning_rate / (1.0 + 10.0 * progress) ** 0.75
        opt = tf.compat.v1.train.MomentumOptimizer(lr, 0.9)
        op = tf.group(opt.minimize(loss, global_step=gs), name="train_op")
        reversed_grad, = tf.gradients(float(domain_weight) * domain_loss, features)
        probe = tf.constant(0.0) if reversed_grad is None else tf.norm(reversed_grad)
    return Model("dann", {"x": x, "y": y, "x_target": x_t}, b.training,
                 loss, acc, op, gs, {"reversed_grad_norm": probe},
                 {"domain_accuracy": domain_acc, "label_loss": label_loss,
                  "domain_loss": domain_loss})
