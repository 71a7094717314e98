"""Deprecated API (ML9xx): fixes, import aliases, and what must not be reported."""

from __future__ import annotations

import pytest

from modellint.testing import fix_text, lint_text
from rules.deprecated import DataAttributeMutation, DeprecatedFunctional, DeprecatedVariable

DEPRECATED_RULES = [DeprecatedVariable, DataAttributeMutation, DeprecatedFunctional]


def codes(source, rules=DEPRECATED_RULES):
    return [(f.code, f.line) for f in lint_text(source, rules)]


@pytest.mark.parametrize(
    ("imports", "sigmoid"),
    [
        ("import torch\nimport torch.nn.functional as F", "F.sigmoid"),
        ("import torch\nfrom torch.nn import functional as F", "F.sigmoid"),
        ("import torch\nfrom torch.nn.functional import sigmoid", "sigmoid"),
        ("import torch\nimport torch.nn as nn", "nn.functional.sigmoid"),
        ("import torch", "torch.nn.functional.sigmoid"),
    ],
)
def test_sigmoid_alias_forms_are_fixed(imports, sigmoid):
    source = f"{imports}\n\ndef gate(x):\n    return x * {sigmoid}(x)\n"
    assert codes(source, [DeprecatedFunctional]) == [("ML903", imports.count("\n") + 4)]
    fixed = fix_text(source, [DeprecatedFunctional])
    assert fixed == source.replace(f"{sigmoid}(x)", "torch.sigmoid(x)")


def test_functional_fix_uses_torch_alias_and_combines():
    source = """\
import torch as th
import torch.nn.functional as F

def head(x, acts=(F.tanh, F.relu)):
    gate = F.sigmoid(x) * F.tanh(x)
    return F.softmax(gate), acts
"""
    expected = """\
import torch as th
import torch.nn.functional as F

def head(x, acts=(th.tanh, F.relu)):
    gate = th.sigmoid(x) * th.tanh(x)
    return F.softmax(gate), acts
"""
    assert codes(source, [DeprecatedFunctional]) == [
        ("ML903", 4), ("ML903", 5), ("ML903", 5), ("ML903", 6)
    ]
    fixed = fix_text(source, [DeprecatedFunctional])
    assert fixed == expected
    # the softmax without dim remains: it has no automatic fix
    assert codes(fixed, [DeprecatedFunctional]) == [("ML903", 6)]


def test_functional_without_torch_import_is_reported_not_fixed():
    source = "from torch.nn import functional as F\n\ny = F.tanh\n"
    (finding,) = lint_text(source, [DeprecatedFunctional])
    assert finding.fix is None
    assert fix_text(source, [DeprecatedFunctional]) == source


@pytest.mark.parametrize(
    ("line", "reported"),
    [
        ("p = F.softmax(x)", True),
        ("p = F.log_softmax(x, dtype=torch.float32)", True),
        ("p = F.softmin(x)", True),
        ("m = nn.Softmax()", True),
        ("p = F.softmax(x, -1)", False),
        ("p = F.log_softmax(x, dim=1)", False),
        ("m = nn.LogSoftmax(dim=-1)", False),
        ("m = nn.Softmax2d()", False),
        ("p = x.softmax(-1)", False),
        ("p = torch.softmax(x, 1)", False),
    ],
)
def test_softmax_without_dim(line, reported):
    source = f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n{line}\n"
    assert bool(codes(source, [DeprecatedFunctional])) is reported


def test_variable_messages_name_volatile_and_requires_grad():
    source = """\
import torch
from torch.autograd import Variable

a = Variable(torch.ones(2), volatile=True)
b = Variable(torch.ones(2), requires_grad=True)
c = Variable(torch.ones(2))
"""
    findings = lint_text(source, [DeprecatedVariable])
    assert [f.line for f in findings] == [4, 5, 6]
    assert "torch.no_grad()" in findings[0].message
    assert "requires_grad_()" in findings[1].message


def test_data_writes_reported_and_reads_not():
    source = """\
import torch
import torch.nn as nn

def step(model, lr):
    total = 0.0
    for p in model.parameters():
        total += p.data.norm()
        p.data.sub_(lr * p.grad.data)
    for name, buf in model.named_buffers():
        buf.data.fill_(0)
    first = list(model.parameters())[0]
    first.data.zero_()
    model.fc.weight.data[0, 0] = 1.0
    model.fc.bias.data *= 0.5
    snapshot = model.fc.weight.data.clone()
    return total, snapshot
"""
    # `first` is not known to be a tensor: precision over recall
    assert codes(source, [DataAttributeMutation]) == [
        ("ML902", 8), ("ML902", 10), ("ML902", 13), ("ML902", 14),
    ]


def test_data_attribute_of_other_objects_is_not_reported():
    source = """\
class Replay:
    def __init__(self):
        self.data = []

    def reset(self):
        self.data = []
        self.data[0] = None

def configure(args, batch):
    args.data = "imagenet"
    batch.data += 1
    batch.data.extend_()
"""
    assert codes(source, [DataAttributeMutation]) == []


def test_aliases_are_info_and_missing_dim_is_a_warning():
    source = "import torch\nimport torch.nn.functional as F\n\na = F.tanh(x)\nb = F.softmax(a)\n"
    severities = [f.severity.value for f in lint_text(source, [DeprecatedFunctional])]
    assert severities == ["info", "warning"]
