"""Where findings are: the engine computes LibCST positions only for the class members and
top-level statements that hold a finding (the language server lints a file on every pause in
typing). What it reports must be what positions over the whole file give."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from modellint.config import Config
from modellint.static import engine
from modellint.static.engine import lint_source
from modellint.testing import registry

TRICKY = '''import torch
import torch.nn.functional as F
from torch.autograd import Variable


class A(torch.nn.Module):
    """doc
    string"""
    x = 1; y = F.tanh(x)

    # comment
    @staticmethod
    def f(a,
          b):
        s = """multi
line"""
        return F.sigmoid(a) + \\
            F.tanh(b)

    class Inner:
        def g(self):
            return Variable(1)
    z = [1,
         2]; w = F.tanh(z)
    def h(self): return F.tanh(1)


\x0c
class B: v = F.tanh(2); u = 3


class C(torch.nn.Module):
    a = 1
    b = 2
    c = 3
    d = 4
    e = 5
    def k(self):
        return F.sigmoid(3)  # noqa: ML999
if True:
    class D:
        q = F.tanh(4)
        r = 5
'''


def _rules():
    return [rule for rule in registry().rules.values()
            if rule.code in ("ML901", "ML903") and hasattr(rule, "report")]


def _found(text: str) -> list[tuple]:
    result = lint_source("t.py", text.encode(), _rules(), Config().rule_options())
    return [(f.code, f.line, f.column, f.end_line, f.end_column, f.statement_line, f.source_line)
            for f in result.findings]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_positions_in_class_members_are_those_of_the_whole_file(monkeypatch, newline):
    text = TRICKY.replace("\n", newline)
    ours = _found(text)

    def whole(self, nodes):
        if self._all is None:
            self._all = (MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(
                PositionProvider), 0)

    monkeypatch.setattr(engine._Positions, "_compute", whole)
    assert ours == _found(text)
    assert [(code, line, column) for code, line, column, *_ in ours] == [
        ("ML903", 9, 16), ("ML903", 17, 16), ("ML903", 18, 13), ("ML901", 22, 20),
        ("ML903", 24, 18), ("ML903", 25, 25), ("ML903", 29, 14), ("ML903", 39, 16),
        ("ML903", 42, 13)]


def test_one_finding_in_a_large_class_costs_its_member_alone(monkeypatch):
    """A finding in method 150 of 200: positions for that method (and the class header), no
    code generated to count the lines before it (CPython's parse says where it starts)."""
    resolved: list[int] = []
    resolve = MetadataWrapper.resolve
    generated: list[int] = []
    code_for_node = cst.Module.code_for_node

    def counting(self, provider):
        found = resolve(self, provider)
        resolved.append(len(found))
        return found

    def generating(self, node):
        generated.append(1)
        return code_for_node(self, node)

    monkeypatch.setattr(MetadataWrapper, "resolve", counting)
    monkeypatch.setattr(cst.Module, "code_for_node", generating)
    methods = "".join(
        f"    # method {i}\n    def m{i}(self, x):\n        return x + {i}\n\n"
        for i in range(200))
    text = ("import torch\nimport torch.nn.functional as F\n\n\nclass Big(torch.nn.Module):\n"
            + methods.replace("return x + 150", "return F.tanh(x)"))
    line = text.split("\n").index("        return F.tanh(x)") + 1
    assert [(code, at, column) for code, at, column, *_ in _found(text)] == [
        ("ML903", line, 16)]
    assert len(resolved) == 1 and resolved[0] < 100, resolved
    assert generated == []
