"""The project's error classes.

Every error graph_override raises on purpose derives from `GraphOverrideError`
and also from the builtin exception a caller would already catch, so that
``except KeyError`` around legacy ``tf.RegisterGradient`` code keeps working.
"""

__all__ = [
    "AttributionError",
    "CheckpointDamagedError",
    "CheckpointMismatchError",
    "ClusterSpecError",
    "ClusterUnreachableError",
    "ConcurrentScopeError",
    "ConversionError",
    "ConversionUsageError",
    "DuplicateGradientError",
    "EagerModeError",
    "GradientContractError",
    "GradientFunctionError",
    "GraphDefError",
    "GraphOverrideError",
    "NoMatchError",
    "OptimizerError",
    "OptimizerTypeError",
    "QuantizerError",
    "RuleError",
    "SerializationError",
    "SourceError",
    "SpecialFileError",
    "TrainingOutputError",
    "UnavailableNameError",
    "UnknownEstimatorError",
    "UnknownFamilyError",
    "UnknownGradientError",
    "UnknownOpTypeError",
]


class GraphOverrideError(Exception):
    """Base class of every error graph_override raises on purpose.

    Errors keep their class when raised inside `tf.function`: AutoGraph
    (on by default) re-creates an exception raised in converted code, and
    turns the classes it cannot re-create (all of these) into its own
    StagingError, so ``except EagerModeError`` would miss it. AutoGraph
    leaves exceptions that carry `ag_pass_through` untouched.
    """

    ag_pass_through = True

    def __str__(self):
        # KeyError and LookupError subclasses would otherwise print the
        # message with quotes around it (KeyError.__str__ uses repr()).
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class DuplicateGradientError(GraphOverrideError, KeyError):
    """A gradient name is already taken by a different function."""


class UnknownOpTypeError(GraphOverrideError, ValueError):
    """An override map names an op type TensorFlow does not know."""


class UnknownGradientError(GraphOverrideError, LookupError):
    """A gradient name is neither registered nor a resolvable built-in name."""


class UnknownEstimatorError(GraphOverrideError, ValueError):
    """A name that is not one of the built-in estimators (the message
    suggests the closest)."""


class NoMatchError(GraphOverrideError, ValueError):
    """An override scope (or a patch rule) selected no op at all."""


class EagerModeError(GraphOverrideError, RuntimeError):
    """An override map was used where TensorFlow silently ignores it."""


class GraphDefError(GraphOverrideError, ValueError):
    """A GraphDef file or message cannot be read, checked or written."""


class GradientContractError(GraphOverrideError, ValueError):
    """A gradient function returned the wrong count, shape or type."""


class RuleError(GraphOverrideError, ValueError):
    """A frozen-graph patch rule is malformed, or cannot be applied to a node
    it selects (graph_override.frozen)."""


class SourceError(GraphOverrideError, ValueError):
    """A source file cannot be read or parsed as Python, or cannot be written
    (graph_override.migrate)."""


class UnknownFamilyError(GraphOverrideError, ValueError):
    """A family name that is not overrides, stopgrad or tf2
    (graph_override.training)."""


class CheckpointMismatchError(GraphOverrideError, ValueError):
    """A checkpoint directory holds variables of a different model
    (graph_override.training)."""


class ClusterSpecError(GraphOverrideError, ValueError):
    """A cluster spec, job name or task index that cannot be used
    (graph_override.training)."""


class ClusterUnreachableError(GraphOverrideError, ConnectionError):
    """Tasks of the cluster did not answer within the time allowed
    (graph_override.training)."""


class ConcurrentScopeError(GraphOverrideError, RuntimeError):
    """Two threads use gradient override maps on one graph at the same time;
    TensorFlow keeps one map per graph, so their ops would swap gradients."""


class GradientFunctionError(GraphOverrideError, RuntimeError):
    """A gradient function of the user's own, named ``MODULE:FUNCTION``
    (``--map OP=MODULE:FUNCTION``, `user_functions.register_function`),
    raised when TensorFlow called it; the message names the function, the
    node, the exception and where it was raised, and ``__cause__`` is the
    exception. A `RuntimeError`, so that TensorFlow passes it on as it is
    (it re-raises a TypeError or ValueError from a gradient inside a
    message of its own)."""


class ConversionError(GraphOverrideError, ValueError):
    """A frozen graph cannot be turned into a TF2 function or SavedModel as
    asked (graph_override.frozen.to_function, FrozenFunction.save)."""


class ConversionUsageError(ConversionError):
    """A conversion refused for what the caller asked, not for the graph: a
    tensor name that is not in it, a `trainable` that selects nothing, an
    output folder that cannot be written. The command line reports it as bad
    usage (exit status 2)."""


class CheckpointDamagedError(CheckpointMismatchError):
    """A checkpoint's .index or .data file is missing, truncated, empty or
    corrupt, so it cannot be restored (graph_override.training)."""


class SpecialFileError(GraphOverrideError, OSError):
    """An output path is a device, a named pipe, a socket or a symbolic
    link: writing would replace it with a plain file, so it is refused, also
    with overwrite (CLI: --force)."""


class TrainingOutputError(GraphOverrideError, OSError):
    """A checkpoint or summary folder cannot be written, or a write failed
    during training (graph_override.training)."""


class SerializationError(GraphOverrideError, ValueError):
    """A Keras model cannot save an object of graph_override by name (an
    `op_with_gradient` wrapper whose op function or gradient has no name), or
    a saved name cannot be resolved when the model is loaded."""


class QuantizerError(GraphOverrideError, ValueError):
    """A quantized Keras layer (graph_override.keras) was given a quantizer or
    constraint that is no such thing (an unknown name, an object of the wrong
    kind), or a quantizer met a non-float input; the message names the layer
    and the argument."""


class OptimizerError(GraphOverrideError, ValueError):
    """A larq optimizer of graph_override.keras (`Bop`, `CaseOptimizer`) was
    set up in a way it cannot train: a variable claimed by two optimizers, an
    optimizer that claims none, a hyperparameter that is not a number or
    schedule; the message names the optimizer and the variable."""


class OptimizerTypeError(OptimizerError, TypeError):
    """`CaseOptimizer` was given something that is not a predicate or not a
    Keras optimizer where one belongs (larq raises TypeError there)."""


class UnavailableNameError(GraphOverrideError, AttributeError):
    """A name of larq's API that graph_override.keras does not offer (Keras 3
    removed what it needs); the message names what to use instead."""


class AttributionError(GraphOverrideError, ValueError):
    """An attribution method (graph_override.attribution) was given a model,
    method, input, target or baseline it cannot use: an unknown method, an
    input of the wrong shape, a target class out of range, a batch dimension
    DeepLIFT's batch of inputs and baselines cannot fill; the message names the argument and what to do."""
