"""Reading a GraphDef's function library: which functions its nodes call
and how TensorFlow differentiates each body after import.

While/If/Case bodies reached from the graph through control flow ops only
are rebuilt as Python graphs and differentiated by tf.gradients, which
honours ``_gradient_op_type`` ("python"); PartitionedCall bodies, and
everything reached through one, are differentiated by a
``SymbolicGradient`` node in C++, which never reads it ("symbolic"). See
`graph_override.frozen.patching.library` for what `patch` does with each.
"""

__all__ = ["CALL_OPS", "CONTROL_FLOW_OPS", "body_modes", "call_cycle", "called_functions",
           "reached_functions"]

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


def _callees(node, library):
    """The library functions `node` calls: its op type where that names one,
    and every function its attrs name, also inside a function attr's own
    attrs (a PartitionedCall of a function given a function)."""
    if node.op in library:
        yield node.op
    todo = list(node.attr.values())
    while todo:
        value = todo.pop()
        if value.HasField("func"):
            yield value.func.name
            todo.extend(value.func.attr.values())
        elif value.HasField("list"):
            for f in value.list.func:
                yield f.name
                todo.extend(f.attr.values())


def call_cycle(graph_def):
    """A list of library function names that call one another in a ring,
    the first repeated at the end (``["F", "F"]`` for a function that calls
    itself, ``["F", "G", "F"]``), or None.

    TensorFlow has no recursive functions: importing a graph that calls
    such a function recurses in C++ until the process dies (SIGSEGV), so
    the callers refuse it first (`graph_override.frozen.tf2.graph.check_ops`,
    the attribution methods). The walk is iterative: a chain of any depth
    is followed without Python's recursion limit.

    Example:
      >>> from tensorflow.core.framework import graph_pb2
      >>> g = graph_pb2.GraphDef()
      >>> f = g.library.function.add()
      >>> f.signature.name = "F"
      >>> f.node_def.add(name="again", op="F")
      name: "again"
      op: "F"
      <BLANKLINE>
      >>> call_cycle(g)
      ['F', 'F']
    """
    library = {f.signature.name: f for f in graph_def.library.function}
    calls = {name: sorted(set(c for node in f.node_def for c in _callees(node, library)
                              if c in library))
             for name, f in library.items()}
    state = {}  # name -> 1 on the walk's path, 2 done
    for start in library:
        if start in state:
            continue
        path, todo = [], [(start, iter(calls[start]))]
        state[start] = 1
        path.append(start)
        while todo:
            name, callees = todo[-1]
            callee = next(callees, None)
            if callee is None:
                state[name] = 2
                todo.pop()
                path.pop()
            elif state.get(callee) == 1:
                return path[path.index(callee):] + [callee]
            elif callee not in state:
                state[callee] = 1
                path.append(callee)
                todo.append((callee, iter(calls[callee])))
    return None


def reached_functions(graph_def, nodes):
    """The names of the library functions the `nodes` call, directly or
    through other functions (their bodies run when the nodes do)."""
    library = {f.signature.name: f for f in graph_def.library.function}
    found, todo = set(), [c for node in nodes for c in _callees(node, library)]
    while todo:
        name = todo.pop()
        if name in found or name not in library:
            continue
        found.add(name)
        todo.extend(c for node in library[name].node_def for c in _callees(node, library))
    return found
