"""Runs SavedModels written by FrozenFunction.save with plain TensorFlow.

    python tests/frozen_plain_check.py SPEC.json OUT.npz

Run in a fresh process by tests/frozen/test_savedmodel.py: it never imports
graph_override (and records that it did not). For each case of SPEC it
loads the SavedModel, calls its serving signature under a GradientTape and
stores the outputs and the gradients of sum(outputs * cotangents) into the
inputs and into the SavedModel's weights; and it runs the ORIGINAL GraphDef
in a Session (forward only) for comparison.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def _check(case, arrays, out):
    name = case["name"]
    feeds = [arrays["%s/feed_%d" % (name, i)] for i in range(len(case["inputs"]))]
    cots = [arrays["%s/cot_%d" % (name, i)] for i in range(len(case["output_keys"]))]
    loaded = tf.saved_model.load(case["dir"])
    signature = loaded.signatures["serving_default"]
    xs = [tf.constant(f) for f in feeds]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        result = signature(**dict(zip(case["input_keys"], xs)))
        ys = [result[k] for k in case["output_keys"]]
        loss = tf.add_n([tf.reduce_sum(y * c) for y, c in zip(ys, cots)])
    grads = tape.gradient(loss, xs + list(loaded.weights))
    served = loaded.serve(*xs)
    for i, y in enumerate(ys):
        out["%s/out_%d" % (name, i)] = y.numpy()
        out["%s/serve_%d" % (name, i)] = served[case["output_keys"][i]].numpy()
    for i, g in enumerate(grads):
        if g is not None:
            out["%s/grad_%d" % (name, i)] = g.numpy()
    with open(case["pb"], "rb") as f:
        graph_def = tf.compat.v1.GraphDef.FromString(f.read())
    with tf.Graph().as_default():
        tensors = tf.compat.v1.import_graph_def(
            graph_def, return_elements=case["inputs"] + case["outputs"], name="")
        n = len(case["inputs"])
        with tf.compat.v1.Session() as sess:
            values = sess.run(tensors[n:], dict(zip(tensors[:n], feeds)))
    for i, v in enumerate(values):
        out["%s/session_%d" % (name, i)] = v


def main(spec_path, out_path):
    with open(spec_path) as f:
        spec = json.load(f)
    arrays = np.load(spec["arrays"])
    out = {}
    for case in spec["cases"]:
        _check(case, arrays, out)
    out["graph_override_imported"] = np.array("graph_override" in sys.modules)
    np.savez(out_path, **out)
    print("checked %d SavedModel(s); graph_override imported: %s"
          % (len(spec["cases"]), "graph_override" in sys.modules))


if __name__ == "__main__":
    main(*sys.argv[1:])
