"""The engine's one walker: `walk` (the batched pass), `visit` (one visitor over a subtree, as
LibCST's `node.visit`) and `code_nodes`."""

from __future__ import annotations

import libcst as cst

from modellint.rule import StaticRule, child_nodes, code_nodes, visit
from modellint.rules._loops import names_in
from modellint.static.walk import dispatch_table, walk
from modellint.testing import lint_text

SOURCE = """\
@decorate(a)
def f(x, y=g(1)):
    def inner():
        return hidden(x)
    return outer(x.attr, lambda: secret(y))
"""


def _module() -> cst.Module:
    return cst.parse_module(SOURCE)


def _call_names(nodes) -> list[str]:
    return [n.func.value for n in nodes if isinstance(n, cst.Call)
            and isinstance(n.func, cst.Name)]


class _Calls(cst.CSTVisitor):
    def __init__(self, prune: type | None = None) -> None:
        self.prune = prune
        self.calls: list[str] = []
        self.left: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node.func.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return not (self.prune is cst.FunctionDef and node.name.value == "inner")

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return self.prune is not cst.Lambda

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.left.append(node.name.value)


def test_visit_goes_through_the_code_in_source_order():
    visitor = _Calls()
    visit(_module(), visitor)
    assert visitor.calls == ["decorate", "g", "hidden", "outer", "secret"]
    assert visitor.left == ["inner", "f"]


def test_visit_returning_false_skips_the_children_as_libcst_does():
    for prune in (cst.FunctionDef, cst.Lambda):
        ours, libcsts = _Calls(prune), _Calls(prune)
        visit(_module(), ours)
        _module().visit(libcsts)
        assert ours.calls == libcsts.calls
        # the pruned node is still left
        assert ours.left == libcsts.left == ["inner", "f"]
    pruned = _Calls(cst.FunctionDef)
    visit(_module(), pruned)
    assert "hidden" not in pruned.calls and "secret" in pruned.calls


def test_visit_uses_the_visitors_own_methods_and_their_overrides():
    class Base:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def visit_Call(self, node: cst.Call) -> None:
            self.seen.append("base")

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    class Child(Base):
        def visit_Call(self, node: cst.Call) -> None:
            self.seen.append(node.func.value)

    visitor = Child()
    visit(_module(), visitor)
    # the override, and the inherited prune of the lambda
    assert visitor.seen == ["decorate", "g", "hidden", "outer"]


class _Prunes(StaticRule):
    """Test rule: returns False from visit_FunctionDef.

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    """

    code = "ML992"
    name = "prunes"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


class _Calls992(StaticRule):
    """Test rule: reports every call.

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    """

    code = "ML993"
    name = "calls"

    def visit_Call(self, node: cst.Call) -> None:
        self.report(node, "call")


def test_a_rule_in_the_batched_walk_cannot_prune_for_the_others():
    # as in LibCST's batched visitors, a rule's return value hides nothing from the others
    findings = lint_text(SOURCE, [_Prunes, _Calls992])
    assert [f.line for f in findings] == [1, 2, 4, 5, 5]
    seen: list[str] = []
    table = dispatch_table([])
    table["visit_Call"] = [lambda node: seen.append(node.func.value)]
    walk(_module(), table)
    assert seen == ["decorate", "g", "hidden", "outer", "secret"]


def test_code_nodes_prune_and_stop():
    module = _module()
    assert _call_names(code_nodes(module)) == ["decorate", "g", "hidden", "outer", "secret"]
    nested = (cst.FunctionDef, cst.Lambda)
    function = module.body[0]
    assert _call_names(code_nodes(function.body, prune=nested)) == ["outer"]
    stopped = list(code_nodes(function.body, stop=nested))
    assert _call_names(stopped) == ["outer"]
    assert any(isinstance(n, cst.Lambda) for n in stopped)
    assert not any(isinstance(n, cst.Lambda) for n in code_nodes(function.body, prune=nested))
    # no whitespace, commas or parentheses
    assert not any(isinstance(n, (cst.Comma, cst.LeftParen, cst.BaseParenthesizableWhitespace))
                   for n in code_nodes(module))


def test_code_nodes_prune_by_a_base_class_or_a_class_alone():
    # (leaf classes are compared by type; a base class, or a class not in a tuple, still
    # prunes every node that is an instance of it)
    module = cst.parse_module("def f():\n    x = lambda: 1\n    del x\n    return x\n")
    kinds = {type(n) for n in code_nodes(module, prune=(cst.BaseSmallStatement,))}
    assert not kinds & {cst.Assign, cst.Del, cst.Return, cst.Lambda}
    assert cst.Lambda not in {type(n) for n in code_nodes(module, prune=cst.Lambda)}
    assert cst.Lambda in {type(n) for n in code_nodes(module, prune=(cst.Del,))}


def test_child_nodes_are_in_source_order():
    function = _module().body[0]
    kinds = [type(n).__name__ for n in child_nodes(function)]
    assert kinds == ["Decorator", "Name", "Parameters", "IndentedBlock"]


def test_child_nodes_are_kept_only_while_a_lint_keeps_them():
    """The engine keeps each node's children while it lints a file (`children_kept`): asked
    again, the same tuple; outside a lint nothing is kept, so no tree outlives its caller."""
    from modellint.static import walk

    function = _module().body[0]
    assert child_nodes(function) == child_nodes(function) and walk._CHILDREN is None
    with walk.children_kept():
        first = child_nodes(function)
        assert child_nodes(function) is first and isinstance(first, tuple)
        assert id(function) in walk._CHILDREN  # type: ignore[operator]
    assert walk._CHILDREN is None


def test_names_in_reads_names_not_attribute_names_nor_nested_scopes():
    expr = cst.parse_expression("f(a.b.c, d[e], lambda: hidden, [g for g in h])")
    assert names_in(expr) == {"f", "a", "d", "e", "g", "h"}


class _ReportsLater(StaticRule):
    """Test rule: reports every call to `late` from `leave_Module`.

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    """

    code = "ML990"
    name = "reports-later"

    def __init__(self, context) -> None:
        super().__init__(context)
        self.sites: list[tuple[cst.Call, cst.CSTNode | None]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "late":
            self.sites.append((node, self.context.current_statement))

    def leave_Module(self, original_node: cst.Module) -> None:
        for call, statement in self.sites:
            if self.context.options.get("first"):
                statement = original_node.body[0]
            elif self.context.options.get("none"):
                statement = None
            self.report(call, "late", statement=statement)


LATE = """\
x = (  # noqa: ML990
    late()
)
y = [
    late(),
]
"""


def test_a_report_after_the_walk_belongs_to_the_statement_it_names():
    findings = lint_text(LATE, [_ReportsLater])
    # the noqa comment on the first line of the statement hides the first report
    assert [(f.line, f.statement_line) for f in findings] == [(5, 4)]


def test_a_report_after_the_walk_without_a_statement_is_in_the_innermost_one():
    findings = lint_text(LATE, [_ReportsLater], {"none": True})
    assert [(f.line, f.statement_line) for f in findings] == [(5, 4)]


def test_the_statement_named_decides_which_noqa_applies():
    # both reports are said to belong to the first statement, whose noqa hides them
    assert lint_text(LATE, [_ReportsLater], {"first": True}) == []
