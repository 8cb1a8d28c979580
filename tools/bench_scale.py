"""Section 10 of tools/bench.py: explaining a data set, a batch at a time.

One frozen model (Keras MobileNetV2, weights=None, batch normalization
calibrated, as in section 7) explains N images of a memory-mapped ``.npy``
with `attribution.explain_to_folder` (the code of ``graph-override explain
-o DIR``: each batch read from the file, the maps written in shards with a
manifest) at a fixed batch size, one fresh process per N:

- throughput: the seconds for all N images per image, against the best
  single batch's per-image cost (the same method and batch size, one call on
  a batch already in memory, warm: the fastest of REPEATS calls before the
  run and REPEATS after it, so that the single batch and the run see the
  load of the same minutes); the goal is a ratio of at most 1.1
  (`THROUGHPUT_GOAL`). Both sides are warm: the method's function is built
  by a call before anything is timed, and where N is not a multiple of the
  batch size the first call at the last batch's size is made (and reported,
  ``partial_first_call_s``) before the run too. On a shared machine a short
  call gets more of the cores than a run of minutes (the scheduler favours
  a process that has just waited), so the ratio to the median single batch
  and the CPU ratio (``time.process_time``, all threads) are reported beside
  it, with the load average at the run's start and end;
- side by side (the N given `rounds` in the config: 10,000): the whole run
  and as many calls on one batch in memory, each round in a rotating order,
  the median of the rounds' ratios (`_side_by_side`): the goal's measure
  where the machine's speed drifts over minutes, which a best single batch
  of one minute does not see;
- memory: the process's peak resident size during the run (``VmHWM``,
  reset to the resident size when the run starts), and the resident size
  then (the model built, frozen and warmed up; the data written with
  ``write()``, never mapped for writing); flat in N is a peak within 10 %
  (`MEMORY_GOAL`) from the smallest N to the largest.

Run on its own: ``python tools/bench_scale.py SIZE ALPHA BATCH N REPEATS
[ROUNDS]`` prints one JSON line.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
METHOD = "gradient_input"
THROUGHPUT_GOAL = 1.1
MEMORY_GOAL = 1.1


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _write_npy(path, n, size):
    """N random images as a .npy file, written a chunk at a time with
    write() (no mapping: the file's pages never count as this process's)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {
            "descr": "<f4", "fortran_order": False, "shape": (n, size, size, 3)})
        for first in range(0, n, 256):
            rows = min(256, n - first)
            f.write(rng.uniform(-1, 1, (rows, size, size, 3)).astype("<f4").tobytes())


def _reset_peak():
    """Resets the process's peak resident size (VmHWM) to its resident size
    now (Linux 4.0+: ``echo 5 > /proc/self/clear_refs``), so that the peak
    read later is the run's."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def child(size, alpha, batch, n, repeats, rounds=0):
    """The measurements of one N: a dict; with `rounds`, also the run side
    by side with as many calls on one batch in memory (`_side_by_side`)."""
    import gc  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel
    from bench_attribution import freeze, keras_application  # pylint: disable=import-outside-toplevel
    from graph_override import attribution  # pylint: disable=import-outside-toplevel
    from graph_override.attribution import shards, sources  # pylint: disable=import-outside-toplevel
    model = keras_application("MobileNetV2", size, alpha=alpha)
    graph_def, inputs, outputs = freeze(model, size)
    del model
    gc.collect()
    explainer = attribution.Explainer(graph_def, inputs=inputs, outputs=outputs)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "x.npy")
        _write_npy(path, n, size)
        x = next(sources.NpySource(path).batches(batch))[1]
        explainer.attribute(METHOD, x, target=0)  # warm-up: the method's function built
        partial_first_s = None
        if n % batch:  # the run's last batch has another shape: its first call paid here
            start = time.perf_counter()
            explainer.attribute(METHOD, x[:n % batch], target=0)
            partial_first_s = time.perf_counter() - start
        before = _single_batches(explainer, x, repeats)
        gc.collect()
        before_peak = _status_kb("VmHWM")
        _reset_peak()
        before_rss = _status_kb("VmRSS")
        load_start = os.getloadavg()
        start, cpu = time.perf_counter(), time.process_time()
        manifest = shards.explain_to_folder(explainer, METHOD, sources.NpySource(path),
                                            os.path.join(folder, "maps"), target=0,
                                            batch_size=batch)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        peak = _status_kb("VmHWM")
        load_end = os.getloadavg()
        after = _single_batches(explainer, x, repeats)
        side = _side_by_side(explainer, path, folder, x, n, batch, rounds) if rounds else {}
    walls = [w for w, _ in before + after]
    cpus = [c for _, c in before + after]
    best, best_cpu = min(walls), min(cpus)
    median, median_cpu = statistics.median(walls), statistics.median(cpus)
    per_image, cpu_per_image = seconds / n, cpu / n
    return dict(n=n, batch=batch, size=size, alpha=alpha, shards=len(manifest["shards"]),
                seconds=seconds, ms_per_image=per_image * 1e3,
                best_ms_per_image=best / batch * 1e3, ratio=per_image / (best / batch),
                median_ms_per_image=median / batch * 1e3,
                median_ratio=per_image / (median / batch),
                best_before_ms_per_image=min(w for w, _ in before) / batch * 1e3,
                best_after_ms_per_image=min(w for w, _ in after) / batch * 1e3,
                cpu_ms_per_image=cpu_per_image * 1e3, best_cpu_ms_per_image=best_cpu / batch * 1e3,
                cpu_ratio=cpu_per_image / (best_cpu / batch),
                median_cpu_ratio=cpu_per_image / (median_cpu / batch),
                partial_rows=n % batch, partial_first_call_s=partial_first_s,
                load_start=list(load_start), load_end=list(load_end),
                rss_before_mb=before_rss / 1024, peak_setup_mb=before_peak / 1024,
                peak_mb=peak / 1024, **side)


def _side_by_side(explainer, path, folder, x, n, batch, rounds):
    """`rounds` rounds, each in a rotating order: the whole run (to a
    folder of its own, removed after), and ceil(n / batch) calls of the
    method on the batch `x` already in memory (the work of the run without
    its file reading and writing); the ratio of their per-image costs within
    each round, and its median: both sides see the same minutes, where the
    best single batch of a minute's calls is a quieter moment than a run of
    minutes sees."""
    import shutil  # pylint: disable=import-outside-toplevel
    from bench_common import rotations  # pylint: disable=import-outside-toplevel
    from graph_override.attribution import shards, sources  # pylint: disable=import-outside-toplevel
    calls = -(-n // batch)
    ratios, cpu_ratios, count = [], [], [0]

    def run():
        count[0] += 1
        out = os.path.join(folder, "side%d" % count[0])
        start, cpu = time.perf_counter(), time.process_time()
        shards.explain_to_folder(explainer, METHOD, sources.NpySource(path), out, target=0,
                                 batch_size=batch)
        spent = (time.perf_counter() - start) / n, (time.process_time() - cpu) / n
        shutil.rmtree(out)
        return spent

    def in_memory():
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            explainer.attribute(METHOD, x, target=0)
        images = calls * len(x)
        return (time.perf_counter() - start) / images, (time.process_time() - cpu) / images

    sides = {"run": run, "batches": in_memory}
    for order in rotations(list(sides), rounds):
        got = {label: sides[label]() for label in order}
        ratios.append(got["run"][0] / got["batches"][0])
        cpu_ratios.append(got["run"][1] / got["batches"][1])
    return dict(side_rounds=rounds, side_ratio=statistics.median(ratios),
                side_cpu_ratio=statistics.median(cpu_ratios), side_ratios=ratios,
                side_cpu_ratios=cpu_ratios)


def _single_batches(explainer, x, repeats):
    """(wall s, CPU s) of `repeats` calls of the method on the batch `x`."""
    times = []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        explainer.attribute(METHOD, x, target=0)
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    return times


def _run_child(args, log):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(ROOT / "tools")] + [
            p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, __file__] + [str(a) for a in args],
                          capture_output=True, text=True, env=env, cwd=str(ROOT), check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        log("bench_scale failed: %s" % tail)
        return {"error": "tools/bench_scale.py %s failed: %s" % (
            " ".join(str(a) for a in args), tail)}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_section(cfg, log):
    """The section's rows: one per N (a fresh process each)."""
    s = cfg["scale"]
    rows = []
    for n in s["ns"]:
        log("scale: MobileNetV2 %dx%d alpha %g, %d images in batches of %d (own process)"
            % (s["size"], s["size"], s["alpha"], n, s["batch"]))
        rows.append(_run_child([s["size"], s["alpha"], s["batch"], n, s["repeats"],
                                s.get("rounds", {}).get(n, 0)], log))
    return rows


def render(rows):
    """The section's Markdown."""
    if not rows:
        return None
    errors = [r["error"] for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    out = []
    if rows:
        r0 = rows[0]
        out.append(
            "`tools/bench_scale.py`: Keras MobileNetV2 (weights=None, %dx%dx3, alpha %g) "
            "frozen; %s of N images from a memory-mapped .npy with "
            "`attribution.explain_to_folder` (what `graph-override explain -o DIR` runs: "
            "each batch read from the file, maps written in shards with a manifest) in "
            "batches of %d, one fresh process per N. 'best batch': the fastest of the "
            "calls of the method on one batch already in memory, warm, made before and "
            "after the run (it and the run see the same minutes' load). CPU: `time.process_time` of the process (all its threads), less "
            "sensitive than wall time to other processes on the cores. Peak RSS: the process's `VmHWM` during the run (reset with "
            "/proc/self/clear_refs when it starts); 'at start': the resident size then "
            "(model built, frozen and warmed up)." % (
                r0["size"], r0["size"], r0["alpha"], METHOD, r0["batch"]))
        out.append("")
        out.append("| N | shards | s | ms / image | best batch ms / image | ratio (goal <= %.1f) "
                   "| CPU ms / image | best batch CPU ms / image | CPU ratio | RSS MB at start "
                   "| peak RSS MB |" % THROUGHPUT_GOAL)
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            out.append("| %s | %d | %.1f | %.2f | %.2f | **%.3f** | %s | %s | %s | %.0f | %.0f |"
                       % (format(r["n"], ","), r["shards"], r["seconds"], r["ms_per_image"],
                          r["best_ms_per_image"], r["ratio"],
                          "%.2f" % r["cpu_ms_per_image"] if "cpu_ms_per_image" in r else "—",
                          "%.2f" % r["best_cpu_ms_per_image"] if "cpu_ratio" in r else "—",
                          "**%.3f**" % r["cpu_ratio"] if "cpu_ratio" in r else "—",
                          r["rss_before_mb"], r["peak_mb"]))
        out.append("")
        for r in rows:
            if "median_ratio" not in r:
                continue
            out.append(
                "- N = %s: against the median single batch (%.2f ms / image) the ratio is "
                "**%.3f** (CPU %.3f); best single batch before the run %.2f, after it %.2f "
                "ms / image; load average at the run's start %.2f, at its end %.2f%s." % (
                    format(r["n"], ","), r["median_ms_per_image"], r["median_ratio"],
                    r["median_cpu_ratio"], r["best_before_ms_per_image"],
                    r["best_after_ms_per_image"], r["load_start"][0], r["load_end"][0],
                    "; the first call at the last batch's size (%d rows), made before the "
                    "run: %.2f s" % (r["partial_rows"], r["partial_first_call_s"])
                    if r.get("partial_first_call_s") is not None else ""))
        for r in rows:
            if "side_ratio" not in r:
                continue
            ratio = r["side_ratio"]
            out.append(
                "- N = %s, side by side (%d rounds in a rotating order: the whole run, and as "
                "many calls on one batch in memory): ratio **%.3f** (goal <= %.1f: %s), CPU "
                "%.3f; per round %s." % (
                    format(r["n"], ","), r["side_rounds"], ratio, THROUGHPUT_GOAL,
                    "met" if ratio <= THROUGHPUT_GOAL else "**not met**", r["side_cpu_ratio"],
                    ", ".join("%.3f" % v for v in r["side_ratios"])))
        if len(rows) > 1:
            low, high = min(rows, key=lambda r: r["n"]), max(rows, key=lambda r: r["n"])
            growth = high["peak_mb"] / low["peak_mb"]
            out.append("")
            out.append("Peak RSS from %s to %s images: x%.3f (goal <= %.2f: %s)." % (
                format(low["n"], ","), format(high["n"], ","), growth, MEMORY_GOAL,
                "met" if growth <= MEMORY_GOAL else "**not met**"))
    for e in errors:
        out.append("")
        out.append("Not measured: %s" % e)
    return "\n".join(out)


if __name__ == "__main__":
    size_, alpha_, batch_, n_, repeats_ = sys.argv[1:6]
    print(json.dumps(child(int(size_), float(alpha_), int(batch_), int(n_), int(repeats_),
                           int(sys.argv[6]) if len(sys.argv) > 6 else 0)))
