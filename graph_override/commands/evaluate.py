"""graph-override evaluate: faithfulness, robustness, randomization and
complexity metrics of attribution maps, from .npy files to a JSON report
(and a picture of the curves)."""

import argparse
import functools
import json
import os

from graph_override.commands._explain_options import add_allow_option, target
from graph_override.commands._explain_data import read_array, read_arrays, several_names
from graph_override.commands._usage import EXIT_FINDING, report_error, usage_error

HELP = "score attribution maps: deletion/insertion, ROAD, max-sensitivity, sparseness, ..."
_DESCRIPTION = (
    "Scores the attribution maps in --maps (a .npy array: one map per example of\n"
    "--data, of its shape or without the channel axis; a model of several inputs:\n"
    "one array per input in --data and --maps, each map of its input's shape,\n"
    "the features of all the inputs ranked together) for the frozen GraphDef\n"
    "MODEL and the examples in --data, with the metrics of\n"
    "graph_override.attribution.metrics named in --metric (comma-separated, or\n"
    "`all`), and writes a JSON report to OUT: for each metric its mean, each\n"
    "example's score, how to read it, its settings and, for the curve metrics,\n"
    "the mean curve. --plot draws the curves (needs matplotlib); OUT and the\n"
    "picture are written both or neither, atomically; an existing file is\n"
    "replaced only with --force.\n"
    "\n"
    "Metrics:\n"
    "%s\n"
    "\n"
    "--set METRIC.OPTION=VALUE sets a metric's option (a number, true/false, a\n"
    "word, or a JSON list), e.g. --set deletion.features_in_step=16 --set\n"
    "road.percentages=[10,50,90]; --seed N seeds every metric that draws random\n"
    "numbers (two runs with the same seed write the same report). The metrics that\n"
    "explain perturbed inputs again (max_sensitivity, local_lipschitz_estimate,\n"
    "random_logit) need --explain METHOD, the method that made --maps, and take its\n"
    "options as --set explain.OPTION=VALUE (e.g. --set explain.abs=false).\n"
    "\n"
    "MODEL comes from elsewhere: ops that reach outside the model are refused as in\n"
    "`explain` unless --allow-op names them.\n"
    "\n"
    "Exit status: 0 written; 1 the model cannot be run as asked; 2 bad usage: an\n"
    "unknown metric or option, unreadable MODEL or .npy, maps that do not fit the\n"
    "data, a class out of range, OUT exists (without --force). Nothing is written\n"
    "on an error.")
EPILOG = """examples:
  graph-override evaluate model.pb --inputs x:0 --outputs logits:0 --data x.npy --maps maps.npy --metric deletion,insertion,sparseness -o scores.json --plot curves.png
  graph-override evaluate model.pb --inputs x:0 --outputs logits:0 --data x.npy --maps sal.npy --metric max_sensitivity,random_logit --explain saliency --seed 0 -o robust.json"""


def _describe():
    from graph_override.attribution.metrics.table import METRICS  # pylint: disable=import-outside-toplevel
    width = max(map(len, METRICS))
    return "\n".join("  %-*s  %s" % (width, s.name, s.summary) for s in METRICS.values())


DESCRIPTION = _DESCRIPTION % _describe()


def configure(parser):
    parser.add_argument("model", metavar="MODEL", help="frozen GraphDef (.pb or .pbtxt)")
    parser.add_argument("--inputs", required=True, metavar="NAME:0",
                        help="the input tensor the data feeds; a model of several inputs: "
                             "NAME:0,NAME:0,... (--data and --maps then give an array per "
                             "input: FILE.npy,FILE.npy in that order, or a .npz keyed by "
                             "the inputs' names, as `explain` writes)")
    parser.add_argument("--outputs", required=True, metavar="NAME:0",
                        help="the output tensor (logits or probabilities, as scored)")
    parser.add_argument("--data", required=True, metavar="FILE.npy", help="the examples")
    parser.add_argument("--maps", required=True, metavar="FILE.npy",
                        help="their attribution maps (e.g. written by `explain`)")
    parser.add_argument("--metric", required=True, metavar="NAME[,NAME...]|all",
                        help="the metrics to run")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the JSON report to write")
    parser.add_argument("--target", type=target, metavar="K",
                        help="the class the maps explain (K1,K2,...: one per example); "
                             "default: each example's top class")
    parser.add_argument("--explain", metavar="METHOD",
                        help="the method that made --maps, for the metrics that explain "
                             "again")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="METRIC.OPTION=VALUE", help="a metric's option; repeat")
    parser.add_argument("--seed", type=_seed, metavar="N",
                        help="the seed of every metric that draws random numbers")
    parser.add_argument("--batch-size", type=_rows,
                        default=64, metavar="N", help="rows per model call (default 64)")
    parser.add_argument("--plot", metavar="PNG", help="also draw the curves here")
    add_allow_option(parser)
    parser.add_argument("--force", action="store_true", help="replace OUT and PNG")


def _rows(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("expected a positive number of rows, got %r" % text)
    return int(text)


def _seed(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError("expected an integer seed >= 0, got %r" % text)
    return int(text)


_usage = functools.partial(usage_error, "evaluate")


def _value(text):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


def _settings(args, names):
    """({metric: {option: value}}, {explain option: value}), or a message."""
    from graph_override.attribution.metrics.table import METRICS  # pylint: disable=import-outside-toplevel
    options, explain = {}, {}
    for item in args.settings:
        key, sep, text = item.partition("=")
        metric, dot, option = key.partition(".")
        if not sep or not dot or not option:
            return "--set %s: expected METRIC.OPTION=VALUE, e.g. deletion.baseline=0.5" % item
        if metric == "explain":
            explain[option] = _value(text)
            continue
        if metric not in names:
            return "--set %s: %s is not among --metric (%s)" % (item, metric, ", ".join(names))
        if option not in METRICS[metric].options:
            return "--set %s: %s takes no option %s; its options: %s" % (
                item, metric, option, ", ".join(METRICS[metric].options) or "none")
        options.setdefault(metric, {})[option] = _value(text)
    if args.seed is not None:
        for name in names:
            if "seed" in METRICS[name].options:
                options.setdefault(name, {}).setdefault("seed", args.seed)
    return options, explain


def _check_files(args):
    from graph_override._files.atomic import refuse_special  # pylint: disable=import-outside-toplevel
    from graph_override.commands._explain_checks import check_model  # pylint: disable=import-outside-toplevel
    from graph_override.commands.explain import _same  # pylint: disable=import-outside-toplevel
    from graph_override.errors import SpecialFileError  # pylint: disable=import-outside-toplevel
    message = check_model(args.model)
    if message is not None:
        return message
    outs = [("-o", args.output)] + ([("--plot", args.plot)] if args.plot else [])
    if args.plot and _same(args.output, args.plot):
        return "-o and --plot name the same file %s" % args.output
    for flag, path in outs:
        for read in [args.model] + args.data.split(",") + args.maps.split(","):
            if _same(path, read):
                return "%s %s is an input of this run; write the result elsewhere" % (flag, path)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            return "%s %s: the folder %s does not exist; create it first" % (flag, path, folder)
        if os.path.lexists(path):
            try:
                refuse_special(path)
            except SpecialFileError as e:
                return "%s %s" % (flag, e)
            if not args.force:
                return "%s %s: exists already; pass --force to replace it" % (flag, path)
    return None


def check(args):
    """The usage errors found without TensorFlow: the metrics, --set, --explain,
    the files; then --data and --maps are read into ``args.x`` and ``args.a``."""
    from graph_override.attribution.metrics.table import METRICS  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    names = list(METRICS) if args.metric == "all" else [
        m for m in args.metric.split(",") if m]
    unknown = [m for m in names if m not in METRICS]
    if unknown or not names:
        return "--metric: unknown metric %s; the metrics: %s, or all" % (
            ", ".join(unknown) or "(none)", ", ".join(METRICS))
    args.metric_names = list(dict.fromkeys(names))
    settings = _settings(args, args.metric_names)
    if isinstance(settings, str):
        return settings
    args.metric_options, args.explain_options = settings
    again = [m for m in args.metric_names if METRICS[m].needs == "model+explain"]
    if again and not args.explain:
        return "--explain: %s explain perturbed inputs again; name the method that made " \
               "--maps (e.g. --explain saliency)" % ", ".join(again)
    if args.explain:
        from graph_override.attribution import method_table  # pylint: disable=import-outside-toplevel
        try:
            method_table.method_spec(args.explain)
        except AttributionError as e:
            return "--explain: %s" % e
    message = _check_files(args)
    if message is None and args.plot:
        from graph_override.commands import _picture  # pylint: disable=import-outside-toplevel
        message = _picture.matplotlib_missing()
    if message is not None:
        return message
    names = several_names(args.inputs)
    try:
        if names is None:
            args.x = read_array(args.data, "--data")
            args.a = read_array(args.maps, "--maps")
        else:  # several inputs: an array per input in each
            args.x = read_arrays(args.data, names, "--data")
            args.a = read_arrays(args.maps, names, "--maps")
    except AttributionError as e:
        return str(e)
    return _check_counts(args)


def _examples(arrays, names):
    """{label: examples} of --data or --maps (an array, a list in the order
    of the input `names`, or a dict)."""
    if isinstance(arrays, dict):
        return {str(k): len(v) for k, v in arrays.items()}
    if isinstance(arrays, list):
        return {name: len(v) for name, v in zip(names, arrays)}
    return {"": len(arrays)}


def _check_counts(args):
    """None, or why --maps and --data do not hold one map per example."""
    names = several_names(args.inputs)
    data, maps = _examples(args.x, names), _examples(args.a, names)
    counts = set(data.values()) | set(maps.values())
    if len(counts) == 1:
        args.examples = counts.pop()
        return None
    if len(data) == 1 and len(maps) == 1:
        return "--maps %s holds %d maps, --data %s %d examples: give one map per example" % (
            args.maps, len(args.a), args.data, len(args.x))
    return ("--data %s and --maps %s: the inputs' arrays hold different numbers of examples "
            "(--data %s; --maps %s): give every input one row per example, the same number" % (
                args.data, args.maps, ", ".join("%s %d" % kv for kv in data.items()),
                ", ".join("%s %d" % kv for kv in maps.items())))


def _report(args, scores):
    from graph_override import __version__  # pylint: disable=import-outside-toplevel
    return {"model": args.model, "data": args.data, "maps": args.maps,
            "examples": int(args.examples), "explain": args.explain,
            "graph_override": __version__,
            "metrics": {name: score.as_dict() for name, score in scores.items()}}


def _run(args):
    from graph_override._files.atomic_group import write_all  # pylint: disable=import-outside-toplevel
    from graph_override.attribution.metrics import plots, table  # pylint: disable=import-outside-toplevel
    scores = table.evaluate(args.model, args.x, args.a, args.metric_names, args.target,
                            explain=args.explain or "saliency",
                            explain_options=args.explain_options,
                            options=args.metric_options, batch_size=args.batch_size,
                            inputs=several_names(args.inputs) or args.inputs,
                            outputs=args.outputs,
                            allow_ops=args.allow_ops)
    files = [(args.output, (json.dumps(_report(args, scores), indent=1) + "\n").encode())]
    if args.plot:
        try:
            files.append((args.plot, plots.plot_curves(scores, title=os.path.basename(
                args.model))))
        except ValueError as e:
            return _usage("--plot: %s" % e)
    try:
        write_all(files, replace=args.force, keep_mode=False)
    except OSError as e:
        return _usage("%s: cannot be written (%s); nothing was written" % (
            e.filename or args.output, e.strerror or e))
    width = max(map(len, scores))
    for name, score in scores.items():
        print("%-*s  %10.4g  (%s is better)" % (width, name, score.mean(),
                                               "higher" if score.higher_is_better
                                               else "lower"))
    print("wrote %s%s" % (args.output, "; curves %s" % args.plot if args.plot else ""))
    return 0


def run(args):
    """Runs the metrics (after `check`) and writes the report."""
    from graph_override.errors import AttributionError, RuleError  # pylint: disable=import-outside-toplevel
    message = None if hasattr(args, "x") else check(args)
    if message is not None:
        return _usage(message)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    try:
        return _run(args)
    except (AttributionError, RuleError) as e:
        return _usage(str(e))
    except tf.errors.OpError as e:
        report_error("evaluate", "%s: TensorFlow cannot run the model: %s; nothing was "
                     "written" % (args.model, str(e).splitlines()[0][:500]))
        return EXIT_FINDING
