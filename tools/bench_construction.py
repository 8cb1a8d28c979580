"""Section 2 of tools/bench.py: graph construction of N straight-through
sites: time, ops, and entries added to TensorFlow's gradient registry, for
each family and for the per-call naming idiom of public DANN code."""

import itertools
import time

import tensorflow as tf

import graph_override as go
from graph_override import overrides, stopgrad, tf2

from bench_common import median, rotations, timed


_dann_calls = itertools.count()


def dann_counter_ste_sign(x, clip_value=1.0):
    """ste_sign the way public DANN code builds its gradient reversal layer:
    a fresh tf.RegisterGradient name per call (``"FlipGradient%d" %
    num_calls``), so no call collides with an earlier one. Same forward ops
    as overrides.ste_sign."""
    grad_name = "bench.SignSTE%d" % next(_dann_calls)

    @tf.RegisterGradient(grad_name)
    def _sign_ste(op, grad):
        x = op.inputs[0]
        return [grad * tf.cast(tf.abs(x) <= clip_value, grad.dtype)]

    g = tf.compat.v1.get_default_graph()
    with g.gradient_override_map({"Sign": grad_name}):
        s = tf.sign(x)
    with g.gradient_override_map({"Sign": "Identity"}):
        return tf.sign(s + 0.1)


BUILD_VARIANTS = [
    ("tf.sign alone (no gradient change; the floor)", tf.sign),
    ("overrides.ste_sign (this toolkit)", overrides.ste_sign),
    ("stopgrad.ste_sign (this toolkit, no registry)", stopgrad.ste_sign),
    ("tf2.ste_sign: tf.custom_gradient in graph mode", tf2.ste_sign),
    ("DANN counter idiom: a RegisterGradient name per call", dann_counter_ste_sign),
]


def _build_once(fn, sites, with_gradients):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [16], name="x")
        entries = go.registry_size()
        ops = len(graph.get_operations())
        cpu = time.process_time()
        build, ys = timed(lambda: [fn(x) for _ in range(sites)])
        cpu = time.process_time() - cpu
        entries = go.registry_size() - entries
        ops = len(graph.get_operations()) - ops
        grad = None
        if with_gradients:
            grad, _ = timed(lambda: tf.gradients(tf.add_n(ys), x))
    return build, cpu, grad, entries, ops


def bench_construction(cfg, log):
    results = []
    for sites in cfg["sites"]:
        log("graph construction: %d sites" % sites)
        with_grad = sites <= cfg["build_grad_sites"]
        rec = {label: dict(build=[], cpu=[], grad=[], entries=[], ops=None)
               for label, _ in BUILD_VARIANTS}
        for _, fn in BUILD_VARIANTS:  # warm up: first calls import and cache
            _build_once(fn, 10, with_grad)
        for order in rotations(BUILD_VARIANTS, cfg["build_repeats"]):
            for label, fn in order:
                build, cpu, grad, entries, ops = _build_once(fn, sites, with_grad)
                r = rec[label]
                r["build"].append(build)
                r["cpu"].append(cpu)
                r["entries"].append(entries)
                r["ops"] = ops
                if grad is not None:
                    r["grad"].append(grad)
        floor = rec[BUILD_VARIANTS[0][0]]
        rows = []
        for label, _ in BUILD_VARIANTS:
            r = rec[label]
            rows.append(dict(
                variant=label, seconds=median(r["build"]),
                us_per_site=1e6 * median(r["build"]) / sites,
                cpu_us_per_site=1e6 * median(r["cpu"]) / sites,
                ratio=median(a / b for a, b in zip(r["build"], floor["build"])),
                cpu_ratio=median(a / b for a, b in zip(r["cpu"], floor["cpu"])),
                grad_seconds=median(r["grad"]) if r["grad"] else None,
                ops_per_site=r["ops"] / sites,
                entries_first=r["entries"][0], entries_total=sum(r["entries"])))
        results.append(dict(sites=sites, repeats=cfg["build_repeats"], rows=rows))
    return results


