"""Legacy ``(op, *grads)`` gradient functions, run unchanged in TF2.

`op_with_gradient(op_fn, gradient)` is the TF2 twin of one override-map
entry: where TF1 code wrote::

    with tf.compat.v1.get_default_graph().gradient_override_map(
            {"Sign": "SignSTE"}):
        y = tf.sign(x)

TF2 code writes ``y = op_with_gradient(tf.sign, sign_ste_grad)(x)``. The
result, an `OpWithGradient`, runs the op under `tf.custom_gradient`, so it
works in eager mode, in `tf.function`, inside Keras layers and in graph
mode, where override maps are silently ignored (eager, and a GradientTape
inside tf.function). Keras models save it by name when its op function and
gradient have names.

The legacy gradient function gets a read-only view of the op (`inputs`,
`outputs`, `type`, `name`, `get_attr`, `node_def`), so code written for
`tf.RegisterGradient`, TensorFlow's own gradient functions included, runs
as it is.
"""

import functools

import tensorflow as tf

from graph_override import registry
from graph_override._families import keras_saving, tracing
from graph_override._tensorflow.contract import check_gradients
from graph_override.errors import GradientContractError

__all__ = ["LegacyOp", "OpWithGradient", "op_with_gradient"]


class LegacyOp:
    """What a legacy gradient function sees as `op` under `op_with_gradient`.

    Attributes:
      type: the op type, e.g. "Sign", as TensorFlow creates it for the call.
      name: the op's name (in eager mode, the name the op would get in a graph).
      inputs: the op's input tensors, in the op's input order. Inputs that
        are arguments of the call are the very tensors passed in (so second
        order gradients flow through them); inputs that the op function
        creates from Python values (the axis of tf.split) are constants.
      outputs: the op's output tensors, as the call returned them. As in a
        TF1 graph with an override map, they depend on the inputs through the
        legacy gradient itself, so a second order gradient through them is
        the one the legacy code computed.
      skip_input_indices: None, as for an op TensorFlow differentiates fully.
    """

    skip_input_indices = None

    def __init__(self, op_type, name, inputs, outputs, template):
        self.type = op_type
        self.name = name
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self._template = template

    @property
    def node_def(self):
        """The NodeDef of the op as TensorFlow builds it for this call."""
        return self._template.node_def

    def get_attr(self, name):
        """The value of attr `name`, as `tf.Operation.get_attr` returns it.

        The attrs come from the op TensorFlow builds for the call (the same
        dtypes, shapes and Python arguments), so ``T`` of Sign,
        ``transpose_a`` of MatMul or ``num_split`` of Split are exactly what
        graph mode would give.

        Raises:
          GradientContractError: the op has no attr `name`.
        """
        try:
            return self._template.get_attr(name)
        except ValueError:
            have = sorted(k for k in self._template.node_def.attr
                          if not k.startswith("_"))
            raise GradientContractError(
                "a legacy gradient function asked op %r (type %s) for attr %r, "
                "which ops of type %s do not have (they have: %s). Read only "
                "attrs the op type defines; see tf.raw_ops.%s." % (
                    self.name, self.type, name, self.type,
                    ", ".join(have) or "none", self.type)) from None

    def values(self):
        """The op's outputs, like `tf.Operation.values()`."""
        return self.outputs

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            "graph_override.legacy.op_with_gradient gives gradient functions a "
            "view of op %r (type %s) with inputs, outputs, type, name, get_attr, "
            "node_def and values(); it has no attribute %r. Rewrite the gradient "
            "function to use those, or run it in graph mode with "
            "graph_override.override_gradients." % (
                self.__dict__.get("name"), self.__dict__.get("type"), name))

    def __repr__(self):
        return "<LegacyOp %r type=%s>" % (self.name, self.type)


def _resolve(gradient):
    """(function, name for messages) of a gradient function or name."""
    if isinstance(gradient, str):
        return registry.resolve_function(gradient), gradient
    if callable(gradient):
        return gradient, tracing.describe_fn(gradient)
    raise TypeError(
        "op_with_gradient(op_fn, gradient): gradient must be a legacy gradient "
        "function (op, *grads) or a registered gradient name such as "
        "'Identity', got %s" % type(gradient).__name__)


class _Template:
    """The op an op function creates, from the scratch graph.

    slots[i] is ("arg", k) when op input i is argument tensor k, or
    ("const", ndarray) when the op function made it from a Python value;
    structure is the nesting of what the op function returns.
    """

    def __init__(self, op, slots, structure):
        self.op, self.slots, self.structure = op, slots, structure
        self._eager_gradient = None

    def eager_gradient(self, grad_fn, grad_name):
        """The legacy gradient as a `tf.function`, traced once per signature.

        Legacy gradient functions are graph code: some call `tf.gradients`
        (smoothed max-pool gradients, guided backprop), which raises in eager
        execution. In eager mode they therefore run in a FuncGraph, as they
        would in a TF1 graph, with the same view of the op."""
        if self._eager_gradient is None:
            self._eager_gradient = tf.function(
                functools.partial(_legacy_gradients, grad_fn, grad_name, self,
                                  self.op.name),
                autograph=False, reduce_retracing=True)
        return self._eager_gradient


def _legacy_gradients(grad_fn, grad_name, template, name, xs, outputs, dys):
    """Runs the legacy gradient function on a view of the op; the gradient
    of each argument tensor (summed where an argument feeds several op
    inputs), checked against the gradient contract."""
    op, slots = template.op, template.slots
    inputs = [xs[s[1]] if s[0] == "arg" else tf.constant(s[1]) for s in slots]
    dys = [tf.zeros_like(o) if dy is None and o.dtype.is_floating else dy
           for dy, o in zip(dys, outputs)]
    view = LegacyOp(op.type, name, inputs, outputs, op)
    got = grad_fn(view, *dys)
    grads = check_gradients(got, op_name=name, op_type=op.type, inputs=inputs,
                            gradient_name=grad_name, function=grad_fn)
    per_arg = [[] for _ in xs]
    for slot, g in zip(slots, grads):
        if slot[0] == "arg":
            per_arg[slot[1]].append(g)
    return [_sum_grads(gs) for gs in per_arg]


def _sum_grads(grads):
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    return tf.math.add_n([tf.convert_to_tensor(g) for g in grads])


def op_with_gradient(op_fn, gradient):
    """Wraps `op_fn` so that its op differentiates with a legacy gradient.

    The TF2 twin of an override-map entry:
    ``with g.gradient_override_map({"Sign": "SignSTE"}): y = tf.sign(x)``
    becomes ``y = op_with_gradient(tf.sign, sign_ste_grad)(x)``, which works
    in eager mode, in `tf.function`, in Keras layers and in graph mode.

    Forward: ``y = op_fn(*args, **kwargs)``, unchanged (the same op runs).
    Backward: ``dargs = gradient(op, *dys)``, where `op` is a `LegacyOp`
    view of the op, and each op input's gradient goes to the argument that
    fed it.

    How the op is found: the first time the wrapper sees a given signature
    (dtypes and static shapes of the tensor arguments, values of the other
    arguments), it runs `op_fn` once on placeholders in a scratch `tf.Graph`
    that is then dropped. The op TensorFlow creates there gives `type`,
    every attr for `get_attr` and which op input is which argument. This is
    more robust than a table of tf functions: aliases (tf.math.sign,
    tf.compat.v1.sign), keyword arguments (MatMul's transpose_a) and dtype
    dependent attrs come out exactly as in graph mode, and no user code
    runs beyond `op_fn` itself. The scratch result is cached per signature.

    Tensor arguments are the positional or keyword arguments that are
    tensors, variables or numpy arrays; other values (Python numbers,
    strings, ``name=``) are passed to `op_fn` as they are. An argument that
    feeds several op inputs (``lambda a: tf.multiply(a, a)``) gets the sum
    of their gradients.

    Where the legacy function runs: in graph mode and inside `tf.function`,
    where the gradient is computed; in eager mode, as a `tf.function`
    traced once per signature. Legacy gradient functions are graph code,
    and some call `tf.gradients` (smoothed max-pool gradients in feature
    visualization, guided backprop), which eager execution refuses; so
    `tf.gradients` inside the legacy function works in every mode, and
    Python side effects in it happen when it is traced, as they did when
    a TF1 graph was built.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override.tf2 import op_with_gradient
      >>> def sign_ste_grad(op, grad):  # written for tf.RegisterGradient
      ...     x = op.inputs[0]
      ...     return grad * tf.cast(tf.abs(x) <= 1.0, grad.dtype)
      >>> x = tf.constant([-2.0, 0.0, 0.5])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = op_with_gradient(tf.sign, sign_ste_grad)(x)
      >>> print(y.numpy(), tape.gradient(y, x).numpy())
      [-1.  0.  1.] [0. 1. 1.]
      >>> rounded = op_with_gradient(tf.round, "Identity")  # tensorpack DoReFa
      >>> print(rounded(tf.constant([0.4, 1.6])).numpy())
      [0. 2.]

    Args:
      op_fn: a function that creates exactly one TensorFlow op from its
        arguments (constants it makes from Python values are fine) and
        returns all of that op's outputs, e.g. tf.sign, tf.round,
        tf.identity, tf.matmul, tf.split.
      gradient: a legacy gradient function ``(op, *grads) -> grads`` (one
        gradient per op input, None allowed), or a registered gradient name:
        TensorFlow's own ("Identity"), one registered with
        `graph_override.register_gradient` or ``tf.RegisterGradient``, or a
        built-in estimator name such as
        ``"graph_override.ste_sign(clip_value=1.0)"``.

    Returns:
      An `OpWithGradient`: callable with `op_fn`'s signature, it returns what
      `op_fn` returns. None gradients reach the arguments as None (no
      gradient); gradients of outputs nothing depends on reach the legacy
      function as zeros (float outputs), as in graph mode. Second order
      gradients flow through the legacy function's use of ``op.inputs`` and
      ``op.outputs``. Keras saves it by name when both parts have one (see
      `OpWithGradient`).

    Raises:
      UnknownGradientError: `gradient` is a name nothing is registered under.
      GradientContractError: `op_fn` does not create one op from its
        arguments (when called); the legacy function returns the wrong count,
        shape or dtype of gradients, or reads an attr the op does not have
        (when differentiated). The message names the op and the function.
      TypeError: `gradient` is neither a function nor a name.
    """
    return OpWithGradient(op_fn, gradient)


def _wrap(op_fn, grad_fn, grad_name):
    """The function behind an OpWithGradient: op_fn under tf.custom_gradient."""
    cache = {}

    def template_for(structure, leaves, positions, tensors):
        try:
            key = (tracing.signature_key(leaves, positions, tensors),
                   repr(tf.nest.map_structure(lambda _: 0, structure)))
            hash(key)
        except (TypeError, ValueError):
            key = None
        if key is not None and key in cache:
            return cache[key]
        template = _Template(*tracing.trace(op_fn, structure, leaves, positions, tensors))
        if key is not None and len(cache) < 64:
            cache[key] = template
        return template

    @functools.wraps(op_fn)
    def wrapper(*args, **kwargs):
        structure = (list(args), kwargs)
        leaves = tf.nest.flatten(structure)
        positions = [i for i, leaf in enumerate(leaves) if tracing.is_input(leaf)]
        if not positions:  # nothing to differentiate: just the op
            return op_fn(*args, **kwargs)
        tensors = [tracing.to_tensor(leaves[i]) for i in positions]
        template = template_for(structure, leaves, positions, tensors)
        op = template.op
        returned = []  # filled with what the caller gets, read by grad()

        @tf.custom_gradient
        def legacy_op(*xs):
            call_args, call_kwargs = tracing.rebuild(structure, leaves, positions, xs)
            result = op_fn(*call_args, **call_kwargs)
            outputs = tf.nest.flatten(result)
            real = getattr(outputs[0], "op", None) if not tf.executing_eagerly() else None
            name = real.name if real is not None else op.name

            def grad(*dys):
                # The outputs the caller got: tied to the inputs by this very
                # gradient, as an overridden op's outputs are in TF1 graphs.
                seen = list(returned or outputs)
                if tf.executing_eagerly():
                    run = template.eager_gradient(grad_fn, grad_name)
                    return run(list(xs), seen, list(dys))
                return _legacy_gradients(grad_fn, grad_name, template, name,
                                         list(xs), seen, list(dys))

            return (outputs if len(outputs) > 1 else outputs[0]), grad

        out = legacy_op(*tensors)
        flat = list(out) if isinstance(out, (list, tuple)) else [out]
        returned.extend(flat)
        return tf.nest.pack_sequence_as(template.structure, flat)

    return wrapper


class OpWithGradient:
    """What `op_with_gradient(op_fn, gradient)` returns: `op_fn` whose op
    differentiates with the legacy `gradient`, callable like `op_fn`.

    Keras saves it by name (as ``graph_override>OpWithGradient``, in
    ``.keras`` and HDF5 files) when both parts have one: `op_fn` a TensorFlow
    op function (saved as ``tf.sign``) or a module-level function of your own
    (``module:function``), and `gradient` a registered gradient name (or a
    function registered under one). Loading needs the names to resolve: your
    module imported (loading never imports one), your gradient registered.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override.tf2 import op_with_gradient
      >>> rounded = op_with_gradient(tf.math.round, "Identity")
      >>> rounded.get_config()
      {'op_fn': 'tf.round', 'gradient': 'Identity'}
      >>> type(rounded).from_config(rounded.get_config()) == rounded
      True

    Attributes:
      op_fn: the op function.
      gradient: the gradient function or name, as given.
    """

    def __init__(self, op_fn, gradient):
        if not callable(op_fn):
            raise TypeError("op_with_gradient(op_fn, gradient): op_fn must be "
                            "callable, got %s" % type(op_fn).__name__)
        grad_fn, grad_name = _resolve(gradient)
        self.op_fn, self.gradient = op_fn, gradient
        self._call = _wrap(op_fn, grad_fn, grad_name)
        self.__wrapped__ = op_fn  # inspect.signature shows op_fn's

    __name__ = property(keras_saving.no_name)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def get_config(self):
        """``{"op_fn": name, "gradient": name}``, what Keras saves.

        Raises:
          SerializationError: `op_fn` or `gradient` has no name (a lambda, a
            nested function, a gradient function registered under no name);
            the message says which and what to do.
        """
        return keras_saving.wrapper_config(self, self.op_fn, self.gradient)

    @classmethod
    def from_config(cls, config):
        """The wrapper a saved config describes.

        Raises:
          SerializationError: the config or its op function does not resolve
            (the function's module is not imported, or it is not an op
            function of TensorFlow's or of your own modules).
          UnknownGradientError: the gradient name is not registered here.
        """
        return cls(*keras_saving.wrapper_parts(config))

    def __eq__(self, other):
        if not isinstance(other, OpWithGradient):
            return NotImplemented
        return self.op_fn is other.op_fn and (
            self.gradient is other.gradient or (
                isinstance(self.gradient, str) and isinstance(other.gradient, str)
                and str(self.gradient) == str(other.gradient)))

    def __hash__(self):
        return hash((id(self.op_fn), str(self.gradient) if isinstance(
            self.gradient, str) else id(self.gradient)))

    def __repr__(self):
        gradient = (repr(str(self.gradient)) if isinstance(self.gradient, str)
                    else tracing.describe_fn(self.gradient))
        return "op_with_gradient(%s, %s)" % (
            keras_saving.op_fn_name(self.op_fn)[0] or tracing.describe_fn(self.op_fn), gradient)


keras_saving.register([OpWithGradient])
