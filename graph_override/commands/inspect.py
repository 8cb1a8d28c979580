"""graph-override inspect: why would gradients through a frozen graph fail?"""

import argparse
import functools
import hashlib
import json
import os

from graph_override.commands import explain
from graph_override.commands._usage import EXIT_FINDING, report_error, usage_error

HELP = "list op types, failing gradients, gradient names and risky ops of a GraphDef"
DESCRIPTION = (
    "Reads a frozen GraphDef (binary .pb or text .pbtxt) and reports:\n"
    "  - how many nodes of each op type it holds;\n"
    "  - the nodes on which tf.gradients would fail, and why: an op type with no\n"
    "    gradient (\"No gradient defined for operation\"), or a _gradient_op_type\n"
    "    name that does not resolve in this process (e.g. CustomGradient-5997,\n"
    "    left by tf.custom_gradient, which dies with the process that built it);\n"
    "  - every _gradient_op_type name, whether it resolves here, and whether it\n"
    "    needs graph_override to resolve;\n"
    "  - risky ops worth a look before running an untrusted graph (file reads\n"
    "    and writes, PyFunc/EagerPyFunc, debug dumps, remote calls);\n"
    "  - TF1 while loops (Enter/Exit/NextIteration), which TensorFlow cannot\n"
    "    differentiate after importing a GraphDef;\n"
    "  - nodes inside the function library (functional While/If bodies, Keras\n"
    "    and TF2 exports) as well, named FUNCTION/NODE.\n"
    "The first line gives the file's size, node count and sha256. A binary\n"
    "GraphDef cut off exactly between two nodes is still valid protobuf and\n"
    "loads with fewer nodes: compare the node count and sha256 with the\n"
    "original's (e.g. `sha256sum model.pb` where it was written).\n"
    "\n"
    "With --method NAME (an attribution method: guided_backprop, deconvnet,\n"
    "eps_lrp, deeplift, saliency, ...), it reports instead the op types on the path\n"
    "from --inputs to --outputs (default: every Placeholder; every node nothing\n"
    "reads), function bodies included, that the method does not cover: neither in\n"
    "its rules nor linear (a Softmax, an Elu under guided backprop, a custom op),\n"
    "with no gradient, or batch normalization in training mode; per op type the\n"
    "count and the first nodes. --map OP=ACTION (as in `graph-override explain`,\n"
    "e.g. Cumsum=mygrads:my_rule for a gradient function of your own) counts OP as\n"
    "covered. It also lists the nodes the outputs need (function bodies included)\n"
    "whose ops reach outside the model (file reads and writes, PyFunc, ...), which\n"
    "`explain` refuses to run unless allowed by name with --allow-op OP, and\n"
    "refuses a graph whose library functions call themselves (TensorFlow would\n"
    "crash). Exit status 0 all covered and nothing refused, 1 something is not.\n"
    "\n"
    "Exit status: 0 nothing found, 1 failing gradients, TF1 loops or risky ops,\n"
    "2 bad usage or a file that cannot be read as a GraphDef. A missing MODEL, a\n"
    "folder (a SavedModel) and options that need --method are reported before\n"
    "TensorFlow is imported, at once.")
EPILOG = """examples:
  graph-override inspect model.pb
  graph-override inspect model.pbtxt --json > report.json
  graph-override inspect model.pb --limit 100     # longer tables
  graph-override inspect model.pb --method deeplift --inputs x:0 --outputs logits:0
  graph-override inspect model.pb --method deeplift --map Softsign=mygrads:rescale

then repair what it found:
  graph-override patch model.pb -o fixed.pb --map Sign=ste_sign
  graph-override patch model.pb -o fixed.pb --map 'gradient:CustomGradient-*=remove'"""


def configure(parser):
    parser.add_argument("model", metavar="MODEL", help="GraphDef file (.pb or .pbtxt), or a "
                        "Keras model (.keras, .h5) or SavedModel folder, frozen first")
    parser.add_argument("--json", action="store_true",
                        help="print the full report as JSON instead of tables")
    parser.add_argument("--limit", type=_positive_int, default=30, metavar="N",
                        help="rows per table in the text report (default 30)")
    parser.add_argument("--method", metavar="NAME",
                        help="report the op types on the input-output path that the "
                             "attribution method NAME does not cover")
    parser.add_argument("--inputs", nargs="+", metavar="NAME:0",
                        help="with --method: the input tensors (default: the Placeholders)")
    parser.add_argument("--outputs", nargs="+", metavar="NAME:0",
                        help="with --method: the output tensors (default: the nodes "
                             "nothing reads)")
    explain.add_map_option(parser, "with --method: a gradient rule of your own, as in "
                                   "`explain --map`; its op type counts as covered; "
                                   "repeat for more")
    explain.add_allow_option(parser)


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            "expected a positive number of rows, got %r" % text)
    return value


def _file_digest(path):
    """(size in bytes, sha256 hex digest) of the file at `path`."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


_usage = functools.partial(usage_error, "inspect")


def _refused(graph_def, report, allow_ops):
    """The risky ops (`frozen.RISKY_OPS`) explain would refuse to run for
    the report's outputs: dicts node, op, reason."""
    from graph_override.frozen.inspection.risky import risky_nodes  # pylint: disable=import-outside-toplevel
    return risky_nodes(graph_def, [t.split(":")[0] for t in report.outputs], allow_ops)


def _refused_lines(refused):
    from graph_override.frozen.inspection.report import table  # pylint: disable=import-outside-toplevel
    if not refused:
        return []
    ops = sorted({r["op"] for r in refused})
    return (["%d node(s) that reach outside the model, which `explain` refuses to run "
             "(if you trust this graph: %s):" % (
                 len(refused), " ".join("--allow-op " + op for op in ops))]
            + table([("node", "op", "why")] + [(r["node"], r["op"], r["reason"])
                                               for r in refused]))


def _coverage(args, graph_def):
    from graph_override.attribution import coverage  # pylint: disable=import-outside-toplevel
    from graph_override.errors import (AttributionError, ConversionError,  # pylint: disable=import-outside-toplevel
                                       RuleError, UnknownOpTypeError)
    from graph_override.frozen.tf2.graph import check_calls  # pylint: disable=import-outside-toplevel
    try:
        check_calls(graph_def, args.model)  # what explain refuses first
    except ConversionError as e:
        report_error("inspect", e)
        return EXIT_FINDING
    try:
        _, user_ops = explain.parse_maps(args.maps)
        report = coverage.coverage_report(graph_def, args.method, inputs=args.inputs,
                                          outputs=args.outputs, also_covered=user_ops,
                                          source=args.model, advice="cli")
    except (AttributionError, ConversionError, RuleError, UnknownOpTypeError) as e:
        return _usage(str(e))
    refused = _refused(graph_def, report, args.allow_ops)
    if args.json:
        out = report.to_dict()
        out.update(refused_ops=refused, ok=report.ok and not refused)
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(["%s: %s" % (args.model, report.format())]
                        + _refused_lines(refused)))
    return 0 if report.ok and not refused else 1


def check(args):
    """The usage errors found without TensorFlow, as a message, or None:
    options that go with --method only, and a MODEL that is missing, a
    directory (a SavedModel) or not a regular file."""
    from graph_override.commands._rules import check_model  # pylint: disable=import-outside-toplevel
    if args.method is None and (args.inputs or args.outputs):
        return ("--inputs and --outputs go with --method NAME (the path whose "
                "coverage to report)")
    if args.method is None and (args.maps or args.allow_ops):
        return ("%s goes with --method NAME (%s)" % (
            ("--map", "a rule of your own, whose op type counts as covered") if args.maps
            else ("--allow-op", "an op explain may run on the path")))
    if _saved(args.model):
        return None
    return check_model(args.model)


def _saved(path):
    return path.lower().endswith((".keras", ".h5", ".hdf5")) or os.path.isfile(
        os.path.join(path, "saved_model.pb"))


def _load(args):
    """The GraphDef of MODEL: read, or a saved model frozen (its input and
    output then the defaults of --inputs and --outputs)."""
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    from graph_override.attribution import saved_models  # pylint: disable=import-outside-toplevel
    if not _saved(args.model):
        return frozen.load(args.model)
    graph = saved_models.model_graph(
        args.model, args.inputs if os.path.isdir(args.model) else None,
        args.outputs if os.path.isdir(args.model) else None, args.allow_ops)
    args.inputs, args.outputs = [graph.input], [graph.output]
    return graph.graph_def


def run(args):
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    message = check(args)
    if message is not None:
        return _usage(message)
    try:
        graph_def = _load(args)
    except AttributionError as e:
        return _usage(str(e))
    if args.method is not None:
        return _coverage(args, graph_def)
    size, sha256 = _file_digest(os.path.join(args.model, "saved_model.pb")
                                if os.path.isdir(args.model) else args.model)
    report = frozen.inspect(graph_def)
    if args.json:
        out = report.to_dict()
        out.update(file=args.model, bytes=size, sha256=sha256)
        print(json.dumps(out, indent=2))
    else:
        print("%s: %d bytes, sha256 %s" % (args.model, size, sha256))
        print("%s: %s" % (args.model, report.format(limit=args.limit)))
    return 0 if report.ok else 1
