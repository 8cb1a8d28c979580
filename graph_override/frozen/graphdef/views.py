"""The gradient attribute of a GraphDef's nodes and read-only views of a
graph: which nodes carry which gradient name, the names, op types and
inputs of every node read once from its bytes, and the nodes some nodes
depend on."""

import collections

from graph_override.frozen.graphdef import graph_index

__all__ = ["GRADIENT_ATTR", "GRADIENT_ATTR_BYTES", "View", "ancestors", "gradient_attr",
           "node_list", "nodes_by_gradient"]

GRADIENT_ATTR = "_gradient_op_type"
GRADIENT_ATTR_BYTES = GRADIENT_ATTR.encode()


def gradient_attr(node):
    attr = node.attr.get(GRADIENT_ATTR)
    return None if attr is None else attr.s.decode("utf-8", "replace")


def nodes_by_gradient(graph_def):
    """{gradient name: [node names]} of the nodes carrying `_gradient_op_type`,
    in graph order, then those inside library functions (as FUNCTION/NODE);
    a byte search skips graphs that carry none."""
    out = collections.OrderedDict()
    if GRADIENT_ATTR_BYTES in graph_def.SerializeToString():
        for node in graph_def.node:
            name = gradient_attr(node)
            if name is not None:
                out.setdefault(name, []).append(node.name)
        for function in graph_def.library.function:
            for node in function.node_def:
                name = gradient_attr(node)
                if name is not None:
                    out.setdefault(name, []).append(
                        "%s/%s" % (function.signature.name, node.name))
    return out


def node_list(names, limit=5):
    """'a, b, c ...': the first `limit` node names, for messages."""
    return ", ".join(names[:limit]) + (" ..." if len(names) > limit else "")


def ancestors(node_inputs, names, *, stop=(), seen=None, control=True):
    """The names of the nodes `names` depend on, `names` included, in the
    order a depth-first walk over the inputs finds them.

    Args:
      node_inputs: node name -> its input references (``"h"``, ``"h:1"``,
        ``"^init"``), e.g. ``{n.name: n.input for n in graph_def.node}``; a
        name it lacks is listed but not walked further.
      names: the node names to start from.
      stop: node names where the walk stops (not listed): fed tensors.
      seen: a set of names not to walk again (not listed), which gains every
        name listed: share it to walk from several starts in turn.
      control: whether control inputs (``^init``) are dependencies; False
        for the data (and gradient) path alone.

    Example:
      >>> inputs = {"y": ["h:0", "^init"], "h": ["x"], "x": [], "init": []}
      >>> ancestors(inputs, ["y"])
      ['y', 'init', 'h', 'x']
      >>> ancestors(inputs, ["y"], stop={"h"}, control=False)
      ['y']
    """
    seen = set() if seen is None else seen
    stop, todo, found = set(stop), list(names), []
    while todo:
        name = todo.pop()
        if name in seen or name in stop:
            continue
        seen.add(name)
        found.append(name)
        todo.extend(ref.lstrip("^").split(":")[0] for ref in node_inputs.get(name, ())
                    if control or not ref.startswith("^"))
    return found


class View:
    """Names and op types of a GraphDef's nodes and all their inputs (in one
    flat list), read once from its bytes (a C-level pass; see
    graph_override.frozen.wire), and whether any node may carry a gradient
    name."""

    def __init__(self, graph_def=None, data=None, index=None):
        self.data = data if data is not None else graph_def.SerializeToString()
        if index is None:
            index = graph_index.read_index(self.data)
        if graph_def is not None and (index is None
                                      or len(index.ops) != len(graph_def.node)):
            index = graph_index.Index.from_graph_def(graph_def)  # unchecked, odd graph
        self.index = index
        self.ops = index.ops
        self.has_gradient_attrs = GRADIENT_ATTR_BYTES in self.data

    @property
    def names(self):
        """Node names, in node order."""
        return self.index.names

    @property
    def inputs(self):
        """Every node's inputs, in node order."""
        return self.index.inputs
