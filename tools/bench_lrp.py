"""Section 8 of tools/bench.py: LRP composites against the plain gradient.

Keras MobileNetV2 and ResNet50 (weights=None, batch normalization
calibrated as in section 7, logits out), frozen once; for each model and
batch size, in a fresh process, one after another in a rotating order:

- the plain gradient (the unpatched `FrozenFunction` under a GradientTape,
  the target logits summed: ratio 1);
- `attribution.lrp` with each composite of `COMPOSITES` through one
  `attribution.Explainer` (canonized and prepared once; `first call`
  includes that and the check that the folded graph computes the model's
  outputs): ``epsilon`` (the epsilon rule in every layer: one transposed
  product per layer, as the gradient), ``epsilon_plus_flat`` (Zennit's
  recommended composite: z+ in the convolutions, which needs a forward
  product with W+ per layer besides the backward one);
- the floor of any layer rule (`bench_floors.LAYER_FLOOR`): the plain
  gradient with every layer op's input gradient multiplied by its input, so
  that each layer's input is kept into the backward pass.

Run on its own: ``python tools/bench_lrp.py MODEL SIZE BATCH REPEATS``
prints one JSON line.
"""

import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPOSITES = ("epsilon", "epsilon_plus_flat")
GOAL = 1.5
"""An LRP composite costs at most this many times the plain gradient."""


def child(model_name, size, batch, repeats):
    """The measurements of one model and batch size."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    import bench_floors  # pylint: disable=import-outside-toplevel
    from bench_attribution import (  # pylint: disable=import-outside-toplevel
        enough_repeats, freeze, keras_application)
    from bench_common import median, rotations, timed  # pylint: disable=import-outside-toplevel
    from graph_override import attribution  # pylint: disable=import-outside-toplevel
    from graph_override.frozen.tf2.function import (  # pylint: disable=import-outside-toplevel
        FrozenFunction)

    extra = {"alpha": 0.35} if model_name == "MobileNetV2" and size < 96 else {}
    graph_def, input_name, output_name = freeze(
        keras_application(model_name, size, **extra), size)
    x = np.random.RandomState(1).uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
    plain = FrozenFunction(graph_def, [input_name], [output_name])
    target = plain(tf.constant(x)).numpy().argmax(axis=1)
    onehot = tf.one_hot(target, 1000)

    def gradient(function=plain):
        t = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(t)
            scalars = tf.reduce_sum(function(t) * onehot, axis=1)
        return tape.gradient(scalars, t).numpy()

    explainer = attribution.Explainer(graph_def, inputs=input_name, outputs=output_name)
    variants, first_call, sums = {"plain gradient": gradient}, {}, {}
    for composite in COMPOSITES:
        def run(composite=composite):
            return explainer.attribute("lrp", x, target, composite=composite)
        start = time.perf_counter()
        result = run()
        first_call[composite] = time.perf_counter() - start
        picked = result.outputs[np.arange(batch), target]
        sums[composite] = float(np.max(np.abs(result.maps.sum(axis=(1, 2, 3)) - picked)
                                       / np.maximum(np.abs(picked), 1e-30)))
        variants["lrp " + composite] = lambda run=run: run().maps
    for label, rules in bench_floors.LAYER_FLOOR.items():
        floor = FrozenFunction(graph_def, [input_name], [output_name], rules=rules,
                               on_no_match="ignore")
        variants[label] = lambda floor=floor: gradient(floor)
    for fn in variants.values():
        fn()  # warm-up
    repeats = enough_repeats(repeats, timed(gradient)[0])
    times = {label: [] for label in variants}
    for order in rotations(list(variants), repeats):
        for label in order:
            start = time.perf_counter()
            variants[label]()
            times[label].append(time.perf_counter() - start)
    base = times["plain gradient"]
    return dict(model=model_name, size=size, batch=batch, repeats=repeats,
                tensorflow=tf.__version__, first_call_s=first_call,
                relative_sum_gap=sums,
                seconds={k: median(t) for k, t in times.items()},
                ratio={k: median(a / b for a, b in zip(t, base)) for k, t in times.items()})


def bench_section(cfg, log):
    """One row per model and batch size, each measured in a process of its own."""
    c = cfg["lrp"]
    rows = []
    for model_name in c["models"]:
        for batch in c["batches"]:
            log("lrp: %s %dx%d, batch %d (own process)" % (model_name, c["size"], c["size"],
                                                          batch))
            args = [model_name, c["size"], batch, c["repeats"]]
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join(
                [str(ROOT), str(ROOT / "tools")] + [p for p in os.environ.get(
                    "PYTHONPATH", "").split(os.pathsep) if p]))
            proc = subprocess.run([sys.executable, __file__] + [str(a) for a in args],
                                  capture_output=True, text=True, env=env, cwd=str(ROOT),
                                  check=False)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                log("bench_lrp failed: %s" % tail)
                rows.append({"error": "tools/bench_lrp.py %s failed: %s" % (
                    " ".join(str(a) for a in args), tail)})
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return rows


def render(rows):
    """The section's Markdown: one table per model and batch."""
    if not rows:
        return None
    good = [r for r in rows if "error" not in r]
    out = []
    if good:
        out.append(
            "`tools/bench_lrp.py`: `attribution.lrp` on Keras applications (weights=None, "
            "%dx%dx3, batch normalization calibrated, logits out), frozen; one fresh process "
            "per model and batch; median seconds per batch (repetitions in a rotating order "
            "after a warm-up call); ratio to the plain gradient, the median of the ratios "
            "within each repetition. Each example is explained for its own top class. "
            "`sum gap`: how far each example's maps sum from its logit (relative; the "
            "epsilon rule absorbs some relevance, the biases take some). Goal: an LRP "
            "composite at most %.1fx the plain gradient." % (good[0]["size"], good[0]["size"],
                                                            GOAL))
    for r in good:
        out.append("")
        out.append("### %s, batch %d (TensorFlow %s, %d repetitions)" % (
            r["model"], r["batch"], r["tensorflow"], r["repeats"]))
        out.append("")
        out.append("| variant | seconds | ratio | first call s | sum gap | goal |")
        out.append("|---|---|---|---|---|---|")
        for label, seconds in r["seconds"].items():
            composite = label[4:] if label.startswith("lrp ") else None
            ratio = r["ratio"][label]
            goal = ("<= %.1f: %s" % (GOAL, "met" if ratio <= GOAL else "**not met**")
                    if composite else "—")
            out.append("| %s | %.3f | **%.2f** | %s | %s | %s |" % (
                label, seconds, ratio,
                "%.2f" % r["first_call_s"][composite] if composite else "—",
                "%.1e" % r["relative_sum_gap"][composite] if composite else "—", goal))
    for r in rows:
        if "error" in r:
            out.append("")
            out.append("- %s" % r["error"])
    return "\n".join(out)


if __name__ == "__main__":
    name, size, batch, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(
        sys.argv[4])
    print(json.dumps(child(name, size, batch, repeats)))
