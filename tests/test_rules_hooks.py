"""Hooks (ML401-ML404): what each rule reports, its message, and the ML401 fix."""

from __future__ import annotations

from conftest import write

from modellint.rules.hooks import (
    DeprecatedBackwardHook,
    HookHandleDiscarded,
    HookKeepsGraph,
    HookRegisteredInForward,
)
from modellint.testing import fix_text, lint_text
from modellint.testing import registry as _registry

HEADER = "import torch\nimport torch.nn as nn\n\n"

# the hooks tutorial, as its notebook writes it
TUTORIAL = HEADER + """\
import torchvision

model = torchvision.models.resnet34()


class SaveOutput:
    def __init__(self):
        self.outputs = []

    def __call__(self, module, module_in, module_out):
        self.outputs.append(module_out)

    def clear(self):
        self.outputs = []


save_output = SaveOutput()
hook_handles = []
for layer in model.modules():
    if isinstance(layer, torch.nn.modules.conv.Conv2d):
        handle = layer.register_forward_hook(save_output)
        hook_handles.append(handle)
"""


def lines(source, rule, options=None):
    return [f.line for f in lint_text(source, [rule], options) if f.code == rule.code]


def test_deprecated_backward_hook_fix_renames_only_the_method():
    source = HEADER + "net = nn.Linear(2, 2)\nh = net.register_backward_hook(lambda *a: None)\n"
    findings = lint_text(source, [DeprecatedBackwardHook])
    assert [(f.code, f.line) for f in findings] == [("ML401", 5)]
    assert "net.register_backward_hook" in findings[0].message
    assert findings[0].fix is not None and not findings[0].fix.safe
    assert fix_text(source, [DeprecatedBackwardHook]) == source.replace(
        "register_backward_hook", "register_full_backward_hook")
    # safe fixes only: unchanged
    assert fix_text(source, [DeprecatedBackwardHook], unsafe=False) == source


def test_tutorial_save_output_keeps_graph():
    findings = lint_text(TUTORIAL, [HookKeepsGraph])
    assert [f.line for f in findings] == [14]
    assert "SaveOutput.__call__" in findings[0].message
    assert "module_out" in findings[0].message
    assert ".detach()" in findings[0].message


def test_tutorial_with_detach_is_clean():
    fixed = TUTORIAL.replace("append(module_out)", "append(module_out.detach())")
    assert lines(fixed, HookKeepsGraph) == []


def test_cpu_alone_keeps_graph_but_detach_item_tolist_do_not():
    template = HEADER + "store = []\n\ndef hook(m, i, o):\n    store.append({})\n\n" \
        "nn.Linear(2, 2).register_forward_hook(hook)\n"
    assert lines(template.format("o.cpu()"), HookKeepsGraph) == [7]
    assert lines(template.format("o[0].clone().to('cpu')"), HookKeepsGraph) == [7]
    assert lines(template.format("(o.detach(), o.shape)"), HookKeepsGraph) == []
    for safe in ("o.detach()", "o.cpu().detach()", "o.item()", "o.tolist()", "o.shape",
                 "o.detach().cpu().numpy()", "[t.detach() for t in o]"):
        assert lines(template.format(safe), HookKeepsGraph) == [], safe
    assert lines(template.format("[t for t in o]"), HookKeepsGraph) == [7]


def test_partial_and_factory_hooks_are_followed():
    source = HEADER + """\
import functools

feats = {}


def save(name, module, inputs, output):
    feats[name] = output


layer = nn.Linear(2, 2)
h = layer.register_forward_hook(functools.partial(save, "fc"))
"""
    assert lines(source, HookKeepsGraph) == [10]


def test_hook_storing_on_the_module_is_reported():
    source = HEADER + """\
def remember(module, inputs, output):
    module.last = output


h = nn.Linear(2, 2).register_forward_hook(remember)
"""
    assert lines(source, HookKeepsGraph) == [5]


def test_handle_discarded_is_off_by_default_and_a_warning():
    assert HookHandleDiscarded.default_enabled is False
    assert HookHandleDiscarded.severity.value == "warning"
    assert _registry().rules["ML403"] is HookHandleDiscarded


def test_handle_discarded_only_for_torch_hook_methods():
    source = HEADER + """\
layer = nn.Linear(2, 2)
layer.register_forward_hook(print)
layer.weight.register_hook(print)
layer.weight.register_post_accumulate_grad_hook(print)
h = layer.register_forward_pre_hook(print)
"""
    assert lines(source, HookHandleDiscarded) == [5, 7]


def test_handle_discarded_enabled_by_select_on_the_command_line(modellint, tmp_path):
    write(tmp_path, "probe.py", HEADER + "layer = nn.Linear(2, 2)\n"
          "layer.register_forward_hook(print)\n")
    assert modellint("--format", "json", "probe.py").codes() == []
    result = modellint("--format", "json", "--select", "ML403", "probe.py")
    assert result.codes() == [("ML403", 5)]


def test_hook_registered_in_forward():
    source = HEADER + """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.h = self.fc.register_forward_hook(print)

    def forward(self, x):
        h = self.fc.register_forward_hook(print)
        x.register_hook(print)

        def inner(m):
            return m.register_forward_hook(print)

        return self.fc(x)
"""
    findings = lint_text(source, [HookRegisteredInForward])
    assert [f.line for f in findings] == [11]
    assert "self.fc.register_forward_hook" in findings[0].message
    assert "__init__" in findings[0].message
