"""Reading a GraphDef's function library: which functions its nodes call
and how TensorFlow differentiates each body after import.

While/If/Case bodies reached from the graph through control flow ops only
are rebuilt as Python graphs and differentiated by tf.gradients, which
honours ``_gradient_op_type`` ("python"); PartitionedCall bodies, and
everything reached through one, are differentiated by a
``SymbolicGradient`` node in C++, which never reads it ("symbolic"). See
`graph_override.frozen.patching.library` for what `patch` does with each.
"""

__all__ = ["CALL_OPS", "CONTROL_FLOW_OPS", "body_modes", "called_functions"]

CALL_OPS = frozenset(("PartitionedCall", "StatefulPartitionedCall"))
CONTROL_FLOW_OPS = frozenset(("While", "StatelessWhile", "If", "StatelessIf", "Case",
                              "StatelessCase"))


def called_functions(node):
    """The names of the functions a node's attrs refer to."""
    for value in node.attr.values():
        if value.HasField("func"):
            yield value.func.name
        elif value.HasField("list"):
            for f in value.list.func:
                yield f.name


def body_modes(graph_def):
    """{function name: "python" | "symbolic"}: how tf.gradients
    differentiates each function's body after import (see the module
    docstring). Functions no node reaches are left out."""
    library = {f.signature.name: f for f in graph_def.library.function}
    modes = {}
    todo = [(graph_def.node, "python")]
    while todo:
        nodes, mode = todo.pop()
        for node in nodes:
            callees = list(called_functions(node))
            if node.op in library:
                callees.append(node.op)
            if not callees:
                continue
            child = mode if node.op in CONTROL_FLOW_OPS else "symbolic"
            for name in callees:
                if name not in library:
                    continue
                old = modes.get(name)
                if old == "symbolic" or old == child:
                    continue
                modes[name] = child
                todo.append((library[name].node_def, child))
    return modes
