"""What the source migration knows about TensorFlow functions, by name.

The codemod never runs the user's code, so it decides from names alone which
ops a call creates. A call inside an override scope is either converted (it
creates exactly one op whose type the map re-routes), harmless (it creates
only ops the map does not name), or a reason to leave the scope untouched
(anything it cannot be sure of). Names are canonical: the qualified name
with ``tensorflow.`` and ``compat.v1.``/``compat.v2.`` removed, so
``tf.math.sign`` under ``import tensorflow.compat.v1 as tf`` is ``math.sign``.
"""

import re

__all__ = [
    "BUILTIN_OPS",
    "GRADIENT_BUILDERS",
    "GRAPH_GETTERS",
    "GRAPH_IMPORTERS",
    "HINTS",
    "OPERATOR_OPS",
    "KERAS_LAYER_PREFIXES",
    "REGISTER_GRADIENT",
    "RUNNING_METHODS",
    "SAFE_METHODS",
    "SESSION_GETTERS",
    "canonical",
    "op_types_of",
]

# Functions that create exactly one op of a known type from their arguments.
_SINGLE = {
    "Sign": ["sign", "math.sign"],
    "Round": ["round", "math.round", "keras.backend.round"],
    "Floor": ["floor", "math.floor"],
    "Ceil": ["ceil", "math.ceil"],
    "Rint": ["rint", "math.rint"],
    "Identity": ["identity"],
    "Relu": ["nn.relu"],
    "Relu6": ["nn.relu6"],
    "Elu": ["nn.elu"],
    "Selu": ["nn.selu"],
    "Softplus": ["nn.softplus", "math.softplus"],
    "Softsign": ["nn.softsign", "math.softsign"],
    "Sigmoid": ["sigmoid", "math.sigmoid", "nn.sigmoid"],
    "Tanh": ["tanh", "math.tanh", "nn.tanh"],
    "Neg": ["negative", "math.negative"],
    "Square": ["square", "math.square"],
    "Sqrt": ["sqrt", "math.sqrt"],
    "Rsqrt": ["rsqrt", "math.rsqrt"],
    "Exp": ["exp", "math.exp"],
    "Log": ["log", "math.log"],
    "Reciprocal": ["reciprocal", "math.reciprocal"],
    "Mul": ["multiply", "math.multiply"],
    "StopGradient": ["stop_gradient"],
    "BiasAdd": ["nn.bias_add"],
    "Maximum": ["maximum", "math.maximum"],
    "Minimum": ["minimum", "math.minimum"],
    "Sub": ["subtract", "math.subtract"],
    "Less": ["less", "math.less"],
    "LessEqual": ["less_equal", "math.less_equal"],
    "Greater": ["greater", "math.greater"],
    "GreaterEqual": ["greater_equal", "math.greater_equal"],
    "Equal": ["equal", "math.equal"],
    "Pack": ["stack"],
}

# Functions whose op types depend on their arguments or that create several
# ops; converting them would be a guess, so they only pass when the map
# names none of these types.
_SEVERAL = {
    "abs": {"Abs", "ComplexAbs"},
    "math.abs": {"Abs", "ComplexAbs"},
    "matmul": {"MatMul", "BatchMatMulV2", "BatchMatMulV3", "SparseMatMul"},
    "linalg.matmul": {"MatMul", "BatchMatMulV2", "BatchMatMulV3", "SparseMatMul"},
    "add": {"AddV2", "Add"},
    "math.add": {"AddV2", "Add"},
    "divide": {"RealDiv", "Div", "Cast"},
    "math.divide": {"RealDiv", "Div", "Cast"},
    "truediv": {"RealDiv", "Div", "Cast"},
    "math.truediv": {"RealDiv", "Div", "Cast"},
    "cast": {"Cast"},
    "dtypes.cast": {"Cast"},
    "reshape": {"Reshape", "Const"},
    "clip_by_value": {"Minimum", "Maximum", "ClipByValue", "Const"},
    "reduce_mean": {"Mean", "Const", "Range", "Rank"},
    "math.reduce_mean": {"Mean", "Const", "Range", "Rank"},
    "reduce_sum": {"Sum", "Const", "Range", "Rank"},
    "math.reduce_sum": {"Sum", "Const", "Range", "Rank"},
    "reduce_max": {"Max", "Const", "Range", "Rank"},
    "math.reduce_max": {"Max", "Const", "Range", "Rank"},
    "constant": {"Const"},
    "convert_to_tensor": {"Const"},
    "ones_like": {"OnesLike", "Fill", "Const", "Shape"},
    # A static shape makes these a Const in graph mode.
    "zeros_like": {"ZerosLike", "Const", "Fill"},
    "shape": {"Shape", "Const"},
    "zeros": {"Fill", "Const", "Zeros"},
    "ones": {"Fill", "Const", "Ones"},
    "where": {"Select", "SelectV2", "Where"},
    "concat": {"ConcatV2", "Identity", "Const"},
    "split": {"Split", "SplitV", "Const"},
    "transpose": {"Transpose", "Const", "Range", "Rank", "Sub"},
    "name_scope": set(),
    "variable_scope": set(),
    "device": set(),
    "control_dependencies": set(),
    "get_default_graph": set(),
    # Look-ups and factories: they return Python objects and create no op.
    "get_variable_scope": set(),
    "get_collection": set(),
    "zeros_initializer": set(),
    "ones_initializer": set(),
    "constant_initializer": set(),
    "glorot_uniform_initializer": set(),
    "random_normal_initializer": set(),
    "truncated_normal_initializer": set(),
    "keras.backend.floatx": set(),
    "keras.backend.epsilon": set(),
    "placeholder": {"Placeholder"},
    "float32": set(),
    "float16": set(),
    "float64": set(),
    "as_dtype": set(),
}

OP_TYPES = {}
# Names that create exactly one op (of the type OP_TYPES gives): the ones a
# conversion wraps in op_with_gradient.
_SINGLE_NAMES = frozenset(n for names in _SINGLE.values() for n in names)
for _type, _names in _SINGLE.items():
    for _name in _names:
        OP_TYPES[_name] = frozenset([_type])
for _name, _types in _SEVERAL.items():
    OP_TYPES[_name] = frozenset(_types)

# What to do instead, for TensorFlow functions that are common in override
# scopes but cannot be converted by this tool.
HINTS = {
    "py_func": "tf.py_func creates a PyFunc op; in TF2 use tf.py_function inside "
               "a tf.custom_gradient function and call the gradient there",
    "matmul": "wrap it as op_with_gradient(tf.linalg.matmul, ...) only where "
              "both inputs are matrices (MatMul); batched inputs create "
              "BatchMatMulV2",
}

REGISTER_GRADIENT = "RegisterGradient"
GRAPH_GETTERS = ("get_default_graph",)
# Keras 2 code asks the session for its graph (``K.get_session().graph``);
# Keras 3 has no get_session, so a converted file must not keep the call.
SESSION_GETTERS = frozenset({"keras.backend.get_session"})

# Functions that import a whole graph: every op in it of a mapped type takes
# the map's gradient, and the way to change those is to patch the GraphDef.
GRAPH_IMPORTERS = frozenset({
    "import_graph_def", "graph_util.import_graph_def", "train.import_meta_graph",
    "saved_model.loader.load", "saved_model.load", "saved_model.load_v2",
    "saved_model.loader_impl.load"})

# Functions that build gradient ops: the map re-routes those they create.
GRADIENT_BUILDERS = frozenset({"gradients", "hessians", "gradients_impl.gradients"})

# Operators applied to tensors create these ops.
OPERATOR_OPS = {
    "Multiply": {"Mul"},
    "Divide": {"RealDiv", "Div", "TrueDiv", "Cast"},
    "Add": {"AddV2", "Add"},
    "Subtract": {"Sub"},
    "MatrixMultiply": {"MatMul", "BatchMatMulV2", "BatchMatMulV3"},
    "Power": {"Pow"},
    "FloorDivide": {"FloorDiv"},
    "Modulo": {"FloorMod"},
    "BitAnd": {"LogicalAnd", "BitwiseAnd"},
    "BitOr": {"LogicalOr", "BitwiseOr"},
    "BitXor": {"LogicalXor", "BitwiseXor"},
    "Minus": {"Neg"},
    "BitInvert": {"LogicalNot", "Invert"},
    "LessThan": {"Less"},
    "LessThanEqual": {"LessEqual"},
    "GreaterThan": {"Greater"},
    "GreaterThanEqual": {"GreaterEqual"},
    "Subscript": {"StridedSlice", "GatherV2", "Slice"},
}

# Python builtins: harmless, or the ops they create on tensors.
BUILTIN_OPS = {name: frozenset() for name in (
    "print", "len", "range", "int", "float", "str", "bool", "list", "tuple",
    "dict", "set", "isinstance", "enumerate", "zip", "repr", "type",
    "getattr", "hasattr", "sorted", "reversed", "super")}
BUILTIN_OPS.update({"abs": frozenset({"Abs", "ComplexAbs"}),
                    "pow": frozenset({"Pow"}),
                    "sum": frozenset({"AddV2", "Add"}),
                    "min": frozenset({"Less", "Greater"}),
                    "max": frozenset({"Less", "Greater"})})

# Methods that never create ops, whatever object they are called on (the
# Graph look-ups find ops that exist already).
SAFE_METHODS = frozenset({"get_shape", "as_list", "format", "append", "extend",
                          "items", "keys", "values", "startswith", "endswith",
                          "get_tensor_by_name", "get_operation_by_name",
                          "as_graph_element", "get_operations", "get_collection",
                          "get_collection_ref", "get_all_collection_keys"})

# Keras layers and models: built here, they create their ops when called.
KERAS_LAYER_PREFIXES = ("keras.layers.", "layers.", "keras.Sequential",
                        "keras.models.", "keras.Model")

# Methods that, on TensorFlow's objects, run a graph but build nothing in it.
RUNNING_METHODS = frozenset({"run", "restore", "eval"})

_PRIVATE = re.compile(r"^python\.(?:ops|framework)\.(?:gen_)?\w+\.(\w+)$")


def canonical(qualified_name):
    """The table name of a qualified name, or None if it is not TensorFlow's.

    >>> canonical("tensorflow.compat.v1.math.sign")
    'math.sign'
    >>> canonical("tensorflow.python.ops.gen_math_ops.sign")
    'sign'
    """
    parts = qualified_name.split(".", 1)
    if parts[0] != "tensorflow" or len(parts) == 1:
        return None
    rest = parts[1]
    for prefix in ("compat.v1.", "compat.v2."):
        if rest.startswith(prefix):
            rest = rest[len(prefix):]
    m = _PRIVATE.match(rest)
    if m:
        rest = m.group(1)
    return rest


def op_types_of(name):
    """The op types a TensorFlow function (canonical name) creates, or None
    when the table does not know it."""
    return OP_TYPES.get(name)
