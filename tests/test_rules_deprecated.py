"""Deprecated API (ML9xx): fixes, import aliases, and what must not be reported."""

from __future__ import annotations

import pytest

from modellint.testing import fix_text, lint_text
from rules.deprecated import (
    DataAttributeMutation,
    DataLoaderIteratorNext,
    DeprecatedFunctional,
    DeprecatedVariable,
    ZeroDimDataIndex,
)

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


# -- ML910 / ML911: idioms of old PyTorch that now raise ---------------------------------------


def test_zero_dim_data_index_premise_and_fix_hold_on_installed_torch():
    """`loss.data[0]` raises on today's torch and the fixed code computes the value."""
    torch = pytest.importorskip("torch")
    source = ("import torch\nimport torch.nn.functional as F\n\n"
              "def step(out, y):\n    loss = F.mse_loss(out, y)\n    return loss.data[0]\n")
    assert codes(source, [ZeroDimDataIndex]) == [("ML910", 6)]
    [finding] = lint_text(source, [ZeroDimDataIndex])
    assert not finding.fix.safe
    assert fix_text(source, [ZeroDimDataIndex], unsafe=False) == source
    fixed = fix_text(source, [ZeroDimDataIndex])
    assert fixed.endswith("    return loss.item()\n")
    assert fix_text(fixed, [ZeroDimDataIndex]) == fixed
    before, after = {}, {}
    exec(source, before)  # noqa: S102 - our own example
    exec(fixed, after)  # noqa: S102
    out, y = torch.ones(3), torch.zeros(3)
    with pytest.raises(IndexError):
        before["step"](out, y)
    assert after["step"](out, y) == 1.0


@pytest.mark.parametrize(
    "source",
    [
        # a loss module called inline, and one built in the file
        "import torch.nn as nn\n\ndef f(o, y):\n    return nn.MSELoss()(o, y).data[0]\n",
        "import torch.nn as nn\n\ncrit = nn.NLLLoss()\n\ndef f(o, y):\n"
        "    l = crit(o, y)\n    return l.data[0]\n",
        # backward() without arguments needs a one-element tensor
        "def f(model, x):\n    out = model(x).mean()\n    out.backward()\n    return out.data[0]\n",
        "import torch\n\ndef f(x):\n    return x.norm().data[0]\n",
    ],
)
def test_zero_dim_data_index_reported(source):
    assert [code for code, _ in codes(source, [ZeroDimDataIndex])] == ["ML910"]


@pytest.mark.parametrize(
    "source",
    [
        "def f(x):\n    return x.data[0]\n",
        "def f(loss):\n    return loss.data[1]\n",
        "import torch.nn as nn\n\ncrit = nn.MSELoss(reduction='none')\n\ndef f(o, y):\n"
        "    l = crit(o, y)\n    return l.data[0]\n",
        # backward with a gradient: not a scalar
        "def f(out, g):\n    out.backward(g)\n    return out.data[0]\n",
        "def f(x):\n    return x.max(1).data[0]\n",
    ],
)
def test_zero_dim_data_index_not_reported(source):
    assert codes(source, [ZeroDimDataIndex]) == []


def test_dataloader_next_premise_and_fix_hold_on_installed_torch():
    data = pytest.importorskip("torch.utils.data")
    torch = pytest.importorskip("torch")
    source = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
              "loader = DataLoader(TensorDataset(torch.arange(4)), batch_size=2)\n"
              "batches = iter(loader)\n(first,) = batches.next()\n")
    [finding] = lint_text(source, [DataLoaderIteratorNext])
    assert (finding.code, finding.line, finding.fix.safe) == ("ML911", 6, True)
    fixed = fix_text(source, [DataLoaderIteratorNext], unsafe=False)
    assert fixed.endswith("(first,) = next(batches)\n")
    assert fix_text(fixed, [DataLoaderIteratorNext]) == fixed
    with pytest.raises(AttributeError):
        exec(source, {})  # noqa: S102 - our own example
    namespace = {}
    exec(fixed, namespace)  # noqa: S102
    assert torch.equal(namespace["first"], torch.tensor([0, 1]))
    assert not hasattr(iter(data.DataLoader([1, 2])), "next")


def test_dataloader_next_guessed_from_the_name_is_an_unsafe_fix():
    source = "def show(val_loader):\n    it = iter(val_loader)\n    return it.next()\n"
    [finding] = lint_text(source, [DataLoaderIteratorNext])
    assert not finding.fix.safe
    assert fix_text(source, [DataLoaderIteratorNext], unsafe=False) == source


def test_dataloader_next_scopes_and_rebound_next():
    # the same name in another function is another object
    source = ("def a(train_loader):\n    it = iter(train_loader)\n    return next(it)\n\n"
              "def b(reader):\n    it = reader.open()\n    return it.next()\n")
    assert codes(source, [DataLoaderIteratorNext]) == []
    # a module that defines its own `next`: reported, not fixed
    source = ("def next(it):\n    return it\n\ndef show(loader):\n"
              "    return iter(loader).next()\n")
    [finding] = lint_text(source, [DataLoaderIteratorNext])
    assert finding.fix is None


@pytest.mark.parametrize(
    ("call", "advice"),
    [
        ("Variable(x, requires_grad=True)", "`.requires_grad_()`"),
        ("Variable(x, requires_grad=False)", "returns the tensor unchanged"),
        ("Variable(x)", "returns the tensor unchanged"),
        ("Variable(x, volatile=True)", "`torch.no_grad()`"),
    ],
)
def test_variable_advice_follows_what_the_call_asks_for(call, advice):
    source = f"from torch.autograd import Variable\n\ndef f(x):\n    return {call}\n"
    (finding,) = lint_text(source, [DeprecatedVariable])
    assert advice in finding.message
