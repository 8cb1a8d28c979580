"""`graph-override explain` at dataset scale: batches, a progress bar,
data read as it is needed (a memory-mapped .npy, a folder of images,
TFRecord files) and maps written in resumable shards (-o DIR).

The options (`add_options`) and their usage checks (`check`) need no
TensorFlow; `open_source` and `run_folder` run after it is imported."""

import os
import sys

__all__ = ["add_options", "check", "data_kind", "folder_mode", "open_source", "picture_rows",
           "progress", "run_folder"]

_TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfr")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp")  # sources.IMAGE_SUFFIXES


def _shape(text):
    import argparse  # pylint: disable=import-outside-toplevel
    try:
        dims = tuple(int(t) for t in text.split(","))
    except ValueError:
        dims = (0,)
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError("expected a shape such as 32,32,3, got %r" % text)
    return dims


def _examples(text):
    import argparse  # pylint: disable=import-outside-toplevel
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("expected a positive number of examples, got %r"
                                         % text)
    return int(text)


def add_options(parser):
    parser.add_argument("--batch-size", type=_examples, metavar="N",
                        help="examples per model call (default: as many as hold 2**21 input "
                             "values, 1 to 256; a fixed batch dimension: that)")
    parser.add_argument("--shard-size", type=_examples, metavar="N",
                        help="write the maps to the folder OUT in shards of N examples (a "
                             "multiple of the batch size; default the first multiple >= 1024)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run whose manifest is in the folder OUT")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (drawn only when stderr is a terminal)")
    parser.add_argument("--feature", metavar="NAME",
                        help="TFRecord --data: the feature of each tf.train.Example to explain")
    parser.add_argument("--feature-shape", type=_shape, metavar="D1,D2,...",
                        help="TFRecord --data: the shape of a float feature")
    parser.add_argument("--image-scale", choices=("unit", "byte", "symmetric"),
                        help="image --data: pixel values scaled to [0, 1] (unit, default), "
                             "[0, 255] (byte) or [-1, 1] (symmetric)")


def data_kind(path):
    """'images' (a folder), 'tfrecord' (by suffix) or 'npy'."""
    if os.path.isdir(path):
        return "images"
    if path.lower().endswith(_TFRECORD_SUFFIXES):
        return "tfrecord"
    return "npy"


def folder_mode(args):
    """Whether the maps go to a folder of shards (--shard-size, --resume, or
    OUT an existing folder)."""
    return bool(args.shard_size or args.resume or os.path.isdir(args.output))


def check(args):
    """None, or the usage error of these options (without TensorFlow)."""
    kind = data_kind(args.data)
    if (args.feature or args.feature_shape) and kind != "tfrecord":
        return "--feature and --feature-shape go with TFRecord --data (*.tfrecord)"
    if kind == "tfrecord" and not args.feature:
        return "--data %s: a TFRecord file; name the feature to explain with --feature" % (
            args.data)
    if args.image_scale and kind == "npy":
        return "--image-scale goes with a folder of images or TFRecord images as --data"
    if kind != "npy" and not os.path.exists(args.data):
        return "--data %s: not found" % args.data
    if kind == "images" and not any(n.lower().endswith(_IMAGE_SUFFIXES)
                                    for n in os.listdir(args.data)):
        return "--data %s: a folder that holds no image files (%s)" % (
            args.data, ", ".join(_IMAGE_SUFFIXES))
    if folder_mode(args):
        if args.force:
            return ("--force: a folder of shards is never overwritten; continue it with "
                    "--resume or write to another folder")
        if args.resume and not os.path.isfile(os.path.join(args.output, "manifest.json")):
            return "--resume: %s holds no manifest.json of an earlier run" % args.output
        parent = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(parent):
            return "-o %s: the folder %s does not exist; create it first" % (args.output,
                                                                           parent)
    return None


def progress(args):
    """Whether to draw a progress bar: stderr a terminal, and not --quiet."""
    try:
        return not args.quiet and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _image_shape(graph):
    """(height, width) and channels of the model's image input, where its
    placeholder says them (else None, 3)."""
    name = graph.input.split(":")[0]
    node = next((n for n in graph.graph_def.node if n.name == name), None)
    dims = ([d.size for d in node.attr["shape"].shape.dim]
            if node is not None and "shape" in node.attr else [])
    if len(dims) != 4:
        return None, 3
    size = tuple(dims[1:3]) if min(dims[1:3]) > 0 else None
    return size, dims[3] if dims[3] in (1, 3, 4) else 3


def open_source(args, explainer):
    """The `sources` source of --data: the .npy memory-mapped, a folder's
    images or TFRecords resized to the model's input; for several inputs, a
    list of memory-mapped .npy files (one per input), or the arrays of a .npz
    (numpy memory-maps .npy files only: a .npz's arrays are read whole)."""
    from graph_override.attribution import sources  # pylint: disable=import-outside-toplevel
    if isinstance(args.data_array, dict):  # several inputs from a .npz: read whole
        return args.data_array
    if isinstance(args.data_array, (list, tuple)):  # a .npy per input, each memory-mapped
        return [sources.NpySource(p.strip()) for p in args.data.split(",")]
    kind = data_kind(args.data)
    if kind == "npy":
        return sources.NpySource(args.data)
    size, channels = _image_shape(explainer.model_graph(None))
    scale = args.image_scale or "unit"
    if kind == "images":
        return sources.ImageFolder(args.data, size=size, channels=channels, scale=scale)
    return sources.TFRecords([args.data], args.feature, args.feature_shape, size=size,
                             channels=channels, scale=scale)


def picture_rows(n, png):
    """The line saying which rows the picture shows, where not all."""
    from graph_override.commands._picture import MAX_ROWS  # pylint: disable=import-outside-toplevel
    if n <= MAX_ROWS:
        return ""
    return "; the picture %s shows rows 0-%d of %d (the first %d)" % (png, MAX_ROWS - 1, n,
                                                                     MAX_ROWS)


def run_folder(args, explainer, spec, options, draw):
    """Writes the maps to the folder of shards -o (`attribution.shards`);
    then the picture of the first rows (`draw(x, result)` its bytes)."""
    from graph_override.attribution import batching, shards  # pylint: disable=import-outside-toplevel
    from graph_override.commands._picture import MAX_ROWS  # pylint: disable=import-outside-toplevel
    source = open_source(args, explainer)
    manifest = shards.explain_to_folder(
        explainer, spec.name, source, args.output, args.target, batch_size=args.batch_size,
        shard_size=args.shard_size, resume=args.resume, progress=progress(args), **options)
    line = "wrote %s: %s maps of %d example(s) in %d shard(s), manifest %s" % (
        args.output, spec.name, manifest["count"], len(manifest["shards"]),
        os.path.join(args.output, shards.MANIFEST))
    if args.png:
        from graph_override._files.atomic import atomic_write  # pylint: disable=import-outside-toplevel
        from graph_override.attribution.several_sources import as_source, rows as count  # pylint: disable=import-outside-toplevel
        import numpy as np  # pylint: disable=import-outside-toplevel
        parts, rows = [], 0
        members = [i["maps"] for i in manifest.get("inputs") or ()]  # maps/NAME per input
        for shard in manifest["shards"]:  # the first MAX_ROWS rows, from as few shards
            if rows >= MAX_ROWS:
                break
            with np.load(os.path.join(args.output, shard["file"])) as data:
                parts.append(_Rows(data, MAX_ROWS - rows, members))
            rows += count(parts[-1].maps)
        x = next(as_source(source).batches(rows, 0, rows))[1]
        atomic_write(args.png, draw(x, batching.join(parts)), keep_mode=False)
        line += "; picture %s%s" % (args.png, picture_rows(manifest["count"], args.png)
                                    or "")
    print(line)
    return 0


class _Rows:
    """The first `rows` of a shard's arrays, as an `Attribution` holds them
    (several inputs: the list of their `members`' maps, in the model's order)."""

    def __init__(self, data, rows, members=()):
        self.method = None
        for name in ("maps", "outputs", "targets", "delta"):
            setattr(self, name, data[name][:rows] if name in data.files else None)
        if members:
            self.maps = [data[m][:rows] for m in members]
