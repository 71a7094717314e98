"""Registration (ML1xx): what a list of lists of layers gets."""

from __future__ import annotations

from modellint.testing import lint_text
from rules.registration import ModuleInPlainContainer, UnregisteredTensor

NESTED = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = [[nn.Linear(2, 2)], [nn.ReLU()]]
        self.flat = [nn.Linear(2, 2)]
        self.sizes = [[1, 2], [3]]
"""


def test_a_list_of_lists_of_layers_is_reported_without_a_fix_that_would_raise():
    # nn.ModuleList([[...]]) raises TypeError: every level needs its own wrapper
    nested, flat = lint_text(NESTED, [ModuleInPlainContainer])
    assert (nested.line, nested.fix) == (7, None)
    assert "lists of modules" in nested.message and "each inner list" in nested.message
    assert flat.line == 8 and flat.fix is not None


def test_forward_may_read_every_attribute_of_the_installed_torchs_module_and_no_other():
    # nn.Module's own attributes come from torch's table (checked against the installed torch):
    # `set_submodule` exists, `mps` does not (modules move with `.to("mps")`)
    from rules.registration import UndefinedModuleAttribute

    source = (
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n"
        "    def forward(self, x):\n"
        "        self.set_submodule('fc', nn.Identity())\n"
        "        return self.fc(x) if self.mps else x\n"
    )
    (finding,) = lint_text(source, [UndefinedModuleAttribute])
    assert finding.line == 11 and "`self.mps`" in finding.message


OPTIONAL_WEIGHTS = """\
import torch
import torch.nn as nn


class LossFunction(nn.Module):
    def __init__(self, w_t=None, scale=None):
        super().__init__()
        self.w_t = torch.tensor(w_t) if w_t is not None else None
        self.scale = scale if scale is not None else 1.0
        if w_t is not None:
            self.register_buffer("w_b", torch.tensor(w_t))
"""


def test_a_tensor_set_only_when_given_is_still_unregistered():
    # chemprop's per-task loss weights (bench/bugs c-chemprop-loss-task-weights-plain-tensor)
    findings = lint_text(OPTIONAL_WEIGHTS, [UnregisteredTensor])
    assert [(f.code, f.line) for f in findings] == [("ML103", 8)]
    assert "self.w_t" in findings[0].message
