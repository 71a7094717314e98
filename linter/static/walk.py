"""One pre-order walk over a LibCST tree that calls every rule's visit_/leave_ methods.

LibCST's own traversal visits every whitespace, comma and parenthesis node and goes through its
generic transform machinery; rules never look at those nodes. This walk follows only the
fields that hold code (in source order) and dispatches by node class, which makes the shared
pass several times cheaper. Visitors for whitespace, punctuation and operator nodes are
therefore not called (read them from the parent node instead).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import libcst as cst

_SKIPPED_FIELDS = frozenset(
    {
        "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "comma", "semicolon",
        "colon", "equal", "dot", "header", "footer", "leading_lines", "lines_after_decorators",
        "trailing_whitespace", "operator", "asynchronous", "first_colon", "second_colon",
        "default_indent", "default_newline", "encoding", "has_trailing_newline", "indent",
        "newline", "star", "relative", "conversion", "start", "end", "whitespace",
    }
)
# where the dataclass field order differs from the order in the source text
_SOURCE_ORDER = {
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.MatchCase: ("pattern", "guard", "body"),
    cst.Arg: ("keyword", "value"),
}
if hasattr(cst, "ExceptStarHandler"):
    _SOURCE_ORDER[cst.ExceptStarHandler] = ("type", "name", "body")

_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _FIELDS.get(cls)
    if fields is None:
        if cls in _SOURCE_ORDER:
            fields = _SOURCE_ORDER[cls]
        else:
            fields = tuple(
                f.name for f in dataclasses.fields(cls)
                if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace")
            )
        _FIELDS[cls] = fields
    return fields


# nodes with no code under them (names are a third of a module's nodes): their children are
# never looked for, and walks that do not visit them need not put them on their stack
LEAF_TYPES = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString})

# node class -> whether it is one: cheaper than `isinstance` against LibCST's abstract base
_IS_NODE: dict[type, bool] = {}


def _is_node(cls: type) -> bool:
    known = _IS_NODE[cls] = issubclass(cls, cst.CSTNode)
    return known


# node id -> (the node, its code children), while the engine lints a file (`children_kept`):
# the walk, the scopes and the class outlines ask for the children of the same nodes (half
# the asks, on a model file); each node held so that no other object takes its id meanwhile.
# None outside a lint, where nothing would let go of the trees
_CHILDREN: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] | None = None


@contextlib.contextmanager
def children_kept() -> Iterator[None]:
    """Keep what `child_nodes` finds until the end of the block (one file's lint)."""
    global _CHILDREN
    outer = _CHILDREN
    if outer is None:
        _CHILDREN = {}
    try:
        yield
    finally:
        _CHILDREN = outer


def child_nodes(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The code-bearing children of `node` in source order (the nodes `walk` goes to next:
    no whitespace, punctuation or operators); much cheaper than LibCST's `children`."""
    kept = _CHILDREN
    if kept is not None:
        cached = kept.get(id(node))
        if cached is not None:
            return cached[1]
    children: list[cst.CSTNode] = []
    is_node = _IS_NODE
    for field in _FIELDS.get(type(node)) or _child_fields(type(node)):
        value = getattr(node, field)
        cls = type(value)
        if cls is tuple or cls is list:
            for child in value:
                kind = type(child)
                known = is_node.get(kind)
                if known or (known is None and _is_node(kind)):
                    children.append(child)
        else:
            known = is_node.get(cls)
            if known or (known is None and _is_node(cls)):
                children.append(value)
    found = tuple(children)
    if kept is not None:
        kept[id(node)] = (node, found)
    return found


def visitor_names(cls: type, base: type) -> tuple[str, ...]:
    """The `visit_X` and `leave_X` methods of `cls` defined below `base` in its classes (LibCST's
    visitor defines a no-op stub for every node type; looking them all up took milliseconds)."""
    names = set()
    for klass in cls.__mro__:
        if klass is base:
            break
        for name, attr in vars(klass).items():
            if name.startswith(("visit_", "leave_")) and callable(attr):
                names.add(name)
    return tuple(sorted(names))


Dispatch = dict[str, list[Callable[[cst.CSTNode], None]]]


def dispatch_table(visitors: Iterable[cst.BatchableCSTVisitor]) -> Dispatch:
    table: Dispatch = {}
    for visitor in visitors:
        for name, method in visitor.get_visitors().items():
            table.setdefault(name, []).append(method)
    return table


def walk(root: cst.CSTNode, table: Dispatch) -> None:
    """Call `visit_<Type>` before and `leave_<Type>` after each node's children. A `visit_`
    that returns False skips the node's children (its `leave_` is still called), as in
    LibCST; the engine's batched rules cannot prune (their visits return None)."""
    visits: dict[type, list] = {}
    leaves: dict[type, list] = {}
    # nodes to visit, and `_Leaving` marks for those whose children are done
    stack: list[Any] = [root]
    pop, push, extend = stack.pop, stack.append, stack.extend
    leaf_types = LEAF_TYPES
    while stack:
        node = pop()
        cls = type(node)
        if cls is _Leaving:
            node = node.node
            for method in leaves[type(node)]:
                method(node)
            continue
        methods = visits.get(cls)
        if methods is None:
            name = cls.__name__
            methods = visits[cls] = table.get(f"visit_{name}", [])
            leaves[cls] = table.get(f"leave_{name}", [])
        enter = True
        for method in methods:
            if method(node) is False:
                enter = False
        if leaves[cls]:
            push(_Leaving(node))
        if not enter or cls in leaf_types:
            continue
        extend(reversed(child_nodes(node)))


class _Leaving:
    """On `walk`'s stack: the node's children are done, its `leave_` methods are next."""

    __slots__ = ("node",)

    def __init__(self, node: cst.CSTNode) -> None:
        self.node = node


_EXACT: dict[tuple[type, ...], frozenset[type] | None] = {}


def exact_types(classes: tuple[type, ...]) -> frozenset[type] | None:
    """`classes` as a set for `type(node) in`, when none of them has a subclass (LibCST's node
    classes have none: `isinstance` against one that fails is a call into ABCMeta's Python
    check, ten times the cost); else None. Found once for each tuple."""
    if type(classes) is not tuple:
        return None  # a class alone (a plugin's): `isinstance` takes it
    if classes not in _EXACT:
        _EXACT[classes] = None if any(
            cls.__subclasses__() for cls in classes) else frozenset(classes)
    return _EXACT[classes]


def code_nodes(
    root: cst.CSTNode, prune: tuple[type, ...] = (), stop: tuple[type, ...] = ()
) -> Iterator[cst.CSTNode]:
    """`root` and the code nodes under it in source order (the nodes `walk` visits), without
    the nodes of the `prune` types and what is under them; a node of a `stop` type is
    yielded, what is under it is not."""
    stack = [root]
    pop, extend = stack.pop, stack.extend
    pruned, stopped = exact_types(prune), exact_types(stop)
    while stack:
        node = pop()
        if prune and (type(node) in pruned if pruned is not None else isinstance(node, prune)):
            continue
        yield node
        if stop and (type(node) in stopped if stopped is not None else isinstance(node, stop)
                     ) or type(node) in LEAF_TYPES:
            continue
        extend(reversed(child_nodes(node)))


_ALL_FIELDS: dict[type, tuple[str, ...]] = {}


def every_node(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`root` and every node under it, whitespace and punctuation included (cheaper than
    LibCST's `children`, which runs a visitor on each node)."""
    stack = [root]
    is_node = _IS_NODE
    while stack:
        node = stack.pop()
        yield node
        cls = type(node)
        fields = _ALL_FIELDS.get(cls)
        if fields is None:
            fields = _ALL_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
        for name in fields:
            value = getattr(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for child in value:
                    known = is_node.get(type(child))
                    if known or (known is None and _is_node(type(child))):
                        stack.append(child)
            else:
                known = is_node.get(kind)
                if known or (known is None and _is_node(kind)):
                    stack.append(value)


def visit(node: cst.CSTNode, visitor: object) -> None:
    """Walk `node` with one visitor object's `visit_<Type>`/`leave_<Type>` methods (a plain
    object or a `cst.CSTVisitor`): a `visit_` returning False skips the node's children, as
    `node.visit(visitor)` does in LibCST, without rebuilding every node it passes. Only code
    nodes are visited (not whitespace, commas, parentheses or operators)."""
    table: Dispatch = {}
    # the visitor's own classes: LibCST's bases define a no-op for every node type, and
    # listing those (`dir`) costs more than many a walk
    for klass in type(visitor).__mro__:
        if klass.__module__.startswith("libcst") or klass is object:
            continue
        for name, attr in vars(klass).items():
            if (name.startswith(("visit_", "leave_")) and name not in table and callable(attr)
                    and not getattr(attr, "_is_no_op", False)):
                table[name] = [getattr(visitor, name)]
    walk(node, table)
