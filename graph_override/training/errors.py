"""Errors of `graph_override.training`, all `GraphOverrideError` subclasses.

They also derive from the builtin a caller would catch (ValueError for bad
input, ConnectionError for a cluster that cannot be reached), and their
messages name the family, directory or address, what was expected, what came
and what to do.
"""

from graph_override.errors import GraphOverrideError

__all__ = ["CheckpointMismatchError", "ClusterSpecError",
           "ClusterUnreachableError", "UnknownFamilyError"]


class UnknownFamilyError(GraphOverrideError, ValueError):
    """A family name that is not overrides, stopgrad or tf2."""


class CheckpointMismatchError(GraphOverrideError, ValueError):
    """A checkpoint directory holds variables of a different model."""


class ClusterSpecError(GraphOverrideError, ValueError):
    """A cluster spec, job name or task index that cannot be used."""


class ClusterUnreachableError(GraphOverrideError, ConnectionError):
    """Tasks of the cluster did not answer within the time allowed."""
