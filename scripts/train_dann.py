#!/usr/bin/env python
"""Domain-adversarial training (DANN) with flip_gradient, in a Session.

Source domain: scikit-learn's digits (labelled). Target domain: other digits
under uneven lighting (a random brightness ramp on every image, labels unused
for training). A gradient reversal layer, flip_gradient from the family you
choose (forward x, gradient -dy), sits between the features and a domain
classifier, so the features learn to ignore the lighting. The same network
is also trained without it (source only), and both are measured on held-out
target images.

    python scripts/train_dann.py --family overrides --seed 0

The last line printed compares the two target accuracies.
"""

import sys

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow's native start-up lines stay off stderr

from graph_override.training import recipes, scripting  # noqa: E402  pylint: disable=wrong-import-position


def _parser():
    parser = scripting.new_parser(
        __file__, __doc__.split("\n\n")[0],
        "examples:\n  python scripts/train_dann.py --family stopgrad --seed 2\n"
        "  python scripts/train_dann.py --reversal-scale 0.5 --no-source-only")
    scripting.add_common_flags(parser, epochs=100, log_every=10)
    parser.add_argument("--reversal-scale", type=float, default=1.0,
                        help="flip_gradient scale, the paper's lambda (default 1.0)")
    parser.add_argument("--domain-weight", type=float, default=1.0,
                        help="weight of the domain loss (default 1.0)")
    parser.add_argument("--learning-rate", type=float, default=0.01,
                        help="initial momentum-SGD learning rate (default 0.01)")
    parser.add_argument("--no-source-only", action="store_true",
                        help="skip the source-only baseline")
    return parser


def _body(args, loop_args):
    print("DANN on digits -> digits under uneven lighting: family %s, %d epochs, "
          "seed %d" % (args.family, args.epochs, args.seed), flush=True)
    c = recipes.train_dann(args.family, epochs=args.epochs, seed=args.seed,
                           reversal_scale=args.reversal_scale,
                           domain_weight=args.domain_weight,
                           learning_rate=args.learning_rate,
                           source_only=not args.no_source_only, **loop_args)
    if c.source_only is not None:
        print("source-only: source test accuracy %.4f"
              % c.source_only_result.evaluations[-1][2]["source_test"])
    print("DANN: source test accuracy %.4f; gradient norm sent into the "
          "features through flip_gradient: %.6g" % (
              c.dann_result.evaluations[-1][2]["source_test"],
              c.dann_result.probes.get("reversed_grad_norm", float("nan"))))
    if c.source_only is None:
        print("target accuracy: DANN %.4f" % c.dann)
    else:
        print("target accuracy: source-only %.4f, DANN %.4f (%+.4f)"
              % (c.source_only, c.dann, c.dann - c.source_only))


def main(argv=None):
    return scripting.run_main(_parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
