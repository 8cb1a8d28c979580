"""How fast is load + patch + save of a large GraphDef, next to protobuf alone?

  python tools/bench_frozen.py                 # 200,000 nodes, 3 repeats
  python tools/bench_frozen.py --nodes 50000 --repeats 5 --json

Builds a synthetic frozen binarized network of N nodes (Placeholder, Const
weights, MatMul, Sign, AddV2, Identity; one node in five is a Sign), writes
it to a temporary folder, then times

* protobuf: GraphDef.FromString + SerializeToString of the same bytes, the
  floor for any tool that reads and writes the graph;
* graph_override's Python API: frozen.load (parse + checks: names,
  duplicates, dangling inputs, output indexes, cycles, unknown fields) +
  frozen.patch(["Sign=ste_sign"]) + frozen.save (atomic: temporary file,
  fsync, read back, re-parse and re-check, rename): each step takes or
  gives a GraphDef message, so each checks what it is given;
* graph_override's file path, frozen.patch_file (what `graph-override
  patch` runs): the same checks of the input, once, on the bytes; the
  attrs appended to the selected nodes' bytes; the same atomic write;
  once with the C reader (graph_override.frozen.graphdef._scan, where pip built it)
  and once without it, as on a machine without a C compiler;

and reports the median time of each (each repetition runs every side once,
in a rotating order), their ratios (the median of the ratios within each
repetition), and peak memory (resident set size of the process, and
Python-level allocations via tracemalloc).
Since save() writes deterministic bytes (attr maps in key order, the same
file in every process), the ratio is also given against protobuf's
parse + SerializeToString(deterministic=True). Peak memory of each side is
measured apart, in a fresh process per side that reads the file and does
the work once: the growth of its peak resident size over the size after
importing TensorFlow.
`run(nodes, repeats)` returns the same figures as a dict (used by
tools/bench.py).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def synthetic_graph_def(nodes):
    """A GraphDef of about `nodes` nodes: blocks of
    Const -> MatMul -> AddV2 -> Sign -> Identity chained from a Placeholder."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from tensorflow.core.framework import graph_pb2, types_pb2  # pylint: disable=import-outside-toplevel
    graph = graph_pb2.GraphDef()
    graph.versions.producer = 1
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = types_pb2.DT_FLOAT
    weight = np.ones((4, 4), np.float32).tobytes()
    prev = "x"
    for i in range((nodes - 1) // 5):
        scope = "block_%d/" % i
        w = graph.node.add(name=scope + "w", op="Const")
        w.attr["dtype"].type = types_pb2.DT_FLOAT
        tensor = w.attr["value"].tensor
        tensor.dtype = types_pb2.DT_FLOAT
        tensor.tensor_shape.dim.add(size=4)
        tensor.tensor_shape.dim.add(size=4)
        tensor.tensor_content = weight
        for name, op, inputs in (("matmul", "MatMul", [prev, scope + "w"]),
                                 ("add", "AddV2", [scope + "matmul", prev]),
                                 ("sign", "Sign", [scope + "add"]),
                                 ("out", "Identity", [scope + "sign"])):
            node = graph.node.add(name=scope + name, op=op, input=inputs)
            node.attr["T"].type = types_pb2.DT_FLOAT
        prev = scope + "out"
    return graph


def _seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(nodes=200_000, repeats=3):
    """Times load+patch+save against protobuf's parse+serialize.

    Returns:
      A dict: nodes, bytes, seconds for protobuf_parse_serialize,
      protobuf_with_file_io, load, patch, save, load_patch_save, the ratio
      load_patch_save / protobuf_parse_serialize (and with file I/O), the
      ratio patch / protobuf_parse_serialize, nodes_changed, peak_rss_mb,
      rss_after_imports_mb and python_peak_mb.
    """
    from tensorflow.core.framework import graph_pb2  # pylint: disable=import-outside-toplevel
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    from graph_override.frozen.graphdef import wire  # pylint: disable=import-outside-toplevel
    # Peak so far: the interpreter with TensorFlow and graph_override imported.
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    graph = synthetic_graph_def(nodes)
    data = graph.SerializeToString()
    node_count = len(graph.node)
    del graph
    with tempfile.TemporaryDirectory(prefix="bench_frozen_") as folder:  # removed on errors too
        src = os.path.join(folder, "model.pb")
        dst = os.path.join(folder, "fixed.pb")
        with open(src, "wb") as f:
            f.write(data)

        def protobuf_only():
            graph_pb2.GraphDef.FromString(data).SerializeToString()

        def protobuf_deterministic():
            graph_pb2.GraphDef.FromString(data).SerializeToString(deterministic=True)

        def protobuf_with_file_io():
            with open(src, "rb") as f:
                out = graph_pb2.GraphDef.FromString(f.read()).SerializeToString()
            with open(dst, "wb") as f:
                f.write(out)

        parts = {"load": [], "patch": [], "save": []}
        changed = []

        def ours():
            t0 = time.perf_counter()
            loaded = frozen.load(src)
            t1 = time.perf_counter()
            fixed, report = frozen.patch(loaded, ["Sign=ste_sign"])
            t2 = time.perf_counter()
            frozen.save(fixed, dst, overwrite=True)
            t3 = time.perf_counter()
            parts["load"].append(t1 - t0)
            parts["patch"].append(t2 - t1)
            parts["save"].append(t3 - t2)
            changed.append(len(report.changes))

        def file_path():
            frozen.patch_file(src, dst, ["Sign=ste_sign"], overwrite=True)

        def file_path_python():  # without the C reader, as where pip had no compiler
            saved, wire._scan = wire._scan, None  # pylint: disable=protected-access
            try:
                frozen.patch_file(src, dst, ["Sign=ste_sign"], overwrite=True)
            finally:
                wire._scan = saved  # pylint: disable=protected-access

        frozen.patch(frozen.load(src), ["Sign=ste_sign"])  # warm up (imports, registry)
        # Side by side, each side once per repetition in a rotating order, so
        # the machine's load hits every side alike; medians over repetitions,
        # and each ratio the median of the ratios within a repetition.
        sides = [protobuf_only, protobuf_with_file_io, protobuf_deterministic,
                 ours, file_path, file_path_python]
        times = {f: [] for f in sides}
        for rep in range(repeats):
            for f in sides[rep % len(sides):] + sides[:rep % len(sides)]:
                times[f].append(_seconds(f))
        base, base_io, base_det, total, by_file, by_file_python = (
            statistics.median(times[f]) for f in sides)

        def ratio(side, to):
            return round(statistics.median(a / b for a, b in zip(times[side], times[to])), 2)

        # tracemalloc slows every Python allocation down, so it gets a run of
        # its own, outside the timings.
        tracemalloc.start()
        ours()
        python_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        for key in parts:
            parts[key].pop()
        memory = {side: _child_peak_mb(side, src, os.path.join(folder, "child.pb"))
                  for side in ("protobuf", "graph_override", "patch_file")}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "nodes": node_count,
        "repeats": repeats,
        "bytes": len(data),
        "protobuf_parse_serialize_s": round(base, 4),
        "protobuf_with_file_io_s": round(base_io, 4),
        "load_s": round(statistics.median(parts["load"]), 4),
        "patch_s": round(statistics.median(parts["patch"]), 4),
        "save_s": round(statistics.median(parts["save"]), 4),
        "load_patch_save_s": round(total, 4),
        "ratio": ratio(ours, protobuf_only),
        "ratio_with_file_io": ratio(ours, protobuf_with_file_io),
        "protobuf_deterministic_s": round(base_det, 4),
        "ratio_deterministic": ratio(ours, protobuf_deterministic),
        "protobuf_peak_growth_mb": memory["protobuf"],
        "graph_override_peak_growth_mb": memory["graph_override"],
        "memory_ratio": (round(memory["graph_override"] / memory["protobuf"], 2)
                         if memory["protobuf"] and memory["graph_override"] else None),
        "patch_ratio": round(statistics.median(
            a / b for a, b in zip(parts["patch"], times[protobuf_only])), 2),
        "patch_file_s": round(by_file, 4),
        "patch_file_ratio": ratio(file_path, protobuf_only),
        "patch_file_ratio_with_file_io": ratio(file_path, protobuf_with_file_io),
        "c_reader": wire.speedups(),
        "patch_file_python_s": round(by_file_python, 4),
        "patch_file_python_ratio": ratio(file_path_python, protobuf_only),
        "patch_file_peak_growth_mb": memory["patch_file"],
        "patch_file_memory_ratio": (round(memory["patch_file"] / memory["protobuf"], 2)
                                    if memory["protobuf"] and memory["patch_file"] else None),
        "nodes_changed": changed[-1],
        "peak_rss_mb": round(rss / 1024.0, 1),
        "rss_after_imports_mb": round(rss_before / 1024.0, 1),
        "python_peak_mb": round(python_peak / 2 ** 20, 1),
    }


_CHILD = r"""
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from tensorflow.core.framework import graph_pb2
from graph_override import frozen

def hwm_kb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))

side, src, dst = sys.argv[1:4]
before = hwm_kb()
if side == "protobuf":
    with open(src, "rb") as f:
        out = graph_pb2.GraphDef.FromString(f.read()).SerializeToString()
    with open(dst, "wb") as f:
        f.write(out)
elif side == "patch_file":
    frozen.patch_file(src, dst, ["Sign=ste_sign"], overwrite=True)
else:
    fixed, _ = frozen.patch(frozen.load(src), ["Sign=ste_sign"])
    frozen.save(fixed, dst, overwrite=True)
print((hwm_kb() - before) / 1024.0)
"""


def _child_peak_mb(side, src, dst):
    """Growth of the peak resident size of a fresh process doing one
    protobuf parse+serialize or one load+patch+save (None off Linux)."""
    if not os.path.exists("/proc/self/status"):
        return None
    proc = subprocess.run([sys.executable, "-c", _CHILD, side, src, dst],
                          capture_output=True, text=True, check=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return round(float(proc.stdout.strip().splitlines()[-1]), 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.nodes, args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("GraphDef: %(nodes)d nodes, %(bytes)d bytes; %(nodes_changed)d Sign nodes patched"
          % result)
    print("protobuf parse + serialize:       %(protobuf_parse_serialize_s).3f s" % result)
    print("  ... with file read + write:     %(protobuf_with_file_io_s).3f s" % result)
    print("graph_override load+patch+save:   %(load_patch_save_s).3f s "
          "(load %(load_s).3f, patch %(patch_s).3f, save %(save_s).3f)" % result)
    print("ratio: %(ratio).2fx protobuf alone, %(ratio_with_file_io).2fx protobuf with "
          "file I/O; patch() alone %(patch_ratio).2fx" % result)
    print("graph_override patch_file:        %(patch_file_s).3f s (what graph-override "
          "patch runs); ratio %(patch_file_ratio).2fx protobuf alone, "
          "%(patch_file_ratio_with_file_io).2fx with file I/O" % result)
    print("  ... without the C reader:        %(patch_file_python_s).3f s; ratio "
          "%(patch_file_python_ratio).2fx protobuf alone (C reader in use above: "
          "%(c_reader)s)" % result)
    print("deterministic: protobuf parse + SerializeToString(deterministic=True) "
          "%(protobuf_deterministic_s).3f s; ratio %(ratio_deterministic).2fx" % result)
    print("peak memory growth, own process each: protobuf %(protobuf_peak_growth_mb)s MB, "
          "load+patch+save %(graph_override_peak_growth_mb)s MB (ratio %(memory_ratio)s), "
          "patch_file %(patch_file_peak_growth_mb)s MB (ratio %(patch_file_memory_ratio)s)"
          % result)
    print("peak memory: %(peak_rss_mb).0f MB resident (process; %(rss_after_imports_mb).0f MB "
          "after importing TensorFlow), %(python_peak_mb).1f MB Python allocations" % result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
