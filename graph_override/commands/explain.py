"""graph-override explain: attribution maps of a frozen model, from .npy to .npy
(and a picture)."""

import functools
import io
import os
import sys

from graph_override.commands._explain_options import (add_allow_option,  # noqa: F401  (parse_maps: explain's reader, used by inspect)
                                                       add_map_option, add_method_options,
                                                       check_options, method_flags,
                                                       parse_maps, target)
from graph_override.attribution import method_table as _method_table
from graph_override.commands import _explain_checks, _explain_picture, _explain_stream
from graph_override.commands._explain_data import (baseline_number, read_array, read_arrays,
                                                   read_baseline, several_names)
from graph_override.commands._usage import EXIT_FINDING, report_error, usage_error

HELP = "attribution maps (guided backprop, DeepLIFT, IG, ...) of a frozen or saved model"
DESCRIPTION = (
    "Runs an attribution method of graph_override.attribution on MODEL (a frozen\n"
    "GraphDef .pb/.pbtxt with --inputs and --outputs; a Keras .keras or .h5 file or\n"
    "a SavedModel folder, frozen inside, its input and output read from it) for\n"
    "the examples in --data (a .npy array, first dimension the examples, read a\n"
    "batch at a time; a folder of PNG/JPEG images; a TFRecord file with --feature)\n"
    "in batches of --batch-size, with a progress bar on a terminal, and writes the\n"
    "maps, one per example, of the data's shape (Grad-CAM: the layer's), to OUT\n"
    "(.npy), or with --shard-size to the folder OUT in shards with a manifest,\n"
    "resumable with --resume after a crash. A .npy OUT is written atomically: OUT is the\n"
    "complete array or not there; an existing OUT is replaced only with --force,\n"
    "and MODEL, --data and --baseline never. --png draws each input beside its map\n"
    "(a row per example, the first 16, said when there are more; needs matplotlib;\n"
    "several inputs: each input beside its map, one colour scale per example\n"
    "shared by its inputs; examples of more than 3 dimensions are refused before\n"
    "the model runs). The picture is drawn before anything is written, and OUT\n"
    "and PNG are written both or neither: if one fails, the other is as it was\n"
    "before the run; if the run is killed while renaming them into place, the\n"
    "next run with the same OUT finishes the pair first (saying so).\n"
    "\n"
    "Methods and their options (an option of another method is a usage error):\n"
    + "".join(("  %-21s %s" % (spec.name, ", ".join(
        (["--baseline"] if spec.baseline else []) + [f.name for f in spec.flags]))).rstrip()
        + "\n" for spec in _method_table.METHODS.values()) +
    "SmoothGrad draws new noise at every run unless --seed is given: two runs\n"
    "with the same --seed write the same maps. --target K explains class K of\n"
    "every example (K1,K2,... one per example); the default is each example's\n"
    "top class.\n"
    "\n"
    "Before running, the op types on the path from --inputs to --outputs that the\n"
    "method does not cover are listed as a warning (see `inspect --method`);\n"
    "after it, maps that vanish (every map exactly 0, or at most 1e-12 x max(1,\n"
    "largest |output|), e.g. a model whose batch normalization statistics were\n"
    "never calibrated) are a warning too, as in the Python API.\n"
    "\n"
    "--map OP=ACTION (the syntax of `graph-override patch`, e.g.\n"
    "Elu=mygrads:guided_elu for a gradient function of your own) sets the gradient\n"
    "of OP before the method's rules, so it wins where both select a node.\n"
    "\n"
    "MODEL comes from elsewhere: before anything of it is imported or run, a graph\n"
    "that would run ops reaching outside the model (file reads and writes, PyFunc,\n"
    "PrintV2, ...: the risky ops of `inspect`) on the way to --outputs, function\n"
    "bodies included, is refused unless --allow-op OP names each op type.\n"
    "\n"
    "Exit status: 0 written; 1 the model cannot be run or differentiated as asked\n"
    "(a library function that calls itself, out of memory, an error TensorFlow\n"
    "raises running it, a --map function of your own that raises); 2 bad usage:\n"
    "an unknown method, unreadable MODEL or .npy (a damaged Const, a .npy whose\n"
    "header claims more than the file holds), ops that reach outside the model\n"
    "not allowed with --allow-op, data or baseline of the wrong shape or dtype, a\n"
    "class out of range, a name not in the graph, OUT exists (without --force),\n"
    "OUT or PNG cannot be written or the picture drawn. Nothing is written on an\n"
    "error, and each is one line. Usage errors that need no model are reported\n"
    "before TensorFlow is imported, at once.")
EPILOG = """examples:
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method guided_backprop --data x.npy -o maps.npy --png maps.png
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method deeplift --data x.npy --baseline zeros --target 3 -o maps.npy
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method integrated_gradients --data x.npy --baseline blurred.npy --steps 100 --rule riemann_middle -o ig.npy
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method smoothgrad --data x.npy --seed 0 --samples 25 -o sg.npy
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method grad_cam --data x.npy --layer conv2/Relu:0 --resize -o cam.npy
  graph-override explain model.pb --inputs x:0 --outputs logits:0 --method occlusion --data x.npy --patch 3 --stride 2 --baseline 0.5 -o occ.npy
  graph-override explain model.keras --method saliency --data images/ --batch-size 32 --shard-size 1024 -o maps/
  graph-override explain model.keras --method saliency --data images/ --batch-size 32 --shard-size 1024 -o maps/ --resume
  graph-override inspect model.pb --method deeplift --inputs x:0 --outputs logits:0   # coverage only"""


def configure(parser):
    parser.add_argument("model", metavar="MODEL", help="frozen GraphDef (.pb or .pbtxt), "
                        "Keras model (.keras, .h5) or SavedModel folder")
    parser.add_argument("--inputs", metavar="NAME:0",
                        help="the input tensor the data feeds (a GraphDef needs it); a model "
                             "of several inputs: NAME:0,NAME:0,... (--data then gives an "
                             "array per input, and OUT is a .npz of a map per input, or a "
                             "folder of shards)")
    parser.add_argument("--outputs", metavar="NAME:0",
                        help="the output tensor to explain (logits, not probabilities; a "
                             "GraphDef needs it; a SavedModel's signature output key)")
    parser.add_argument("--method", required=True, metavar="NAME", help="the method")
    parser.add_argument("--data", required=True, metavar="FILE.npy|DIR|FILE.tfrecord",
                        help="the examples: a .npy array (first dimension the examples), "
                             "a folder of images or a TFRecord file; several inputs: "
                             "FILE.npy,FILE.npy (in the order of --inputs, each read a "
                             "batch at a time) or FILE.npz (read whole)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the .npy file to write the maps to, or the folder of shards "
                             "(--shard-size); several inputs: a .npz, a map per input, or "
                             "the folder (each shard's maps/NAME per input)")
    parser.add_argument("--target", type=target, metavar="K",
                        help="the class to explain (K1,K2,...: one per example); "
                             "default: each example's top class")
    parser.add_argument("--baseline", metavar="zeros|NUMBER|FILE.npy", help=(
        "the reference input of the methods with one (occlusion: what a patch becomes): "
        "a number, or an array, one per example or one for all (default zeros)"))
    add_method_options(parser)
    parser.add_argument("--mode", choices=("exact", "fast"), default="exact",
                        help="exact (default): forward and backward as two eager calls; "
                             "fast: both in one compiled function, faster, the maps moved "
                             "by float rounding (see the attribution guide)")
    parser.add_argument("--png", metavar="PNG", help=(
        "also draw inputs and maps here, a row per example (several inputs: each input "
        "beside its map, on one colour scale per example)"))
    add_map_option(parser, "a gradient rule of your own, applied before the method's; "
                           "repeat for more")
    add_allow_option(parser)
    _explain_stream.add_options(parser)
    parser.add_argument("--force", action="store_true",
                        help="replace OUT and PNG if they exist")


_usage = functools.partial(usage_error, "explain")


def _same(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _check_outputs(args):
    """None, or why OUT / PNG cannot be written (before any work). First
    finishes what a killed run left (`_files.atomic_group.recover`): its OUT and
    PNG both new, not one of each."""
    from graph_override._files.atomic import refuse_special  # pylint: disable=import-outside-toplevel
    from graph_override._files.atomic_group import recover  # pylint: disable=import-outside-toplevel
    from graph_override.errors import SpecialFileError  # pylint: disable=import-outside-toplevel
    outs = ([] if _explain_stream.folder_mode(args) else [("-o", args.output)]) + (
        [("--png", args.png)] if args.png else [])
    if all(os.path.isdir(os.path.dirname(os.path.abspath(p))) for _, p in outs):
        for note in recover([p for _, p in outs]):
            print("graph-override explain: %s" % note, file=sys.stderr)
    if outs and args.png and _same(args.output, args.png):
        return "-o and --png name the same file %s" % args.output
    reads = [args.model] + args.data.split(",") + (
        args.baseline.split(",") if args.baseline not in (None, "zeros")
        and baseline_number(args.baseline) is None else [])
    for flag, path in outs:
        for read in reads:
            if _same(path, read):
                return "%s %s is an input of this run; write the result elsewhere" % (
                    flag, path)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            return "%s %s: the folder %s does not exist; create it first" % (
                flag, path, folder)
        if os.path.lexists(path):
            try:
                refuse_special(path)
            except SpecialFileError as e:
                return "%s %s" % (flag, e)
            if not args.force:
                return "%s %s: exists already; pass --force to replace it" % (flag, path)
    return None


def check(args):
    """The usage errors found without TensorFlow, as a message, or None.

    Checked in this order, the cheap first: --method, whether --baseline and
    --steps go with it, that MODEL is a file, -o and --png (see
    `_check_outputs`), matplotlib for --png; then --data and --baseline are
    read (`_array`) and kept in ``args.data_array`` and
    ``args.baseline_array`` (None for zeros) for `run`.
    """
    from graph_override.attribution import method_table  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    try:
        spec = method_table.method_spec(args.method)
    except AttributionError as e:
        return "--method: %s" % e
    message = (check_options(args, spec) or _explain_checks.check_model(args.model)
               or _explain_checks.check_names(args) or _explain_stream.check(args) or _check_outputs(args))
    if message is None and args.png:
        from graph_override.commands import _picture  # pylint: disable=import-outside-toplevel
        message = _picture.matplotlib_missing()
    if message is not None:
        return message
    names = several_names(args.inputs)
    if names is not None:
        return _check_several(args, names, spec)
    try:
        args.data_array = (read_array(args.data, "--data")
                           if _explain_stream.data_kind(args.data) == "npy" else None)
        if args.data_array is not None and args.data_array.shape[0] == 0:
            return "--data %s holds no examples (its first dimension is 0)" % args.data
        args.baseline_array = read_baseline(args.baseline, read_array)
    except AttributionError as e:
        return str(e)
    return _explain_picture.check(args, spec.name, None, [args.data_array])


def _check_several(args, names, spec):
    """`check` for a model of several inputs: OUT a .npz, an array per input
    in --data (and --baseline), --png of maps per input that it can draw."""
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    if not args.output.endswith(".npz") and not _explain_stream.folder_mode(args):
        return ("-o %s: a model of several inputs (%s) gets a map per input: give a .npz "
                "file, one array per input name, or a folder of shards (--shard-size)" % (
                    args.output, ", ".join(names)))
    try:
        args.data_array = read_arrays(args.data, names, "--data")
        args.baseline_array = read_baseline(
            args.baseline, lambda text, what: read_arrays(text, names, what))
    except AttributionError as e:
        return str(e)
    values = (args.data_array.values() if isinstance(args.data_array, dict)
              else args.data_array)
    if any(v.shape[0] == 0 for v in values):
        return "--data %s holds no examples (a first dimension is 0)" % args.data
    from graph_override.commands._picture_several import in_order  # pylint: disable=import-outside-toplevel
    return _explain_picture.check(args, spec.name, names, in_order(args.data_array, names))


def _warn_coverage(args, graph, spec, user_ops):
    from graph_override.attribution import coverage  # pylint: disable=import-outside-toplevel
    report = coverage.coverage_report(graph.graph_def, spec.name, inputs=list(graph.names),
                                      outputs=[graph.output], also_covered=user_ops,
                                      source=args.model, advice="cli")
    for u in report.uncovered:
        print("graph-override explain: warning: %s does not cover %s (%d node(s): %s): %s"
              % (spec.name, u["op"], u["count"], ", ".join(u["nodes"][:3]), u["reason"]),
              file=sys.stderr)


def _attribute_warning(explainer, spec, args, options):
    """The method's result (or `run_folder`'s exit status); the API's warnings
    about it printed as this command's (the coverage warning, printed before
    the run, once)."""
    import warnings  # pylint: disable=import-outside-toplevel
    from graph_override.attribution import checks  # pylint: disable=import-outside-toplevel
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", checks.AttributionWarning)
        if _explain_stream.folder_mode(args):
            result = _explain_stream.run_folder(args, explainer, spec, options, lambda x, r: (
                _explain_picture.picture_bytes(args, x, r, spec.name)))
        else:
            result = explainer.attribute(
                spec.name, _explain_stream.open_source(args, explainer), args.target,
                batch_size=args.batch_size, progress=_explain_stream.progress(args), **options)
    for w in caught:
        if issubclass(w.category, checks.VanishingMapsWarning):
            print("graph-override explain: warning: %s" % w.message, file=sys.stderr)
        elif not issubclass(w.category, checks.CoverageWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return result


def _write(args, maps, picture):
    """Writes the maps and the picture, both or neither (`_files.atomic_group`);
    None, or why they could not be written."""
    from graph_override._files.atomic_group import write_all  # pylint: disable=import-outside-toplevel
    files = [("-o", args.output, maps)] + ([("--png", args.png, picture)] if args.png else [])
    try:
        notes = write_all([(path, data) for _, path, data in files], replace=args.force,
                          keep_mode=False)
    except OSError as e:
        if e.__cause__ is not None:  # a file written first could not be put back
            return str(e)
        flag, path = next(((f, p) for f, p, _ in files if e.filename is not None
                           and _same(p, e.filename)), files[-1][:2])
        reason = ("appeared while the maps were computed (another process?)"
                  if isinstance(e, FileExistsError) else
                  "cannot be written: %s" % (os.strerror(e.errno) if e.errno else e))
        return "%s %s: %s; %s" % (flag, path, reason, "nothing was written" if len(files) == 1
                                  else "neither %s nor %s was written (both are as they were "
                                       "before this run)" % (args.output, args.png))
    for note in notes:
        print("graph-override explain: %s" % note, file=sys.stderr)
    return None


def _saved(result, names):
    """The bytes of OUT: the maps as .npy, or as .npz of a map per input
    (named as the inputs, without ":0", or as the keys of --data's .npz)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from graph_override.attribution.several import plain_name  # pylint: disable=import-outside-toplevel
    buffer = io.BytesIO()
    if isinstance(result.maps, list):
        np.savez(buffer, **{plain_name(n): m for n, m in zip(names, result.maps)})
    elif isinstance(result.maps, dict):
        np.savez(buffer, **{plain_name(k): m for k, m in result.maps.items()})
    else:
        np.save(buffer, result.maps, allow_pickle=False)
    return buffer.getvalue()


def _summary(args, spec, result):
    import numpy as np  # pylint: disable=import-outside-toplevel
    from graph_override.attribution.several_sources import rows  # pylint: disable=import-outside-toplevel
    picture = "; picture %s%s" % (args.png, _explain_stream.picture_rows(
        rows(result.maps), args.png)) if args.png else ""
    if isinstance(result.maps, (list, dict)):
        from graph_override.attribution.several import plain_name  # pylint: disable=import-outside-toplevel
        shapes = ", ".join("%s %s" % (plain_name(k), m.shape) for k, m in (
            result.maps.items() if isinstance(result.maps, dict) else
            zip(several_names(args.inputs), result.maps)))
        return "wrote %s: %s maps of %d example(s), one per input: %s%s%s" % (
            args.output, spec.name, len(result.outputs), shapes, "" if result.delta is None
            else "; completeness delta max |d| = %.3g" % float(np.max(np.abs(result.delta))),
            picture)
    targets = ("" if result.targets is None else "; target(s) %s" % ", ".join(
        str(int(t)) for t in result.targets[:10]) + (" ..." if len(result.targets) > 10
                                                     else ""))
    delta = ("" if result.delta is None else "; completeness delta max |d| = %.3g"
             % float(np.max(np.abs(result.delta))))
    return "wrote %s: %s maps of %d example(s), shape %s %s%s%s%s" % (
        args.output, spec.name, len(result.maps), result.maps.shape, result.maps.dtype,
        targets, delta, picture)


def _run(args):
    from graph_override.attribution import method_table  # pylint: disable=import-outside-toplevel
    from graph_override.attribution.engine import Explainer  # pylint: disable=import-outside-toplevel
    spec = method_table.method_spec(args.method)
    options = {}
    if args.baseline_array is not None:
        options["baseline"] = args.baseline_array
    options.update((key, getattr(args, key)) for _, key, _ in method_flags()
                   if getattr(args, key, None) is not None)
    user_rules, user_ops = parse_maps(args.maps)
    explainer = Explainer(args.model, inputs=several_names(args.inputs) or args.inputs,
                          outputs=args.outputs,
                          rules=user_rules, allow_ops=args.allow_ops, mode=args.mode)
    graph = explainer.model_graph(args.data_array)
    _warn_coverage(args, graph, spec, user_ops)
    result = _attribute_warning(explainer, spec, args, options)
    if isinstance(result, int):  # a folder of shards, written
        return result
    picture = _explain_picture.picture_bytes(args, _explain_picture.first_rows(
        _explain_stream.open_source(args, explainer)), result, spec.name) \
        if args.png else None
    message = _write(args, _saved(result, several_names(args.inputs)), picture)
    if message is not None:
        return _usage(message)
    print(_summary(args, spec, result))
    return 0


def run(args):
    """Runs the method (after `check`) and writes the maps and the picture."""
    from graph_override.errors import (AttributionError,  # pylint: disable=import-outside-toplevel
                                       RuleError, UnknownOpTypeError)
    message = None if hasattr(args, "data_array") else check(args)
    if message is not None:
        return _usage(message)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    try:
        return _run(args)
    except (AttributionError, RuleError, UnknownOpTypeError) as e:
        return _usage(str(e))
    except MemoryError as e:  # numpy's, for what the run would hold at once
        return _cannot_run("out of memory computing the maps (%s): use a smaller "
                           "--batch-size%s; nothing was written" % (
                               e, " or fewer --steps" if args.steps else ""))
    except tf.errors.OpError as e:
        return _cannot_run("%s: TensorFlow cannot run the model: %s; nothing was "
                           "written" % (args.model, _explain_checks.op_error(e, args)))


def _cannot_run(message):
    report_error("explain", message)
    return EXIT_FINDING


