"""Errors of `graph_override.training`, kept in `graph_override.errors` with
all the others and importable from here too.

They derive from `GraphOverrideError` and from the builtin a caller would
catch (ValueError for bad input, ConnectionError for a cluster that cannot
be reached, OSError for a folder that cannot be written); their messages
name the family, file, directory or address, what was expected, what came
and what to do.
"""

from graph_override.errors import (CheckpointDamagedError, CheckpointMismatchError,
                                   ClusterSpecError, ClusterUnreachableError,
                                   TrainingOutputError, UnknownFamilyError)

__all__ = ["CheckpointDamagedError", "CheckpointMismatchError", "ClusterSpecError",
           "ClusterUnreachableError", "TrainingOutputError", "UnknownFamilyError"]
