"""Sections 3 and 4 of tools/bench.py: frozen-graph patching and source
migration throughput. The measurements live in tools/bench_frozen.py and
tools/bench_migrate.py (each runnable on its own); this module runs them
as the report needs: bench_frozen in a fresh process per size, so peak
memory is its own, and either module's failure becomes a row naming the
error instead of stopping the report."""

import json
import os
import subprocess
import sys

from bench_common import TOOLS, load_script


def _run_other(name, calls, log):
    """Runs `name`.run(*args) for each args in `calls`; None if the module is
    absent; a one-row table naming the error if it fails."""
    try:
        module = load_script(name)
        if module is None:
            return None
        out = []
        for args in calls:
            log("%s.run%r" % (name, tuple(args)))
            out.append(module.run(*args))
        return out
    except Exception as e:  # pylint: disable=broad-except
        log("%s failed: %s: %s" % (name, type(e).__name__, e))
        return [{"error": "scripts/%s.py failed: %s: %s" % (name, type(e).__name__, e)}]


# The child reports peak RSS from /proc/self/status (VmHWM, the peak of its
# own address space): ru_maxrss survives exec, so a child started by this
# large process would report the parent's peak.
_FROZEN_CHILD = """
import importlib.util, json, sys
def hwm_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        return None
import tensorflow, graph_override.frozen
after_imports = hwm_mb()
spec = importlib.util.spec_from_file_location("bench_frozen", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
result = module.run(int(sys.argv[2]), int(sys.argv[3]))
if after_imports is not None:
    result["rss_after_imports_mb"] = after_imports
    result["peak_rss_mb"] = hwm_mb()
print(json.dumps(result))
"""


def bench_frozen(cfg, log):
    """tools/bench_frozen.py's run(nodes, repeats), each size in a fresh
    process: peak memory (ru_maxrss) only grows, so it must not see the
    other sections' graphs."""
    path = TOOLS / "bench_frozen.py"
    if not path.exists():
        return None
    out = []
    for nodes in cfg["frozen_nodes"]:
        log("frozen-graph patching: %d nodes (own process)" % nodes)
        proc = subprocess.run(
            [sys.executable, "-c", _FROZEN_CHILD, str(path), str(nodes),
             str(cfg["frozen_repeats"])], capture_output=True, text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            out.append({"error": "tools/bench_frozen.py failed at %d nodes: %s"
                                 % (nodes, tail[0])})
            log(out[-1]["error"])
            break
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def bench_migrate(cfg, log):
    return _run_other("bench_migrate", cfg["migrate"], log)


