"""Errors of `graph_override.training`, kept in `graph_override.errors` with
all the others and importable from here too.

They derive from `GraphOverrideError` and from the builtin a caller would
catch (ValueError for bad input, ConnectionError for a cluster that cannot
be reached); their messages name the family, directory or address, what was
expected, what came and what to do.
"""

from graph_override.errors import (CheckpointMismatchError, ClusterSpecError,
                                   ClusterUnreachableError, UnknownFamilyError)

__all__ = ["CheckpointMismatchError", "ClusterSpecError",
           "ClusterUnreachableError", "UnknownFamilyError"]
