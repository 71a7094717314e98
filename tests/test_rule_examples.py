"""Every registered rule's own valid/invalid examples, plugins' included, and its docs."""

from __future__ import annotations

import textwrap

import pytest

from modellint.rule import DOC_SECTIONS, StaticRule, Valid
from modellint.testing import fix_text, lint_text, registry

RULES = sorted(registry().rules.values(), key=lambda r: r.code)
STATIC = [r for r in RULES if issubclass(r, StaticRule)]


def _cases(kind):
    for rule in STATIC:
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind}-{index}")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    doc = rule.documentation()
    for section in DOC_SECTIONS:
        assert f"## {section}" in doc, f"{rule.code} lacks the section {section!r}"
    assert rule.summary(), f"{rule.code} has no one-line summary"
    assert rule.name == rule.name.lower() and " " not in rule.name


@pytest.mark.parametrize("rule", [r for r in STATIC if r.code != "ML001"], ids=lambda r: r.code)
def test_static_rule_has_examples(rule):
    assert rule.valid, f"{rule.code} has no valid examples"
    assert rule.invalid, f"{rule.code} has no invalid examples"


@pytest.mark.parametrize(("rule", "example"), list(_cases("valid")))
def test_valid_example(rule, example):
    example = example if isinstance(example, Valid) else Valid(example)
    findings = [f for f in lint_text(example.code, [rule], example.options) if f.code == rule.code]
    assert findings == [], f"{rule.code} flagged valid code:\n{example.code}"


@pytest.mark.parametrize(("rule", "example"), list(_cases("invalid")))
def test_invalid_example(rule, example):
    findings = lint_text(example.code, [rule], example.options)
    lines = [f.line for f in findings if f.code == rule.code]
    assert example.line in lines, (
        f"{rule.code} should report line {example.line}, reported {lines}:\n{example.code}"
    )
    if example.fixed is not None:
        fixed = fix_text(example.code, [rule], example.options)
        assert fixed == textwrap.dedent(example.fixed)
