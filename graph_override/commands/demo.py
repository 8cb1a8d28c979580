"""graph-override demo: train a binarized network on real digits in a
Session, and see the three families agree."""

import ast
import functools

from graph_override.commands._usage import usage_error

HELP = "train a binarized network in a Session and compare the three families"
DESCRIPTION = (
    "Part 1 is a short run of scripts/train_bnn.py: a binarized network "
    "(BinaryNet: weights and activations through ste_sign, batch "
    "normalization, Adam) trained on scikit-learn's bundled handwritten "
    "digits in a tf.compat.v1 Session, once with the override family "
    "(gradient_override_map) and once with the stop_gradient family, which "
    "must give the same losses. TensorFlow's own Sign gradient is zero: "
    "without an override nothing would learn.\n"
    "Part 2 runs every estimator of the three families (overrides in a "
    "Session, stopgrad and tf2 eagerly) on inputs with exact zeros and clip "
    "boundaries and prints the largest difference to the tf2 oracle.\n"
    "Exit status 0 when the network learns (test accuracy >= 0.90), the two "
    "families give the same losses and every estimator agrees; 1 otherwise.")
EPILOG = ("example:\n  graph-override demo --epochs 5 --seed 0\n"
          "the full run (about 97% test accuracy):\n"
          "  python scripts/train_bnn.py --epochs 20")

MIN_ACCURACY = 0.90


def configure(parser):
    parser.add_argument("--epochs", type=int, default=5,
                        help="training epochs of part 1 (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")


def _tf_sign_gradient_is_zero():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from graph_override import overrides  # pylint: disable=import-outside-toplevel
    with tf.Graph().as_default():
        w = tf.constant([-0.5, 0.0, 0.25, 2.0])
        plain, = tf.gradients(tf.sign(w), w)
        ste, = tf.gradients(overrides.ste_sign(w), w)
        with tf.compat.v1.Session() as sess:
            return sess.run([plain, ste])


def _part1(epochs, seed):
    """Returns True when the BNN learned and both families gave the same losses."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    try:
        from graph_override.training import recipes  # pylint: disable=import-outside-toplevel
        from graph_override.training.data import digits  # pylint: disable=import-outside-toplevel
        digits()
    except ImportError as e:
        print("  skipped: %s\n" % e)
        return None
    plain, ste = _tf_sign_gradient_is_zero()
    print("  d sign(w)/dw at w = [-0.5, 0, 0.25, 2]: TensorFlow's Sign gradient "
          "%s, ste_sign %s\n" % (plain.tolist(), ste.tolist()))
    runs = {}
    for family in ("overrides", "stopgrad"):
        print("  family %s:" % family)
        runs[family] = recipes.train_bnn(
            family, epochs=epochs, seed=seed,
            log=lambda m: print("    " + m))
    a, b = ([loss for _, loss in runs[f].losses] for f in ("overrides", "stopgrad"))
    diff = float(np.max(np.abs(np.subtract(a, b)))) if a else 0.0
    acc = runs["overrides"].evaluations[-1][2]["test"]
    same = len(a) == len(b) and diff <= 1e-5
    print("\n  %d steps in %.1f s per family; largest loss difference between "
          "the families: %.1e; test accuracy %.4f" % (
              len(a), runs["overrides"].seconds, diff, acc))
    return acc >= MIN_ACCURACY and same and abs(plain).max() == 0


def _families_table():
    import numpy as np  # pylint: disable=import-outside-toplevel
    from graph_override import estimators, overrides, stopgrad, testing, tf2  # pylint: disable=import-outside-toplevel
    # An even count: deeplift_rescale reads the batch as [inputs; references].
    x = np.array([-2.0, -1.0001, -1.0, -0.5, -0.05, -0.0, 0.0, 0.05, 0.0501,
                  0.5, 0.9999, 1.0, 1.0001, 1.5, 2.5, 6.0], np.float32)
    up = np.random.RandomState(1).randn(x.size).astype(np.float32)
    rows = []
    for name, spec in estimators.ESTIMATORS.items():
        # Each estimator with the parameters of its docstring example; one
        # whose op takes a shape of its own (MaxPool: 4-D) on that example's input.
        example = np.array(ast.literal_eval(spec.doc.x), np.float32)
        xs, ups = (x, up) if example.ndim <= 1 else (example, None)
        ref = testing.evaluate(functools.partial(getattr(tf2, name), **spec.doc.example), xs,
                               "eager", upstream=ups)
        row = [name]
        for fam, mode in ((overrides, "graph"), (stopgrad, "graph"),
                          (stopgrad, "eager")):
            r = testing.evaluate(functools.partial(getattr(fam, name), **spec.doc.example),
                                 xs, mode, upstream=ups)
            same_fwd = np.array_equal(r.outputs.view(np.uint32),
                                      ref.outputs.view(np.uint32))
            row.append((same_fwd, float(np.max(np.abs(r.gradients[0] - ref.gradients[0])))))
        rows.append(row)
    return rows


def _agrees(cell):
    same_fwd, diff = cell
    return same_fwd and diff <= 1e-5  # False for NaN too


def run(args):
    if args.epochs < 1:
        return usage_error("demo", "--epochs must be at least 1, got %d" % args.epochs)
    print("Part 1: BinaryNet on scikit-learn's digits, trained in a "
          "tf.compat.v1 Session (%d epochs; scripts/train_bnn.py is the full "
          "run)\n" % args.epochs)
    learned = _part1(args.epochs, args.seed)
    print("\nPart 2: every estimator, each family against the tf2 oracle "
          "(forward bits, max |gradient difference|)\n")
    header = ("estimator", "overrides/Session", "stopgrad/Session", "stopgrad/eager")
    print("  %-16s | %-17s | %-17s | %-17s" % header)
    failed = False
    for row in _families_table():
        cells = ["%s %.1e" % ("bitwise" if same else "DIFFERS", diff)
                 for same, diff in row[1:]]
        print("  %-16s | %-17s | %-17s | %-17s" % tuple([row[0]] + cells))
        failed |= not all(_agrees(c) for c in row[1:])
    ok = learned is not False and not failed
    if not ok:
        print("\nCHECK FAILED: see above.")
    elif learned is None:
        print("\nThe three families agree (part 1 skipped: install "
              "scikit-learn to train on the digits).")
    else:
        print("\nThe straight-through estimator trains where TF's zero Sign "
              "gradient cannot, and the three families agree.")
    return 0 if ok else 1
