"""Saved Keras models and SavedModels as frozen GraphDefs, and what a model
file is when it is none of the kinds the engine reads.

A model path is read by its kind:

* a ``.keras`` file (Keras 3, or Keras 2.13+'s format) or an ``.h5`` /
  ``.hdf5`` file: loaded with ``tf.keras.models.load_model(path,
  compile=False, safe_mode=True)`` (a Lambda layer's Python code is refused;
  functions saved by name resolve only through the allow-list of
  `graph_override._trust.allowed`, as loading does), then traced for its
  input's spec and frozen (`models.from_callable`);
* a SavedModel folder (``saved_model.pb`` inside: Keras 2's ``model.save``,
  Keras 3's ``model.export``, ``tf.saved_model.save``): before anything of it
  is loaded, its graph and function library are searched for ops that reach
  outside the model (`RISKY_OPS`), except the checkpoint ops that restore its
  own variables (`CHECKPOINT_OPS`); any other is refused unless allowed by
  name. Then its ``serving_default`` signature (or the one signature) is
  frozen;
* anything else: a frozen GraphDef (``.pb``/``.pbtxt``).

The input and output names come from the model: the frozen graph's
placeholder and output for a Keras model, the signature's one input and
output (or the one `outputs` names by its signature key) for a SavedModel.
The frozen graph is then checked like any GraphDef from elsewhere
(`models.check_untrusted`, by the `Explainer`).
"""

import os

import tensorflow as tf

from graph_override._tensorflow import compat
from graph_override.attribution import models
from graph_override.errors import AttributionError, GraphDefError

__all__ = ["CHECKPOINT_OPS", "KERAS_SUFFIXES", "describe_file", "is_saved", "model_graph",
           "op_names", "saved_model_graph"]

KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")
# What restoring (and saving) a SavedModel's own variables runs.
CHECKPOINT_OPS = frozenset({"RestoreV2", "SaveV2", "MergeV2Checkpoints", "ShardedFilename",
                            "StringJoin", "RestoreSlice", "SaveSlices", "Restore", "Save"})
_MAGIC = (
    (b"PK\x03\x04", "a zip archive: if it is a Keras model, name it *.keras"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file: if it is a Keras model, name it *.h5"),
    (b"\x93NUMPY", "a NumPy array (.npy): give the model first and the array as --data"),
    (b"\x89PNG", "a PNG image: give the model first, images as --data"),
    (b"\xff\xd8\xff", "a JPEG image: give the model first, images as --data"),
)


def is_saved(path):
    """Whether `path` names a saved Keras model file or a SavedModel folder."""
    path = os.fsdecode(path)
    return (path.lower().endswith(KERAS_SUFFIXES)
            or os.path.isfile(os.path.join(path, "saved_model.pb")))


def describe_file(path):
    """What the file `path` is, by its first bytes, where that is not a
    GraphDef (None: not known)."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return None
    if head[4:8] == b"TFL3":
        return ("a TensorFlow Lite model, which cannot be differentiated: give the model it "
                "was converted from")
    if head[:1] == b"{":
        return "a JSON file (a Keras config holds no weights): give the saved .keras or .h5"
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    return None


def _keras_model(path, allow_ops):
    from graph_override import tf2  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import  (registers the saved names)
    del allow_ops  # a Keras file names layers, not ops: its frozen graph is checked after
    try:
        model = tf.keras.models.load_model(path, compile=False, safe_mode=True)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as e:
        raise AttributionError("%s: cannot be loaded as a Keras model (%s: %s)" % (
            path, type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")) from None
    spec = models.keras_spec(model)
    if spec is None:
        raise AttributionError("%s: the Keras model does not say its input shape (one input "
                               "with a known rank is needed)" % path)
    graph = models.from_callable(model, spec)
    return models.ModelGraph(graph.graph_def, graph.input, graph.output, path)


def _check_saved_model(path, allow_ops):
    """Refuses a SavedModel whose graph or functions hold ops that reach
    outside the model, other than its checkpoint's, before it is loaded."""
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel
    from graph_override.frozen.inspection.risky import RISKY_OPS  # pylint: disable=import-outside-toplevel
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    allowed = CHECKPOINT_OPS | frozenset(allow_ops)
    refused = set()
    for meta in proto.meta_graphs:
        nodes = [("", n) for n in meta.graph_def.node] + [
            (fn.signature.name + "/", n) for fn in meta.graph_def.library.function
            for n in fn.node_def]
        refused.update((where + n.name, n.op) for where, n in nodes
                       if n.op in RISKY_OPS and n.op not in allowed)
    if refused:
        ops = sorted({op for _, op in refused})
        raise AttributionError(
            "%s: the SavedModel holds %d node(s) that reach outside the model (%s); nothing "
            "of it was loaded. If you trust it, allow each op type by name: %s" % (
                path, len(refused), ", ".join("%s (%s)" % r for r in sorted(refused)[:5]),
                " ".join("--allow-op " + op for op in ops)))


def _signature(loaded, path):
    signatures = dict(getattr(loaded, "signatures", {}) or {})
    if "serving_default" in signatures:
        return signatures["serving_default"]
    if len(signatures) == 1:
        return next(iter(signatures.values()))
    raise AttributionError("%s: the SavedModel has %s; expected a serving_default signature"
                           % (path, "signatures %s" % ", ".join(sorted(signatures))
                              if signatures else "no signatures"))


def _pick(names, given, what, path):
    """The frozen tensor name among `names` (signature key -> tensor name)
    that `given` names (a key or a tensor name), or the one there is."""
    given = given[0] if isinstance(given, (list, tuple)) and len(given) == 1 else given
    if given is None:
        if len(names) == 1:
            return next(iter(names.values()))
        raise AttributionError("%s: the signature has %d %s (%s): name one with --%s KEY" % (
            path, len(names), what, ", ".join(sorted(names)), what))
    if given in names:
        return names[given]
    return given if ":" in given else given + ":0"


def saved_model_graph(path, inputs=None, outputs=None, allow_ops=()):
    """The `ModelGraph` of the SavedModel folder `path` (see the module
    docstring)."""
    _check_saved_model(path, allow_ops)
    try:
        loaded = tf.saved_model.load(path)
    except (OSError, ValueError, tf.errors.OpError) as e:
        raise AttributionError("%s: cannot be loaded as a SavedModel (%s)" % (
            path, str(e).splitlines()[0][:300])) from None
    function = _signature(loaded, path)
    frozen = compat.freeze_concrete_function(function)
    keys = sorted(function.structured_input_signature[1])
    in_names = dict(zip(keys, (t.name for t in frozen.inputs)))
    out_keys = sorted(function.structured_outputs)
    out_names = dict(zip(out_keys, (t.name for t in frozen.outputs)))
    return models.ModelGraph(frozen.graph.as_graph_def(), _pick(in_names, inputs, "inputs", path),
                             _pick(out_names, outputs, "outputs", path), path)


def model_graph(model, inputs=None, outputs=None, allow_ops=()):
    """The `ModelGraph` of a GraphDef (message or path), a saved Keras model
    or a SavedModel folder; GraphDefError naming what a file is when it is
    no model."""
    if not isinstance(model, tf.compat.v1.GraphDef) and is_saved(model):
        path = os.fsdecode(model)
        if os.path.isdir(path):
            return saved_model_graph(path, inputs, outputs, allow_ops)
        if inputs is not None or outputs is not None:
            raise AttributionError("%s: a Keras model's input and output come from the model; "
                                   "give no inputs= or outputs= (--inputs, --outputs)" % path)
        return _keras_model(path, allow_ops)
    try:
        return models.from_graph_def(model, inputs, outputs)
    except GraphDefError as e:
        what = None if isinstance(model, tf.compat.v1.GraphDef) else describe_file(model)
        if what is None:
            raise
        kind, _, todo = what.partition(": ")
        raise GraphDefError("%s: is %s, not a model (a frozen GraphDef .pb/.pbtxt, a Keras "
                            ".keras/.h5 file or a SavedModel folder); %s" % (
                                os.fsdecode(model), kind, todo)) from e


def op_names(allow_ops):
    """`allow_ops` (what a graph from elsewhere may run besides the model:
    `models.check_untrusted`) as a tuple of op type names (one name alone is
    one)."""
    names = (allow_ops,) if isinstance(allow_ops, str) else allow_ops
    try:
        names = tuple(names or ())
    except TypeError:
        names = (names,)
    if not all(isinstance(n, str) and n for n in names):
        raise AttributionError("allow_ops=%r: expected op type names such as "
                               "['ReadFile']" % (allow_ops,))
    return names
