"""The options of `graph-override explain` (and `inspect --method`) that
choose and set a method: the argument types, ``--map`` and ``--allow-op``,
the methods' own flags (`METHOD_FLAGS`) and the check that each flag goes
with the method given. Nothing here imports TensorFlow."""

import argparse

__all__ = ["METHOD_FLAGS", "add_allow_option", "add_map_option", "add_method_options",
           "baseline_number", "check_options", "parse_maps", "target", "positive"]


def target(text):
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        values = [-1]
    if min(values) < 0:
        raise argparse.ArgumentTypeError(
            "expected a class index K >= 0 or K1,K2,... (one per example), got %r" % text)
    return values[0] if len(values) == 1 else values


def positive(text, what="steps"):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("expected a positive number of %s, got %r"
                                         % (what, text))
    return int(text)


def _samples(text):
    return positive(text, "samples")


def _seed(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError("expected an integer seed >= 0, got %r" % text)
    return int(text)


def _number(text, positive):
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 if positive else value >= 0) or value == float("inf"):
        raise argparse.ArgumentTypeError("expected a finite number %s 0, got %r" % (
            ">" if positive else ">=", text))
    return value


def _shape(text):
    """3 or 3,3 (a patch or a stride: an int, or one per leading axis)."""
    try:
        values = tuple(int(t) for t in text.split(","))
    except ValueError:
        values = (0,)
    if min(values) < 1:
        raise argparse.ArgumentTypeError(
            "expected a size N >= 1 or N1,N2,... (one per leading axis of an example), "
            "got %r" % text)
    return values[0] if len(values) == 1 else values


def _rows(text):
    return positive(text, "rows")


def _epsilon(text):
    return _number(text, positive=True)


def _spread(text):
    return _number(text, positive=False)


# The methods' options on the command line: (flag, the API's keyword (the
# attribute of args), the methods that take it). `check_options` refuses
# a flag given with another method; explain passes each one given to the method.
METHOD_FLAGS = (
    ("--no-abs", "abs", ("saliency",)),
    ("--rule", "rule", ("integrated_gradients",)),
    ("--seed", "seed", ("smoothgrad",)),
    ("--samples", "samples", ("smoothgrad",)),
    ("--stdev-spread", "stdev_spread", ("smoothgrad",)),
    ("--magnitude", "magnitude", ("smoothgrad",)),
    ("--epsilon", "epsilon", ("eps_lrp",)),
    ("--layer", "layer", ("grad_cam",)),
    ("--resize", "resize", ("grad_cam",)),
    ("--patch", "patch", ("occlusion",)),
    ("--stride", "stride", ("occlusion",)),
    ("--internal-batch-size", "internal_batch_size",
     ("integrated_gradients", "smoothgrad", "occlusion")),
)


def add_method_options(parser):
    from graph_override.attribution.method_table import RIEMANN_RULES  # pylint: disable=import-outside-toplevel
    parser.add_argument("--no-abs", dest="abs", action="store_const", const=False,
                        help="saliency: the signed gradient (the API's abs=False); "
                             "default its absolute value")
    parser.add_argument("--rule", choices=RIEMANN_RULES, metavar="RULE",
                        help="integrated_gradients: the Riemann rule, one of %s "
                             "(default riemann_trapezoid)" % ", ".join(RIEMANN_RULES))
    parser.add_argument("--seed", type=_seed, metavar="N",
                        help="smoothgrad: the noise's random seed (default: new noise "
                             "at every run)")
    parser.add_argument("--samples", type=_samples, metavar="N",
                        help="smoothgrad: noisy copies per example (default 50)")
    parser.add_argument("--stdev-spread", type=_spread, metavar="S",
                        help="smoothgrad: the noise's standard deviation as a fraction of "
                             "each example's value range (default 0.15)")
    parser.add_argument("--magnitude", action="store_const", const=True,
                        help="smoothgrad: average the squared gradient")
    parser.add_argument("--epsilon", type=_epsilon, metavar="EPS",
                        help="eps_lrp: the stabilizer epsilon > 0 (default 1e-4)")
    parser.add_argument("--layer", metavar="NAME:0",
                        help="grad_cam: the layer's tensor in MODEL (default: the last "
                             "4-D tensor before the output)")
    parser.add_argument("--resize", action="store_const", const=True,
                        help="grad_cam: resize the maps to the input's height and width")
    parser.add_argument("--patch", type=_shape, metavar="N[,N...]",
                        help="occlusion: the patch's size (N: on every axis of an example "
                             "but the last, which is whole; N1,N2: the leading axes)")
    parser.add_argument("--stride", type=_shape, metavar="N[,N...]",
                        help="occlusion: the step between patches, as --patch (default 1)")
    parser.add_argument("--internal-batch-size", type=_rows, metavar="ROWS",
                        help="integrated_gradients, smoothgrad, occlusion: rows per model "
                             "call (default: one step or sample per call; occlusion 256)")


def add_map_option(parser, help_text):
    """Adds ``--map OP=ACTION`` (repeatable, into ``args.maps``): a gradient
    rule of the user's own, in the syntax of `graph-override patch`
    (``Elu=mygrads:guided_elu``, ``Elu=ste_sign``). `explain` and
    ``inspect --method`` take it; `parse_maps` reads it."""
    parser.add_argument("--map", dest="maps", action="append", default=[],
                        metavar="OP=ACTION", help=help_text)


def add_allow_option(parser):
    """Adds ``--allow-op OP`` (repeatable, into ``args.allow_ops``): an op
    type that reaches outside the model (ReadFile, WriteFile, PyFunc, ...)
    which the user allows the graph to run. `explain` refuses such ops on
    the path otherwise; ``inspect --method`` reports them."""
    parser.add_argument("--allow-op", dest="allow_ops", action="append", default=[],
                        metavar="OP",
                        help="let the graph run ops of type OP although they read or "
                             "write files or reach elsewhere (ReadFile, WriteFile, "
                             "PrintV2, ...; see `inspect`); repeat for more")


def baseline_number(text):
    """The number --baseline gives (0.5, -1, 1e-3), or None for zeros or a
    file (a file named like a number: ./0.5)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value - value == 0 else None  # finite


def parse_maps(maps):
    """(rules, op types): the `Rule` s of ``--map`` values (a user's
    ``MODULE:FUNCTION`` imported and registered, as `frozen.parse_rule` does)
    and the op types they select, which count as covered.

    Raises:
      RuleError, UnknownOpTypeError: a rule that does not parse, a function
        that does not import, an op type TensorFlow does not know.
    """
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    rules = [frozen.parse_rule(m) for m in maps]
    return rules, {r.op_type for r in rules if r.op_type}


def check_options(args, spec):
    """None, or why --baseline, --steps or a method's flag does not go with
    the method (or occlusion has no --patch)."""
    if args.baseline is not None and not spec.baseline:
        return ("--baseline: %s takes no baseline (integrated_gradients, deeplift and "
                "occlusion do)" % spec.name)
    if args.steps is not None and spec.name != "integrated_gradients":
        return "--steps: only integrated_gradients takes steps, not %s" % spec.name
    if spec.name == "occlusion" and getattr(args, "patch", None) is None:
        return "--patch: occlusion needs the patch's size, e.g. --patch 3 (3x3 on an image)"
    for flag, key, methods in METHOD_FLAGS:
        if getattr(args, key, None) is not None and spec.name not in methods:
            return "%s: only %s takes it, not %s" % (flag, " and ".join(methods), spec.name)
    return None
