"""`FrozenFunction.save`: a SavedModel whose gradients need no graph_override.

A SavedModel keeps the graph's ``_gradient_op_type`` names, and a process
that loads it resolves them in its own gradient registry: names such as
``graph_override.ste_sign(clip_value=1.0)`` would fail (or, for a name that
happens to exist, be silently wrong) without graph_override. So the saved
graph is the `make_portable` form of the patched graph: every node carrying
a built-in estimator name is rewritten into its stop_gradient subgraph,
whose gradient plain TensorFlow computes; the rewritten nodes compute the
same values, and the outputs are equal to float rounding (grappler may fuse
the changed graph's ops differently). Gradient names that are TensorFlow op
types (an override map to "Identity") resolve anywhere and are kept, and the
SavedModel is written without traced gradient functions
(``experimental_custom_gradients=False``), so that the loading process
resolves them node by node: TensorFlow would otherwise keep one gradient
function per name, traced for the first node's shapes, and fail on nodes of
other shapes. Everything else is refused:
clip_gradient (its gradient is not linear in dy, so no stop_gradient form
exists) and names registered in this process only.

The directory is written atomically (`graph_override._files.atomic_dir`): into a
hidden temporary sibling folder, loaded back and checked (its gradient is
built, as plain TensorFlow would, where the graph keeps gradient names), then
renamed into place; an existing SavedModel is replaced only with
``overwrite=True``, by swapping the two in one step
(``renameat2(RENAME_EXCHANGE)``) and deleting the old one. What a killed
convert left (temporary folders, a previous SavedModel set aside) is cleaned
up or restored before the next write.
"""

import os
import re
import shutil
import warnings

import tensorflow as tf

from graph_override import builtin_names
from graph_override._tensorflow import compat
from graph_override._files import atomic_dir
from graph_override.errors import ConversionError, ConversionUsageError, RuleError
from graph_override.frozen.patching.engine import make_portable
from graph_override.frozen.graphdef.views import GRADIENT_ATTR, node_list, nodes_by_gradient
from graph_override.frozen.patching.patch_rules import Rule
from graph_override.frozen.tf2 import graph

__all__ = ["SIGNATURE_KEY", "check_target", "output_keys", "portable_graph_def", "save"]

SIGNATURE_KEY = "serving_default"


def _glob_escape(name):
    return re.sub(r"([*?\[])", r"[\1]", name)


def _library_names(graph_def):
    out = {}
    for function in graph_def.library.function:
        for node in function.node_def:
            attr = node.attr.get(GRADIENT_ATTR)
            if attr is not None:
                out.setdefault(attr.s.decode("utf-8", "replace"), []).append(
                    "%s/%s" % (function.signature.name, node.name))
    return out


def portable_graph_def(graph_def, source="<GraphDef>"):
    """`graph_def` with every built-in gradient name in its stop_gradient form.

    Raises:
      ConversionError: a name without a portable form (clip_gradient, a name
        registered in this process only), naming its nodes.
    """
    rules, refused = [], []
    by_name = {name: list(nodes) for name, nodes in nodes_by_gradient(graph_def).items()}
    for name, nodes in _library_names(graph_def).items():  # FUNCTION/NODE
        by_name.setdefault(name, []).extend(nodes)
    for name, nodes in by_name.items():
        parsed = builtin_names.parse_builtin_name(name)
        if parsed is not None:
            rules.append((Rule(gradient_op_type=_glob_escape(name), estimator=parsed[0],
                               params=parsed[1]), nodes))
        elif not compat.is_op_type(name):
            refused.append("%r at node(s) %s is registered in this process only"
                           % (name, node_list(nodes)))
    if refused:
        raise ConversionError(
            "%s: cannot save a SavedModel whose gradients work without "
            "graph_override: %s. Patch those nodes with a built-in estimator "
            "that has a stop_gradient form (rules=[...]), or keep differentiating "
            "with to_function in a process that imports graph_override."
            % (source, "; ".join(refused)))
    if not rules:
        return graph_def
    try:
        portable, report = make_portable(graph_def, [r for r, _ in rules])
    except RuleError as e:
        raise ConversionError(
            "%s: cannot save a SavedModel whose gradients work without "
            "graph_override: %s (nodes %s). clip_gradient has no stop_gradient "
            "form; use a linear estimator such as scale_gradient there, or keep "
            "differentiating with to_function in a process that imports "
            "graph_override." % (source, e, "; ".join(node_list(n) for _, n in rules))
        ) from e
    if report.unresolved_left:
        raise ConversionError("%s: after the stop_gradient rewrite, %s" % (
            source, "; ".join(report.unresolved_left)))
    return portable


class _Serving(tf.Module):
    """What the SavedModel holds: the variables and one tf.function."""

    def __init__(self, frozen_fn, graph_def):
        super().__init__(name=frozen_fn.name)
        self.weights = list(frozen_fn.weights)
        if graph_def is frozen_fn.graph_def:  # nothing to rewrite: the live function
            concrete = frozen_fn.concrete_function
            input_specs = frozen_fn.specs()[0]
        else:
            weights = list(zip(frozen_fn.weight_names,
                               [w.numpy() for w in frozen_fn.weights]))
            concrete, specs, output_specs = graph.wrap(
                graph.as_placeholders(graph_def, weights),
                frozen_fn.inputs + [n + ":0" for n in frozen_fn.weight_names],
                frozen_fn.outputs, frozen_fn.source)
            input_specs = specs[:len(frozen_fn.inputs)]
            if frozen_fn.input_specs is None:  # not built (convert): the same specs
                frozen_fn.input_specs, frozen_fn.output_specs = input_specs, output_specs
        keys = output_keys(frozen_fn.outputs)
        variables = self.weights

        @tf.function(input_signature=input_specs)
        def serve(*inputs):
            result = concrete(*inputs, *[tf.convert_to_tensor(v) for v in variables])
            return dict(zip(keys, result))

        self.serve = serve


def output_keys(outputs):
    """The signature's output keys: the node name for a node's first output,
    the tensor name ("node:1") for the others (`outputs` are distinct)."""
    return [name[:-2] if name.endswith(":0") else name for name in outputs]


def check_target(path, overwrite):
    """Refuses a `path` that `save` may not write (see `save`): a
    ConversionUsageError, bad usage rather than a fault of the graph."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise ConversionUsageError("%s: the folder %s does not exist; create it first"
                                   % (path, parent))
    if os.path.lexists(path):
        if not overwrite:
            raise ConversionUsageError("%s: exists already; pass overwrite=True (CLI: "
                                       "--force) to replace it" % path)
        if not os.path.isdir(path) or os.path.islink(path):
            raise ConversionUsageError("%s: exists and is not a directory; refusing to "
                                       "replace it with a SavedModel" % path)
        if os.listdir(path) and not os.path.exists(os.path.join(path, "saved_model.pb")):
            raise ConversionUsageError("%s: is a non-empty directory that holds no "
                                       "SavedModel; refusing to replace it, even with "
                                       "overwrite" % path)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _verify(folder, module, source, path, differentiate):
    """Loads the SavedModel written in `folder` and, if `differentiate`,
    builds (without running) the gradient of its signature's float outputs
    into its float inputs and weights, as a process without graph_override
    would.

    Only a graph that keeps gradient names (TensorFlow's own, such as
    Identity) needs it: they are what a loading process resolves, and what
    TensorFlow's default way of saving broke. Every other node differentiates
    with its op type's own gradient, as in TensorFlow's own SavedModels; and
    building the gradient costs more than writing the model.
    """
    loaded = tf.saved_model.load(folder)
    if SIGNATURE_KEY not in loaded.signatures:
        raise ConversionError("%s: the written SavedModel has no %r signature; "
                              "nothing was replaced" % (path, SIGNATURE_KEY))
    if len(loaded.weights) != len(module.weights):
        raise ConversionError("%s: the written SavedModel holds %d weights, "
                              "expected %d; nothing was replaced" % (
                                  path, len(loaded.weights), len(module.weights)))
    if not differentiate:
        return
    signature = loaded.signatures[SIGNATURE_KEY]
    specs = signature.structured_input_signature[1]
    names = sorted(specs)
    weights = list(loaded.weights)

    def differentiate(*inputs):
        with tf.GradientTape() as tape:
            tape.watch([x for x in inputs if x.dtype.is_floating])
            outputs = signature(**dict(zip(names, inputs)))
            sums = [tf.reduce_sum(y) for y in outputs.values() if y.dtype.is_floating]
        sources = [x for x in inputs if x.dtype.is_floating] + weights
        return tape.gradient(sums, sources) if sums and sources else []

    try:
        tf.function(differentiate).get_concrete_function(*[specs[n] for n in names])
    except Exception as e:  # pylint: disable=broad-except
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        raise ConversionError(
            "%s: the SavedModel written from %s does not differentiate in plain "
            "TensorFlow (%s: %s); nothing was written. Please report it with the "
            "model's `graph-override inspect` output." % (
                path, source, type(e).__name__, lines[-1] if lines else "")
        ) from e


def _write_error(path, tmp, error):
    """What a failed write of the SavedModel says (a full disk, a folder
    that became unwritable), naming `path`, not the hidden temporary."""
    if isinstance(error, OSError) and error.strerror:
        text = error.strerror  # its file name is the temporary's
    else:
        text = getattr(error, "message", None) or str(error)
    if tmp:
        text = text.replace(tmp, path)
    return ConversionUsageError("%s: the SavedModel could not be written (%s: %s); nothing "
                                "was written and any previous %s is unchanged"
                                % (path, type(error).__name__, text.splitlines()[0][:300]
                                   if text else "", os.path.basename(path)))


def save(frozen_fn, path, *, overwrite=False):
    """Writes `frozen_fn` as a SavedModel at `path` (a directory).

    The SavedModel has a ``serving_default`` signature (inputs named after
    their nodes, with characters other than letters, digits, ``_.-/``
    replaced by ``_``; outputs in a dict keyed by `output_keys`: the node
    name, ``policy/output`` for ``policy/output:0``, or the tensor name for
    a later output, ``split:1``) and a ``serve``
    function whose gradients, into the inputs and into the variables (the
    fine-tuned weights), work in plain TensorFlow.

    Returns:
      The path written.

    Raises:
      ConversionError: no portable form for a gradient (see
        `portable_graph_def`), `path` exists (without `overwrite`), its
        folder is missing, or it is something other than a SavedModel.
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(os.path.dirname(path)):
        for note in atomic_dir.recover(path):
            warnings.warn(note, RuntimeWarning, stacklevel=2)
    check_target(path, overwrite)
    graph_def = portable_graph_def(frozen_fn.graph_def, frozen_fn.source)
    module = _Serving(frozen_fn, graph_def)
    try:
        tmp = atomic_dir.make_temporary(path)
    except OSError as e:
        raise _write_error(path, "", e) from None
    try:
        try:
            # Without experimental_custom_gradients the SavedModel keeps the
            # gradient names (TensorFlow's own op types, after the portable
            # rewrite) and the loading process resolves them per node; with
            # it, TensorFlow would store ONE gradient function per name, traced
            # for the shapes of the first node, and nodes of other shapes
            # would fail.
            tf.saved_model.save(module, tmp, signatures={
                SIGNATURE_KEY: module.serve.get_concrete_function()},
                options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
        except (tf.errors.OpError, OSError) as e:  # a full disk: ResourceExhaustedError
            raise _write_error(path, tmp, e) from None
        _verify(tmp, module, frozen_fn.source, path,
                differentiate=bool(nodes_by_gradient(graph_def) or _library_names(graph_def)))
        check_target(path, overwrite)  # another writer may have been faster
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700
        try:
            atomic_dir.replace(tmp, path, overwrite)
        except FileExistsError:
            raise ConversionUsageError(
                "%s: appeared while the SavedModel was being written (another process "
                "writing the same folder?); it was left as it is and nothing was "
                "written. Pass overwrite=True (CLI: --force) to replace it." % path
            ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
