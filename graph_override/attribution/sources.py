"""Where the examples come from, read a batch at a time.

A source has ``count`` (the number of examples, None where a stream does
not say), ``batches(batch_size, start, stop)`` yielding (first row, float
ndarray of at most batch_size rows) from row `start`, and ``describe()``
(a JSON-able dict: what it is and a digest, for a run's manifest):

* `ArraySource`: an ndarray, or a memory-mapped one (`NpySource`: a ``.npy``
  file opened with ``np.load(mmap_mode="r")`` for each batch: only the rows
  of a batch are read into memory, and stay there only while it runs);
* `ImageFolder`: the PNG, JPEG, GIF and BMP files of a folder (not its
  subfolders), in the order of their names, decoded with TensorFlow's
  ``tf.io.decode_image`` (the user's data, read in this process). Each image
  is decoded to `channels` channels (3 by default; 1: grey), resized to
  `size` (height, width; the model's input size) with
  ``tf.image.resize(method="bilinear", antialias=True)`` where its own size
  differs, and scaled from [0, 255] to `scale`: ``"unit"`` [0, 1]
  (default), ``"byte"`` [0, 255], ``"symmetric"`` [-1, 1];
* `TFRecords`: TFRecord files of ``tf.train.Example`` s, the feature
  `feature` of each: a float list (`shape` given, e.g. (32, 32, 3)) or
  encoded image bytes (decoded as a folder's images are);
* `DatasetSource`: a ``tf.data.Dataset`` of examples (not batched).

The digest of ``describe()`` is a sha256 of the array's bytes (an ``.npy``
file's whole content), of the folder's file names and sizes, or of the
TFRecord files' names and sizes; a ``tf.data.Dataset`` has none.
"""

import hashlib
import os

import numpy as np

from graph_override.errors import AttributionError

__all__ = ["ArraySource", "DatasetSource", "IMAGE_SUFFIXES", "ImageFolder", "NpySource",
           "SCALES", "TFRecords", "as_source", "file_digest"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp")
SCALES = {"unit": (0.0, 1.0), "byte": (0.0, 255.0), "symmetric": (-1.0, 1.0)}
_MAX_IMAGE_BYTES = 256 * 2 ** 20


def file_digest(path, chunk=2 ** 20):
    """The sha256 (hex) of the file `path`, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_start(start, stop, count):
    stop = count if stop is None else stop if count is None else min(stop, count)
    if start < 0 or (stop is not None and start > stop):
        raise AttributionError("rows %d to %s: outside the %s examples" % (start, stop, count))
    return stop


class ArraySource:
    """An array (ndarray or memmap), first dimension the examples."""

    def __init__(self, array, description=None):
        if getattr(array, "ndim", 0) < 1:
            raise AttributionError("the data has shape %s; expected examples, first dimension "
                                   "the examples" % (getattr(array, "shape", None),))
        self.array = array
        self.count = int(array.shape[0])
        self.example_shape = tuple(array.shape[1:])
        self._description = description

    def batches(self, batch_size, start=0, stop=None):
        stop = _check_start(start, stop, self.count)
        for first in range(start, stop, batch_size):
            yield first, np.array(self.array[first:min(first + batch_size, stop)])

    def describe(self):
        if self._description is not None:
            return dict(self._description)
        return {"kind": "array", "shape": list(self.array.shape), "dtype": self.array.dtype.str,
                "sha256": hashlib.sha256(np.ascontiguousarray(self.array).data).hexdigest()}


class NpySource(ArraySource):
    """A ``.npy`` file, memory-mapped: a batch's rows are read when it runs."""

    def __init__(self, path):
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as e:
            raise AttributionError("%s: not a .npy array that memory-maps (%s); save it "
                                   "with numpy.save(path, array)" % (path, e)) from None
        if not isinstance(array, np.ndarray):
            raise AttributionError("%s holds several arrays (.npz); save the one to use with "
                                   "numpy.save(path, array)" % path)
        self.path = os.path.abspath(path)
        super().__init__(array)

    def batches(self, batch_size, start=0, stop=None):
        """As `ArraySource`'s, the file mapped again for each batch: the pages
        a batch read leave the process with its mapping, so what stays
        resident does not grow with the rows read."""
        stop = _check_start(start, stop, self.count)
        for first in range(start, stop, batch_size):
            mapped = np.load(self.path, mmap_mode="r", allow_pickle=False)
            rows = np.array(mapped[first:min(first + batch_size, stop)])
            del mapped
            yield first, rows

    def describe(self):
        return {"kind": "npy", "path": self.path, "shape": list(self.array.shape),
                "dtype": self.array.dtype.str, "sha256": file_digest(self.path)}


def _decode(data, name, size, channels, scale):
    """One encoded image as a float32 array (height, width, channels)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    try:
        image = tf.io.decode_image(data, channels=channels, expand_animations=False)
    except (tf.errors.InvalidArgumentError, ValueError) as e:
        raise AttributionError("%s: not an image TensorFlow decodes (PNG, JPEG, GIF, BMP): "
                               "%s" % (name, str(e).splitlines()[0][:200])) from None
    image = tf.cast(image, tf.float32)
    if size is not None and tuple(image.shape[:2]) != tuple(size):
        image = tf.image.resize(image, size, method="bilinear", antialias=True)
    low, high = SCALES[scale]
    return (image.numpy() * np.float32((high - low) / 255.0) + np.float32(low)).astype(
        np.float32)


def _stack(images, names):
    shapes = {i.shape for i in images}
    if len(shapes) > 1:
        raise AttributionError(
            "images of different sizes (%s ...) and a model whose input says no height and "
            "width: resize them to one size first (%s)" % (
                ", ".join(str(s) for s in sorted(shapes)[:3]), ", ".join(names[:3])))
    return np.stack(images)


def _check_image_options(size, channels, scale):
    if scale not in SCALES:
        raise AttributionError("scale=%r: expected one of %s" % (scale, ", ".join(SCALES)))
    if channels not in (1, 3, 4):
        raise AttributionError("channels=%r: expected 1, 3 or 4" % (channels,))
    if size is not None and (len(size) != 2 or not all(
            isinstance(s, (int, np.integer)) and s > 0 for s in size)):
        raise AttributionError("size=%r: expected (height, width)" % (size,))


class ImageFolder:
    """The images of a folder, in name order (see the module docstring)."""

    def __init__(self, folder, size=None, channels=3, scale="unit"):
        _check_image_options(size, channels, scale)
        if not os.path.isdir(folder):
            raise AttributionError("%s: not a folder of images" % folder)
        self.folder = os.path.abspath(folder)
        self.names = sorted(n for n in os.listdir(folder)
                            if n.lower().endswith(IMAGE_SUFFIXES)
                            and os.path.isfile(os.path.join(folder, n)))
        if not self.names:
            raise AttributionError("%s holds no image files (%s)" % (
                folder, ", ".join(IMAGE_SUFFIXES)))
        self.size, self.channels, self.scale = size, channels, scale
        self.count = len(self.names)
        self.example_shape = (tuple(size) if size else (None, None)) + (channels,)

    def _read(self, name):
        from graph_override._files.read import read_regular_file  # pylint: disable=import-outside-toplevel
        path = os.path.join(self.folder, name)
        return read_regular_file(
            path, _MAX_IMAGE_BYTES, error=AttributionError, expected="an image file",
            too_large="%%s: larger than %d MiB, not an image to explain" % (
                _MAX_IMAGE_BYTES // 2 ** 20))

    def batches(self, batch_size, start=0, stop=None):
        stop = _check_start(start, stop, self.count)
        for first in range(start, stop, batch_size):
            names = self.names[first:min(first + batch_size, stop)]
            yield first, _stack([_decode(self._read(n), os.path.join(self.folder, n),
                                         self.size, self.channels, self.scale)
                                 for n in names], names)

    def describe(self):
        digest = hashlib.sha256()
        for name in self.names:
            digest.update(("%s\0%d\0" % (name, os.path.getsize(
                os.path.join(self.folder, name)))).encode("utf-8", "surrogateescape"))
        return {"kind": "image_folder", "path": self.folder, "count": self.count,
                "size": list(self.size) if self.size else None, "channels": self.channels,
                "scale": self.scale, "sha256": digest.hexdigest()}


class TFRecords:
    """The feature `feature` of the ``tf.train.Example`` s in TFRecord files."""

    def __init__(self, paths, feature, shape=None, size=None, channels=3, scale="unit"):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        self.paths = [os.path.abspath(p) for p in ([paths] if isinstance(paths, str) else paths)]
        missing = [p for p in self.paths if not os.path.isfile(p)]
        if not self.paths or missing:
            raise AttributionError("TFRecord file(s) %s: not found" % ", ".join(missing or ["-"]))
        _check_image_options(size, channels, scale)
        self.feature, self.size, self.channels, self.scale = feature, size, channels, scale
        first = next(iter(tf.data.TFRecordDataset(self.paths[:1])), None)
        if first is None:
            raise AttributionError("%s holds no records" % self.paths[0])
        example = tf.train.Example.FromString(first.numpy())
        if feature not in example.features.feature:
            raise AttributionError("%s: the records have no feature %r; they have %s" % (
                self.paths[0], feature, ", ".join(sorted(example.features.feature))))
        self.kind = example.features.feature[feature].WhichOneof("kind")
        if self.kind == "float_list" and not shape:
            raise AttributionError("feature %r is a float list: give its shape (e.g. 32,32,3)"
                                   % feature)
        if self.kind not in ("float_list", "bytes_list"):
            raise AttributionError("feature %r holds %s; expected floats or encoded image "
                                   "bytes" % (feature, self.kind))
        self.shape = tuple(shape) if shape else None
        self.count = sum(1 for _ in tf.data.TFRecordDataset(self.paths))
        self.example_shape = self.shape or (
            (tuple(size) if size else (None, None)) + (channels,))

    def _example(self, record):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        value = tf.train.Example.FromString(record).features.feature[self.feature]
        if self.kind == "float_list":
            values = np.asarray(value.float_list.value, np.float32)
            if values.size != int(np.prod(self.shape)):
                raise AttributionError("feature %r holds %d values; shape %s needs %d" % (
                    self.feature, values.size, self.shape, int(np.prod(self.shape))))
            return values.reshape(self.shape)
        return _decode(value.bytes_list.value[0], "feature %r" % self.feature, self.size,
                       self.channels, self.scale)

    def batches(self, batch_size, start=0, stop=None):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        stop = _check_start(start, stop, self.count)
        records = tf.data.TFRecordDataset(self.paths).skip(start).take(stop - start)
        rows, first = [], start
        for record in records:
            rows.append(self._example(record.numpy()))
            if len(rows) == batch_size:
                yield first, _stack(rows, [self.feature])
                first, rows = first + len(rows), []
        if rows:
            yield first, _stack(rows, [self.feature])

    def describe(self):
        digest = hashlib.sha256()
        for path in self.paths:
            digest.update(("%s\0%d\0" % (os.path.basename(path), os.path.getsize(path)))
                          .encode("utf-8", "surrogateescape"))
        return {"kind": "tfrecord", "paths": self.paths, "feature": self.feature,
                "shape": list(self.shape) if self.shape else None, "count": self.count,
                "size": list(self.size) if self.size else None, "sha256": digest.hexdigest()}


class DatasetSource:
    """A ``tf.data.Dataset`` of examples (one tensor each, not batched)."""

    def __init__(self, dataset):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        spec = dataset.element_spec
        if not isinstance(spec, tf.TensorSpec):
            raise AttributionError("the dataset's elements are %s; expected one tensor per "
                                   "example (map it to the input: ds.map(lambda x, y: x))"
                                   % (spec,))
        self.dataset = dataset
        cardinality = int(dataset.cardinality())
        self.count = cardinality if cardinality >= 0 else None
        self.example_shape = tuple(spec.shape.as_list())

    def batches(self, batch_size, start=0, stop=None):
        stop = _check_start(start, stop, self.count)
        data = self.dataset.skip(start)
        if stop is not None:
            data = data.take(stop - start)
        first = start
        for batch in data.batch(batch_size):
            array = batch.numpy()
            yield first, array
            first += len(array)

    def describe(self):
        return {"kind": "tf.data.Dataset", "count": self.count,
                "element_shape": list(self.example_shape)}


def as_source(data):
    """`data` as a source: a source as it is, a ``tf.data.Dataset``, else an
    array (a list or tensor is made one)."""
    if hasattr(data, "batches") and hasattr(data, "describe"):
        return data
    if type(data).__name__.endswith("Dataset") and hasattr(data, "element_spec"):
        return DatasetSource(data)
    if not isinstance(data, np.ndarray):
        data = np.asarray(data.numpy() if hasattr(data, "numpy") else data)
    return ArraySource(data)
