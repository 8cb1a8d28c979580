"""The rewriting pass of the source migration (`graph_override.migrate`).

`_Rewriter` applies a `graph_override.migrate.analysis.Plan` to the very
module the plan was made for (nodes are matched by identity), so everything
the plan does not name keeps its bytes: comments, blank lines, quotes and
spacing. Comments of removed code move to the next statement kept.
"""

import libcst as cst

from graph_override.migrate.analysis import (
    HELPER,
    HELPER_MODULE,
    analyze,
    bound_name,
)

__all__ = ["rewrite"]


class _Rewriter(cst.CSTTransformer):
    """Applies a Plan; everything else is left byte for byte."""

    def __init__(self, plan):
        super().__init__()
        self.plan = plan
        # id -> node (holding the node keeps its id from being reused)
        self.remove = {}       # statements to drop
        self.flatten = {}      # With statements to replace by their body

    def leave_Call(self, original_node, updated_node):
        grad = self.plan.calls.get(original_node)
        if grad is None:
            return updated_node
        wrapper = cst.Call(func=cst.Name(self.plan.helper), args=[
            cst.Arg(updated_node.func, comma=cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(grad)])
        return updated_node.with_changes(func=wrapper)

    def leave_With(self, original_node, updated_node):
        drop = self.plan.with_items.get(original_node)
        if drop is None:
            return updated_node
        items = [it for i, it in enumerate(updated_node.items) if i not in drop]
        # Comments written inside the removed map move above the body.
        notes = []
        for i in sorted(drop):
            notes.extend(_collect_comments(updated_node.items[i]))
        body = updated_node.body
        header = getattr(body, "header", None)
        if not items and header is not None and header.comment is not None:
            notes.append(header.comment)  # the with line goes, and its comment moves
            body = body.with_changes(header=cst.TrailingWhitespace())
            updated_node = updated_node.with_changes(body=body)
        if notes and isinstance(body, cst.IndentedBlock) and body.body:
            first = body.body[0].with_changes(leading_lines=[
                cst.EmptyLine(comment=c) for c in notes] + list(body.body[0].leading_lines))
            body = body.with_changes(body=[first] + list(body.body[1:]))
            updated_node = updated_node.with_changes(body=body)
        if not items:
            self.flatten[id(updated_node)] = updated_node
            return updated_node
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(items=items)

    def _leave_import(self, original_node, updated_node):
        dead = self.plan.imports.get(original_node)
        if not dead:
            return updated_node
        names = [a for a in updated_node.names if bound_name(a) not in dead]
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        changes = {"names": names}
        if isinstance(updated_node, cst.ImportFrom) and updated_node.lpar and len(names) == 1:
            changes.update(lpar=None, rpar=None)
        return updated_node.with_changes(**changes)

    leave_Import = leave_ImportFrom = _leave_import

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if original_node in self.plan.statements:
            self.remove[id(updated_node)] = updated_node
        return updated_node

    def leave_FunctionDef(self, original_node, updated_node):
        if not any(d in self.plan.decorators for d in original_node.decorators):
            return updated_node
        kept, carried = [], []
        # Python 3.9 (TensorFlow 2.15) has no zip(strict=True); libcst keeps
        # one updated decorator per original.
        for orig, new in zip(original_node.decorators, updated_node.decorators):
            if orig in self.plan.decorators:
                carried.extend(_comments(new.leading_lines))
                continue
            if carried:
                new = new.with_changes(leading_lines=list(carried) + list(new.leading_lines))
                carried = []
            kept.append(new)
        changes = {"decorators": kept}
        if carried:
            changes["lines_after_decorators"] = (
                list(carried) + list(updated_node.lines_after_decorators))
        return updated_node.with_changes(**changes)

    def _rebuild(self, body):
        out, pending, dropped = [], [], False
        for stmt in body:
            if self.remove.get(id(stmt)) is stmt:
                pending.extend(stmt.leading_lines)
                dropped = True
                continue
            if self.flatten.get(id(stmt)) is stmt:
                inner = _body_statements(stmt.body)
                lead = list(stmt.leading_lines)
                header = getattr(stmt.body, "header", None)
                if header is not None and header.comment is not None:
                    lead.append(cst.EmptyLine(comment=header.comment))
                lead, pending = _join(pending, lead, first=not out), []
                dropped = False
                if inner:
                    inner[0] = inner[0].with_changes(
                        leading_lines=lead + list(inner[0].leading_lines))
                else:
                    pending = lead
                out.extend(inner)
                pending.extend(_comments(getattr(stmt.body, "footer", ())))
                continue
            if pending or dropped:
                stmt = stmt.with_changes(leading_lines=_join(
                    pending, stmt.leading_lines, first=not out))
                pending, dropped = [], False
            out.append(stmt)
        return out, _comments(pending)

    def leave_IndentedBlock(self, original_node, updated_node):
        body, pending = self._rebuild(updated_node.body)
        if body == list(updated_node.body) and not pending:
            return updated_node
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()], leading_lines=pending)]
            pending = []
        return updated_node.with_changes(
            body=body, footer=list(pending) + list(updated_node.footer))

    def leave_Module(self, original_node, updated_node):
        body, pending = self._rebuild(updated_node.body)
        if self.plan.calls and self.plan.need_import:
            body = _insert_import(body, self.plan.helper)
        return updated_node.with_changes(
            body=body, footer=list(pending) + list(updated_node.footer))


class _CommentCollector(cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.comments = []

    def visit_Comment(self, node):
        self.comments.append(node)


def _collect_comments(node):
    collector = _CommentCollector()
    node.visit(collector)
    return collector.comments


def _blank(line):
    return line.comment is None


def _join(carried, lines, first):
    """Leading lines of a statement that follows removed ones: their
    comments and blank lines, without doubled blank runs (or any blank at
    the top of a block)."""
    carried, lines = list(carried), list(lines)
    if lines and _blank(lines[0]):
        while carried and _blank(carried[-1]):
            carried.pop()
    out = carried + lines
    if first:
        while out and _blank(out[0]):
            out.pop(0)
    return out


def _comments(lines):
    return [line for line in lines if line.comment is not None]


def _body_statements(block):
    if isinstance(block, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=list(block.body),
                                        trailing_whitespace=block.trailing_whitespace)]
    return list(block.body)


def _is_import_line(stmt):
    return isinstance(stmt, cst.SimpleStatementLine) and stmt.body and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _is_docstring(stmt):
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString,
                                                cst.ConcatenatedString)))


def _insert_import(body, helper):
    alias = "" if helper == HELPER else " as %s" % helper
    line = cst.parse_statement("from %s import %s%s\n" % (HELPER_MODULE, HELPER, alias))
    i = 1 if body and _is_docstring(body[0]) else 0
    at = i
    while i < len(body) and _is_import_line(body[i]):
        i += 1
        at = i
    return list(body[:at]) + [line] + list(body[at:])


def rewrite(module, keep_names=(), wrappers=None):
    """Migrates a parsed module; returns (new Module, Plan)."""
    plan, wrapper = analyze(module, keep_names, wrappers)
    if not (plan.calls or plan.with_items or plan.statements or plan.decorators
            or plan.imports):
        return module, plan
    return wrapper.module.visit(_Rewriter(plan)), plan
