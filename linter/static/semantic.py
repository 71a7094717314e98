"""The semantic model of one file, as rules query it: what a LibCST expression holds (a `Kind`),
where it is known.

    kind = self.context.semantic.kind(expr, scope, before=site.order)

Names follow the assignments of the enclosing function (`scope`, before `before`), then the
module's names, imports and definitions, through the project index (`linter/static/index.py`),
which also knows `self.x` (set anywhere in the class or its project bases), the classes and
functions of the project's other files, and what torch's own classes are. What cannot be known
is None: a rule that needs a fact it does not have stays silent.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst

from modellint.static.imports import dotted_name
from modellint.static.index import (
    UNKNOWN,
    ProjectIndex,
    Where,
    extract,
    name_summary,
    text_hash,
)
from modellint.static.kinds import Kind

if TYPE_CHECKING:
    from modellint.static.context import FileContext
    from modellint.static.scope import Scope


def summarize(node: cst.CSTNode | None, self_name: str | None = None, depth: int = 0) -> list:
    """The index summary of a LibCST expression (see `linter/static/index.py`)."""
    if node is None or depth > 12:
        return UNKNOWN
    if isinstance(node, (cst.Name, cst.Attribute)):
        name = dotted_name(node)
        if name is None:
            assert isinstance(node, cst.Attribute)
            return ["attr", summarize(node.value, self_name, depth + 1), node.attr.value]
        return name_summary(name.split("."), self_name)
    if isinstance(node, cst.Call):
        args, keywords = [], {}
        for arg in node.args:
            if arg.star == "**":
                keywords["**"] = UNKNOWN
            elif arg.star:
                args.append(UNKNOWN)
            elif arg.keyword is not None:
                keywords[arg.keyword.value] = summarize(arg.value, self_name, depth + 1)
            else:
                args.append(summarize(arg.value, self_name, depth + 1))
        return ["call", summarize(node.func, self_name, depth + 1), args, keywords]
    if isinstance(node, cst.Subscript):
        key = None
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            value = node.slice[0].slice.value
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                key = value.evaluated_value
        return ["sub", summarize(node.value, self_name, depth + 1), key]
    if isinstance(node, (cst.Integer, cst.Float)):
        try:
            return ["num", float(node.evaluated_value)]
        except (ValueError, OverflowError):
            return UNKNOWN
    if isinstance(node, cst.Name):
        return ["ref", node.value]
    if isinstance(node, (cst.List, cst.Tuple)):
        return ["seq", [summarize(e.value, self_name, depth + 1) for e in node.elements]]
    return UNKNOWN


def _param_names(func: cst.FunctionDef) -> list[str]:
    params = func.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)] + [
        p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)
    ]


class SemanticModel:
    """Per file; made on first use by `FileContext.semantic`."""

    def __init__(self, context: FileContext, index: ProjectIndex | None) -> None:
        self.context = context
        path = context.path
        digest = text_hash(context.source)
        if index is None or index.hashes.get(path) != digest:
            # alone (a test, a file not in the run's index), or its text changed since the
            # index read it (--fix): this file's facts from its text now
            own = index.copy() if index is not None else ProjectIndex()
            try:
                tree = ast.parse(context.source)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            own.add(path, extract(context.source, tree) if tree is not None else extract(""),
                    digest)
            index = own
        self.index = index
        self.path = path

    def kind(self, expr: cst.BaseExpression, scope: Scope | None = None,
             before: int | None = None) -> Kind | None:
        """What `expr` holds, or None when that is not known. `scope` is the function (or
        module) the expression is in, `before` the order of its site there: names take the
        value last assigned to them before it."""
        self_name, cls = self._method_of(scope)
        return self.index.kind(summarize(expr, self_name), self._where(scope, before, cls, self_name))

    def kind_here(self, expr: cst.BaseExpression, node: cst.CSTNode | None = None) -> Kind | None:
        """What `expr` holds, for a rule that visits nodes during the walk: names as they are
        in the function being walked (or the module) at `node` (a call, assignment, augmented
        assignment or loop that holds `expr`; without it, their last values there)."""
        from modellint.static.scope import scope_of

        root = self.context.current_function or self.context.module_node
        if root is None:
            return None
        scope = scope_of(self.context, root)
        site = scope.site(node) if node is not None else None
        return self.kind(expr, scope, site.order if site is not None else None)

    def kind_of_name(self, name: str, scope: Scope | None = None,
                     before: int | None = None) -> Kind | None:
        """What the dotted `name` (`model`, `self.net`) holds."""
        self_name, cls = self._method_of(scope)
        parts = name.split(".")
        if self_name is not None and parts[0] == self_name and len(parts) > 1:
            summary: list = ["self", parts[1]]
            for attr in parts[2:]:
                summary = ["attr", summary, attr]
        else:
            summary = ["ref", name]
        return self.index.kind(summary, self._where(scope, before, cls, self_name))

    def instance_of(self, cls: str) -> Kind | None:
        """The kind of an instance of this file's class `cls`."""
        return self.index.instance(self.path, cls)

    def _method_of(self, scope: Scope | None) -> tuple[str | None, str | None]:
        if scope is None or not isinstance(scope.root, cst.FunctionDef):
            return None, None
        owner = self.context.method_owners.get(id(scope.root))
        if owner is None:
            return None, None
        names = _param_names(scope.root)
        if not names or any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
            for d in scope.root.decorators
        ):
            return None, None
        return names[0], owner.name.value

    def _where(self, scope: Scope | None, before: int | None, cls: str | None,
               self_name: str | None) -> Where:
        if scope is None:
            return Where(self.path, cls)
        params = set(_param_names(scope.root)) if isinstance(scope.root, cst.FunctionDef) else set()
        module_scope = not isinstance(scope.root, cst.FunctionDef)
        cache: dict[str, list | None] = {}

        def local(name: str) -> list | None:
            if name in cache:
                return cache[name]
            found = [a for a in scope.assigned(name, before)]
            result: list | None
            if found:
                last = found[-1]
                if last.value is not None:
                    result = summarize(last.value, self_name)
                elif last.element is not None:
                    result = summarize(last.element, self_name)
                elif last.iterates is not None:
                    result = ["iter", summarize(last.iterates, self_name)]
                else:
                    result = UNKNOWN
                if result is not UNKNOWN:
                    # its names take the values they had there
                    result = ["local", result, last.site.order]
            elif name in params:
                result = UNKNOWN
            elif module_scope:
                # at module level, a name assigned only later (or never) is not known here
                result = UNKNOWN if scope.assigned(name) else None
            else:
                result = None
            cache[name] = result
            return result

        return Where(self.path, cls, local,
                     lambda order: self._where(scope, order, cls, self_name))
