"""Maps of a whole data set, written in shards with a manifest, resumable.

`explain_to_folder` runs a method over a data set (an array, a memory-mapped
``.npy``, an image folder, TFRecords, a ``tf.data.Dataset``: see
`graph_override.attribution.sources`) batch by batch and writes the maps of
every `shard_size` examples to FOLDER/``shard-NNNNN.npz`` (arrays ``maps``,
``outputs``, and ``targets`` and ``delta`` where the method gives them),
each written atomically, batch by batch as the batches come, in a thread
beside the model's calls (`graph_override.attribution.shard_writer`): a
shard is whole or not there, and its maps are never all in memory. FOLDER/``manifest.json`` (JSON, also replaced atomically) says
what was computed:

* ``format``: ``"graph_override.attribution.shards/1"``;
* ``model``: what the model is (``source``), ``sha256`` (of the GraphDef or
  model file; of every file of a SavedModel folder; of the frozen GraphDef
  for a model given as an object), ``input`` and ``output`` tensor names;
* ``method`` and ``options`` (as given, arrays by shape and sha256;
  SmoothGrad's seed, drawn for the run where none was given), ``target``,
  ``batch_size`` and ``shard_size``;
* ``input``: the data's description (`sources`: kind, path, shape or count,
  sha256);
* ``versions``: graph_override's and TensorFlow's;
* ``count``: the examples; ``shards``: one entry per finished shard, in row
  order: ``file``, ``rows`` [first, end), ``sha256`` of the file.

A model of several inputs (the data a list or dict of arrays, ``.npy``
files or sources, or a ``tf.data.Dataset`` of tuples or dicts: see
`graph_override.attribution.several_sources`) has its maps written per
input: a shard holds ``maps/NAME`` for each input (NAME its tensor name
without ":0"), and the manifest lists the inputs under ``inputs``, in the
model's order: each one's ``name``, the ``key`` the caller gave it (null for
a list) and its shard array ``maps``; `read_maps` gives them back as the
inputs were given (a list or a dict).

A run killed at any point leaves finished shards and a manifest that lists
them (and at most one finished shard it does not list yet, which a resumed
run checks and adopts). ``resume=True`` continues where the run stopped,
after checking that everything but the shard list is what this run would
write (else `AttributionError` naming what differs); finished shards are
never written again. The maps are those of one uninterrupted run, bit for
bit: each shard is computed from its own first row, in batches of the same
size, and SmoothGrad's noise is drawn per batch from the recorded seed.
"""

import functools
import hashlib
import json
import os
import warnings

import numpy as np

from graph_override.attribution import batching, several, shard_writer, sources
from graph_override.errors import AttributionError

__all__ = ["FORMAT", "MANIFEST", "default_shard_size", "explain_to_folder", "model_digest",
           "read_manifest", "read_maps"]

FORMAT = "graph_override.attribution.shards/1"
MANIFEST = "manifest.json"
_SHARD = "shard-%05d.npz"
_MIN_SHARD = 1024


def default_shard_size(batch_size):
    """The smallest multiple of `batch_size` of at least 1024 examples."""
    return batch_size * -(-_MIN_SHARD // batch_size)


def model_digest(explainer, x, packed=None):
    """The sha256 of the model: its file (every file of a folder, by
    relative path), or the frozen GraphDef of a model given as an object
    (traced for inputs like `x`; with `packed`, several inputs' packed
    batch)."""
    model = explainer.model
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        path = os.fsdecode(model)
        if os.path.isdir(path):
            digest = hashlib.sha256()
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    digest.update(os.path.relpath(full, path).encode("utf-8", "surrogateescape")
                                  + b"\0" + sources.file_digest(full).encode() + b"\0")
            return digest.hexdigest()
        return sources.file_digest(path)
    graph = explainer.model_graph(x, packed)
    return hashlib.sha256(graph.graph_def.SerializeToString(deterministic=True)).hexdigest()


def _plain(value):
    """`value` as JSON: numbers, strings, lists as they are; arrays by shape,
    dtype and sha256; anything else by its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float, str)) for v in value):
        return list(value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        array = np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else value)
        return {"array": list(array.shape), "dtype": array.dtype.str,
                "sha256": hashlib.sha256(array.data).hexdigest()}
    if callable(value):
        return "callable %s.%s" % (getattr(value, "__module__", "?"),
                                   getattr(value, "__qualname__", type(value).__name__))
    return repr(value)


def _versions():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from graph_override import __version__  # pylint: disable=import-outside-toplevel
    return {"graph_override": __version__, "tensorflow": tf.__version__}


def _atomic_json(path, data):
    from graph_override._files.atomic import atomic_write  # pylint: disable=import-outside-toplevel
    atomic_write(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode(),
                 keep_mode=False)


def read_manifest(folder):
    """The manifest of `folder` (a dict); AttributionError if it is not one."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise AttributionError("%s: cannot be read as a manifest (%s)" % (path, e)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise AttributionError("%s: not a manifest of %s" % (path, FORMAT))
    return manifest


def read_maps(folder):
    """The maps of every listed shard of `folder`, joined (an ndarray; for a
    model of several inputs a list or dict of them, as the inputs were
    given)."""
    manifest = read_manifest(folder)
    inputs = manifest.get("inputs")
    members = ["maps"] if not inputs else [i["maps"] for i in inputs]
    parts = {m: [] for m in members}
    for shard in manifest["shards"]:
        with np.load(os.path.join(folder, shard["file"]), allow_pickle=False) as data:
            for m in members:
                parts[m].append(data[m])
    if not manifest["shards"]:
        return None
    joined = [np.concatenate(parts[m]) for m in members]
    if not inputs:
        return joined[0]
    if inputs[0]["key"] is None:
        return joined
    return {i["key"]: maps for i, maps in zip(inputs, joined)}


def _inputs(explainer, first):
    """(`several.Packed`, the manifest's ``inputs``) of a batch `first` of
    several inputs (a list or dict), or (None, None) for one input."""
    if not several.is_several(first):
        return None, None
    packed, _ = several.arrange(first, explainer.input_names(first))
    return packed, [{"name": name, "key": None if packed.keys is None else str(key),
                     "maps": "maps/" + several.plain_name(name)}
                    for name, key in zip(packed.names, packed.keys or packed.names)]


def _differences(old, new):
    keys = sorted(k for k in set(old) | set(new) if k != "shards")
    return ["%s: %s in the manifest, %s now" % (k, json.dumps(old.get(k), sort_keys=True)[:200],
                                                json.dumps(new.get(k), sort_keys=True)[:200])
            for k in keys if old.get(k) != new.get(k)]


def _check_shards(folder, manifest):
    """The end row of the listed shards, each checked against its sha256."""
    end = 0
    for shard in manifest["shards"]:
        path = os.path.join(folder, shard["file"])
        if shard["rows"][0] != end or not os.path.isfile(path) or \
                sources.file_digest(path) != shard["sha256"]:
            raise AttributionError(
                "%s: listed in the manifest but missing or changed (rows %s); the run cannot "
                "be resumed: start it again in a new folder" % (path, shard["rows"]))
        end = shard["rows"][1]
    return end


def _adopt(folder, manifest, start, stop):
    """A finished shard the manifest does not list yet (the run was killed
    between writing it and the manifest), added to it; the new start row."""
    path = os.path.join(folder, _SHARD % len(manifest["shards"]))
    if not os.path.isfile(path):
        return start
    try:
        with np.load(path, allow_pickle=False) as data:
            rows = len(data["outputs"])
    except (OSError, ValueError, KeyError):
        return start  # not a whole shard: computed again
    if rows != stop - start:
        return start
    manifest["shards"].append({"file": os.path.basename(path), "rows": [start, stop],
                               "sha256": sources.file_digest(path)})
    _atomic_json(os.path.join(folder, MANIFEST), manifest)
    return stop


def _prepare(folder, header, resume):
    """The manifest to continue (a fresh one, or the folder's when resuming)."""
    path = os.path.join(folder, MANIFEST)
    if os.path.lexists(path):
        if not resume:
            raise AttributionError(
                "%s holds a run already (%s): resume it (resume=True, --resume) or write to "
                "another folder" % (folder, MANIFEST))
        manifest = read_manifest(folder)
        different = _differences(manifest, header)
        if different:
            raise AttributionError(
                "%s: the manifest is of another run, which --resume would not continue: %s. "
                "Give the same model, method, options and input, or write to another folder"
                % (path, "; ".join(different)))
        return manifest
    if os.path.isdir(folder) and os.listdir(folder):
        raise AttributionError("%s: not empty and holds no %s; write the maps to a new or "
                               "empty folder" % (folder, MANIFEST))
    os.makedirs(folder, exist_ok=True)
    manifest = dict(header, shards=[])
    _atomic_json(path, manifest)
    return manifest


def explain_to_folder(explainer, method, data, folder, target=None, *, batch_size=None,
                      shard_size=None, resume=False, progress=False, **options):
    """Writes the maps of `method` for every example of `data` in shards of
    `folder` (see the module docstring) and returns the manifest.

    Args:
      explainer: an `attribution.Explainer`.
      data: an array, a ``tf.data.Dataset`` of known length or a `sources`
        source.
      batch_size: examples per model call (None: `batching.batch_size_for`).
      shard_size: examples per shard, a multiple of the batch size (None:
        `default_shard_size`).
      resume: continue the run a manifest in `folder` describes.
      progress: a progress bar on stderr (tqdm).
    """
    source = batching.as_source(explainer, data)
    if source.count is None:
        raise AttributionError("the data's length is not known (a tf.data.Dataset of unknown "
                               "cardinality): shards need it; use ds.apply("
                               "tf.data.experimental.assert_cardinality(N))")
    size = batching.batch_size_for(explainer, source, batch_size)
    shard_size = default_shard_size(size) if shard_size is None else shard_size
    if not isinstance(shard_size, (int, np.integer)) or shard_size < 1 or shard_size % size:
        raise AttributionError("shard_size=%r: expected a multiple of the batch size %d"
                               % (shard_size, size))
    if method == "smoothgrad" and options.get("seed") is None:
        options = batching.with_seed(method, options)
        if resume and os.path.isfile(os.path.join(folder, MANIFEST)):
            options["seed"] = read_manifest(folder).get("options", {}).get("seed")
    first = next(source.batches(1, 0, 1))[1]
    packed, inputs = _inputs(explainer, first)
    if packed is not None:
        first = packed.pack(several.arrange(first, packed.names)[1])
    graph = explainer.model_graph(first, packed)
    header = {"format": FORMAT, "method": method, "options": {
        k: _plain(v) for k, v in sorted(options.items())}, "target": _plain(target),
        "batch_size": size, "shard_size": int(shard_size), "input": source.describe(),
        "count": source.count, "versions": _versions(),
        "model": {"source": graph.source, "sha256": model_digest(explainer, first, packed),
                  "input": graph.input, "output": graph.output}}
    if inputs:
        header["inputs"] = inputs
        header["model"]["input"] = list(graph.names)
    manifest = _prepare(folder, header, resume)
    start = _check_shards(folder, manifest)
    bar = batching.progress_bar(progress, source.count, start)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = _run_shards(explainer, method, source, target, folder, manifest,
                              (start, size, shard_size), bar, options)
    batching.warn_once(caught, batches)
    return manifest


def _run_shards(explainer, method, source, target, folder, manifest, sizes, bar, options):
    """Computes and writes the shards from row `start`; the batches run.
    Each batch's maps go to its shard's file in the `shard_writer.Writer`'s
    thread while the next batches run; the manifest lists a shard once its
    file is in place (in that thread too, in row order)."""
    start, size, shard_size = sizes
    while start < source.count:  # a shard a killed run finished, not listed yet
        stop = min(start + shard_size, source.count)
        if _adopt(folder, manifest, start, stop) != stop:
            break
        if bar is not None:
            bar.update(stop - start)
        start = stop
    count, index, shard = 0, len(manifest["shards"]), None
    members = [i["maps"] for i in manifest.get("inputs") or ()] or ["maps"]
    writer = shard_writer.Writer()
    try:
        while start < source.count:
            stop = min(start + shard_size, source.count)
            shard = shard_writer.ShardFile(os.path.join(folder, _SHARD % index), stop - start,
                                           members)
            for _, result in batching.batches(explainer, method, source, target,
                                              batch_size=size, start=start, stop=stop,
                                              **options):
                writer.submit(functools.partial(shard.add, result))
                count += 1
                if bar is not None:
                    bar.update(len(result.outputs))
            writer.submit(functools.partial(_finish_shard, folder, manifest, shard, start, stop))
            shard, start, index = None, stop, index + 1
    except BaseException:
        writer.close(check=False)
        if shard is not None:
            shard.discard()
        raise
    finally:
        if bar is not None:
            bar.close()
    writer.close()
    return count


def _finish_shard(folder, manifest, shard, start, stop):
    """Puts `shard` in place and lists it in the manifest."""
    digest = shard.finish()
    manifest["shards"].append({"file": os.path.basename(shard.path), "rows": [start, stop],
                               "sha256": digest})
    _atomic_json(os.path.join(folder, MANIFEST), manifest)
