"""Serialization (ML501-ML504): the target-version switch of ML501, its fix, and what counts
as a module for ML502."""

from __future__ import annotations

from conftest import write

from modellint.rules.serialization import (
    LoadResultAssigned,
    UncheckedNonStrictLoad,
    UnsafeTorchLoad,
    WholeModelSave,
)
from modellint.testing import fix_text, lint_text

HEADER = "import torch\nimport torch.nn as nn\n\n"


def lines(source, rule, options=None):
    return [f.line for f in lint_text(source, [rule], options) if f.code == rule.code]


def test_weights_only_false_is_reported_on_every_target_version():
    source = HEADER + "sd = torch.load('m.pt', map_location='cpu', weights_only=False)\n"
    for version in ((1, 13), (2, 4), (2, 6), (2, 9)):
        assert lines(source, UnsafeTorchLoad, {"target_torch_version": version}) == [4]


def test_missing_weights_only_depends_on_target_version():
    source = HEADER + "sd = torch.load('m.pt')\n"
    assert lines(source, UnsafeTorchLoad, {"target_torch_version": (2, 5)}) == [4]
    assert lines(source, UnsafeTorchLoad, {"target_torch_version": (2, 6)}) == []
    assert lines(source, UnsafeTorchLoad, {"target_torch_version": (2, 7)}) == []
    finding = lint_text(source, [UnsafeTorchLoad], {"target_torch_version": (2, 5)})[0]
    assert "2.5" in finding.message and "weights_only=True" in finding.message


def test_target_version_from_config(modellint, tmp_path):
    write(tmp_path, "load.py", HEADER + "sd = torch.load('m.pt')\n")
    assert modellint("--format", "json", "load.py").codes() == []
    write(tmp_path, "pyproject.toml", '[tool.modellint]\ntarget-torch-version = "2.4"\n')
    assert modellint("--format", "json", "load.py").codes() == [("ML501", 4)]


def test_fix_is_unsafe_and_sets_weights_only_true():
    source = HEADER + "sd = torch.load('m.pt', weights_only=False)\n"
    finding = lint_text(source, [UnsafeTorchLoad])[0]
    assert not finding.fix.safe
    assert fix_text(source, [UnsafeTorchLoad], unsafe=False) == source
    assert fix_text(source, [UnsafeTorchLoad]) == source.replace("False", "True")
    old = {"target_torch_version": (2, 1)}
    assert fix_text(HEADER + "sd = torch.load(path)\n", [UnsafeTorchLoad], old) == (
        HEADER + "sd = torch.load(path, weights_only=True)\n")
    # a second run has nothing left to fix
    once = fix_text(HEADER + "sd = torch.load(path)\n", [UnsafeTorchLoad], old)
    assert lines(once, UnsafeTorchLoad, old) == []


def test_load_through_alias_and_kwargs():
    old = {"target_torch_version": (2, 0)}
    aliased = "import torch as T\n\nsd = T.load('m.pt', weights_only=False)\n"
    assert lines(aliased, UnsafeTorchLoad) == [3]
    kwargs = HEADER + "def load(p, **kw):\n    return torch.load(p, **kw)\n"
    assert lines(kwargs, UnsafeTorchLoad, old) == []
    unrelated = "import pickle\n\nobj = pickle.load(open('a', 'rb'))\n"
    assert lines(unrelated, UnsafeTorchLoad, old) == []


def test_whole_model_save_knows_what_is_a_module():
    source = HEADER + """\
class Net(nn.Module):
    def forward(self, x):
        return x


def main(model):
    net = Net().cuda()
    torch.save(net, "a.pt")
    torch.save(net.state_dict(), "b.pt")
    torch.save(model, "c.pt")
    torch.save({"net": net.state_dict()}, "d.pt")
    net = net.state_dict()
    torch.save(net, "e.pt")
"""
    findings = lint_text(source, [WholeModelSave])
    assert [f.line for f in findings] == [11]
    assert "net.state_dict()" in findings[0].message


def test_non_strict_load_result_must_be_used():
    source = HEADER + """\
model = nn.Linear(2, 2)
model.load_state_dict({}, strict=False)
model.load_state_dict({})
res = model.load_state_dict({}, strict=False)
print(res.missing_keys)
"""
    assert lines(source, UncheckedNonStrictLoad) == [5]


def test_load_result_assigned_to_the_model():
    source = HEADER + """\
model = nn.Linear(2, 2)
model = model.load_state_dict({})
result = model.load_state_dict({})
"""
    findings = lint_text(source, [LoadResultAssigned])
    assert [f.line for f in findings] == [5]
    assert "`model`" in findings[0].message
