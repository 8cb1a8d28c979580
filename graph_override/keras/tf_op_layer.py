"""Keras 2's ``TFOpLambda`` layers, read under Keras 3 (which has none) and
under Keras 2, as the pure op each one names, or refused by name.

Keras 2 records ``x + y`` on symbolic tensors, or ``tf.nn.relu(x)``, as a
TFOpLambda layer whose config names the op (``"__operators__.add"``,
``"nn.relu"``, ``"math.multiply"``) and whose inbound node carries the call's
other arguments, tensors among them. Keras 2 looks that name up anywhere in
``tf``, so a model file can name ``io.write_file``: loading runs it. Here a
name is run only if it is a pure TensorFlow op function (the allow-list of
graph_override._trust.allowed: tf, tf.math, tf.nn, ... ops that read and
write nothing outside their inputs) or one of Python's operators on tensors
(`OPERATORS`); any other name is refused with a SerializationError that says
which layer names what.

`translate` rewrites a model config: each TFOpLambda becomes an `OpLayer`
whose inputs are the call's tensors (its first argument, then the tensors
among its keyword arguments) and whose config keeps the rest of the call. A
``Lambda`` layer (Python code: Keras 2 saves its bytecode) is refused, on
both releases, with the way out: the model's builder and its weights.
"""

import tensorflow as tf

from graph_override._families import keras_saving
from graph_override._trust.allowed import pure_tf_op
from graph_override.errors import SerializationError

__all__ = ["OPERATORS", "OpLayer", "op_function", "translate"]

# Python's operators on tensors, as Keras 2 names them.
OPERATORS = {"__operators__.add": tf.math.add, "__operators__.ne": tf.math.not_equal,
             "__operators__.eq": tf.math.equal}


def op_function(name, layer="?"):
    """The op a TFOpLambda config names, or a SerializationError naming it."""
    fn = OPERATORS.get(name) if isinstance(name, str) else None
    if fn is None and isinstance(name, str):
        fn = pure_tf_op(name)
    if fn is None:
        raise SerializationError(
            "layer %r (Keras 2's TFOpLambda) calls tf.%s, which is not a pure TensorFlow op "
            "(those of tf, tf.math, tf.nn, tf.linalg, tf.bitwise, tf.signal that touch "
            "nothing beyond their inputs) or one of Python's operators on tensors: a model "
            "file is a program, and loading runs no other function. Rebuild the model in "
            "code and load its weights with model.load_weights." % (layer, name))
    return fn


class OpLayer(tf.keras.layers.Layer):
    """One pure op called on tensors: ``op(first, **arguments)``, where
    `first` is the layer's first input (or its first `first_count` inputs as
    a list) and each argument named in `tensor_arguments` is the next input.

    Args:
      function: the op's name as Keras 2 saves it ("nn.relu",
        "__operators__.add"); refused unless pure (`op_function`).
      first_count: None when the first argument is one tensor, else how
        many inputs form the list it is.
      tensor_arguments: the names of the keyword arguments that are tensors,
        in the order of the inputs after the first argument's.
      arguments: the call's other keyword arguments (JSON values).
    """

    def __init__(self, function, first_count=None, tensor_arguments=(), arguments=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.op = op_function(function, kwargs.get("name"))
        self.function = function
        self.first_count = first_count
        self.tensor_arguments = list(tensor_arguments)
        self.arguments = dict(arguments or {})

    def call(self, inputs):  # pylint: disable=arguments-differ
        tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        count = 1 if self.first_count is None else self.first_count
        first = tensors[0] if self.first_count is None else tensors[:count]
        kwargs = dict(self.arguments, **dict(zip(self.tensor_arguments, tensors[count:])))
        return self.op(first, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(function=self.function, first_count=self.first_count,
                      tensor_arguments=list(self.tensor_arguments),
                      arguments=dict(self.arguments))
        return config


keras_saving.register([OpLayer])


def _is_reference(value, names):
    """Whether a keyword argument is a tensor as Keras 2 saves one:
    [layer name, node index, tensor index] of a layer of the model."""
    return (isinstance(value, list) and len(value) == 3 and value[0] in names
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value[1:]))


def _entry(value, where):
    if (isinstance(value, list) and len(value) in (3, 4) and isinstance(value[0], str)
            and all(isinstance(v, int) for v in value[1:3])):
        return value
    raise SerializationError("%s: an inbound tensor of a TFOpLambda layer is %r, not "
                             "[layer, node, tensor, arguments]: the config is damaged."
                             % (where, value))


def _translated(layer, names, where):
    config = dict(layer.get("config") or {})
    name = config.get("name", layer.get("name"))
    function = config.pop("function", None)
    op_function(function, name)  # refused before anything is built
    nodes = layer.get("inbound_nodes") or []
    new_nodes = []
    first_count = tensor_names = arguments = None
    for node in nodes:
        if isinstance(node, list) and node and isinstance(node[0], str):
            first = [_entry(node, where)]  # one tensor
            count = None
        elif isinstance(node, list) and node:
            first = [_entry(n, where) for n in node]
            count = len(first)
        else:
            raise SerializationError("%s: layer %r has an inbound node %r that Keras 2 "
                                     "does not write: the config is damaged."
                                     % (where, name, node))
        kwargs = first[0][3] if len(first[0]) == 4 and isinstance(first[0][3], dict) else {}
        kwargs = {k: v for k, v in kwargs.items() if k != "name"}
        refs = {k: v for k, v in kwargs.items() if _is_reference(v, names)}
        arguments = {k: v for k, v in kwargs.items() if k not in refs}
        first_count, tensor_names = count, list(refs)
        new_nodes.append([[e[0], e[1], e[2], {}] for e in first]
                         + [[v[0], v[1], v[2], {}] for v in refs.values()])
    config.update(function=function, first_count=first_count,
                  tensor_arguments=tensor_names or [], arguments=arguments or {})
    out = dict(layer, config=config, inbound_nodes=new_nodes,
               class_name="graph_override>OpLayer")
    out.pop("module", None)
    out.pop("registered_name", None)
    return out


def translate(config, where="the model"):
    """`config` (a model config as Keras 2 saves it) with each TFOpLambda
    layer, in it and in the models nested in it, an `OpLayer`.

    Raises:
      SerializationError: a TFOpLambda names an op that is not pure, or
        its inbound nodes are not as Keras 2 writes them; a Lambda layer.
    """
    if isinstance(config, list):
        return [translate(c, where) for c in config]
    if not isinstance(config, dict):
        return config
    out = {k: translate(v, where) for k, v in config.items()}
    layers = (out.get("config") or {}).get("layers") if isinstance(out.get("config"), dict) \
        else None
    if isinstance(layers, list):
        names = {l.get("name") or (l.get("config") or {}).get("name")
                 for l in layers if isinstance(l, dict)}
        out["config"] = dict(out["config"], layers=[_layer(l, names, where) for l in layers])
    return out


def _layer(layer, names, where):
    if not isinstance(layer, dict):
        return layer
    if layer.get("class_name") == "TFOpLambda":
        return _translated(layer, names, where)
    if layer.get("class_name") == "Lambda":
        raise SerializationError(
            "%s: layer %r is a Lambda layer, which holds Python code (larq-zoo's MeliusNet22 "
            "and RealToBinaryNet have them): loading runs no code from a file. Build the "
            "model in code (graph_override.keras.zoo has larq-zoo's architectures) and load "
            "this file's weights: weights=PATH, or model.load_weights(PATH)."
            % (where, (layer.get("config") or {}).get("name", layer.get("name"))))
    return layer
