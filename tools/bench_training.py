"""Section 1 of tools/bench.py: a training step of a binarized MLP with
ste_sign from each family, against the same network with tanh.

Each variant is built once and warmed up; then, repetition by repetition in
a rotating order, `train_steps` steps of each are timed (wall and CPU time).
A ratio is the median over repetitions of the ratio to the tanh Session
within each repetition.
"""

import time

import numpy as np
import tensorflow as tf

from graph_override import overrides, stopgrad, tf2

from bench_common import median, rotations, timed


def _init_weights(sizes, seed=0):
    """Glorot-uniform weights, the same numbers for every variant."""
    rng = np.random.RandomState(seed)
    out = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (a + b))
        out.append(rng.uniform(-limit, limit, (a, b)).astype(np.float32))
    return out


def _data(sizes, batch, seed=1):
    rng = np.random.RandomState(seed)
    x = rng.randn(batch, sizes[0]).astype(np.float32)
    y = rng.randint(0, sizes[-1], batch).astype(np.int32)
    return x, y


def _logits(x, weights, act):
    h = x
    for i, w in enumerate(weights):
        h = tf.matmul(h, w)
        if i < len(weights) - 1:
            h = act(h)
    return h


def _loss(logits, labels):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))


LEARNING_RATE = 0.01

# (label, activation, how it runs)
TRAIN_VARIANTS = [
    ("tanh (baseline), Session", tf.tanh, "session"),
    ("overrides.ste_sign, Session", overrides.ste_sign, "session"),
    ("stopgrad.ste_sign, Session", stopgrad.ste_sign, "session"),
    ("tf2.ste_sign (tf.custom_gradient), Session", tf2.ste_sign, "session"),
    ("tf2.ste_sign, eager", tf2.ste_sign, "eager"),
    ("tf2.ste_sign, tf.function", tf2.ste_sign, "function"),
    ("tanh, eager", tf.tanh, "eager"),
    ("tanh, tf.function", tf.tanh, "function"),
]


class _SessionStep:
    def __init__(self, act, sizes, batch):
        x_np, y_np = _data(sizes, batch)
        self.graph = tf.Graph()
        with self.graph.as_default():
            weights = [tf.compat.v1.Variable(w, name="w%d" % i)
                       for i, w in enumerate(_init_weights(sizes))]
            x, y = tf.constant(x_np), tf.constant(y_np)
            before = len(self.graph.get_operations())
            self.loss = _loss(_logits(x, weights, act), y)
            self.forward_ops = len(self.graph.get_operations()) - before
            opt = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE)
            self.train = opt.minimize(self.loss, var_list=weights)
            self.ops = len(self.graph.get_operations())
            init = tf.compat.v1.global_variables_initializer()
        self.graph.finalize()
        self.sess = tf.compat.v1.Session(graph=self.graph)
        self.sess.run(init)
        self.first_loss = float(self.sess.run(self.loss))

    def __call__(self):
        self.sess.run(self.train)

    def close(self):
        self.sess.close()


class _EagerStep:
    def __init__(self, act, sizes, batch, compiled):
        x_np, y_np = _data(sizes, batch)
        self.x, self.y = tf.constant(x_np), tf.constant(y_np)
        self.weights = [tf.Variable(w) for w in _init_weights(sizes)]
        self.act = act
        self.optimizer = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE)
        self.first_loss = float(_loss(_logits(self.x, self.weights, act), self.y))
        self.step = tf.function(self._step) if compiled else self._step
        self.forward_ops = self.ops = None
        if compiled:
            graph = self.step.get_concrete_function().graph
            self.ops = len(graph.get_operations())

    def _step(self):
        with tf.GradientTape() as tape:
            loss = _loss(_logits(self.x, self.weights, self.act), self.y)
        grads = tape.gradient(loss, self.weights)
        # The Session's update op (ResourceApplyGradientDescent, in place), so
        # the comparison is of the gradients, not of two ways to apply them.
        self.optimizer.apply_gradients(zip(grads, self.weights))
        return loss

    def __call__(self):
        loss = self.step()
        loss.numpy()  # wait for the step to finish

    def close(self):
        pass


def bench_training(cfg, log):
    """Median seconds per training step of every variant, per MLP."""
    results = []
    for title, sizes, batch in cfg["mlps"]:
        log("training step: MLP %s" % title)
        steps = {}
        for label, act, how in TRAIN_VARIANTS:
            steps[label] = (_SessionStep(act, sizes, batch) if how == "session"
                            else _EagerStep(act, sizes, batch, how == "function"))
            for _ in range(2):  # warm up: first runs allocate and optimize
                steps[label]()
        times = {label: [] for label in steps}
        cpu = {label: [] for label in steps}
        labels = list(steps)
        n = cfg["train_steps"]
        for order in rotations(labels, cfg["train_repeats"]):
            for label in order:
                step = steps[label]
                cpu0 = time.process_time()
                seconds, _ = timed(lambda s=step, n=n: [s() for _ in range(n)])
                cpu[label].append((time.process_time() - cpu0) / n)
                times[label].append(seconds / n)
        # Ratios: the median over repetitions of the ratio within each one
        # (the variants of one repetition ran seconds apart, so slow drifts
        # of the machine's load cancel out).
        base, cpu_base = times[labels[0]], cpu[labels[0]]
        rows = []
        for label in labels:
            s = steps[label]
            rows.append(dict(variant=label, ms=1e3 * median(times[label]),
                             spread=1e3 * (max(times[label]) - min(times[label])),
                             ratio=median(a / b for a, b in zip(times[label], base)),
                             cpu_ms=1e3 * median(cpu[label]),
                             cpu_ratio=median(a / b for a, b in zip(cpu[label], cpu_base)),
                             ops=s.ops, forward_ops=s.forward_ops,
                             first_loss=s.first_loss))
            s.close()
        ste = [r["first_loss"] for r in rows if "ste_sign" in r["variant"]]
        results.append(dict(title=title, rows=rows, repeats=cfg["train_repeats"],
                            steps=n, same_loss=max(ste) - min(ste) <= 1e-5 * abs(ste[0])))
    return results


