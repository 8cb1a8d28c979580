"""A writer killed with SIGKILL at a point it announces: shared by the tests
of graph_override._files.atomic and graph_override._files.atomic_dir."""

import os
import signal
import subprocess
import sys
import time


def kill_when_ready(script, ready, *args):
    """Runs ``python -c script *args``, waits until it creates the file
    `ready` (its synchronization point), then kills it with SIGKILL."""
    proc = subprocess.Popen([sys.executable, "-c", script, *map(str, args)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the writer did not reach its synchronization point"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    ready.unlink()
