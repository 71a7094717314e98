"""Small questions about LibCST nodes that rules and the engine share: a node's source text,
a call's arguments."""

from __future__ import annotations

import libcst as cst

from modellint.static.walk import code_nodes

# nodes whose body is a scope of its own
NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_EMPTY_MODULE = cst.Module(body=[])


def source_of(node: cst.CSTNode) -> str:
    """The source text of a node. It is generated, which is costly: use it for messages and
    for checks that run rarely, not on every node."""
    return _EMPTY_MODULE.code_for_node(node)


def argument(call: cst.Call, keyword: str, position: int | None = None) -> cst.Arg | None:
    """The argument of `call` given as `keyword=`, or (with `position`) as that positional
    argument (counted from 0, before any `*args`); None when it is not given."""
    positional = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg
        elif not arg.star:
            if positional == position:
                return arg
            positional += 1
    return None


def positional_args(call: cst.Call) -> list[cst.Arg]:
    """The arguments of `call` given by position, before or after any `*args`."""
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def has_star_args(call: cst.Call) -> bool:
    """`call` passes `*args` or `**kwargs` (its arguments cannot all be known)."""
    return any(arg.star for arg in call.args)


def name_nodes(expr: cst.CSTNode) -> list[cst.Name]:
    """Every `Name` read in `expr` in source order: attribute heads (`a` of `a.b`), not
    attribute names (`b`), and nothing inside nested functions, classes or lambdas."""
    found: list[cst.Name] = []
    attributes: set[int] = set()
    for node in code_nodes(expr, prune=NESTED_SCOPES):
        if isinstance(node, cst.Attribute):
            attributes.add(id(node.attr))
        elif isinstance(node, cst.Name) and id(node) not in attributes:
            found.append(node)
    return found
