"""A bounded fuzz of the C GraphDef reader under AddressSanitizer and UBSan.

Builds graph_override's C reader (``_scan.c``) with
``-fsanitize=address,undefined -fno-omit-frame-pointer`` into a temporary
folder, makes seeded mutations of small GraphDefs (bit flips, byte edits,
cut and repeated spans, length prefixes set to the limits), runs each
through the sanitized ``scan``, ``node_count`` and ``append`` in a child
process (the ASan runtime preloaded: a Python extension cannot bring its
own), and compares what they return with the pure-Python reader and with
protobuf. Exit status: 0 when every case agrees and no sanitizer spoke, 1
on a disagreement or a sanitizer report (printed, the input saved next to
it), 2 when the reader cannot be built here (no gcc or no libasan).

    python tools/fuzz_scan.py [--cases 3000] [--seed 0] [--keep DIR]

Needs gcc with libasan and libubsan, and the package importable (run from
the repository, or with it installed).
"""

import argparse
import array
import os
import pathlib
import pickle
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
         "-fno-sanitize-recover=undefined", "-O1", "-g", "-shared", "-fPIC"]
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")

# What the child runs, under the sanitizers: nothing but the extension (no
# TensorFlow, whose own code the sanitizers would also watch).
CHILD = r'''
import array, importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("_scan", sys.argv[1])
scan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scan)
with open(sys.argv[2], "rb") as f:
    cases = pickle.load(f)
out = []
for data, suffix in cases:
    got = {"count": scan.node_count(data), "flat": scan.scan(data, False)}
    full = scan.scan(data)
    got["scan"] = full
    if full is not None and len(full[4]) >= 4:
        n = len(full[4]) // 4
        which = array.array("q", range(0, n, 2))
        got["append"] = scan.append(data, full[0], which, array.array("q", [0] * len(which)),
                                    [suffix])
    out.append(got)
with open(sys.argv[3], "wb") as f:
    pickle.dump(out, f)
'''


def find_source():
    """The C reader's source, wherever in graph_override/frozen/ it lives."""
    found = sorted((ROOT / "graph_override" / "frozen").rglob("_scan.c"))
    if not found:
        raise SystemExit("fuzz_scan: no _scan.c under graph_override/frozen/")
    return found[0]


def runtime():
    """The ASan runtime to preload, or None."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    path = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True,
                          text=True, check=False).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def build(folder, source=None):
    """Compiles the sanitized reader (`source`, by default the package's
    _scan.c) into `folder`; returns its path."""
    source = pathlib.Path(source or find_source())
    target = pathlib.Path(folder) / ("_scan" + sysconfig.get_config_var("EXT_SUFFIX"))
    command = ["gcc", *FLAGS, "-I", sysconfig.get_paths()["include"], "-I", str(source.parent),
               str(source), "-o", str(target)]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError("building the sanitized reader failed:\n" + proc.stderr)
    return target


# --- inputs -----------------------------------------------------------------

def seeds():
    """Serialized GraphDefs with every field the reader looks at."""
    from tensorflow.core.framework import graph_pb2  # pylint: disable=import-outside-toplevel
    graphs = []
    g = graph_pb2.GraphDef()
    g.node.add(name="x", op="Placeholder")
    g.node.add(name="s", op="Sign", input=["x"])
    g.node.add(name="y", op="AddN", input=["s:0", "x", "^s"])
    g.node[2].attr["N"].i = 2
    g.versions.producer = 1
    graphs.append(g)
    g = graph_pb2.GraphDef()
    for k in range(12):
        node = g.node.add(name="n/%d" % k, op="Identity" if k else "Const",
                          input=["n/%d:%d" % (k - 1, k % 3)] if k else [])
        node.attr["T"].type = 1
    fn = g.library.function.add()
    fn.signature.name = "f"
    fn.node_def.add(name="inner", op="Relu", input=["a"])
    graphs.append(g)
    return [m.SerializeToString() for m in graphs]


def _varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def mutate(rng, data):
    """One seeded mutation of `data`."""
    data = bytearray(data)
    for _ in range(1 if rng.random() < 0.6 else rng.randint(2, 4)):
        kind = rng.randrange(7)
        at = rng.randrange(len(data) + 1) if data else 0
        if kind == 0 and data:  # flip a bit
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:  # set a byte to a boundary value
            data[min(at, len(data) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF))
        elif kind == 2:  # cut
            del data[at:at + rng.randint(1, 8)]
        elif kind == 3:  # repeat a span
            end = min(len(data), at + rng.randint(1, 32))
            data[at:at] = data[at:end] * rng.randint(1, 3)
        elif kind == 4:  # insert a huge or long varint
            data[at:at] = _varint(rng.choice((2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 63, 300)))
        elif kind == 5:  # insert random bytes
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        else:  # truncate
            del data[at:]
    return bytes(data)


def cases(count, seed):
    rng = random.Random(seed)
    base = seeds()
    out = [(b, b"") for b in base]
    while len(out) < count:
        data = mutate(rng, rng.choice(base + [d for d, _ in out[-50:]]))
        suffix = rng.choice((b"", b"\x2a\x00", bytes(rng.randrange(256) for _ in range(4))))
        out.append((data, suffix))
    return out[:count]


# --- the reference ------------------------------------------------------------

def _spans(data, raw):
    pairs = array.array("i", raw)
    return [data[pairs[i]:pairs[i] + pairs[i + 1]] for i in range(0, len(pairs), 2)]


def _python_reading(data, suffix, want_append):
    """The pure-Python reader's node count and appended bytes of `data` (None
    where it does not parse)."""
    from google.protobuf.message import DecodeError  # pylint: disable=import-outside-toplevel

    from graph_override.frozen.graphdef import wire  # pylint: disable=import-outside-toplevel
    saved, wire._scan = wire._scan, None  # pylint: disable=protected-access
    try:
        try:
            count = wire.node_count(data)
        except DecodeError:
            count = None  # the nodes do not parse: nothing to compare with
        try:
            nodes = wire.parse_nodes(data)
        except DecodeError:
            nodes = None
        appended = None
        if nodes is not None and want_append:
            appended = wire.append_to_nodes(data, {i: suffix for i in range(0, len(nodes.node), 2)},
                                            nodes)
    finally:
        wire._scan = saved  # pylint: disable=protected-access
    return count, appended


def _index_difference(data, scan, graph):
    """What the C scan's names, op types and inputs get wrong against
    protobuf's parse `graph`, or None."""
    if _spans(data, scan[1]) != [n.name.encode() for n in graph.node]:
        return "names differ from protobuf's"
    if list(scan[2]) != [n.op for n in graph.node]:
        return "op types differ from protobuf's"
    if _spans(data, scan[3]) != [i.encode() for n in graph.node for i in n.input]:
        return "inputs differ from protobuf's"
    return None


def _same_graph(a, b):
    from google.protobuf.message import DecodeError  # pylint: disable=import-outside-toplevel
    from tensorflow.core.framework import graph_pb2  # pylint: disable=import-outside-toplevel
    try:
        return graph_pb2.GraphDef.FromString(a) == graph_pb2.GraphDef.FromString(b)
    except DecodeError:
        return False


def compare(data, suffix, got):
    """What the sanitized reader got wrong for `data`, or None."""
    from google.protobuf.message import DecodeError  # pylint: disable=import-outside-toplevel
    from tensorflow.core.framework import graph_pb2  # pylint: disable=import-outside-toplevel

    count, appended = _python_reading(data, suffix, got.get("append") is not None)
    if None not in (got["count"], count) and got["count"] != count:
        return "node_count: C %r, Python %r" % (got["count"], count)
    if (got["scan"] is None) != (got["flat"] is None):
        return "scan(resolve=False) and scan() disagree on whether they read it"
    if got["scan"] is None:
        return None
    try:
        graph = graph_pb2.GraphDef.FromString(data)
    except DecodeError:
        return None
    wrong = _index_difference(data, got["scan"], graph)
    if wrong:
        return wrong
    # The Python reader writes fields the schema does not know (or knows
    # with another wire type) last; the C one keeps them where they are.
    if (appended is not None and got["append"] != appended
            and not _same_graph(got["append"], appended)):
        return "append differs from the Python reader's"
    return None


def run(count, seed, keep=None, out=sys.stdout, source=None):
    """Fuzzes `count` cases of the reader built from `source` (the
    package's _scan.c by default); returns the exit status (see the
    module)."""
    preload = runtime()
    if preload is None:
        print("fuzz_scan: gcc with libasan is needed", file=sys.stderr)
        return 2
    folder = pathlib.Path(keep or tempfile.mkdtemp(prefix="fuzz_scan."))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        try:
            module = build(folder, source)
        except RuntimeError as e:
            print("fuzz_scan: %s" % e, file=sys.stderr)
            return 2
        todo = cases(count, seed)
        (folder / "cases.pickle").write_bytes(pickle.dumps(todo))
        env = dict(os.environ, LD_PRELOAD=preload,
                   ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        proc = subprocess.run([sys.executable, "-c", CHILD, str(module),
                               str(folder / "cases.pickle"), str(folder / "out.pickle")],
                              capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0 or any(r in proc.stderr for r in REPORTS):
            keep = keep or str(folder)
            print("fuzz_scan: the sanitized reader failed (exit %d); inputs in %s:\n%s"
                  % (proc.returncode, folder / "cases.pickle", proc.stderr[-6000:]), file=out)
            return 1
        results = pickle.loads((folder / "out.pickle").read_bytes())
        wrong = [(i, why) for i, ((data, suffix), got) in enumerate(zip(todo, results))
                 for why in [compare(data, suffix, got)] if why]
        read = sum(got["scan"] is not None for got in results)
        if wrong:
            i, why = wrong[0]
            path = folder / ("case-%d.pb" % i)
            path.write_bytes(todo[i][0])
            keep = keep or str(folder)
            print("fuzz_scan: %d of %d cases disagree; the first (%s): %s"
                  % (len(wrong), len(todo), path, why), file=out)
            return 1
        print("fuzz_scan: %d cases (seed %d), %d read by the C reader, no sanitizer report, "
              "all agree with the Python reader" % (len(todo), seed, read), file=out)
        return 0
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=3000, help="how many inputs (3000)")
    parser.add_argument("--seed", type=int, default=0, help="the mutations' seed (0)")
    parser.add_argument("--keep", help="a folder to build and keep everything in")
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error("--cases must be at least 1")
    sys.path.insert(0, str(ROOT))
    return run(args.cases, args.seed, args.keep)


if __name__ == "__main__":
    sys.exit(main())
