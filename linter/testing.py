"""Helpers for testing rules: lint a string with chosen rules, apply their fixes, and check a
rule against its own examples (what `tests/test_rule_examples.py` runs on every registered
rule; a plugin's tests can call `check_examples(MyRule)` too)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

from modellint.codes import INTERNAL_ERROR
from modellint.config import DEFAULT_TORCH_VERSION
from modellint.finding import Finding
from modellint.fix import PythonText, fix_rounds
from modellint.plugins import Registry, default_registry
from modellint.rule import DOC_SECTIONS, Invalid, Rule, StaticRule, Valid
from modellint.static.linter import Linter


def registry() -> Registry:
    """The built-in and installed plugins' registry (`modellint.plugins.default_registry`)."""
    return default_registry()


def _options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    merged: dict[str, Any] = {"target_torch_version": DEFAULT_TORCH_VERSION,
                              "target_gpu_memory": None}
    for key, value in (options or {}).items():
        key = key.replace("-", "_")
        if key == "target_torch_version" and isinstance(value, str):
            value = tuple(int(p) for p in value.split("."))
        merged[key] = value
    return merged


def lint_text(
    source: str,
    rules: Iterable[type[Rule]],
    options: Mapping[str, Any] | None = None,
    path: str = "example.py",
) -> list[Finding]:
    """Findings of `rules` on `source` (dedented), sorted by position."""
    text = textwrap.dedent(source)
    result = Linter(_visitors(rules), _options(options)).lint(path, text.encode())
    return sorted(result.findings, key=lambda f: f.sort_key())


def _visitors(rules: Iterable[type[Rule]]) -> list[type[StaticRule]]:
    """The rules that visit the tree; the engine reports the others (ML000) itself."""
    return [rule for rule in rules if issubclass(rule, StaticRule)]


def lint_project(
    files: Mapping[str, str],
    rules: Iterable[type[Rule]],
    options: Mapping[str, Any] | None = None,
) -> dict[str, list[Finding]]:
    """Findings of `rules` on a project of several files ({path: source}, dedented), linted
    as one run: each file sees the project index of all of them, built (as `check` builds it)
    only when one of `rules` reads the project (`StaticRule.needs`). Path -> findings."""
    from modellint.static.index import build
    from modellint.static.needs import needs_project

    texts = {path: textwrap.dedent(source) for path, source in files.items()}
    visitors = _visitors(rules)
    index = build(texts.items()) if needs_project(visitors) else None
    linter = Linter(visitors, _options(options), index)
    found = {}
    for path, text in texts.items():
        result = linter.lint(path, text.encode())
        found[path] = sorted(result.findings, key=lambda f: f.sort_key())
    return found


def fix_text(
    source: str,
    rules: Iterable[type[Rule]],
    options: Mapping[str, Any] | None = None,
    unsafe: bool = True,
) -> str:
    """`source` after applying the fixes of `rules` until nothing more changes, as `check
    --fix` applies them; AssertionError when a fix fails or breaks the code."""
    data = textwrap.dedent(source).encode()
    linter = Linter(_visitors(rules), _options(options))
    fixing = fix_rounds(PythonText(linter, "example.py", data), linter.lint("example.py", data),
                        unsafe)
    assert not fixing.messages, "\n".join([*fixing.messages, *fixing.tracebacks])
    # (None: the text cannot be decoded, and there is nothing to fix)
    return fixing.text if fixing.text is not None else data.decode()


# -- a rule against its own examples -----------------------------------------------------------


def check_documented(rule: type[Rule]) -> None:
    """The rule's docs have a summary line and every section (AssertionError if not)."""
    doc = rule.documentation()
    for section in DOC_SECTIONS:
        assert f"## {section}" in doc, f"{rule.code} lacks the section {section!r}"
    assert rule.summary(), f"{rule.code} has no one-line summary"
    assert rule.name == rule.name.lower() and " " not in rule.name, (
        f"{rule.code}'s name {rule.name!r} is not lowercase-with-dashes")


def _findings_of(rule: type[Rule], code: str, options: Mapping[str, Any]) -> list[Finding]:
    """The rule's findings on an example; AssertionError when the rule fails on it (an ML001:
    a crash, or reading what its `needs` do not declare)."""
    found = lint_text(code, [rule], options)
    failures = [f.message for f in found if f.code == INTERNAL_ERROR]
    assert not failures, f"{rule.code} failed on\n{code}\n" + "\n".join(failures)
    return [f for f in found if f.code == rule.code]


def check_valid(rule: type[Rule], example: Valid | str) -> None:
    """The rule reports nothing on a valid example."""
    example = example if isinstance(example, Valid) else Valid(example)
    findings = _findings_of(rule, example.code, example.options)
    assert findings == [], f"{rule.code} flagged valid code:\n{example.code}"


def check_invalid(rule: type[Rule], example: Invalid) -> list[Finding]:
    """The rule reports an invalid example at its line; when its findings there carry a fix,
    the example gives the `fixed` source and applying the fixes (safe and unsafe) gives exactly
    that; an example with `fixed` must get a fix. Returns the rule's findings."""
    findings = _findings_of(rule, example.code, example.options)
    lines = [f.line for f in findings]
    assert example.line in lines, (
        f"{rule.code} should report line {example.line}, reported {lines}:\n{example.code}")
    fixes = [f.fix for f in findings if f.fix is not None]
    if example.fixed is None:
        assert not fixes, (
            f"{rule.code} fixes this example ({fixes[0].description}): give the source after "
            f"the fix as `fixed=`:\n{example.code}")
    else:
        assert fixes, f"{rule.code} gives no fix for this example, which has `fixed`"
        fixed = fix_text(example.code, [rule], example.options)
        expected = textwrap.dedent(example.fixed)
        assert fixed == expected, (
            f"{rule.code}'s fix of\n{example.code}\ngave\n{fixed}\nnot\n{expected}")
    return findings


def example_fixes(rule: type[Rule]) -> tuple[str | None, str]:
    """(`fix`, `fix_availability`) as the rule's invalid examples show them: the kinds of fix
    their findings carry (None, "safe", "unsafe" or "safe/unsafe") and whether every finding
    carries one ("always") or not ("sometimes")."""
    kinds: set[str] = set()
    always = True
    for example in rule.invalid:
        for finding in lint_text(example.code, [rule], example.options):
            if finding.code != rule.code:
                continue
            if finding.fix is None:
                always = False
            else:
                kinds.add(finding.fix.applicability)
    fix = "/".join(sorted(kinds)) or None
    return fix, "always" if always or fix is None else "sometimes"


def check_fix_declaration(rule: type[Rule]) -> None:
    """The rule's declared `fix` and `fix_availability` (what the README's table, `modellint
    rule` and editors show) are what its invalid examples' findings carry."""
    fix, availability = example_fixes(rule)
    assert rule.fix == fix, (
        f"{rule.code} declares fix = {rule.fix!r}, its examples' findings carry {fix!r}")
    if fix is not None:
        assert rule.fix_availability == availability, (
            f"{rule.code} declares fix_availability = {rule.fix_availability!r}, but "
            f"{'every' if availability == 'always' else 'not every'} finding of its examples "
            f"carries a fix: {availability!r}")


def check_examples(rule: type[Rule]) -> None:
    """Every check above on one static rule."""
    check_documented(rule)
    assert rule.valid, f"{rule.code} has no valid examples"
    assert rule.invalid, f"{rule.code} has no invalid examples"
    for valid in rule.valid:
        check_valid(rule, valid)
    for invalid in rule.invalid:
        check_invalid(rule, invalid)
    check_fix_declaration(rule)
