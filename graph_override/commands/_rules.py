"""The arguments `graph-override patch` and `graph-override convert` share:
the model file and its patch rules (`--map`, `--select`), and the checks of
them that need no TensorFlow (`check_model`, `check_maps`), made before it
is imported."""

import ast
import difflib
import functools
import os
import re

# Where the built-in estimators are defined, one `define("name", ...)` call
# each: their names are read from its source (`estimator_names`), so that
# these checks run before TensorFlow, which the table needs, is imported.
_TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "estimators", "table.py")


@functools.lru_cache(maxsize=None)
def estimator_names():
    """The built-in estimators' names, in the order of their table, read
    from estimators/table.py's source without running it: the first
    argument of each top-level ``define(...)`` call. A record added there
    (docs/architecture.md's recipe) is known here by itself."""
    with open(_TABLE, encoding="utf-8") as f:
        tree = ast.parse(f.read(), _TABLE)
    names = []
    for statement in tree.body:
        call = getattr(statement, "value", None)
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "define" and call.args
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)):
            names.append(call.args[0].value)
    return tuple(names)


_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_FUNCTION_SPEC = re.compile(r"(%s):(%s)\Z" % (_DOTTED, _DOTTED))


def add_model_and_rules(parser, *, rules_required):
    """Adds MODEL, ``--map SELECTOR=ACTION`` (repeatable) and ``--select REGEX``."""
    parser.add_argument("model", metavar="MODEL", help="GraphDef file (.pb or .pbtxt)")
    parser.add_argument("--map", dest="maps", action="append", default=[],
                        metavar="SELECTOR=ACTION", required=rules_required,
                        help="a rule, e.g. Sign=ste_sign, or Relu=mygrads:guided for "
                             "a gradient function of your own; repeat for more")
    parser.add_argument("--select", metavar="REGEX",
                        help="only nodes whose name matches REGEX (re.search), "
                             "for every rule")


def parse_rules(args):
    """The `Rule` s of ``--map`` and ``--select``; RuleError for a bad one."""
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    return [frozen.parse_rule(m, name_regex=args.select) for m in args.maps]


def own_functions(rules):
    """The ``MODULE:FUNCTION`` names of the user's own gradient functions
    that `rules` set, sorted."""
    from graph_override import user_functions  # pylint: disable=import-outside-toplevel
    return sorted({r.gradient for r in rules
                   if r.gradient is not None and user_functions.is_function_spec(r.gradient)})


def registration_note(names):
    """How a process that runs the patched graph registers `names` first."""
    from graph_override import user_functions  # pylint: disable=import-outside-toplevel
    return ("note: the patched nodes carry gradient name(s) %s.%s"
            % (", ".join(repr(n) for n in names), user_functions.registration_hint(names)))


def check_model(path):
    """None, or why MODEL cannot be a GraphDef file (missing, a directory,
    a SavedModel's, not a regular file), as `frozen.load` would say it."""
    from graph_override._files.read import graphdef_path_problem  # pylint: disable=import-outside-toplevel
    return graphdef_path_problem(path)


def _action(text):
    """The ACTION of ``--map SELECTOR=ACTION`` (split at the first '=' outside
    parentheses, as `frozen.parse_rule` does), or None."""
    depth = 0
    for i, ch in enumerate(text):
        depth = depth + 1 if ch == "(" else max(0, depth - 1) if ch == ")" else depth
        if ch == "=" and depth == 0:
            return text[i + 1:].strip()
    return None


def check_maps(maps):
    """None, or the first ``--map`` value whose action is a misspelled
    built-in estimator (``Sign=ste_sgin``), in the words `frozen.parse_rule`
    uses. TensorFlow's gradient names are op types (capitalized): an action
    in lower case that is no estimator, no ``MODULE:FUNCTION`` and close to
    an estimator's name is a misspelling. Everything else is parsed later,
    with TensorFlow."""
    names = estimator_names()
    for text in maps:
        action = _action(text)
        if not action or action == "remove" or action != action.lower():
            continue
        name = action.partition(":")[0]
        spec = _FUNCTION_SPEC.match(action)
        if name in names or "." in name or "(" in name or (
                spec and spec.group(1) not in names):
            continue
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        if close:
            return ("--map %r: %r is neither a built-in estimator nor a registered "
                    "gradient name. Did you mean %s? Estimators: %s." % (
                        text, name, " or ".join(repr(c) for c in close),
                        ", ".join(names)))
    return None


def check(args):
    """What `patch` and `convert` refuse before TensorFlow is imported: a
    MODEL that cannot be a GraphDef file, a misspelled estimator."""
    return check_model(args.model) or check_maps(args.maps)
