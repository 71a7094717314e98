"""Where things happen in one function (or a module's top-level code), for rules and the
semantic model.

A `Scope` records, in source order, every node of a function body without descending into
nested functions, classes or lambdas, with the compound statements that enclose it: loops
(only their bodies count as "inside"), `with` bodies and `if`/`else` branches. Rules ask it
where `optimizer.step()`, `scheduler.step()` and `backward()` are and which loops enclose them.
It is computed once per function and shared by every rule of the file.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, cast

import libcst as cst

from modellint.records import record
from modellint.static.imports import dotted_name
from modellint.static.nodes import NESTED_SCOPES, source_of
from modellint.static.walk import LEAF_TYPES, child_nodes

if TYPE_CHECKING:
    # the context makes its semantic model, which asks for scopes: a scope only keys on it
    from modellint.static.context import FileContext

LOOPS = (cst.For, cst.While)
# nodes whose body is another scope
_NESTED = NESTED_SCOPES
# for `type(node) in`: LibCST's node classes have no subclasses, and a failed `isinstance`
# against one is ABCMeta's Python check
_LOOP_TYPES = frozenset(LOOPS)
_SEQUENCE_TYPES = frozenset({cst.Tuple, cst.List})
_Sequence = cst.Tuple | cst.List
_Loop = cst.For | cst.While
_STATEMENTS = (
    cst.SimpleStatementLine, cst.For, cst.While, cst.If, cst.With, cst.Try, cst.TryStar,
    cst.Match,
)



@record
class Site:
    """One node of the scope: its position in source order, the enclosing loops/withs/ifs
    (outermost first) and the statement it belongs to."""

    node: cst.CSTNode
    order: int
    ancestors: tuple[cst.CSTNode, ...]
    statement: cst.CSTNode | None

    @property
    def loops(self) -> tuple[cst.For | cst.While, ...]:
        return tuple(cast(_Loop, a) for a in self.ancestors if type(a) in _LOOP_TYPES)

    def inside(self, node: cst.CSTNode) -> bool:
        return any(a is node for a in self.ancestors)

    def ancestors_below(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        for index, ancestor in enumerate(self.ancestors):
            if ancestor is node:
                return self.ancestors[index + 1 :]
        return ()


@record
class CallSite(Site):
    """The site of a call (`Scope.calls`)."""

    node: cst.Call


@record
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
    # `a, b = f(x)`: the value unpacked, and this target's position in it (before any starred
    # target)
    unpacks: cst.BaseExpression | None = None
    position: int | None = None


@record
class Scope:
    root: cst.CSTNode
    sites: list[Site] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
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

    def method_calls(self, method: str) -> list[tuple[CallSite, cst.BaseExpression]]:
        """`receiver.method(...)` calls: (site, receiver)."""
        found = []
        for site in self.calls:
            func = site.node.func
            if type(func) is cst.Attribute and func.attr.value == method:
                found.append((site, func.value))
        return found

    def code(self) -> str:
        # several rules search the function's text; generating it is costly, so once
        if self._code is None:
            self._code = source_of(self.root)
        return self._code


def scope_of(context: FileContext, root: cst.CSTNode) -> Scope:
    """The (cached) analysis of a FunctionDef or Module."""
    context.check_need("scope", "`scope_of`")
    built = context.built_scopes
    scope = built.get(id(root))
    if scope is None or scope.root is not root:
        scope = built[id(root)] = _build(root)
    return scope


def _targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    # `type() is`: a failed `isinstance` against a LibCST class is ABCMeta's Python check
    if type(target) is cst.Tuple or type(target) is cst.List:
        found: list[cst.BaseExpression] = []
        for element in target.elements:
            found.extend(_targets(element.value))
        return found
    if type(target) is cst.StarredElement:
        return _targets(target.value)
    return [target]


def _elements(
    target: cst.BaseExpression, value: cst.BaseExpression
) -> list[cst.BaseExpression] | None:
    """The value of each name of a flat tuple target (`a, b = x, y`), when the value is a
    tuple or list of as many plain elements; else None."""
    if type(target) not in _SEQUENCE_TYPES or type(value) not in _SEQUENCE_TYPES:
        return None
    target, value = cast(_Sequence, target), cast(_Sequence, value)
    if len(target.elements) != len(value.elements) or any(
        not isinstance(e.value, (cst.Name, cst.Attribute)) for e in target.elements
    ) or any(isinstance(e, cst.StarredElement) for e in value.elements):
        return None
    return [e.value for e in value.elements]


def _positions(target: cst.BaseExpression) -> dict[int, int]:
    """For a flat tuple target (`a, b = ...`, `a, *rest = ...`): the id of each plain target
    before any starred one -> its position."""
    if type(target) not in _SEQUENCE_TYPES:
        return {}
    found = {}
    for position, element in enumerate(cast(_Sequence, target).elements):
        if isinstance(element, cst.StarredElement):
            break
        if isinstance(element.value, (cst.Name, cst.Attribute)):
            found[id(element.value)] = position
    return found


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
        # `kind is` is the dispatch (cheaper than isinstance on every node); the casts below
        # tell mypy what it established
        if kind is cst.Call:
            call_site = CallSite(cast(cst.Call, node), order, ancestors, statement)
            scope.sites.append(call_site)
            scope.calls.append(call_site)
        elif kind is cst.AugAssign:
            scope.sites.append(Site(node, order, ancestors, statement))
        elif kind is cst.Assign:
            assign = cast(cst.Assign, node)
            site = Site(node, order, ancestors, statement)
            for target in assign.targets:
                parts = _targets(target.target)
                single = len(parts) == 1
                elements = _elements(target.target, assign.value)
                positions = _positions(target.target)
                for index, part in enumerate(parts):
                    name = dotted_name(part)
                    if name:
                        scope.assignments.append(Assignment(
                            name, assign.value if single else None, site,
                            element=elements[index] if elements else None,
                            unpacks=assign.value if positions else None,
                            position=positions.get(id(part)) if positions else None))
        elif kind is cst.AnnAssign:
            annotated = cast(cst.AnnAssign, node)
            name = dotted_name(annotated.target) if annotated.value is not None else None
            if name:
                scope.assignments.append(
                    Assignment(name, annotated.value, Site(node, order, ancestors, statement)))
        elif kind is cst.For or kind is cst.While:
            site = Site(node, order, ancestors, statement)
            scope.loops.append(site)
            scope.site_of[id(node)] = site
            if kind is cst.For:
                loop = cast(cst.For, node)
                plain = isinstance(loop.target, cst.Name)
                for part in _targets(loop.target):
                    name = dotted_name(part)
                    if name:
                        scope.assignments.append(Assignment(
                            name, None, site, iterates=loop.iter if plain else None))
        elif kind is cst.WithItem:
            asname = cast(cst.WithItem, node).asname
            for part in _targets(asname.name) if asname is not None else ():
                name = dotted_name(part)
                if name:
                    scope.assignments.append(
                        Assignment(name, None, Site(node, order, ancestors, statement)))
        elif kind is cst.Name or kind is cst.SimpleString or kind is cst.Integer:
            continue
        children: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]
        if kind is cst.For:
            for_ = cast(cst.For, node)
            inner = ancestors + (node,)
            children = [(for_.target, ancestors), (for_.iter, ancestors), (for_.body, inner)]
            if for_.orelse is not None:
                children.append((for_.orelse, ancestors))
        elif kind is cst.While:
            while_ = cast(cst.While, node)
            inner = ancestors + (node,)
            children = [(while_.test, inner), (while_.body, inner)]
            if while_.orelse is not None:
                children.append((while_.orelse, ancestors))
        elif kind is cst.With:
            with_ = cast(cst.With, node)
            children = [(item, ancestors) for item in with_.items]
            children.append((with_.body, ancestors + (node,)))
        elif kind is cst.If:
            if_ = cast(cst.If, node)
            children = [(if_.test, ancestors), (if_.body, ancestors + (node,))]
            if if_.orelse is not None:
                children.append((if_.orelse, ancestors))
        elif kind is cst.Else:
            children = [(cast(cst.Else, node).body, ancestors + (node,))]
        else:
            # leaves are no site and hold none: not put on the stack at all (they take no
            # order either; orders are only compared with each other)
            children = [(child, ancestors) for child in child_nodes(node)
                        if type(child) not in LEAF_TYPES]
        for child, child_ancestors in reversed(children):
            stack.append((child, child_ancestors, statement))
    return scope
