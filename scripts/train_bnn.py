#!/usr/bin/env python
"""Train a binarized network (BinaryNet) on scikit-learn's digits in a Session.

Weights and activations are binarized with ste_sign: their forward is sign(x)
(+1 or -1) and their gradient the straight-through estimator dy * [|x| <= 1],
from the family you choose. TensorFlow's own Sign gradient is zero, so without
an override nothing would learn.

    python scripts/train_bnn.py --family overrides --epochs 20
    python scripts/train_bnn.py --checkpoint-dir /tmp/bnn   # Ctrl-C, rerun: resumes
    python scripts/local_cluster.py scripts/train_bnn.py --epochs 2

The last line printed is the final test accuracy.
"""

import sys

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow's native start-up lines stay off stderr

from graph_override.training import recipes, scripting  # noqa: E402  pylint: disable=wrong-import-position


def _parser():
    parser = scripting.new_parser(
        __file__, __doc__.split("\n\n")[0],
        "examples:\n  python scripts/train_bnn.py --family stopgrad --seed 1\n"
        "  python scripts/train_bnn.py --logdir /tmp/bnn_logs && "
        "tensorboard --logdir /tmp/bnn_logs")
    scripting.add_common_flags(parser, epochs=20)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256],
                        help="hidden layer widths (default 256 256)")
    parser.add_argument("--learning-rate", type=float, default=0.005,
                        help="initial Adam learning rate (default 0.005)")
    return parser


def _body(args, loop_args):
    print("BinaryNet on digits: family %s, %d epochs, seed %d"
          % (args.family, args.epochs, args.seed), flush=True)
    result = recipes.train_bnn(args.family, epochs=args.epochs, seed=args.seed,
                               hidden=tuple(args.hidden),
                               learning_rate=args.learning_rate, **loop_args)
    print("ran %d steps (global step %d -> %d) in %.1f s; gradient norm reaching "
          "the first layer's latent weights through ste_sign: %.6g" % (
              len(result.losses), result.start_step, result.global_step,
              result.seconds, result.probes.get("ste_grad_norm", float("nan"))))
    print("test accuracy: %.4f" % result.evaluations[-1][2]["test"])


def main(argv=None):
    return scripting.run_main(_parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
