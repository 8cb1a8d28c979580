"""Throughput of the source migration (`graph_override.migrate`).

Generates a tree of legacy TF1 files in a temporary folder (each with
registrations, override scopes in the common legacy idioms, and plain code as
filler), migrates it with `migrate_paths` (diff mode: nothing is written),
and reports lines per second. tools/bench.py imports `run`.

    python tools/bench_migrate.py --files 20 --lines 400
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

_HEADER = '''"""Generated legacy module %(i)d."""
import contextlib

import tensorflow.compat.v1 as tf
from tensorflow.python.framework import ops


@tf.RegisterGradient("Bench%(i)dSTE")
def _ste_%(i)d(op, grad):
    x = op.inputs[0]
    return grad * tf.cast(tf.abs(x) <= 1.0, grad.dtype)
'''

_BLOCKS = [
    '''

def binarize_%(i)d_%(j)d(x):
    g = tf.get_default_graph()
    with g.gradient_override_map({"Sign": "Bench%(i)dSTE"}):
        return tf.sign(x)
''',
    '''

def quantize_%(i)d_%(j)d(x, k=2):
    n = float(2 ** k - 1)
    with tf.get_default_graph().gradient_override_map({"Round": "Identity"}):
        return tf.round(x * n) / n
''',
    '''

class Flip%(i)d_%(j)d(object):
    def __init__(self):
        self.num_calls = 0

    def __call__(self, x, l=1.0):
        grad_name = "Bench%(i)dFlip%(j)d_%%d" %% self.num_calls

        @ops.RegisterGradient(grad_name)
        def _flip(op, grad):
            return [tf.negative(grad) * l]

        g = tf.get_default_graph()
        with g.gradient_override_map({"Identity": grad_name}):
            y = tf.identity(x)
        self.num_calls += 1
        return y
''',
    '''

def dynamic_%(i)d_%(j)d(x, mapping):
    # left for the user: the map is built at run time
    with tf.get_default_graph().gradient_override_map(mapping):
        return tf.sign(x)
''',
    '''

@contextlib.contextmanager
def guided_%(i)d_%(j)d():
    # left for the user: the scope yields, its callers create the ops
    with tf.get_default_graph().gradient_override_map({"Relu": "Bench%(i)dGuided"}):
        yield


def saliency_%(i)d_%(j)d(x):
    with guided_%(i)d_%(j)d():
        return tf.nn.relu(x)
''',
    '''

def dense_%(i)d_%(j)d(x, w, b):
    """Plain code, nothing to migrate."""
    h = tf.matmul(x, w) + b
    h = tf.nn.relu(h)
    return tf.reduce_mean(h, axis=-1)
''',
]


def _file_text(i, lines_per_file, plain=False):
    parts = [_HEADER % {"i": i}]
    count, j = parts[0].count("\n"), 0
    blocks = _BLOCKS[-1:] if plain else _BLOCKS
    while count < lines_per_file:
        block = blocks[j % len(blocks)] % {"i": i, "j": j}
        parts.append(block)
        count += block.count("\n")
        j += 1
    return "".join(parts)


def _tree(root, files, lines_per_file, plain):
    total = 0
    for i in range(files):
        folder = os.path.join(root, "pkg%d" % (i % 4), "sub%d" % (i % 2))
        os.makedirs(folder, exist_ok=True)
        text = _file_text(i, lines_per_file, plain)
        total += text.count("\n")
        with open(os.path.join(folder, "model_%d.py" % i), "w") as f:
            f.write(text)
    return total


def _timed(root):
    from graph_override import migrate  # pylint: disable=import-outside-toplevel
    start = time.perf_counter()
    results = migrate.migrate_paths([root], write=False)
    seconds = time.perf_counter() - start
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError("bench_migrate: %s" % errors[0])
    return results, seconds


def run(files=20, lines_per_file=400):
    """Generates `files` legacy files of about `lines_per_file` lines each in
    a temporary tree (two levels of folders), migrates them (diff mode), and
    returns the figures as a dict.

    Two trees are timed: one dense with override scopes (every block of code
    has one to convert or to report: the worst case), and one of the same size
    without any (typical files of a repository, which are only parsed).
    Keys: files, lines, seconds, lines_per_second, files_per_second,
    sites_changed, sites_left, registrations_kept, plain_seconds,
    plain_lines_per_second.
    """
    root = tempfile.mkdtemp(prefix="bench_migrate_")
    try:
        total_lines = _tree(os.path.join(root, "dense"), files, lines_per_file, False)
        plain_lines = _tree(os.path.join(root, "plain"), files, lines_per_file, True)
        results, seconds = _timed(os.path.join(root, "dense"))
        _, plain_seconds = _timed(os.path.join(root, "plain"))
        return {
            "files": len(results),
            "lines": total_lines,
            "seconds": seconds,
            "lines_per_second": total_lines / max(seconds, 1e-9),
            "files_per_second": len(results) / max(seconds, 1e-9),
            "sites_changed": sum(len(r.result.changed) for r in results),
            "sites_left": sum(len(r.result.untouched) for r in results),
            "registrations_kept": sum(len(r.result.kept) for r in results),
            "plain_seconds": plain_seconds,
            "plain_lines_per_second": plain_lines / max(plain_seconds, 1e-9),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--lines", type=int, default=400, help="lines per file")
    args = parser.parse_args(argv)
    r = run(args.files, args.lines)
    print("migrated %(files)d files, %(lines)d lines in %(seconds).2f s: "
          "%(lines_per_second).0f lines/s, %(files_per_second).1f files/s; "
          "%(sites_changed)d sites changed, %(sites_left)d left, "
          "%(registrations_kept)d registrations kept; without override "
          "maps: %(plain_lines_per_second).0f lines/s" % r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
