"""Forward pass & devices (ML2xx): fixes on combined cases, import aliases, and negatives."""

from __future__ import annotations

import pytest

from modellint.testing import fix_text, lint_text, registry
from rules.forward import (
    DropoutIgnoresEval,
    ForwardCalledDirectly,
    HardcodedDevice,
    TensorWithoutDevice,
)

FORWARD_RULES = [DropoutIgnoresEval, ForwardCalledDirectly, TensorWithoutDevice, HardcodedDevice]


def codes(source, rules=FORWARD_RULES, options=None):
    return [(f.code, f.line) for f in lint_text(source, rules, options)]


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import torch.nn.functional as F", "F.dropout"),
        ("from torch.nn import functional as F", "F.dropout"),
        ("from torch.nn.functional import dropout", "dropout"),
        ("import torch", "torch.nn.functional.dropout"),
        ("from torch import nn", "nn.functional.dropout"),
        ("from torch.nn.functional import dropout2d as drop", "drop"),
    ],
)
def test_dropout_alias_forms_are_fixed(imports, call):
    source = f"""\
import torch.nn
{imports}

class Net(torch.nn.Module):
    def forward(self, x):
        return {call}(x, 0.3)
"""
    assert codes(source, [DropoutIgnoresEval]) == [("ML201", 6)]
    assert fix_text(source, [DropoutIgnoresEval]) == source.replace(
        f"{call}(x, 0.3)", f"{call}(x, 0.3, training=self.training)"
    )


def test_dropout_fixes_every_call_and_a_second_fix_changes_nothing():
    source = """\
import torch.nn as nn
import torch.nn.functional as F

class Block(nn.Module):
    def forward(me, x):
        x = F.dropout(F.relu(x), p=0.1) + F.dropout1d(x, 0.2, inplace=False)
        y = F.feature_alpha_dropout(x, 0.1, training=self.training)
        return F.dropout3d(
            x + y,
            0.5
        )
"""
    expected = """\
import torch.nn as nn
import torch.nn.functional as F

class Block(nn.Module):
    def forward(me, x):
        x = F.dropout(F.relu(x), p=0.1, training=me.training) + F.dropout1d(x, 0.2, inplace=False, training=me.training)
        y = F.feature_alpha_dropout(x, 0.1, training=self.training)
        return F.dropout3d(
            x + y,
            0.5, training=me.training
        )
"""
    assert [c for c, _ in codes(source, [DropoutIgnoresEval])] == ["ML201"] * 3
    fixed = fix_text(source, [DropoutIgnoresEval])
    assert fixed == expected
    assert codes(fixed, [DropoutIgnoresEval]) == []


def test_dropout_training_true_is_reported_and_fixed_only_as_unsafe():
    source = """\
import torch.nn as nn
import torch.nn.functional as F

class MCDropout(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5, training=True)
"""
    (finding,) = lint_text(source, [DropoutIgnoresEval])
    assert finding.fix is not None and not finding.fix.safe
    assert fix_text(source, [DropoutIgnoresEval], unsafe=False) == source
    assert "training=self.training)" in fix_text(source, [DropoutIgnoresEval], unsafe=True)


def test_dropout_outside_module_methods_is_not_reported():
    source = """\
import torch.nn as nn
import torch.nn.functional as F

def drop(x, p, training):
    return F.dropout(x, p, training)

class Net(nn.Module):
    @staticmethod
    def helper(x, training):
        return F.dropout(x, 0.1, training=training)

    def forward(self, x):
        return drop(x, 0.1, self.training) + self.helper(x, self.training)
"""
    assert codes(source, [DropoutIgnoresEval]) == []


def test_dropout_in_nested_function_of_forward_uses_the_method_self():
    source = """\
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def forward(self, x):
        def branch(y):
            return F.dropout(y, 0.1)
        return branch(x)
"""
    assert "F.dropout(y, 0.1, training=self.training)" in fix_text(source, [DropoutIgnoresEval])


def test_forward_calls_fixed_together_with_dropout():
    source = """\
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def forward(self, x):
        x = self.body.forward(F.dropout(x, 0.1))
        return self.heads[0].forward(x)
"""
    expected = """\
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def forward(self, x):
        x = self.body(F.dropout(x, 0.1, training=self.training))
        return self.heads[0](x)
"""
    assert sorted(codes(source)) == [("ML201", 6), ("ML202", 6), ("ML202", 7)]
    assert fix_text(source, FORWARD_RULES) == expected


def test_forward_called_directly_negatives():
    source = """\
import torch
import torch.nn as nn

class Base(nn.Module):
    def forward(self, x):
        return x

class Net(Base):
    def forward(self, x):
        a = super().forward(x)
        b = super(Net, self).forward(x)
        c = Base.forward(self, x)
        d = self.parent_cls.forward(self, x)
        return a + b + c + d

class Pipeline:
    def __call__(self, x):
        return self.forward(x)

def run(pipe, x):
    return pipe.forward(x)
"""
    assert codes(source, [ForwardCalledDirectly]) == []


def test_forward_called_directly_on_a_built_model_in_a_script():
    source = """\
import torch
import torchvision

model = torchvision.models.resnet18()
out = model.forward(torch.ones(1, 3, 224, 224))
"""
    assert codes(source, [ForwardCalledDirectly]) == [("ML202", 5)]
    assert "out = model(torch.ones" in fix_text(source, [ForwardCalledDirectly])


def test_tensor_without_device_in_a_method_forward_calls_only():
    source = """\
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x + self._pos(x.shape[1])

    def _pos(self, n):
        return torch.arange(n)

    def example(self):
        return torch.randn(1, 8)
"""
    assert codes(source, [TensorWithoutDevice]) == [("ML203", 9)]


@pytest.mark.parametrize(
    "expression",
    [
        "torch.zeros(4, device=x.device)",
        "torch.zeros_like(x)",
        "x.new_zeros(4)",
        "x.new_tensor([1, 2])",
        "torch.arange(4).to(x.device)",
        "torch.arange(4).to(device=x.device, dtype=x.dtype)",
        "torch.tril(torch.ones(4, 4)).to(x)",
        "torch.ones(4).type_as(x)",
        "torch.tensor(-1.0)",
    ],
)
def test_tensor_without_device_negatives(expression):
    source = f"""\
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x * {expression}
"""
    assert codes(source, [TensorWithoutDevice]) == []


def test_tensor_without_device_is_off_by_default():
    assert registry().rules["ML203"].default_enabled is False


def test_hardcoded_device_forms():
    source = """\
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.dev = torch.device("cuda:1")

    def forward(self, x):
        a = x.cuda()
        b = x.to("cuda", non_blocking=True)
        c = torch.zeros(3, device="cuda")
        d = x.cuda(0)
        e = x.cuda(x.device)
        f = x.to(self.weight.device)
        return a, b, c, d, e, f
"""
    assert codes(source, [HardcodedDevice]) == [
        ("ML204", 7), ("ML204", 10), ("ML204", 11), ("ML204", 12), ("ML204", 13),
    ]
