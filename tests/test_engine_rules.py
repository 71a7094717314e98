"""ML000 and ML001 are plain rules the engine reports itself: no visitor, so a file that no
enabled rule looks at is not parsed by LibCST only to find a syntax error."""

from __future__ import annotations

import libcst as cst
import pytest

from modellint.config import Config
from modellint.rule import StaticRule
from modellint.static import engine
from modellint.testing import registry

OPTIONS = Config().rule_options()


def _default_static_rules():
    return [rule for rule in registry().rules.values()
            if rule.default_enabled and "static" in rule.passes and hasattr(rule, "report")]


def test_the_engine_codes_are_the_registered_plain_rules():
    rules = registry().rules
    for code, name in (engine.SYNTAX_ERROR, engine.INTERNAL_ERROR):
        assert rules[code].name == name
        assert not issubclass(rules[code], StaticRule)


@pytest.fixture
def parses(monkeypatch):
    counted: list[str] = []
    real = engine.parse_with_libcst

    def counting(text: str) -> cst.Module:
        counted.append(text)
        return real(text)

    monkeypatch.setattr(engine, "parse_with_libcst", counting)
    return counted


def test_a_file_no_rule_looks_at_is_not_parsed_by_libcst(parses):
    # no rule's trigger word occurs in it
    data = b'"""Constants."""\n\nANSWER = 42\nNAMES = ["a", "b"]\n'
    result = engine.lint_source("consts.py", data, _default_static_rules(), OPTIONS)
    assert result.findings == [] and result.module is None
    assert parses == []


def test_a_syntax_error_is_still_reported_without_any_rule_looking(parses):
    result = engine.lint_source("broken.py", b"ANSWER = (42\n", _default_static_rules(), OPTIONS)
    assert [(f.code, f.name, f.line) for f in result.findings] == [("ML000", "syntax-error", 1)]
    assert parses == []


def test_a_file_a_rule_looks_at_is_parsed(parses):
    data = b"import torch.nn as nn\n\nlayer = nn.Linear(2, 2)\n"
    result = engine.lint_source("net.py", data, _default_static_rules(), OPTIONS)
    assert result.module is not None and len(parses) == 1
