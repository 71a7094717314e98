"""Registration (ML1xx): what a list of lists of layers gets."""

from __future__ import annotations

from modellint.testing import lint_text
from rules.registration import ModuleInPlainContainer

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
