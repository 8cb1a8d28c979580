"""graph-override convert: a frozen GraphDef as a TF2 SavedModel."""

import functools
import os
import sys

from graph_override.commands._rules import (add_model_and_rules, check, own_functions,  # noqa: F401  (check: the usage errors found without TensorFlow)
                                            parse_rules)
from graph_override.commands._usage import EXIT_FINDING, report_error, usage_error

HELP = "turn a frozen GraphDef into a TF2 SavedModel whose gradients work"
DESCRIPTION = (
    "Reads a frozen GraphDef, applies the --map rules (the syntax of\n"
    "`graph-override patch`), turns the Const nodes matching --trainable into\n"
    "variables, and writes a SavedModel to DIR with a 'serving_default' signature\n"
    "(inputs named after their nodes, outputs keyed by node name: 'policy/output'\n"
    "for policy/output:0, 'split:1' for a later output; the report prints them).\n"
    "\n"
    "The saved graph carries every estimator gradient in its stop_gradient form,\n"
    "so the SavedModel differentiates correctly with plain TensorFlow, in a process\n"
    "without graph_override; clip_gradient, which has no such form, and gradient\n"
    "functions of your own (--map OP=MODULE:FUNCTION) are refused.\n"
    "DIR is written atomically (a temporary sibling folder, then a rename): it is\n"
    "either the complete SavedModel or not there at all.\n"
    "\n"
    "Exit status: 0 written; 1 the graph cannot be converted as asked (unresolvable\n"
    "gradient names, a TF1 while loop the outputs need, a graph that is not frozen,\n"
    "unknown ops, a library function that calls itself, a rule that selects nothing\n"
    "(without --allow-no-match) or has no portable form); 2 bad usage or unreadable MODEL, a name not in the graph, a\n"
    "Placeholder the outputs need missing from --inputs, a --trainable that selects\n"
    "nothing, or DIR exists (without --force). A missing MODEL, a folder (a\n"
    "SavedModel) and a misspelled estimator are reported before TensorFlow is\n"
    "imported, at once.")
EPILOG = """examples:
  graph-override convert model.pb -o saved --inputs x:0 --outputs logits:0 --map Sign=ste_sign
  graph-override convert model.pb -o saved --inputs x --outputs logits --map Sign=ste_sign --trainable 'kernel|bias'
  graph-override convert custom.pb -o saved --inputs x --outputs logits --map 'gradient:CustomGradient-*=ste_sign'
  saved_model_cli show --dir saved --all"""


def configure(parser):
    add_model_and_rules(parser, rules_required=False)
    parser.add_argument("-o", "--output", metavar="DIR", required=True,
                        help="the SavedModel directory to write")
    parser.add_argument("--inputs", nargs="+", required=True, metavar="NAME:0",
                        help="tensors to feed, in signature order")
    parser.add_argument("--outputs", nargs="+", required=True, metavar="NAME:0",
                        help="tensors to return")
    parser.add_argument("--trainable", metavar="REGEX",
                        help="Const nodes whose name matches REGEX become trainable "
                             "variables (an integer N: those with at least N elements)")
    parser.add_argument("--force", action="store_true",
                        help="replace DIR if it holds a SavedModel")
    parser.add_argument("--allow-no-match", action="store_true",
                        help="accept rules that select no node (a rule set for Relu "
                             "and Relu6 on a network with one of them)")


_usage = functools.partial(usage_error, "convert")


def _trainable(text):
    if text is None:
        return None
    return int(text) if text.isdigit() else text


def run(args):
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    from graph_override._files import atomic_dir  # pylint: disable=import-outside-toplevel
    from graph_override.errors import UnknownOpTypeError  # pylint: disable=import-outside-toplevel
    from graph_override.frozen.tf2.save import check_target, output_keys  # pylint: disable=import-outside-toplevel
    try:
        rules = parse_rules(args)
    except (frozen.RuleError, UnknownOpTypeError) as e:
        return _usage(str(e))
    own = own_functions(rules)
    if own:
        report_error("convert", "%s: --map names gradient function(s) of "
                     "your own, %s; a SavedModel cannot carry them so that plain TensorFlow "
                     "differentiates it. Its portable form (stop_gradient subgraphs) expresses "
                     "only the built-in estimators, and TensorFlow's "
                     "experimental_custom_gradients keeps one traced function per gradient "
                     "name, for the first node's shapes, failing on nodes of other shapes. "
                     "Use a built-in estimator, or keep your function: graph-override patch "
                     "--map ... (then register it before running the graph), or "
                     "frozen.to_function(..., rules=[...]) in a process that imports "
                     "graph_override. Nothing written." % (
                         args.model, ", ".join(repr(n) for n in own)))
        return EXIT_FINDING
    out = os.path.abspath(args.output)
    if os.path.isdir(os.path.dirname(out)):  # what a killed convert left
        for note in atomic_dir.recover(out):
            print("graph-override convert: %s" % note, file=sys.stderr)
    # Fail on an unwritable DIR before doing the work. Bad usage here and
    # below (a name not in the graph, DIR appearing meanwhile, a full disk) is
    # a ConversionUsageError, which the command line reports with exit 2.
    check_target(out, args.force)
    # build=False: the live function (registered gradient names) is never
    # called here; save imports the portable form only.
    fn = frozen.FrozenFunction(args.model, args.inputs, args.outputs, rules=rules,
                               trainable=_trainable(args.trainable), build=False,
                               on_no_match="ignore" if args.allow_no_match else "raise")
    fn.save(out, overwrite=args.force)  # refuses before printing a report of nothing
    if fn.patch_report is not None:
        print("%s: %s" % (args.model, fn.patch_report.format()))
    specs = ", ".join("%s %s %s" % (s.name, s.dtype.name, s.shape) for s in fn.specs()[0])
    keys = ", ".join("%r (%s)" % (key, name) for key, name in
                     zip(output_keys(fn.outputs), fn.outputs))
    print("wrote %s: signature 'serving_default' (%s -> %s), %d trainable variable(s) "
          "of %d element(s)" % (args.output, specs, keys, len(fn.weights),
                                sum(int(w.shape.num_elements()) for w in fn.weights)))
    return 0
