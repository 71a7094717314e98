"""Every registered rule's own valid/invalid examples, plugins' included, and its docs: the
checks of `modellint.testing`, which a plugin's own tests can run too."""

from __future__ import annotations

import pytest

from modellint.rule import Invalid, StaticRule
from modellint.testing import (
    check_documented,
    check_fix_declaration,
    check_invalid,
    check_valid,
    example_fixes,
    registry,
)

RULES = sorted(registry().rules.values(), key=lambda r: r.code)
# the static pass's rules: its visitors, and ML000, which the engine reports itself (ML001, a
# crash, has no examples)
STATIC = [r for r in RULES if "static" in r.passes and r.code != "ML001"]


def _cases(kind):
    for rule in STATIC:
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind}-{index}")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    check_documented(rule)


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.code)
def test_static_rule_has_examples(rule):
    assert rule.valid, f"{rule.code} has no valid examples"
    assert rule.invalid, f"{rule.code} has no invalid examples"


@pytest.mark.parametrize(("rule", "example"), list(_cases("valid")))
def test_valid_example(rule, example):
    check_valid(rule, example)


@pytest.mark.parametrize(("rule", "example"), list(_cases("invalid")))
def test_invalid_example(rule, example):
    """Reported at its line; a fix it gets is checked against its `fixed` text."""
    check_invalid(rule, example)


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.code)
def test_declared_fix_is_what_the_examples_carry(rule):
    check_fix_declaration(rule)


class _Fixer(StaticRule):
    """Test rule: replaces `old` by `new`, safely unless the call is `risky(old)`.

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    """

    code = "ML991"
    name = "fixer"
    fix = "safe"

    def visit_Name(self, node):
        import libcst as cst

        from modellint.rule import Fix

        if node.value == "old":
            self.report(node, "old", fix=Fix(((node, cst.Name("new")),), "new", safe=True))
        elif node.value == "older":
            self.report(node, "older", fix=Fix(((node, cst.Name("new")),), "new", safe=False))
        elif node.value == "oldest":
            self.report(node, "oldest")


def _with(**attributes):
    return type("Fixer", (_Fixer,), attributes)


def test_an_invalid_example_that_gets_a_fix_must_say_what_it_fixes_to():
    check_invalid(_Fixer, Invalid("x = old\n", line=1, fixed="x = new\n"))
    with pytest.raises(AssertionError, match="give the source after the fix"):
        check_invalid(_Fixer, Invalid("x = old\n", line=1))
    # (pytest may indent the lines of the message)
    with pytest.raises(AssertionError, match=r"(?s)gave.*x = new.*not.*x = newer"):
        check_invalid(_Fixer, Invalid("x = old\n", line=1, fixed="x = newer\n"))
    with pytest.raises(AssertionError, match="gives no fix"):
        check_invalid(_Fixer, Invalid("x = oldest\n", line=1, fixed="x = new\n"))


def test_the_declared_fix_is_derived_from_the_examples():
    safe = Invalid("x = old\n", line=1, fixed="x = new\n")
    unsafe = Invalid("x = older\n", line=1, fixed="x = new\n")
    none = Invalid("x = oldest\n", line=1)
    assert example_fixes(_with(invalid=[safe])) == ("safe", "always")
    assert example_fixes(_with(invalid=[unsafe])) == ("unsafe", "always")
    assert example_fixes(_with(invalid=[safe, unsafe])) == ("safe/unsafe", "always")
    assert example_fixes(_with(invalid=[safe, none])) == ("safe", "sometimes")
    assert example_fixes(_with(invalid=[none])) == (None, "always")
    check_fix_declaration(_with(invalid=[safe]))
    # a rule that declares a safe fix and emits an unsafe one (as ML201 once did)
    with pytest.raises(AssertionError, match="declares fix = 'safe'"):
        check_fix_declaration(_with(invalid=[safe, unsafe]))
    with pytest.raises(AssertionError, match="fix_availability"):
        check_fix_declaration(_with(invalid=[safe, none]))
    check_fix_declaration(_with(invalid=[safe, none], fix_availability="sometimes"))
