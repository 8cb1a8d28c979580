"""graph-override freeze: a saved Keras model or SavedModel as a frozen GraphDef."""

import functools
import os
import sys

from graph_override.commands._usage import usage_error

HELP = "write a Keras model (.keras, .h5) or SavedModel folder as a frozen GraphDef (.pb)"
DESCRIPTION = (
    "Loads MODEL (a Keras .keras or .h5 file, or a SavedModel folder: Keras 2's\n"
    "model.save, Keras 3's model.export, tf.saved_model.save), freezes its\n"
    "variables into constants and writes the GraphDef to OUT (.pb, binary),\n"
    "atomically: OUT is the complete file or not there; an existing OUT is\n"
    "replaced only with --force. It prints the input and output tensor names, the\n"
    "--inputs and --outputs the other commands take for OUT.\n"
    "\n"
    "MODEL comes from elsewhere, and is loaded as `explain` loads it: a Keras file\n"
    "with Keras's safe mode (a Lambda layer's Python code is refused) and only the\n"
    "functions graph_override's allow-list names; a SavedModel folder only if its\n"
    "graph holds no op that reaches outside the model other than the restoring of\n"
    "its own variables, unless --allow-op names the op type. The frozen graph is\n"
    "checked again for such ops on the way to the output.\n"
    "\n"
    "Exit status: 0 written; 2 bad usage: MODEL not a Keras file or SavedModel folder,\n"
    "one that does not load, ops not allowed, OUT exists (without --force) or cannot\n"
    "be written.")
EPILOG = """examples:
  graph-override freeze model.keras -o model.pb
  graph-override freeze saved_model_dir -o model.pb --outputs logits
  graph-override explain model.pb --inputs input:0 --outputs Identity:0 --method saliency --data x.npy -o maps.npy"""


def configure(parser):
    parser.add_argument("model", metavar="MODEL",
                        help="a Keras model (.keras, .h5) or a SavedModel folder")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the frozen GraphDef file to write (.pb)")
    parser.add_argument("--outputs", metavar="KEY",
                        help="a SavedModel whose signature has several outputs: the one to "
                             "keep (its key)")
    from graph_override.commands._explain_options import add_allow_option  # pylint: disable=import-outside-toplevel
    add_allow_option(parser)
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")


_usage = functools.partial(usage_error, "freeze")


def check(args):
    """The usage errors found without TensorFlow, as a message, or None."""
    from graph_override._files.atomic import refuse_special  # pylint: disable=import-outside-toplevel
    from graph_override.errors import SpecialFileError  # pylint: disable=import-outside-toplevel
    if not os.path.exists(args.model):
        return "MODEL %s: not found" % args.model
    if os.path.isdir(args.model):
        if not os.path.isfile(os.path.join(args.model, "saved_model.pb")):
            return "MODEL %s: a folder without saved_model.pb, not a SavedModel" % args.model
    elif not args.model.lower().endswith((".keras", ".h5", ".hdf5")):
        return ("MODEL %s: expected a Keras model (.keras, .h5) or a SavedModel folder; a "
                "frozen GraphDef (.pb) is frozen already" % args.model)
    if args.outputs and not os.path.isdir(args.model):
        return "--outputs goes with a SavedModel folder (a Keras model has one output)"
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        return "-o %s: the folder %s does not exist; create it first" % (args.output, folder)
    if os.path.lexists(args.output):
        try:
            refuse_special(args.output)
        except SpecialFileError as e:
            return "-o %s" % e
        if not args.force:
            return "-o %s: exists already; pass --force to replace it" % args.output
        if os.path.realpath(args.output) == os.path.realpath(args.model):
            return "-o %s is MODEL; write the frozen graph elsewhere" % args.output
    return None


def _shape(graph_def, tensor):
    node = next((n for n in graph_def.node if n.name == tensor.split(":")[0]), None)
    if node is None or "shape" not in node.attr or node.attr["shape"].shape.unknown_rank:
        return ""
    return " shape (%s)" % ", ".join("None" if d.size < 0 else str(d.size)
                                     for d in node.attr["shape"].shape.dim)


def run(args):
    """Freezes MODEL and writes OUT (after `check`)."""
    from graph_override._files.atomic import atomic_write  # pylint: disable=import-outside-toplevel
    from graph_override.attribution import models, saved_models  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError, GraphDefError  # pylint: disable=import-outside-toplevel
    message = check(args)
    if message is not None:
        return _usage(message)
    try:
        graph = saved_models.model_graph(args.model, None, args.outputs, args.allow_ops)
        models.check_untrusted(graph, [graph.output], args.allow_ops)
    except (AttributionError, GraphDefError) as e:
        return _usage(str(e))
    data = graph.graph_def.SerializeToString(deterministic=True)
    try:
        atomic_write(args.output, data, keep_mode=False, exclusive=not args.force)
    except FileExistsError:
        return _usage("-o %s: appeared while the model was frozen (another process?); "
                      "nothing was written" % args.output)
    except OSError as e:
        return _usage("-o %s: cannot be written: %s" % (args.output, e.strerror or e))
    print("wrote %s: %d bytes, %d nodes" % (args.output, len(data), len(graph.graph_def.node)))
    print("input: %s%s" % (graph.input, _shape(graph.graph_def, graph.input)))
    print("output: %s" % graph.output)
    print("explain it with: graph-override explain %s --inputs %s --outputs %s ..." % (
        args.output, graph.input, graph.output), file=sys.stderr)
    return 0
