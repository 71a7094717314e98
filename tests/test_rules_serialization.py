"""Serialization (ML501-ML506): the target-version switch of ML501, its fix, what counts
as a module for ML502, and which loads read back a pickled module under 2.6 (ML506)."""

from __future__ import annotations

import pytest
from conftest import write

from modellint.rules.serialization import (
    LoadResultAssigned,
    PickledModuleLoad,
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


RESUME = HEADER + """\
import os
import sys

os.chdir(sys.argv[1])
model = nn.Linear(2, 2)
torch.save(model, "model.pt")
torch.save(model.state_dict(), "weights.pt")
restored = torch.load("model.pt", weights_only=False)
state = torch.load("weights.pt", weights_only=False)
restored.load_state_dict(state)
print("resumed", type(restored).__name__)
"""


def test_unsafe_fix_leaves_the_load_of_a_pickled_module_alone(modellint, tmp_path):
    """`--unsafe-fixes` turns on `weights_only=True` for the state dict's load, not for the
    load of the file `torch.save(model, ...)` wrote (it would stop the script); both are
    still reported, and the fixed script still runs."""
    import subprocess
    import sys

    script = write(tmp_path, "resume.py", RESUME)
    found = modellint("--format", "json", "--select", "ML501", "resume.py")
    assert found.codes() == [("ML501", 11), ("ML501", 12)], found
    by_line = {f["line"]: f for f in found.json()}
    assert by_line[11]["fix"] is None and "ML506" in by_line[11]["message"]
    assert by_line[12]["fix"]["applicability"] == "unsafe"
    fixed = modellint("--fix", "--unsafe-fixes", "--select", "ML501", "resume.py")
    assert fixed.rc == 1, fixed  # the pickled module's load is still reported
    text = script.read_text(encoding="utf-8")
    assert 'torch.load("model.pt", weights_only=False)' in text
    assert 'torch.load("weights.pt", weights_only=True)' in text
    ran = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0 and "resumed Linear" in ran.stdout, ran.stderr


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


# -- ML506 ------------------------------------------------------------------------------------


def test_pickled_module_load_premise_holds_on_installed_torch(tmp_path):
    """What ML506 reports fails on the installed torch, and its advice loads."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    source = (HEADER + f"PATH = {str(path)!r}\nmodel = nn.Linear(2, 2)\n"
              "torch.save(model, PATH)\nloaded = torch.load(PATH)\n")
    assert lines(source, PickledModuleLoad) == [7]
    with pytest.raises(Exception, match="[Ww]eights only load failed"):
        exec(source, {})  # noqa: S102 - our own example
    advice = (HEADER + f"PATH = {str(path)!r}\nmodel = nn.Linear(2, 2)\n"
              "torch.save(model.state_dict(), PATH)\nloaded = nn.Linear(2, 2)\n"
              "loaded.load_state_dict(torch.load(PATH))\n")
    assert lines(advice, PickledModuleLoad) == []
    namespace = {}
    exec(advice, namespace)  # noqa: S102
    assert torch.equal(namespace["loaded"].weight, namespace["model"].weight)


def test_pickled_module_load_before_its_save_and_keyword_paths():
    source = (HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
              "def load(cfg):\n    return torch.load(f=cfg.weights, map_location='cpu')\n\n"
              "def train(cfg):\n    model = Net().cuda()\n"
              "    torch.save(obj=model, f=cfg.weights)\n")
    assert lines(source, PickledModuleLoad) == [9]


@pytest.mark.parametrize(
    "source",
    [
        # different literal paths
        "model = nn.Linear(2, 2)\ntorch.save(model, 'a.pt')\nm = torch.load('b.pt')\n",
        # a local `path` in each function: two files
        "def save(path):\n    torch.save(nn.Linear(2, 2), path)\n\n"
        "def load(path):\n    return torch.load(path)\n",
        "def save(out):\n    p = out + '/m.pt'\n    torch.save(nn.Linear(2, 2), p)\n\n"
        "def load(out):\n    p = out + '/s.pt'\n    return torch.load(p)\n",
        # `self.path` of two classes
        "class A(nn.Module):\n    def save(self):\n        torch.save(self, self.path)\n\n"
        "class B:\n    def load(self):\n        return torch.load(self.path)\n",
        # a state dict or an unknown object saved
        "model = nn.Linear(2, 2)\ntorch.save(model.state_dict(), 'm.pt')\nm = torch.load('m.pt')\n",
        "def save(obj):\n    torch.save(obj, 'm.pt')\n\nm = torch.load('m.pt')\n",
        # ML501's business
        "model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
        "m = torch.load('m.pt', weights_only=False)\n",
        "def load(**kw):\n    return torch.load('m.pt', **kw)\n\ntorch.save(nn.Linear(2, 2), 'm.pt')\n",
        # classes allowed for the weights-only unpickler
        "model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
        "with torch.serialization.safe_globals([nn.Linear]):\n    m = torch.load('m.pt')\n",
    ],
)
def test_pickled_module_load_not_reported(source):
    assert lines(HEADER + source, PickledModuleLoad) == []


def test_pickled_module_load_follows_the_target_version():
    source = HEADER + "model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\nm = torch.load('m.pt')\n"
    assert lines(source, PickledModuleLoad, {"target_torch_version": (2, 5)}) == []
    assert lines(source, PickledModuleLoad, {"target_torch_version": (2, 6)}) == [6]
    explicit = source.replace("torch.load('m.pt')", "torch.load('m.pt', weights_only=True)")
    assert lines(explicit, PickledModuleLoad, {"target_torch_version": (2, 0)}) == [6]
    # the self path of one class, and a module-level name read in a function
    method = (HEADER + "class Net(nn.Module):\n    def save(self):\n"
              "        torch.save(self, self.path)\n\n    def restore(self):\n"
              "        return torch.load(self.path)\n")
    assert lines(method, PickledModuleLoad) == [9]
