"""Native log lines that no environment variable silences.

TensorFlow writes some lines from native code straight to file descriptor 2:
absl's pre-initialization notice ("All log messages before
absl::InitializeLog() ...") and "cudart_stub.cc ... Could not find cuda
drivers" while it is imported (2.21), and XLA's "Compiled cluster using
XLA!" the first time a process compiles a function (2.15 and 2.21), whatever
TF_CPP_MIN_LOG_LEVEL says. `native_stderr_silenced` points the descriptor at
/dev/null around such a step; the command line uses it for the import,
`graph_override.estimators.attribution_ops` for its first compiled gradient.
"""

import contextlib
import io
import os
import sys

__all__ = ["native_stderr_silenced", "quiet_requested"]


def quiet_requested(level="1"):
    """Whether TF_CPP_MIN_LOG_LEVEL asks TensorFlow to leave out its logs
    below `level` ("1": information, "3": everything but fatal errors)."""
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") >= level


@contextlib.contextmanager
def native_stderr_silenced():
    """Points file descriptor 2 at /dev/null for the duration. Python
    exceptions still propagate and print after the descriptor is restored.

    Example:
      >>> import os
      >>> from graph_override._console.stderr import native_stderr_silenced
      >>> with native_stderr_silenced():
      ...     _ = os.write(2, b"not shown")
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
