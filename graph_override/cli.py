"""The `graph-override` command line.

Each command lives in `graph_override.commands.<name>` and provides HELP,
DESCRIPTION, EPILOG, ``configure(parser)`` and ``run(args) -> int``.
Exit status: 0 success, 1 a finding or a failed check, 2 bad usage or
unreadable input.
"""

import argparse
import importlib
import os
import sys

__all__ = ["COMMANDS", "EXIT_FINDING", "EXIT_OK", "EXIT_USAGE", "main"]

COMMANDS = ("inspect", "patch", "migrate", "demo")
EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


def _parser(modules):
    parser = argparse.ArgumentParser(
        prog="graph-override",
        description="Safe gradient overrides for TensorFlow 1 style graphs: "
                    "inspect and patch frozen GraphDefs, migrate override-map "
                    "code to TF2, and see it work (demo).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in modules.items():
        p = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION,
                           epilog=module.EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.configure(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv=None):
    """Runs the command line; returns the exit status."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    modules = {name: importlib.import_module("graph_override.commands." + name)
               for name in COMMANDS}
    args = _parser(modules).parse_args(argv)
    from graph_override.errors import GraphDefError, GraphOverrideError  # pylint: disable=import-outside-toplevel
    try:
        return args._run(args)  # pylint: disable=protected-access
    except (GraphDefError, OSError) as e:
        print("graph-override %s: error: %s" % (args.command, e), file=sys.stderr)
        return EXIT_USAGE
    except GraphOverrideError as e:
        print("graph-override %s: error: %s" % (args.command, e), file=sys.stderr)
        return EXIT_FINDING


if __name__ == "__main__":
    sys.exit(main())
