"""The analysis pass of the source migration (`graph_override.migrate`).

The analyzer reads one parsed module, with scope and position metadata, and
decides what to do: which ``with ... gradient_override_map(...)`` scopes can
go, which calls inside them become ``op_with_gradient(fn, gradient)(...)``,
which helper assignments and imports become dead, which registrations stay
(and why), and which scopes and wrapper calls must stay (with the reasons).
It changes nothing: the result is a `Plan` that
`graph_override.migrate.rewrite` applies.

One module per idiom:

* `base`: the walk over the module and how nodes are named;
* `scopes`: override scopes, converted all or nothing;
* `body`: what a scope's body does, and a true reason for each call it
  cannot convert;
* `registrations`: ``RegisterGradient`` functions, and which may go;
* `wrappers`: a project's own wrappers around ``gradient_override_map``;
* `dead_code`: graph variables, counter names and imports left unused.

A scope is converted all or nothing (an outermost scope together with the
scopes nested in it), and only when every call in it is understood: a known
TensorFlow function (see `graph_override.migrate.tables`), a harmless
builtin or method. Anything else leaves the scope as it is.
"""

import libcst as cst

from graph_override.migrate.analysis.base import AnalyzerBase
from graph_override.migrate.analysis.body import BodyMixin
from graph_override.migrate.analysis.boundary import BoundaryMixin
from graph_override.migrate.analysis.common import (HELPER, HELPER_MODULE, Plan,
                                                    bound_name, code)
from graph_override.migrate.analysis.dead_code import DeadCodeMixin
from graph_override.migrate.analysis.registrations import RegistrationsMixin
from graph_override.migrate.analysis.scopes import ScopesMixin
from graph_override.migrate.analysis.wrappers import (Wrapper, WrappersMixin,
                                                      find_wrappers)

__all__ = ["HELPER", "HELPER_MODULE", "Plan", "Wrapper", "analyze", "bound_name",
           "code", "find_wrappers"]


class _Analyzer(ScopesMixin, BodyMixin, BoundaryMixin, RegistrationsMixin,
                WrappersMixin, DeadCodeMixin, AnalyzerBase):
    """Every idiom, joined; the decisions are taken when the walk ends."""

    def leave_Module(self, original_node):
        for node in self.override_withs:
            self.decide(node)
        in_with = {call.func for call in self.override_calls}
        for attr in self.stray:
            if attr not in in_with:
                self.plan.untouched.append((
                    self.line(attr), "gradient_override_map is used outside a "
                    "'with' statement; convert it by hand with "
                    "graph_override.tf2.op_with_gradient" + self.in_wrapper(attr)))
        self.wrapper_calls()
        self.dead_graph_names()
        self.dead_registrations()
        self.dead_imports()
        self.plan.untouched = sorted(set(self.plan.untouched))
        self.plan.changed.sort()
        self.plan.kept.sort()


def analyze(module, keep_names=(), wrappers=None):
    """Runs the analysis pass; returns (Plan, MetadataWrapper).

    Args:
      module: a parsed libcst Module (never mutated).
      keep_names: gradient names other files of the run use in override maps.
      wrappers: {name: Wrapper} of wrappers around gradient_override_map
        (this file's and the other files' of the run).
    """
    # The module is never mutated (libcst nodes are immutable), so the
    # wrapper may skip its defensive deep copy.
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    analyzer = _Analyzer(keep_names, wrappers or {})
    wrapper.visit(analyzer)
    return analyzer.plan, wrapper
