"""Every registered runtime check's own valid/invalid examples (plugins' included), run by one
harness the way tests/test_rule_examples.py runs the static rules' examples; and the runtime
pass's code holds no rule code."""

from __future__ import annotations

import pathlib
import re

import pytest

pytest.importorskip("torch")

from modellint.rule import Valid  # noqa: E402
from modellint.runtime.examples import check_example  # noqa: E402
from modellint.testing import registry  # noqa: E402

CHECKS = sorted(registry().runtime_checks.values(), key=lambda c: c.code)
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _cases(kind):
    for check in CHECKS:
        for index, example in enumerate(getattr(check, kind)):
            yield pytest.param(check, example, id=f"{check.code}-{kind}-{index}")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.code)
def test_runtime_check_has_an_invalid_example(check):
    assert check.invalid, f"the runtime check of {check.code} has no invalid example"


@pytest.mark.parametrize(("check", "example"), list(_cases("valid")))
def test_runtime_valid_example(check, example):
    example = example if isinstance(example, Valid) else Valid(example)
    findings = check_example(example.code, check, example.options)
    assert findings == [], f"{check.code} flagged valid code:\n{example.code}\n{findings}"


@pytest.mark.parametrize(("check", "example"), list(_cases("invalid")))
def test_runtime_invalid_example(check, example):
    findings = check_example(example.code, check, example.options)
    lines = [f.line for f in findings]
    assert example.line in lines, (
        f"{check.code} should report line {example.line}, reported {findings}:\n{example.code}"
    )


def test_every_runtime_code_has_a_check_class():
    rules = registry().rules
    for code, rule in rules.items():
        if "runtime" in rule.passes and code not in ("ML001", "ML002"):  # the runner's own
            assert code in registry().runtime_checks, f"{code} runs at runtime but has no check"


def test_the_runtime_pass_names_no_rule_code():
    literal = re.compile(r"""["'](ML[17]\d\d|ML505)""")
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sorted((ROOT / "linter" / "runtime").glob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if literal.search(line)]
    assert found == []
