"""Canonizers: the graph rewritten so that each layer is one weight op and
one BiasAdd, its bias and (with ``batch_norm``) the batch normalization
after it folded in, as Zennit's `SequentialMergeBatchNorm` does to a torch
model.

A layer's chain (`structure`) of shifts by a constant (BiasAdd, AddV2 or
Sub: b), scalings by a constant (Mul, RealDiv: a) and inference-mode
batch normalizations (FusedBatchNormV3, or Keras 3's Mul by
gamma * rsqrt(var + eps) then AddV2 of beta - mean * that) with one value
per output channel becomes W' = W * a (along the output channels) and one
BiasAdd of b'; the graph computes the same function, to float rounding
(the engine checks it on the first batch it explains). A batch
normalization the canonizer cannot fold (after an add, at the input, with
values that are not per channel) is an error that names it; without the
canonizer it passes relevance through unchanged, as Zennit's composites
do.
"""

import numpy as np
import tensorflow as tf

from graph_override.attribution.relevance.structure import node_name
from graph_override.errors import AttributionError
from graph_override.frozen.graphdef.views import ancestors

__all__ = ["constants", "fold"]

def constants(graph_def, refs):
    """{tensor reference: ndarray} of tensors that do not depend on the
    model's input, computed once in a graph of their own."""
    refs = sorted(set(refs))
    if not refs:
        return {}
    inputs = {n.name: list(n.input) for n in graph_def.node}
    keep = set(ancestors(inputs, [node_name(r) for r in refs]))
    sub = tf.compat.v1.GraphDef()
    sub.node.extend(n for n in graph_def.node if n.name in keep)
    sub.library.CopyFrom(graph_def.library)
    sub.versions.CopyFrom(graph_def.versions)
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(sub, name="")
    names = [r if ":" in r else r + ":0" for r in refs]
    with tf.compat.v1.Session(graph=graph) as session:
        values = session.run(names)
    return dict(zip(refs, (np.asarray(v) for v in values)))


def _channels(op, w):
    """(output channel count, W reshaped so the channels broadcast)."""
    if op.op == "MatMul":
        return (w.shape[0], lambda a: a[:, None]) if op.attr["transpose_b"].b else \
            (w.shape[1], lambda a: a)
    if op.op == "DepthwiseConv2dNative":
        return w.shape[2] * w.shape[3], lambda a: a.reshape(w.shape[2], w.shape[3])
    if op.op == "Conv2DBackpropInput":
        return w.shape[2], lambda a: a[:, None]
    return w.shape[3], lambda a: a


def _per_channel(value, channels):
    value = np.asarray(value, np.float64)
    if value.size == 1:
        return np.full(channels, float(value.reshape(())))
    if value.size == channels and value.shape[-1] == channels:
        return value.reshape(channels)
    return None


def _chain(structure, layer, batch_norm):
    """The nodes after `layer` that fold into it: [(name, kind)]."""
    chain, cur = [], layer
    while True:
        readers = structure.consumers.get(cur, [])
        if len(readers) != 1:
            return chain
        nxt = readers[0]
        kind = structure.kind.get(nxt)
        node = structure.nodes[nxt]
        data = structure.data_inputs(nxt)
        live = structure.live_inputs(nxt)
        position = live.index(True) if True in live else -1
        if position < 0 or data[position] not in (cur, cur + ":0") or any(
                node_name(r) in structure.shaped for r, is_live in zip(data, live)
                if not is_live):  # made from the input's shape: no constant to fold
            return chain
        if kind == "shift" and not (node.op == "Sub" and position == 1):
            chain.append(nxt)
        elif kind == "scale" and batch_norm:
            chain.append(nxt)
        elif kind == "batch_norm" and batch_norm and not node.attr["is_training"].b and \
                node.attr["data_format"].s in (b"", b"NHWC"):
            chain.append(nxt)
        else:
            return chain
        cur = nxt


def fold(structure, graph_def, canonizers):
    """A copy of `graph_def` with every layer's chain folded in (the bias
    always, scalings and batch normalizations with the ``batch_norm``
    canonizer). Raises `AttributionError` for a batch normalization the
    canonizer cannot fold."""
    batch_norm = "batch_norm" in canonizers
    chains = {layer: _chain(structure, layer, batch_norm) for layer in structure.layers()}
    folded = {n for chain in chains.values() for n in chain}
    if batch_norm:
        _refuse_unfolded(structure, folded)
    refs = []
    for layer, chain in chains.items():
        if chain:
            refs.append(structure.data_inputs(layer)[1])
        for name in chain:
            data, live = structure.data_inputs(name), structure.live_inputs(name)
            refs.extend(r for r, is_live in zip(data, live) if not is_live)
    values = constants(graph_def, refs)
    out = tf.compat.v1.GraphDef()
    out.CopyFrom(graph_def)
    by_name = {n.name: n for n in out.node}
    taken = set(by_name)
    drop = set()
    for layer, chain in chains.items():
        if not chain:
            continue
        node = structure.nodes[layer]
        w, scale, shift, scaled = _folded(structure, values, layer, chain)
        _, shape = _channels(node, w)
        dtype = node.attr["T"].type
        np_dtype = tf.dtypes.as_dtype(dtype).as_numpy_dtype
        target = by_name[layer]
        if scaled:
            kernel = _unique(layer + "/lrp_kernel", taken)
            out.node.append(_const(kernel, (w * shape(scale)).astype(np_dtype), dtype))
            target.input[1] = kernel
        bias = _unique(layer + "/lrp_bias", taken)
        out.node.append(_const(bias, shift.astype(np_dtype), dtype))
        last = by_name[chain[-1]]
        last.Clear()
        last.name, last.op = chain[-1], "BiasAdd"
        last.input.extend([layer, bias])
        last.attr["T"].type = dtype
        last.attr["data_format"].s = b"NHWC"
        drop.update(chain[:-1])
    if drop:
        kept = [n for n in out.node if n.name not in drop]
        del out.node[:]
        out.node.extend(kept)
    return out


def _folded(structure, values, layer, chain):
    """(W, a, b, whether a is not all ones) of a layer and its chain."""
    node = structure.nodes[layer]
    w_ref = structure.data_inputs(layer)[1]
    w = values[w_ref].astype(np.float64)
    channels, shape = _channels(node, w)
    scale, shift, scaled = np.ones(channels), np.zeros(channels), False
    for name in chain:
        n = structure.nodes[name]
        data, live = structure.data_inputs(name), structure.live_inputs(name)
        consts = [values[r] for r, is_live in zip(data, live) if not is_live]
        if n.op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"):
            gamma, beta, mean, var = (np.asarray(c, np.float64).reshape(-1)
                                      for c in consts[:4])
            s = gamma / np.sqrt(var + n.attr["epsilon"].f)
            scale, shift, scaled = scale * s, shift * s + (beta - mean * s), True
            continue
        c = _per_channel(consts[0], channels)
        if c is None:
            raise AttributionError(
                "%s %r after the layer %r: its constant has shape %s, not one value "
                "per output channel (%d), so it cannot be folded into the layer; "
                "give canonizers=() to pass relevance through it unchanged" % (
                    n.op, name, layer, np.shape(consts[0]), channels))
        if n.op == "Mul":
            scale, shift, scaled = scale * c, shift * c, True
        elif n.op == "RealDiv":
            scale, shift, scaled = scale / c, shift / c, True
        elif n.op == "Sub":
            shift = shift - c
        else:
            shift = shift + c
    return w, scale, shift, scaled


def _refuse_unfolded(structure, folded):
    for name in structure.path:
        kind = structure.kind[name]
        if name in folded or kind not in ("batch_norm", "scale"):
            continue
        if kind == "scale" and not _from_rsqrt(structure, name):
            continue  # a scaling of the user's own (a Rescaling layer): passes
        before = node_name(structure.data_inputs(name)[structure.live_inputs(name).index(True)])
        raise AttributionError(
            "the batch_norm canonizer cannot fold the batch normalization %r (%s) into "
            "a layer: it follows %r (%s), not a MatMul or convolution whose only reader "
            "it is. Give canonizers=() (CLI: --canonizer none) to pass relevance through "
            "it unchanged, as Zennit does with batch normalizations it does not merge" % (
                name, structure.nodes[name].op, before, structure.nodes[before].op))


def _from_rsqrt(structure, name):
    """Whether a scaling's constant comes from an Rsqrt (Keras 3's inference
    batch normalization)."""
    inputs = {n: list(node.input) for n, node in structure.nodes.items()}
    consts = [node_name(r) for r, live in zip(structure.data_inputs(name),
                                              structure.live_inputs(name)) if not live]
    return any(structure.nodes[n].op == "Rsqrt" for n in ancestors(inputs, consts)
               if n in structure.nodes)


def _unique(name, taken):
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = "%s_%d" % (name, k)
    taken.add(candidate)
    return candidate


def _const(name, array, dtype):
    node = tf.compat.v1.NodeDef(name=name, op="Const")
    node.attr["dtype"].type = dtype
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(array))
    return node
