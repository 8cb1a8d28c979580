"""How a command reports an error: ``graph-override COMMAND: error:
MESSAGE`` on standard error, and the exit statuses. `usage_error` is the one
helper for bad usage (exit status 2), used by every command and by the
command line itself (`graph_override.cli` re-exports the statuses)."""

import sys

__all__ = ["EXIT_FINDING", "EXIT_OK", "EXIT_USAGE", "report_error", "usage_error"]

# The exit statuses: success, a finding or a failed check, bad usage or
# unreadable input.
EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


def report_error(command, message, stream=None):
    """Prints ``graph-override COMMAND: error: MESSAGE`` to `stream`
    (standard error as it is when called: the command line's escaping one
    while a command runs)."""
    print("graph-override %s: error: %s" % (command, message),
          file=sys.stderr if stream is None else stream)


def usage_error(command, message, stream=None):
    """Reports `message` as bad usage of `command`; returns EXIT_USAGE.

    Example:
      >>> import sys
      >>> usage_error("patch", "-o OUT is required (or use --dry-run)", sys.stdout)
      graph-override patch: error: -o OUT is required (or use --dry-run)
      2
    """
    report_error(command, message, stream)
    return EXIT_USAGE
