"""What `graph-override explain` checks of MODEL before TensorFlow is
imported (a file or SavedModel folder; --inputs/--outputs where a GraphDef
needs them) and how it words a TensorFlow error in one line."""

import os
import stat

__all__ = ["check_model", "check_names", "op_error"]


def check_model(path):
    """None, or why MODEL cannot be read (its content is read with
    TensorFlow's protobuf classes, later)."""
    from graph_override._files.atomic import file_kind  # pylint: disable=import-outside-toplevel
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        return "MODEL %s: cannot be read: %s; expected a frozen GraphDef file (.pb or " \
               ".pbtxt)" % (path, e.strerror or e)
    if stat.S_ISREG(mode) or os.path.isfile(os.path.join(path, "saved_model.pb")):
        return None
    return "MODEL %s: is %s, not a frozen GraphDef file (.pb or .pbtxt), a Keras model " \
           "(.keras, .h5) or a SavedModel folder" % (path, file_kind(mode))


def check_names(args):
    """None, or why --inputs/--outputs are missing (a GraphDef names none)
    or given for a Keras file (its model names them)."""
    lower = args.model.lower()
    if lower.endswith((".keras", ".h5", ".hdf5")):
        if args.inputs or args.outputs:
            return ("--inputs/--outputs: MODEL %s is a Keras model, whose input and output "
                    "come from the model; leave them out" % args.model)
        return None
    if os.path.isdir(args.model) or (args.inputs and args.outputs):
        return None
    return ("MODEL %s: a frozen GraphDef needs --inputs and --outputs (the tensor names, "
            "e.g. --inputs x:0 --outputs logits:0; `graph-override inspect %s` lists the "
            "Placeholders); a Keras model (.keras, .h5) or SavedModel folder needs neither"
            % (args.model, args.model))


def op_error(error, args):
    """A TensorFlow error in one line: its class, its first line, the node."""
    import re  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    text = str(getattr(error, "message", None) or error)
    lines = [" ".join(re.sub(r"\{\{function_node [^}]*\}\}", "", line).split())
             for line in text.splitlines()]
    # TensorFlow's own lines around the cause: a header, where the node was
    # defined, the node, a hint, the function.
    first = next((line for line in lines if line and not re.match(
        r"(Graph execution error:|Detected at node|File |\[\[|Hint:|\[Op:|<stack trace)",
        line)),
        lines[0] if lines else "")
    node = re.search(r"\{\{node ([^}]+)\}\}", text)
    hint = ""
    if isinstance(error, tf.errors.ResourceExhaustedError):
        hint = ": use a smaller --batch-size%s" % (" or fewer --steps" if args.steps else "")
    return "%s: %s%s%s" % (type(error).__name__, first[:500],
                           " (node %s)" % node.group(1) if node and node.group(1) not in first
                           else "", hint)
