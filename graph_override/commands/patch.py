"""graph-override patch: set, replace or remove gradients in a frozen graph."""

import functools
import json

from graph_override.commands import _rules
from graph_override.commands._usage import usage_error
from graph_override.commands._rules import (add_model_and_rules, own_functions, parse_rules,
                                            registration_note)

HELP = "set, replace or remove the gradients of nodes in a GraphDef"
DESCRIPTION = (
    "Reads a frozen GraphDef, applies the --map rules to the nodes they select,\n"
    "and writes the result atomically to OUT (never onto MODEL unless --force).\n"
    "\n"
    "A rule is SELECTOR=ACTION:\n"
    "  SELECTOR  an op type (Sign), 'gradient:GLOB' (nodes whose _gradient_op_type\n"
    "            matches, e.g. gradient:CustomGradient-*), or '*' with --select\n"
    "  ACTION    a built-in estimator with parameters (ste_sign, approx_sign,\n"
    "            flip_gradient:scale=0.5, ste_tern:threshold_value=0.1,clip_value=1,\n"
    "            ste_tern:ternary_weight_networks=True,clip_value=None, ...; a\n"
    "            value is a number, True, False or None), 'remove' (drop the\n"
    "            _gradient_op_type name, so the op's own gradient applies), a\n"
    "            registered gradient name (Identity), or MODULE:FUNCTION, a\n"
    "            gradient function of your own, f(op, grad) -> grads, imported as\n"
    "            `python -m` would (the current directory first) and written into\n"
    "            the graph under that name: the process that runs OUT registers it\n"
    "            first, graph_override.user_functions.register_function('MODULE:FUNCTION')\n"
    "--select REGEX narrows every rule to node names matching REGEX (re.search).\n"
    "A node selected by several rules gets the first.\n"
    "\n"
    "Refused (exit 1, nothing written): an estimator on a node whose output is\n"
    "not its first input's dtype and shape (MatMul, OneHot: the gradient goes to\n"
    "the first input); flip_gradient/scale_gradient/clip_gradient on an op that is\n"
    "not an identity, where they would replace its gradient rather than scale it\n"
    "(--allow-replace accepts that); any rule on a node inside a PartitionedCall\n"
    "body, where TensorFlow would ignore it.\n"
    "Nodes inside the function library (While/If bodies) are selected too and\n"
    "named FUNCTION/NODE; --select matches that name. A graph with TF1 while loops\n"
    "is patched, with a warning: tf.gradients cannot cross them after import.\n"
    "\n"
    "Without --portable, estimator names such as graph_override.ste_sign(clip_value=1.0)\n"
    "are written into the graph: any process that imports graph_override resolves\n"
    "them (graph_override.frozen.import_graph_def). With --portable the nodes are\n"
    "rewritten into stop_gradient subgraphs, which plain TensorFlow differentiates\n"
    "with no graph_override installed; forward outputs stay bitwise identical.\n"
    "\n"
    "Exit status: 0 written (or --dry-run ok), 1 a rule selected nothing or cannot\n"
    "be applied, 2 bad usage or an unreadable MODEL / unwritable OUT. A missing\n"
    "MODEL, a folder (a SavedModel), a misspelled estimator and a missing -o are\n"
    "reported before TensorFlow is imported, at once.")
EPILOG = """examples:
  graph-override patch model.pb -o fixed.pb --map Sign=ste_sign
  graph-override patch model.pb -o fixed.pb --map Identity=flip_gradient:scale=0.5 --select '^output$'
  graph-override patch model.pb -o fixed.pb --map 'gradient:CustomGradient-*=ste_sign'
  graph-override patch model.pb -o portable.pb --map Sign=ste_sign --portable
  graph-override patch model.pb -o guided.pb --map Relu=mygrads:guided_relu
  graph-override patch model.pb --map Round=ste_round --dry-run --json"""


def configure(parser):
    add_model_and_rules(parser, rules_required=True)
    parser.add_argument("-o", "--output", metavar="OUT",
                        help="output file (.pbtxt: text format); required unless --dry-run")
    parser.add_argument("--portable", action="store_true",
                        help="rewrite into stop_gradient subgraphs (no graph_override "
                             "needed to differentiate the result)")
    parser.add_argument("--dry-run", action="store_true",
                        help="report what would change; write nothing")
    parser.add_argument("--allow-no-match", action="store_true",
                        help="a rule that selects no node is not an error")
    parser.add_argument("--allow-replace", action="store_true",
                        help="let flip_gradient/scale_gradient/clip_gradient replace "
                             "the gradient of an op that is not an identity")
    parser.add_argument("--force", action="store_true",
                        help="replace OUT if it exists (even if it is MODEL)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


_usage = functools.partial(usage_error, "patch")


def check(args):
    """The usage errors found without TensorFlow, as a message, or None: no
    -o without --dry-run, then `_rules.check` (MODEL, misspelled
    estimators)."""
    if not args.output and not args.dry_run:
        return "-o OUT is required (or use --dry-run)"
    return _rules.check(args)


def run(args):
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    from graph_override.errors import UnknownOpTypeError  # pylint: disable=import-outside-toplevel
    if not args.output and not args.dry_run:
        return _usage("-o OUT is required (or use --dry-run)")
    try:
        rules = parse_rules(args)
    except (frozen.RuleError, UnknownOpTypeError) as e:
        return _usage(str(e))
    # patch_file refuses an unwritable OUT before doing the work.
    report = frozen.patch_file(args.model, None if args.dry_run else args.output, rules,
                               portable=args.portable, overwrite=args.force,
                               on_no_match="ignore" if args.allow_no_match else "raise",
                               allow_replace=args.allow_replace)
    failures = report.gradient_failures_left
    own = own_functions(rules)
    if args.json:
        out = report.to_dict()
        out.update(file=args.model, output=None if args.dry_run else args.output,
                   dry_run=args.dry_run,
                   gradient_failures_left=failures, register_first=own)
        print(json.dumps(out, indent=2))
    else:
        print("%s: %s" % (args.model, report.format()))
        for f in failures[:20]:
            print("warning: gradient still fails at node %r (%s): %s"
                  % (f["node"], f["op"], f["reason"]))
        if own:
            print(registration_note(own))
        print("dry run: nothing written" if args.dry_run
              else "wrote %s" % args.output)
    return 0
