"""What the idioms of one module's analysis share, declared in one place.

As LibCST's codemods share a `CodemodContext`, each idiom of the analysis
(`scopes`, `body`, `boundary`, `registrations`, `wrappers`, `dead_code`)
is a set of functions that receive a `Context` explicitly: what the walk
over the module found (`Facts`, read-only once the walk is done), how to
name nodes (`Names`), the run's inputs, and the few records one idiom
leaves for another, each field saying who writes and who reads it.
"""

import dataclasses

from graph_override.migrate.analysis.common import Plan
from graph_override.migrate.analysis.names import Names

__all__ = ["Context", "Facts"]


@dataclasses.dataclass
class Facts:
    """What `graph_override.migrate.analysis.collect` finds in one walk.

    Attributes:
      override_withs: the outermost ``with ...gradient_override_map(...)``
        statements, in source order (nested ones are reached through them).
      override_calls: the gradient_override_map Call nodes that are items of
        a with statement.
      stray: every ``.gradient_override_map`` Attribute node; those that are
        not the function of a with item's call are used another way.
      enclosing: override With or stray Attribute -> (name of the def it is
        in, name of that def's class or None); absent at module level.
      functions: (FunctionDef, conditional) for every def, in source order;
        conditional: under an if/for/while/try/with of its body (it may not
        run, as with ``if not GRAD_DEFINED:``).
      assign_lines: target Name of every one-target ``name = value``
        statement -> that statement line.
      assign_blocks: the same target Names -> the block (IndentedBlock or
        Module) whose body holds that line.
      import_lines: Import or ImportFrom alone on its line -> that line.
      named_calls: (name, Call) for each call of a plain name or attribute
        whose name is a known wrapper's.
      attr_reads: x -> the Attribute, for every ``x.op``, ``x.name`` and
        ``x.graph`` (what graph code reads of a tensor).
    """

    override_withs: list = dataclasses.field(default_factory=list)
    override_calls: set = dataclasses.field(default_factory=set)
    stray: list = dataclasses.field(default_factory=list)
    enclosing: dict = dataclasses.field(default_factory=dict)
    functions: list = dataclasses.field(default_factory=list)
    assign_lines: dict = dataclasses.field(default_factory=dict)
    assign_blocks: dict = dataclasses.field(default_factory=dict)
    import_lines: dict = dataclasses.field(default_factory=dict)
    named_calls: list = dataclasses.field(default_factory=list)
    attr_reads: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Context:
    """The explicit state of one module's analysis.

    Attributes:
      names: how nodes are named (`Names`); read by every idiom.
      facts: what the walk found (`Facts`); read-only.
      keep_names: gradient names other files of the run use in override
        maps (input; read by `registrations`).
      wrappers: {name: `Wrapper`} of the wrappers around the map that this
        file and the other files of the run define (input; read by
        `wrappers`).
      plan: the output (`Plan`): what the rewriter does and what the report
        says; every idiom adds to it.
      registrations: the module's `Registration` records, made by
        `registrations.collect`; `scopes` counts their uses, and
        `registrations.finish` decides which go.
      graph_names_done: graph Name nodes of the converted scopes; written
        by `scopes`, read by `dead_code.drop_graph_names`.
      name_values_done: gradient-name Name nodes of the converted scopes,
        now references to the function; written by `scopes`, read by
        `registrations.finish`.
    """

    names: Names
    facts: Facts
    keep_names: frozenset = frozenset()
    wrappers: dict = dataclasses.field(default_factory=dict)
    plan: Plan = dataclasses.field(default_factory=Plan)
    registrations: list = dataclasses.field(default_factory=list)
    graph_names_done: set = dataclasses.field(default_factory=set)
    name_values_done: set = dataclasses.field(default_factory=set)
