"""The `graph-override` command line.

Each command lives in `graph_override.commands.<name>` and provides HELP,
DESCRIPTION, EPILOG, ``configure(parser)`` and ``run(args) -> int``, and may
provide ``check(args) -> message or None``, the usage errors it can find
without TensorFlow; a module added to that package is a command. Exit
status: 0 success, 1 a finding or a failed check, 2 bad usage or unreadable
input (a TensorFlow that does not import included).

Start-up is cheap: the arguments are parsed before anything heavy is
imported, so ``--help``, ``--version``, a mistyped argument, what a
command's ``check`` refuses and the whole of ``migrate`` (which only parses
source code) never import TensorFlow. Every other command gets TensorFlow
imported, quietly, just before it runs.
"""

import argparse
import importlib
import os
import pkgutil
import sys

from graph_override._console.stderr import native_stderr_silenced
from graph_override._console.terminal import EscapingStream
from graph_override.commands._usage import (EXIT_FINDING, EXIT_OK, EXIT_USAGE, report_error,
                                            usage_error)

__all__ = ["COMMANDS", "EXIT_FINDING", "EXIT_OK", "EXIT_USAGE",
           "WITHOUT_TENSORFLOW", "import_tensorflow_quietly", "main", "version"]

# The order in which `--help` lists the commands; a command module not named
# here is listed after these, alphabetically.
_ORDER = ("inspect", "patch", "convert", "freeze", "explain", "evaluate", "migrate", "demo")
# Commands that run without TensorFlow. Any other command, including one
# added later, gets TensorFlow imported before it runs.
WITHOUT_TENSORFLOW = frozenset({"migrate"})
# Distributions that provide the `tensorflow` module, for --version.
_TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos",
                     "tf-nightly", "tensorflow-intel")


def _discover():
    from graph_override import commands  # pylint: disable=import-outside-toplevel
    found = {m.name for m in pkgutil.iter_modules(commands.__path__)
             if not m.name.startswith("_")}
    return tuple([n for n in _ORDER if n in found]
                 + sorted(found.difference(_ORDER)))


COMMANDS = _discover()


def version():
    """The `--version` text: this package's version, the installed
    TensorFlow's (read from its metadata, without importing it) and Python's."""
    from importlib import metadata  # pylint: disable=import-outside-toplevel
    from graph_override import __version__  # pylint: disable=import-outside-toplevel
    tf_version = "not installed"
    for dist in _TF_DISTRIBUTIONS:
        try:
            tf_version = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:
            continue
    return "graph-override %s (TensorFlow %s, Python %s)" % (
        __version__, tf_version, ".".join(map(str, sys.version_info[:3])))


class _VersionAction(argparse.Action):
    """`--version`: prints version() and exits 0; the installed packages'
    metadata is read only when the option is given."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        kwargs.setdefault("help", "show the versions of graph-override, "
                                  "TensorFlow and Python, and exit")
        super().__init__(option_strings, dest=dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version())
        parser.exit()


def _modules_needed(argv):
    """The command modules to import for `argv`: only the named command's
    when argv names one (the others' imports, numpy for demo, cost time
    and are not needed), none for `--version`, every one for the top-level
    help and errors."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in COMMANDS and argv.index(first) == 0:
        return (first,)
    if argv[:1] == ["--version"]:  # answered before any command is looked at
        return ()
    return COMMANDS


def _parser(modules):
    parser = argparse.ArgumentParser(
        prog="graph-override",
        description="Safe gradient overrides for TensorFlow 1 style graphs: "
                    "inspect and patch frozen GraphDefs, migrate override-map "
                    "code to TF2, and see it work (demo).",
        epilog="Exit status: 0 success, 1 a finding or a failed check, 2 bad "
               "usage or unreadable input. 'graph-override COMMAND --help' "
               "shows a command's options and examples.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = modules.get(name)
        if module is None:  # not the command being run: its name only
            sub.add_parser(name)
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION,
                           epilog=module.EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.configure(p)
        p.set_defaults(_run=module.run, _check=getattr(module, "check", None))
    return parser


def import_tensorflow_quietly():
    """Imports TensorFlow without its native start-up noise, unless the user
    asked for TensorFlow's logs (TF_CPP_MIN_LOG_LEVEL below 3).

    Raises whatever the import raises (ImportError for a missing or broken
    installation): only the native log lines are silenced, never an error.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        return
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] < "3":
        importlib.import_module("tensorflow")
        return
    with native_stderr_silenced():
        importlib.import_module("tensorflow")


def _tensorflow_or_error():
    """Imports TensorFlow for a command; returns None, or the message saying
    why it cannot be imported and what to do."""
    try:
        import_tensorflow_quietly()
    except Exception as e:  # pylint: disable=broad-except
        # Any exception of the import itself: a missing package
        # (ImportError) or a broken one (numpy ABI errors, AttributeError).
        return ("this command needs TensorFlow, and "
                "'import tensorflow' failed: %s: %s. Install a supported "
                "release (python -m pip install 'tensorflow>=2.15'; "
                "docs/guide/compat.md lists them) or repair the installation; "
                "'graph-override migrate' works without TensorFlow."
                % (type(e).__name__, e))
    return None


def main(argv=None):
    """Runs the command line; returns the exit status.

    `--help`, `--version` and bad usage raise SystemExit (argparse), with
    status 0 or 2.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    modules = {name: importlib.import_module("graph_override.commands." + name)
               for name in _modules_needed(argv)}
    args = _parser(modules).parse_args(argv)
    check = getattr(args, "_check", None)
    if check is not None:
        message = check(args)
        if message is not None:  # names from the user's files: escaped, as below
            return usage_error(args.command, message, EscapingStream(sys.stderr))
    if args.command not in WITHOUT_TENSORFLOW:
        message = _tensorflow_or_error()
        if message is not None:
            return usage_error(args.command, message)
    from graph_override.errors import (ConversionUsageError, GraphDefError,  # pylint: disable=import-outside-toplevel
                                       GraphOverrideError)
    # Names from a graph may hold terminal escape sequences: everything the
    # command prints, reports, warnings and errors alike, goes out escaped.
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapingStream(sys.stdout), EscapingStream(sys.stderr)
    try:
        return args._run(args)  # pylint: disable=protected-access
    except (ConversionUsageError, GraphDefError, OSError) as e:
        return usage_error(args.command, e)
    except GraphOverrideError as e:
        report_error(args.command, e)
        return EXIT_FINDING
    finally:
        sys.stdout, sys.stderr = streams


if __name__ == "__main__":
    sys.exit(main())
