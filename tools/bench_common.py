"""What the sections of tools/bench.py share: timing helpers, the
machine's description, loading a sibling script, atomic writes."""

import datetime
import importlib.util
import os
import pathlib
import platform
import statistics
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"


def median(values):
    """The median of an iterable of numbers."""
    return statistics.median(list(values))


def timed(fn):
    """(wall seconds, result) of calling fn()."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def rotations(items, repeats):
    """For each repetition, `items` in a rotated order, so that a slow
    drift of the machine's load hits every item alike."""
    items = list(items)
    for rep in range(repeats):
        k = rep % len(items)
        yield items[k:] + items[:k]


def load_script(name):
    """tools/NAME.py as a module, or None if there is no such file."""
    path = TOOLS / (name + ".py")
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine():
    """The machine, the versions and the date, for the report's header."""
    import google.protobuf  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import graph_override as go  # pylint: disable=import-outside-toplevel
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return dict(nproc=os.cpu_count(), cpu=model, load=os.getloadavg(),
                python=platform.python_version(), tensorflow=tf.__version__,
                numpy=np.__version__, protobuf=google.protobuf.__version__,
                graph_override=go.__version__, platform=platform.platform(),
                date=datetime.datetime.now(datetime.timezone.utc).strftime(
                    "%Y-%m-%d %H:%M UTC"))


def write_file(path, data):
    """Atomically writes bytes `data` to `path`, creating its folder."""
    from graph_override._files.atomic import atomic_write  # pylint: disable=import-outside-toplevel
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(str(path), data)
