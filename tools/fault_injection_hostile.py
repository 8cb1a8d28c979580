"""Hostile-input faults of tools/fault_injection.py.

* Keras files that name a function to run at load: a function of an
  already-imported package of the user's (which would leave a file behind)
  or a TensorFlow function that changes the process (numpy behaviour on
  tf.Tensor). Loading must refuse with a message that says how to allow it
  (exit 2 here), and run nothing: a file left or a changed process is a
  loss.
* Node names built to collide in the C reader's hash table (against the
  hash of the process reading them): `inspect` must answer as the pure
  Python reader does, and not hang.
"""

import os
import sys

from fault_injection_common import run, snapshot

# Run in the case's folder: saves a legit model, rewrites its op function
# name to the hostile one, loads it with `victim` imported. Exit 2 on a
# refusal that says how to allow the function, 0 if the model loaded.
_KERAS = r'''
import json, os, sys, zipfile
import keras, tensorflow as tf
import victim  # an already-imported package of the user's
from graph_override.tf2 import op_with_gradient
name, fmt = sys.argv[1], sys.argv[2]
inputs = keras.Input((3,))
model = keras.Model(inputs, keras.layers.Dense(3, activation=op_with_gradient(tf.sign, "Identity"))(inputs))
model.save("legit." + fmt)
old, new = '"op_fn": "tf.sign"', '"op_fn": %s' % json.dumps(name)
if fmt == "keras":
    with zipfile.ZipFile("legit.keras") as src, zipfile.ZipFile("model.keras", "w") as out:
        for item in src.infolist():
            data = src.read(item)
            out.writestr(item, data.decode().replace(old, new).encode()
                         if item.filename == "config.json" else data)
else:
    import h5py
    with open("legit.h5", "rb") as f, open("model.h5", "wb") as g:
        g.write(f.read())
    with h5py.File("model.h5", "r+") as f:
        config = f.attrs["model_config"]
        config = config.decode() if isinstance(config, bytes) else config
        f.attrs["model_config"] = config.replace(old, new)
os.unlink("legit." + fmt)
numpy_before = hasattr(tf.Tensor, "ravel")
try:
    keras.models.load_model("model." + fmt)(tf.ones((1, 3)))
    status = 0
except Exception as e:  # Keras wraps the refusal in its own error
    chain = []
    while e is not None:
        chain.append(str(e))
        e = e.__cause__ or e.__context__
    message = " ".join(chain)
    print(message[-400:], file=sys.stderr)
    status = 2 if "If you trust this file" in message else 1
if hasattr(tf.Tensor, "ravel") != numpy_before:
    open("process-changed.txt", "w").close()
sys.exit(status)
'''

_VICTIM = '''import pathlib


def touch(x):
    """Leaves a file: a load that runs it shows."""
    pathlib.Path("victim-ran.txt").write_text("ran")
    return x
'''

KERAS_TARGETS = {"package-function": "victim:touch",
                 "process-state": "tf.experimental.numpy.experimental_enable_numpy_behavior"}


def keras_hostile(check, folder, shared, target, fmt):
    del shared
    with open(os.path.join(folder, "victim.py"), "w") as f:
        f.write(_VICTIM)
    with open(os.path.join(folder, "load.py"), "w") as f:
        f.write(_KERAS)
    before = snapshot(folder)
    # load.py's folder comes first on its path: `import victim` finds it.
    r = run([sys.executable, "load.py", KERAS_TARGETS[target], fmt], folder)
    check.result(r, {2})
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    for made in ("victim-ran.txt", "process-changed.txt"):
        if os.path.exists(os.path.join(folder, made)):
            check.loss("the file's function ran (%s)" % made)
    check.no_leftovers(before, after, allowed=("model." + fmt, "victim-ran.txt",
                                               "process-changed.txt"))


# Writes a GraphDef of `count` names that share one slot of the C reader's
# table in this process, then runs `inspect` on it in the same process (the
# same hash seed) with the C reader and with the Python one.
_COLLIDE = r'''
import contextlib, io, sys
from tensorflow.core.framework import graph_pb2
from graph_override import cli
from graph_override.frozen.graphdef import wire
count = int(sys.argv[1])
cap = 16
while cap < 2 * count:
    cap <<= 1
names, k = [], 0
while len(names) < count:
    name = b"n%d" % k
    if wire._scan._name_hash(name) & (cap - 1) == 0:
        names.append(name.decode())
    k += 1
graph = graph_pb2.GraphDef()
graph.node.add(name=names[0], op="Placeholder")
for name in names[1:]:
    graph.node.add(name=name, op="Sign", input=[names[0]])
with open("colliding.pb", "wb") as f:
    f.write(graph.SerializeToString())
answers = []
for scan in (wire._scan, None):
    wire._scan = scan
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(["inspect", "colliding.pb", "--json"])
    answers.append((status, out.getvalue()))
if answers[0] != answers[1]:
    print("the C and Python readers answer differently", file=sys.stderr)
    sys.exit(3)
sys.exit(answers[0][0])
'''


def colliding_names(check, folder, shared, count):
    del shared
    with open(os.path.join(folder, "collide.py"), "w") as f:
        f.write(_COLLIDE)
    before = snapshot(folder)
    r = run([sys.executable, "collide.py", str(count)], folder, timeout=300)
    check.result(r, {0, 1})
    check.no_leftovers(before, snapshot(folder), allowed=("colliding.pb",))
