"""Where things happen in one function (or a module's top-level code), for rules and the
semantic model.

A `Scope` records, in source order, every node of a function body without descending into
nested functions, classes or lambdas, with the compound statements that enclose it: loops
(only their bodies count as "inside"), `with` bodies and `if`/`else` branches. Rules ask it
where `optimizer.step()`, `scheduler.step()` and `backward()` are and which loops enclose them.
It is computed once per function and shared by every rule of the file.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import libcst as cst

from modellint.static.context import FileContext
from modellint.static.imports import dotted_name
from modellint.static.nodes import NESTED_SCOPES, source_of
from modellint.static.walk import child_nodes

LOOPS = (cst.For, cst.While)
# nodes whose body is another scope
_NESTED = NESTED_SCOPES
_STATEMENTS = (
    cst.SimpleStatementLine, cst.For, cst.While, cst.If, cst.With, cst.Try, cst.TryStar,
    cst.Match,
)



@dataclass
class Site:
    """One node of the scope: its position in source order, the enclosing loops/withs/ifs
    (outermost first) and the statement it belongs to."""

    node: cst.CSTNode
    order: int
    ancestors: tuple[cst.CSTNode, ...]
    statement: cst.CSTNode | None

    @property
    def loops(self) -> tuple[cst.CSTNode, ...]:
        return tuple(a for a in self.ancestors if isinstance(a, LOOPS))

    def inside(self, node: cst.CSTNode) -> bool:
        return any(a is node for a in self.ancestors)

    def ancestors_below(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        for index, ancestor in enumerate(self.ancestors):
            if ancestor is node:
                return self.ancestors[index + 1 :]
        return ()


@dataclass
class Assignment:
    target: str
    # the value assigned, when the target is the whole of one assignment's targets
    value: cst.BaseExpression | None
    site: Site
    # `a, b = Net(), Net()`: this target's own element of the value
    element: cst.BaseExpression | None = None
    # `for p in model.parameters()`: the iterable the target takes its values from (only when
    # the target is a plain name)
    iterates: cst.BaseExpression | None = None


@dataclass
class Scope:
    root: cst.CSTNode
    sites: list[Site] = field(default_factory=list)
    calls: list[Site] = field(default_factory=list)
    loops: list[Site] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    site_of: dict[int, Site] = field(default_factory=dict)
    _code: str | None = field(default=None, repr=False)
    _sites: dict[int, Site] | None = field(default=None, repr=False)

    def assigned(self, name: str, before: int | None = None) -> list[Assignment]:
        """Assignments to the dotted `name`, in source order (only those before `before`)."""
        return [
            a for a in self.assignments
            if a.target == name and (before is None or a.site.order < before)
        ]

    def site(self, node: cst.CSTNode) -> Site | None:
        """The site of a call, assignment, augmented assignment or loop of this scope."""
        if self._sites is None:
            self._sites = {id(site.node): site for site in self.sites}
            self._sites.update(self.site_of)
            for assignment in self.assignments:
                self._sites.setdefault(id(assignment.site.node), assignment.site)
        return self._sites.get(id(node))

    def method_calls(self, method: str) -> list[tuple[Site, cst.BaseExpression]]:
        """`receiver.method(...)` calls: (site, receiver)."""
        found = []
        for site in self.calls:
            func = site.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == method:
                found.append((site, func.value))
        return found

    def code(self) -> str:
        # several rules search the function's text; generating it is costly, so once
        if self._code is None:
            self._code = source_of(self.root)
        return self._code


_CACHE: weakref.WeakKeyDictionary[FileContext, dict[int, Scope]] = weakref.WeakKeyDictionary()


def scope_of(context: FileContext, root: cst.CSTNode) -> Scope:
    """The (cached) analysis of a FunctionDef or Module."""
    per_file = _CACHE.setdefault(context, {})
    scope = per_file.get(id(root))
    if scope is None or scope.root is not root:
        scope = per_file[id(root)] = _build(root)
    return scope


def _targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        found: list[cst.BaseExpression] = []
        for element in target.elements:
            found.extend(_targets(element.value))
        return found
    if isinstance(target, cst.StarredElement):
        return _targets(target.value)
    return [target]


def _elements(
    target: cst.BaseExpression, value: cst.BaseExpression
) -> list[cst.BaseExpression] | None:
    """The value of each name of a flat tuple target (`a, b = x, y`), when the value is a
    tuple or list of as many plain elements; else None."""
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(value, (cst.Tuple, cst.List)):
        return None
    if len(target.elements) != len(value.elements) or any(
        not isinstance(e.value, (cst.Name, cst.Attribute)) for e in target.elements
    ) or any(isinstance(e, cst.StarredElement) for e in value.elements):
        return None
    return [e.value for e in value.elements]


_STATEMENT_TYPES = frozenset(_STATEMENTS)
_NESTED_TYPES = frozenset(_NESTED)


def _build(root: cst.CSTNode) -> Scope:
    scope = Scope(root)
    body = root.body if type(root) is cst.FunctionDef else root
    # (node, ancestors, statement); children pushed in reverse so they pop in source order
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...], cst.CSTNode | None]] = [
        (body, (), None)
    ]
    order = 0
    while stack:
        node, ancestors, statement = stack.pop()
        kind = type(node)
        if kind in _STATEMENT_TYPES:
            statement = node
        order += 1
        if kind in _NESTED_TYPES:
            continue
        if kind is cst.Call or kind is cst.AugAssign:
            site = Site(node, order, ancestors, statement)
            scope.sites.append(site)
            if kind is cst.Call:
                scope.calls.append(site)
        elif kind is cst.Assign:
            site = Site(node, order, ancestors, statement)
            for target in node.targets:
                parts = _targets(target.target)
                single = len(parts) == 1
                elements = _elements(target.target, node.value)
                for index, part in enumerate(parts):
                    name = dotted_name(part)
                    if name:
                        scope.assignments.append(Assignment(
                            name, node.value if single else None, site,
                            element=elements[index] if elements else None))
        elif kind is cst.AnnAssign and node.value is not None:
            name = dotted_name(node.target)
            if name:
                scope.assignments.append(
                    Assignment(name, node.value, Site(node, order, ancestors, statement)))
        elif kind is cst.For or kind is cst.While:
            site = Site(node, order, ancestors, statement)
            scope.loops.append(site)
            scope.site_of[id(node)] = site
            if kind is cst.For:
                plain = isinstance(node.target, cst.Name)
                for part in _targets(node.target):
                    name = dotted_name(part)
                    if name:
                        scope.assignments.append(Assignment(
                            name, None, site, iterates=node.iter if plain else None))
        elif kind is cst.WithItem and node.asname is not None:
            for part in _targets(node.asname.name):
                name = dotted_name(part)
                if name:
                    scope.assignments.append(
                        Assignment(name, None, Site(node, order, ancestors, statement)))
        elif kind is cst.Name or kind is cst.SimpleString or kind is cst.Integer:
            continue
        if kind is cst.For:
            inner = ancestors + (node,)
            children = [(node.target, ancestors), (node.iter, ancestors), (node.body, inner)]
            if node.orelse is not None:
                children.append((node.orelse, ancestors))
        elif kind is cst.While:
            inner = ancestors + (node,)
            children = [(node.test, inner), (node.body, inner)]
            if node.orelse is not None:
                children.append((node.orelse, ancestors))
        elif kind is cst.With:
            children = [(item, ancestors) for item in node.items]
            children.append((node.body, ancestors + (node,)))
        elif kind is cst.If:
            children = [(node.test, ancestors), (node.body, ancestors + (node,))]
            if node.orelse is not None:
                children.append((node.orelse, ancestors))
        elif kind is cst.Else:
            children = [(node.body, ancestors + (node,))]
        else:
            children = [(child, ancestors) for child in child_nodes(node)]
        for child, child_ancestors in reversed(children):
            stack.append((child, child_ancestors, statement))
    return scope
