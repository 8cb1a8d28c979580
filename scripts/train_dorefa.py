#!/usr/bin/env python
"""Train DoReFa networks on scikit-learn's digits for several bit widths.

Activations go through dorefa_quantize (k bits: round(clip(x, 0, 1) n) / n,
n = 2^k - 1, gradient dy on [0, 1]); weights are binary (ste_sign times their
mean magnitude) or k-bit DoReFa weights. One run per --bits setting; prints a
table of test accuracies.

    python scripts/train_dorefa.py --bits 1:1 1:2 2:2 4:4

The last line printed is the accuracy of the last setting.
"""

import argparse
import sys

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow's native start-up lines stay off stderr

from graph_override.training import recipes, scripting  # noqa: E402  pylint: disable=wrong-import-position


def _bits(text):
    try:
        w, a = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            "%r: use WEIGHT_BITS:ACTIVATION_BITS, e.g. 1:2" % text) from None
    if w < 1 or a < 1:
        raise argparse.ArgumentTypeError("%r: bit widths must be >= 1" % text)
    return w, a


def _parser():
    parser = scripting.new_parser(
        __file__, __doc__.split("\n\n")[0],
        "example:\n  python scripts/train_dorefa.py --family stopgrad --bits 1:2 2:4")
    scripting.add_common_flags(parser, epochs=15)
    parser.add_argument("--bits", type=_bits, nargs="+",
                        default=[(1, 1), (1, 2), (2, 2), (4, 4)],
                        metavar="W:A", help="weight:activation bits (default "
                                            "1:1 1:2 2:2 4:4)")
    return parser


def _body(args, loop_args):
    print("DoReFa on digits: family %s, %d epochs, seed %d"
          % (args.family, args.epochs, args.seed), flush=True)
    rows = recipes.train_dorefa(args.family, bits=args.bits, epochs=args.epochs,
                                seed=args.seed, **loop_args)
    print("\nweight bits | activation bits | test accuracy")
    for r in rows:
        print("%11d | %15d | %.4f" % (r.weight_bits, r.activation_bits, r.test_accuracy))
    last = rows[-1]
    print("test accuracy (W%d:A%d): %.4f" % (last.weight_bits, last.activation_bits,
                                             last.test_accuracy))


def main(argv=None):
    return scripting.run_main(_parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
