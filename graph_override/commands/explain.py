"""graph-override explain: attribution maps of a frozen model, from .npy to .npy
(and a picture)."""

import argparse
import io
import os
import sys

HELP = "attribution maps (guided backprop, DeepLIFT, IG, ...) of a frozen GraphDef"
DESCRIPTION = (
    "Runs an attribution method of graph_override.attribution on the frozen\n"
    "GraphDef MODEL for the examples in --data (a .npy array, first dimension the\n"
    "examples, the input's dtype) and writes the maps, one per example, of the\n"
    "data's shape (Grad-CAM: the layer's), to OUT (.npy), atomically: OUT is the\n"
    "complete array or not there; an existing OUT is replaced only with --force,\n"
    "and MODEL, --data and --baseline never. --png draws each input beside its map\n"
    "(a row per example, the first 16; needs matplotlib).\n"
    "\n"
    "Methods: saliency, gradient_input, integrated_gradients (--baseline, --steps),\n"
    "smoothgrad, guided_backprop, deconvnet, eps_lrp, deeplift (--baseline),\n"
    "grad_cam. --target K explains class K of every example (K1,K2,... one per\n"
    "example); the default is each example's top class.\n"
    "\n"
    "Before running, the op types on the path from --inputs to --outputs that the\n"
    "method does not cover are listed as a warning (see `inspect --method`).\n"
    "--map OP=ACTION (the syntax of `graph-override patch`, e.g.\n"
    "Elu=mygrads:guided_elu for a gradient function of your own) sets the gradient\n"
    "of OP before the method's rules, so it wins where both select a node.\n"
    "\n"
    "Exit status: 0 written; 1 the model cannot be run or differentiated as asked;\n"
    "2 bad usage: an unknown method, unreadable MODEL or .npy, data or baseline of\n"
    "the wrong shape or dtype, a class out of range, a name not in the graph, OUT\n"
    "exists (without --force).")
EPILOG = """examples:
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method guided_backprop --data x.npy -o maps.npy --png maps.png
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method deeplift --data x.npy --baseline zeros --target 3 -o maps.npy
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method integrated_gradients --data x.npy --baseline blurred.npy --steps 100 -o ig.npy
  graph-override inspect model.pb --method deeplift --inputs x:0 --outputs logits:0   # coverage only"""


def _target(text):
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            "expected a class index K or K1,K2,... (one per example), got %r" % text) from None
    return values[0] if len(values) == 1 else values


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("expected a positive number of steps, got %r" % text)
    return int(text)


def configure(parser):
    parser.add_argument("model", metavar="MODEL", help="frozen GraphDef (.pb or .pbtxt)")
    parser.add_argument("--inputs", required=True, metavar="NAME:0",
                        help="the input tensor the data feeds")
    parser.add_argument("--outputs", required=True, metavar="NAME:0",
                        help="the output tensor to explain (logits, not probabilities)")
    parser.add_argument("--method", required=True, metavar="NAME", help="the method")
    parser.add_argument("--data", required=True, metavar="FILE.npy",
                        help="the examples, first dimension the examples")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the .npy file to write the maps to")
    parser.add_argument("--target", type=_target, metavar="K",
                        help="the class to explain (K1,K2,...: one per example); "
                             "default: each example's top class")
    parser.add_argument("--baseline", metavar="zeros|FILE.npy",
                        help="integrated_gradients and deeplift: the reference input, "
                             "one per example or one for all (default zeros)")
    parser.add_argument("--steps", type=_positive, metavar="N",
                        help="integrated_gradients: points of the path (default 50)")
    parser.add_argument("--png", metavar="PNG", help="also draw inputs and maps here")
    parser.add_argument("--map", dest="maps", action="append", default=[],
                        metavar="OP=ACTION", help="a gradient rule of your own, applied "
                                                  "before the method's; repeat for more")
    parser.add_argument("--force", action="store_true",
                        help="replace OUT and PNG if they exist")


def _usage(message):
    print("graph-override explain: error: %s" % message, file=sys.stderr)
    return 2


def _same(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _check_outputs(args):
    """None, or why OUT / PNG cannot be written (before any work)."""
    outs = [("-o", args.output)] + ([("--png", args.png)] if args.png else [])
    if args.png and _same(args.output, args.png):
        return "-o and --png name the same file %s" % args.output
    reads = [args.model, args.data] + (
        [args.baseline] if args.baseline not in (None, "zeros") else [])
    for flag, path in outs:
        for read in reads:
            if _same(path, read):
                return "%s %s is an input of this run; write the result elsewhere" % (
                    flag, path)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            return "%s %s: the folder %s does not exist; create it first" % (
                flag, path, folder)
        if os.path.lexists(path) and not args.force:
            return "%s %s: exists already; pass --force to replace it" % (flag, path)
    return None


def _array(path, what):
    """The array in the .npy file `path`; AttributionError for anything else."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    try:
        array = np.load(path, allow_pickle=False)
    except OSError as e:
        raise AttributionError("%s %s: cannot be read: %s" % (what, path, e.strerror or e)) \
            from None
    except ValueError as e:
        raise AttributionError("%s %s: not a .npy array file that loads without pickle "
                               "(%s); save it with numpy.save(path, array)" % (what, path, e)) \
            from None
    if not isinstance(array, np.ndarray):
        raise AttributionError("%s %s: holds several arrays (.npz); save the one to use "
                               "with numpy.save(path, array)" % (what, path))
    if array.dtype.kind != "f":
        raise AttributionError(
            "%s %s holds %s values; the model needs floats: convert them as the model "
            "expects (e.g. numpy.save(path, x.astype('float32') / 255))"
            % (what, path, array.dtype))
    if array.ndim == 0:
        raise AttributionError("%s %s holds a scalar; expected examples, first "
                               "dimension the examples" % (what, path))
    return array


def _options(args, spec):
    """The method's options from --baseline and --steps; AttributionError
    for one the method does not take."""
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    options = {}
    if args.baseline is not None:
        if not spec.baseline:
            raise AttributionError("--baseline: %s takes no baseline (integrated_gradients "
                                   "and deeplift do)" % spec.name)
        if args.baseline != "zeros":
            options["baseline"] = _array(args.baseline, "--baseline")
    if args.steps is not None:
        if spec.name != "integrated_gradients":
            raise AttributionError("--steps: only integrated_gradients takes steps, "
                                   "not %s" % spec.name)
        options["steps"] = args.steps
    return options


def _explainer(model, inputs, outputs, user_rules):
    """An `Explainer` whose every function applies `user_rules` (rule
    strings) before the method's."""
    from graph_override.attribution.engine import Explainer  # pylint: disable=import-outside-toplevel

    class _WithUserRules(Explainer):
        def function(self, x, method_rules=()):
            return super().function(x, tuple(user_rules) + tuple(method_rules))

    return _WithUserRules(model, inputs=inputs, outputs=outputs)


def _warn_coverage(args, graph, spec, user_ops):
    from graph_override.attribution import coverage  # pylint: disable=import-outside-toplevel
    report = coverage.coverage_report(graph.graph_def, spec.name, inputs=[graph.input],
                                      outputs=[graph.output], also_covered=user_ops,
                                      source=args.model)
    for u in report.uncovered:
        print("graph-override explain: warning: %s does not cover %s (%d node(s): %s): %s"
              % (spec.name, u["op"], u["count"], ", ".join(u["nodes"][:3]), u["reason"]),
              file=sys.stderr)


def _write(path, data, force):
    from graph_override._atomic import atomic_write  # pylint: disable=import-outside-toplevel
    atomic_write(path, data, keep_mode=False, exclusive=not force)


def _run(args):
    import numpy as np  # pylint: disable=import-outside-toplevel
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    from graph_override.attribution import rules  # pylint: disable=import-outside-toplevel
    from graph_override.commands import _picture  # pylint: disable=import-outside-toplevel
    spec = rules.method_spec(args.method)
    options = _options(args, spec)
    user_rules = [frozen.parse_rule(m) for m in args.maps]
    x = _array(args.data, "--data")
    explainer = _explainer(args.model, args.inputs, args.outputs, args.maps)
    graph = explainer.model_graph(x)
    _warn_coverage(args, graph, spec, {r.op_type for r in user_rules if r.op_type})
    result = explainer.attribute(spec.name, x, args.target, **options)
    buffer = io.BytesIO()
    np.save(buffer, result.maps, allow_pickle=False)
    picture = None
    if args.png:
        picture = _picture.draw(x, result.maps, method=spec.name, targets=result.targets,
                                title=os.path.basename(args.model))
    _write(args.output, buffer.getvalue(), args.force)
    if picture is not None:
        _write(args.png, picture, args.force)
    targets = ("" if result.targets is None else "; target(s) %s" % ", ".join(
        str(int(t)) for t in result.targets[:10]) + (" ..." if len(result.targets) > 10
                                                     else ""))
    delta = ("" if result.delta is None else "; completeness delta max |d| = %.3g"
             % float(np.max(np.abs(result.delta))))
    print("wrote %s: %s maps of %d example(s), shape %s %s%s%s%s" % (
        args.output, spec.name, len(result.maps), result.maps.shape, result.maps.dtype,
        targets, delta, "; picture %s" % args.png if args.png else ""))
    return 0


def run(args):
    from graph_override.errors import (AttributionError, ConversionError,  # pylint: disable=import-outside-toplevel
                                       RuleError, UnknownOpTypeError)
    message = _check_outputs(args)
    if message is None and args.png:
        from graph_override.commands import _picture  # pylint: disable=import-outside-toplevel
        message = _picture.matplotlib_missing()
    if message is not None:
        return _usage(message)
    try:
        return _run(args)
    except (AttributionError, RuleError, UnknownOpTypeError, FileExistsError) as e:
        return _usage(str(e))
    except ConversionError as e:
        if getattr(e, "usage", False):
            return _usage(str(e))
        raise
