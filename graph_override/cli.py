"""The `graph-override` command line.

Each command lives in `graph_override.commands.<name>` and provides HELP,
DESCRIPTION, EPILOG, ``configure(parser)`` and ``run(args) -> int``.
Exit status: 0 success, 1 a finding or a failed check, 2 bad usage or
unreadable input.
"""

import argparse
import contextlib
import importlib
import io
import os
import sys

__all__ = ["COMMANDS", "EXIT_FINDING", "EXIT_OK", "EXIT_USAGE",
           "import_tensorflow_quietly", "main"]

COMMANDS = ("inspect", "patch", "migrate", "convert", "demo")
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


@contextlib.contextmanager
def _native_stderr_silenced():
    """Points file descriptor 2 at /dev/null for the duration.

    TensorFlow 2.21 writes absl pre-initialization lines ("All log messages
    before absl::InitializeLog() ...", "cudart_stub.cc ... Could not find
    cuda drivers") from native code while it is imported; no environment
    variable silences them. Python exceptions still propagate and print
    after the descriptor is restored.
    """
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)
        os.close(devnull)


def import_tensorflow_quietly():
    """Imports TensorFlow without its native start-up noise, unless the user
    asked for TensorFlow's logs (TF_CPP_MIN_LOG_LEVEL below 3)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules or os.environ["TF_CPP_MIN_LOG_LEVEL"] < "3":
        return
    with _native_stderr_silenced():
        importlib.import_module("tensorflow")


def main(argv=None):
    """Runs the command line; returns the exit status."""
    import_tensorflow_quietly()
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
