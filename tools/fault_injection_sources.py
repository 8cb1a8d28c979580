"""Hostile Python for `graph-override migrate` (tools/fault_injection.py).

Each case puts one hostile file beside a good legacy file in a folder and
runs `graph-override migrate FOLDER --write`: nesting 10,000 deep (which
crashed libcst's native parser), a FIFO named ``*.py`` (which blocked the
read), a symlink to /dev/zero (read without bound), a file over the size
limit. The run must exit 2 with a message naming the hostile file, leave it
as it was, and still migrate the good file. Valid code that is merely deep
(a 400-term sum, 200 nested lists) must be migrated, exit 0 or 1. And
`migrate.migrate_paths("tree", write=True)`, a single str, must take it as
one path, not as the paths "t", "r", "e", "e".
"""

import os

from fault_injection_common import CLI, MEMORY, run, snapshot

SCOPE = ('import tensorflow.compat.v1 as tf\n'
         'with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
         '    y = tf.sign(%s)\n')
HOSTILE = {
    "nested-brackets": SCOPE % "x" + "z = " + "[" * 10000 + "]" * 10000 + "\n",
    "nested-elif": SCOPE % "x" + "if a == 0:\n    pass\n" + "elif a:\n    pass\n" * 10000,
    "nested-not": SCOPE % "x" + "z = " + "not " * 10000 + "w\n",
    "huge-file": SCOPE % "x" + "x = 1\n" * 600000,     # 3.6 MB, over the 2 MiB limit
    "fifo": None,
    "dev-zero-symlink": None,
}
VALID = {
    "sum-400": SCOPE % " + ".join(["x"] * 400),
    "lists-200": SCOPE % "x" + "z = " + "[" * 200 + "]" * 200 + "\n",
}
KINDS = tuple(HOSTILE) + tuple(VALID)


def _tree(folder, shared, kind):
    """tree/legacy.py and tree/<kind>.py; returns (tree, the hostile name)."""
    source, _, _ = shared.legacy()
    tree = os.path.join(folder, "tree")
    os.mkdir(tree)
    with open(os.path.join(tree, "legacy.py"), "wb") as f:
        f.write(source)
    name = "%s.py" % kind
    path = os.path.join(tree, name)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero-symlink":
        os.symlink("/dev/zero", path)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(HOSTILE.get(kind) or VALID[kind])
    return tree, name


def migrate_hostile(check, folder, shared, kind):
    _, migrated, _ = shared.legacy()
    tree, name = _tree(folder, shared, kind)
    before = snapshot(folder)
    r = run(CLI + ["migrate", "tree", "--write", "-q"], folder, timeout=120,
            memory=MEMORY)
    valid = kind in VALID
    check.result(r, {0, 1} if valid else {2})
    if not valid and r.returncode == 2 and "tree/%s:" % name not in r.stderr:
        check.note("the message does not name tree/%s" % name)
    after = snapshot(folder)
    with open(os.path.join(tree, "legacy.py"), "rb") as f:
        if f.read() != migrated:
            check.loss("the good file beside it was not migrated")
    if valid:
        with open(os.path.join(tree, name), encoding="utf-8") as f:
            if "op_with_gradient(tf.sign" not in f.read():
                check.loss("valid deep code was not migrated")
    for changed in ("legacy.py",) + ((name,) if valid else ()):  # checked above
        before.pop(os.path.join("tree", changed))
        after.pop(os.path.join("tree", changed), None)
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after)


_ONE_PATH = """
import sys
from graph_override import migrate
results = migrate.migrate_paths(sys.argv[1], write=True)
for r in results:
    print(r.path, r.error, r.written)
sys.exit(0 if results and all(r.error is None for r in results) else 2)
"""


def migrate_paths_str(check, folder, shared):
    """migrate_paths("tree"): a relative name whose characters name nothing
    here, so even the old behaviour (one path per character) touches
    nothing outside this folder."""
    source, migrated, _ = shared.legacy()
    os.mkdir(os.path.join(folder, "tree"))
    with open(os.path.join(folder, "tree", "legacy.py"), "wb") as f:
        f.write(source)
    r = run([CLI[0], "-c", _ONE_PATH, "tree"], folder, timeout=120)
    check.result(r, {0})
    with open(os.path.join(folder, "tree", "legacy.py"), "rb") as f:
        if f.read() != migrated:
            check.loss("tree/legacy.py was not migrated")
    if r.stdout.split() != [os.path.join("tree", "legacy.py"), "None", "True"]:
        check.note("results: %s" % " ".join(r.stdout.split())[:160])
        check.wrong += 1
