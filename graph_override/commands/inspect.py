"""graph-override inspect: why would gradients through a frozen graph fail?"""

import argparse
import functools
import hashlib
import json

from graph_override.commands import explain
from graph_override.commands._usage import usage_error

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
    "covered. Exit status 0 all covered, 1 something is not.\n"
    "\n"
    "Exit status: 0 nothing found, 1 failing gradients, TF1 loops or risky ops,\n"
    "2 bad usage or a file that cannot be read as a GraphDef.")
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
    parser.add_argument("model", metavar="MODEL", help="GraphDef file (.pb or .pbtxt)")
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


def _coverage(args, graph_def):
    from graph_override.attribution import coverage  # pylint: disable=import-outside-toplevel
    from graph_override.errors import (AttributionError, ConversionError,  # pylint: disable=import-outside-toplevel
                                       RuleError, UnknownOpTypeError)
    try:
        _, user_ops = explain.parse_maps(args.maps)
        report = coverage.coverage_report(graph_def, args.method, inputs=args.inputs,
                                          outputs=args.outputs, also_covered=user_ops,
                                          source=args.model, advice="cli")
    except (AttributionError, ConversionError, RuleError, UnknownOpTypeError) as e:
        return _usage(str(e))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("%s: %s" % (args.model, report.format()))
    return 0 if report.ok else 1


def run(args):
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    if args.method is None and (args.inputs or args.outputs):
        return _usage("--inputs and --outputs go with --method NAME (the path whose "
                      "coverage to report)")
    if args.method is None and args.maps:
        return _usage("--map goes with --method NAME (a rule of your own, whose op type "
                      "counts as covered)")
    graph_def = frozen.load(args.model)
    if args.method is not None:
        return _coverage(args, graph_def)
    size, sha256 = _file_digest(args.model)
    report = frozen.inspect(graph_def)
    if args.json:
        out = report.to_dict()
        out.update(file=args.model, bytes=size, sha256=sha256)
        print(json.dumps(out, indent=2))
    else:
        print("%s: %d bytes, sha256 %s" % (args.model, size, sha256))
        print("%s: %s" % (args.model, report.format(limit=args.limit)))
    return 0 if report.ok else 1
