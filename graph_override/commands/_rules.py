"""The arguments `graph-override patch` and `graph-override convert` share:
the model file and its patch rules (`--map`, `--select`)."""


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
