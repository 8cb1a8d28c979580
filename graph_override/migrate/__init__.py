"""Migration of override-map code to TF2 (`graph-override migrate`).

The public face of the source migration. `migrate_source` rewrites the
``tf.RegisterGradient`` / ``Graph.gradient_override_map`` code of one Python
file into ``graph_override.tf2.op_with_gradient`` calls, keeping comments and
formatting; `migrate_file` and `migrate_paths` do the same for files and
trees, writing atomically only when asked. The work is split by stage:

* `graph_override.migrate.analysis`: reads a module (libcst, never runs it)
  and decides, site by site, what can be converted safely;
* `graph_override.migrate.rewrite`: applies that plan to the syntax tree;
* `graph_override.migrate.tables`: which TensorFlow functions create which
  op types;
* `graph_override.migrate.migration`: files, results, diffs and reports.
"""

from graph_override.migrate.migration import (FileResult, MigrationResult, Site,
                                              SourceError, iter_python_files,
                                              map_names, migrate_file,
                                              migrate_paths, migrate_source,
                                              write_atomically)

__all__ = [
    "FileResult",
    "MigrationResult",
    "Site",
    "SourceError",
    "iter_python_files",
    "map_names",
    "migrate_file",
    "migrate_paths",
    "migrate_source",
    "write_atomically",
]
