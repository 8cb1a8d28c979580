"""`graph_override.frozen.patch_file`: patch a GraphDef file into another
in one pass over its bytes (what ``graph-override patch`` runs).

`load`, `patch` and `save` each take or give a GraphDef message, so each
must check what it is given: the graph is parsed twice, serialized twice
(once deterministically) and checked in full twice. For the most common patch (set
an estimator's name on nodes that have no gradient name, in a binary graph
with no function library) none of that is needed, and `patch_file` works on
the bytes instead:

1. read the file (`read_regular_file`: regular files up to 2 GB only);
2. `graph_index.read_index`: names, op types and inputs of every node, each
   input resolved to its node, in one pass of the C reader where it was
   built (else two protobuf parses and numpy), and one protobuf parse
   that finds unknown fields at any depth;
3. every structural check of `load` (`checks.check_bytes`: names, op
   types, duplicates, dangling inputs, output indexes, self-reads,
   cycles), each NodeDef parsed only where a check needs its attrs;
4. the patch engine (`engine.run`) on the graph kept as bytes, as `patch`
   runs it on a message: selection, `check_fits`, the "has an input"
   check, and the name appended to each selected node's bytes; every
   other byte is kept, so the output differs from the input by exactly
   the attrs set, and the same input gives the same file in every process,
   with or without the C reader;
5. `write_bytes` (the 2 GB refusal, temporary file, fsync, read back and
   compared byte for byte, split into nodes again and counted, then linked
   into place).

Anything else (text files, function libraries, graphs that already carry
gradient names, `remove` and ``gradient:`` rules, IdentityN rewrites,
nodes whose shapes need a graph import, `portable`) takes the message
path (the engine raises `NeedsMessage`), `load` + `patch`/`make_portable` +
`save`, with the same results and errors; so does any input the bytes path
finds wrong, so that errors name the culprit exactly as `load` does.
"""

import os

from graph_override.errors import GraphDefError
from graph_override.frozen.graphdef import checks, formats, graph_index, wire
from graph_override.frozen.graphdef.io import (check_output_path, load, read_regular_file, save,
                                               write_bytes)
from graph_override.frozen.graphdef.views import View
from graph_override.frozen.inspection.inspector import gradient_failures, inspect
from graph_override.frozen.patching.engine import NeedsMessage, make_portable, patch, run
from graph_override.frozen.patching.patch_rules import as_rules
from graph_override.frozen.patching.sources import GraphNodes

__all__ = ["patch_file"]


def _index_of(data, source):
    """The checked `Index` of the binary GraphDef `data`, or NeedsMessage."""
    if (not data or formats.looks_like_text(data)
            or str(source).lower().endswith(formats.TEXT_SUFFIXES)
            or os.path.basename(str(source)) == "saved_model.pb"):
        raise NeedsMessage()
    index = graph_index.read_index(data)
    if index is None or index.unknown is not False:
        raise NeedsMessage()  # load names the node, or says why the bytes do not parse
    if index.library or not len(index.ops):
        raise NeedsMessage()
    try:
        checks.check_bytes(data, source, index=index)
    except Exception:  # pylint: disable=broad-except
        raise NeedsMessage() from None  # load names the node, with its hints
    return index


def _patch_bytes(data, index, rules, on_no_match, allow_replace):
    """(new bytes, PatchReport) of the engine on the graph kept as bytes,
    or NeedsMessage."""
    graph = GraphNodes(View(data=data, index=index))
    new, report, owner = run(graph, rules, what="patch", on_no_match=on_no_match,
                                      allow_replace=allow_replace)
    report.gradient_failures_left = gradient_failures(
        graph.names, graph.ops, graph.node.__getitem__, named=owner)
    return new, report


def _message_path(model, output, rules, portable, overwrite, on_no_match, allow_replace):
    graph_def = load(model)
    apply = make_portable if portable else patch
    new, report = apply(graph_def, rules, on_no_match=on_no_match,
                        allow_replace=allow_replace)
    if output is not None:
        save(new, output, overwrite=overwrite, source=model)
    report.gradient_failures_left = inspect(new).gradient_failures
    return report


def patch_file(model, output, rules, *, portable=False, overwrite=False,
               on_no_match="raise", allow_replace=False):
    """Reads the GraphDef file `model`, patches it and writes `output`.

    The same as ``save(patch(load(model), rules), output)`` (or
    `make_portable` with `portable`): the same checks, refusals and errors,
    and a graph that differentiates the same. For a binary graph without a
    function library, where every rule sets an estimator or a registered
    name on nodes that have none, the work is done on the file's bytes (see
    the module): on a million-node graph about a fifth of the time and a
    quarter of the memory of the message path (with the C reader; see
    docs/benchmarks.md), and the output is the input with the gradient
    attrs added, byte for byte otherwise.

    Example:
      >>> import os, tempfile
      >>> import tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     y = tf.sign(tf.compat.v1.placeholder(tf.float32, name="x"), name="y")
      >>> folder = tempfile.mkdtemp()
      >>> frozen.save(g.as_graph_def(), os.path.join(folder, "model.pb"))
      >>> report = frozen.patch_file(os.path.join(folder, "model.pb"),
      ...                            os.path.join(folder, "fixed.pb"), ["Sign=ste_sign"])
      >>> [(c.node, c.after) for c in report.changes]
      [('y', 'graph_override.ste_sign(clip_value=1.0)')]
      >>> report.gradient_failures_left
      []

    Args:
      model: the input file (binary or text GraphDef).
      output: the file to write, or None to write nothing (a dry run).
      rules: as in `patch`.
      portable: rewrite into stop_gradient subgraphs (`make_portable`).
      overwrite: replace an existing `output`, the input among them.
      on_no_match, allow_replace: as in `patch`.

    Returns:
      The `PatchReport`, with ``gradient_failures_left``: what
      ``inspect(result).gradient_failures`` lists.

    Raises:
      GraphDefError: as `load` and `save`; RuleError, NoMatchError,
        UnknownOpTypeError: as `patch`. Nothing is written then.
    """
    model = os.fspath(model)
    rules = as_rules(rules)
    if output is not None:
        output, _ = check_output_path(output, source=model, overwrite=overwrite)
    if not portable and os.path.isfile(model):
        data = read_regular_file(model)
        try:
            index = _index_of(data, model)
            new, report = _patch_bytes(data, index, rules, on_no_match, allow_replace)
        except NeedsMessage:
            pass
        else:
            if output is not None:
                _write(new, output, overwrite, len(index.ops))
            return report
    return _message_path(model, output, rules, portable, overwrite, on_no_match,
                         allow_replace)


def _write(data, path, overwrite, node_count):
    where = "%s (nothing was written)" % path

    def check(back):
        # The bytes read back were compared with `data` by write_bytes. They
        # are the checked input's nodes, each kept byte for byte and some
        # followed by a serialized attr entry: they must still split into
        # as many nodes, with the same non-node fields.
        try:
            written = wire.node_count(back)
        except Exception as e:  # pylint: disable=broad-except
            raise GraphDefError("%s: the output does not re-parse: %s" % (where, e)) from e
        if written != node_count:
            raise GraphDefError("%s: the output holds %d nodes, not %d" % (
                where, written, node_count))

    write_bytes(data, path, overwrite=overwrite, verify=check)
