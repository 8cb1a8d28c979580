"""The options of `graph-override explain` (and `inspect --method`) that
choose and set a method: the argument types, ``--map`` and ``--allow-op``,
the methods' own flags (`METHOD_FLAGS`, read from the method records) and
the check that each flag goes with the method given. Nothing here imports
TensorFlow."""

import argparse

__all__ = ["METHOD_FLAGS",  # noqa: F822  (read from the records at each use: __getattr__)
           "add_allow_option", "add_map_option", "add_method_options", "check_options",
           "method_flags", "parse_maps", "target"]


def target(text):
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        values = [-1]
    if min(values) < 0:
        raise argparse.ArgumentTypeError(
            "expected a class index K >= 0 or K1,K2,... (one per example), got %r" % text)
    return values[0] if len(values) == 1 else values


def method_flags():
    """((flag, the API's keyword (the attribute of args), the methods that
    take it), ...), read from the method records (`Option.flag`), in the
    records' order. `check_options` refuses a flag given with another
    method; explain passes each one given to the method."""
    from graph_override.attribution import method_table  # pylint: disable=import-outside-toplevel
    flags = {}
    for spec in method_table.METHODS.values():
        for option in spec.options:
            if option.flag is not None:
                entry = flags.setdefault(option.flag.name, (option.name, [], option))
                if entry[0] != option.name:
                    raise ValueError("%s is the flag of %s's %s and of %s's %s" % (
                        option.flag.name, entry[1][0], entry[0], spec.name, option.name))
                entry[1].append(spec.name)
    return tuple((flag, key, tuple(methods)) for flag, (key, methods, _) in flags.items())


def __getattr__(name):
    # METHOD_FLAGS: read from the records at each use, so that a record
    # defined after this import has its flags too
    if name == "METHOD_FLAGS":
        return method_flags()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def add_method_options(parser):
    """Adds each method option's flag (`method_flags`), its help the
    option's documentation."""
    from graph_override.attribution import method_table  # pylint: disable=import-outside-toplevel
    options = {}
    for spec in method_table.METHODS.values():
        for option in spec.options:
            if option.flag is not None:
                options.setdefault(option.flag.name, (option, []))[1].append(spec.name)
    for name, (option, methods) in options.items():
        flag = option.flag
        text = "%s: %s" % (", ".join(methods), option.doc)
        if flag.const is not None:
            parser.add_argument(name, dest=option.name, action="store_const",
                                const=flag.const, help=text)
            continue
        parser.add_argument(name, dest=option.name, type=flag.parse, choices=flag.choices,
                            metavar=flag.metavar,
                            help="%s (default %s)" % (text, option.default))


def add_map_option(parser, help_text):
    """Adds ``--map OP=ACTION`` (repeatable, into ``args.maps``): a gradient
    rule of the user's own, in the syntax of `graph-override patch`
    (``Elu=mygrads:guided_elu``, ``Elu=ste_sign``). `explain` and
    ``inspect --method`` take it; `parse_maps` reads it."""
    parser.add_argument("--map", dest="maps", action="append", default=[],
                        metavar="OP=ACTION", help=help_text)


def add_allow_option(parser):
    """Adds ``--allow-op OP`` (repeatable, into ``args.allow_ops``): an op
    type that reaches outside the model (ReadFile, WriteFile, PyFunc, ...)
    which the user allows the graph to run. `explain` refuses such ops on
    the path otherwise; ``inspect --method`` reports them."""
    parser.add_argument("--allow-op", dest="allow_ops", action="append", default=[],
                        metavar="OP",
                        help="let the graph run ops of type OP although they read or "
                             "write files or reach elsewhere (ReadFile, WriteFile, "
                             "PrintV2, ...; see `inspect`); repeat for more")


def parse_maps(maps):
    """(rules, op types): the `Rule` s of ``--map`` values (a user's
    ``MODULE:FUNCTION`` imported and registered, as `frozen.parse_rule` does)
    and the op types they select, which count as covered.

    Raises:
      RuleError, UnknownOpTypeError: a rule that does not parse, a function
        that does not import, an op type TensorFlow does not know.
    """
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    rules = [frozen.parse_rule(m) for m in maps]
    return rules, {r.op_type for r in rules if r.op_type}


def check_options(args, spec):
    """None, or why --baseline or a method's flag does not go with the method."""
    if args.baseline is not None and not spec.baseline:
        from graph_override.attribution import method_table  # pylint: disable=import-outside-toplevel
        return "--baseline: %s takes no baseline (%s do)" % (spec.name, " and ".join(
            s.name for s in method_table.METHODS.values() if s.baseline))
    for flag, key, methods in method_flags():
        if getattr(args, key, None) is not None and spec.name not in methods:
            return "%s: only %s takes it, not %s" % (flag, " and ".join(methods), spec.name)
    return None
