"""Initialisation (ML601-ML604): nested-module detection, bias guards, the deprecated names
and their fixes."""

from __future__ import annotations

from modellint.rules.init import (
    ApplyInModulesLoop,
    DeprecatedInit,
    InitUnguardedBias,
    InitViaChildren,
)
from modellint.testing import fix_text, lint_text

HEADER = "import torch\nimport torch.nn as nn\n\n"

# the tutorial's myNet with a children() init loop
TUTORIAL_NET = HEADER + """\
class myNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.convBN = nn.Sequential(nn.Conv2d(10, 10, 3), nn.BatchNorm2d(10))
        self.linear = nn.Linear(10, 2)

    def forward(self, x):
        pass


Net = myNet()
for module in Net.children():
    if isinstance(module, nn.Conv2d):
        nn.init.normal_(module.weight, mean=0, std=1)
"""


def lines(source, rule, options=None):
    return [f.line for f in lint_text(source, [rule], options) if f.code == rule.code]


def test_children_init_loop_misses_the_conv_in_sequential():
    findings = lint_text(TUTORIAL_NET, [InitViaChildren])
    assert [f.line for f in findings] == [15]
    assert "Net.modules()" in findings[0].message
    assert not findings[0].fix.safe
    fixed = fix_text(TUTORIAL_NET, [InitViaChildren])
    assert "for module in Net.modules():" in fixed
    assert fix_text(TUTORIAL_NET, [InitViaChildren], unsafe=False) == TUTORIAL_NET
    assert lines(fixed, InitViaChildren) == []


def test_children_loop_over_flat_or_unknown_containers_is_not_reported():
    flat = TUTORIAL_NET.replace(
        "nn.Sequential(nn.Conv2d(10, 10, 3), nn.BatchNorm2d(10))", "nn.Conv2d(10, 10, 3)")
    assert lines(flat, InitViaChildren) == []
    sequential_subclass = HEADER + """\
class Head(nn.Sequential):
    def __init__(self, layers):
        super().__init__(*layers)
        for m in self.children():
            if isinstance(m, nn.Conv2d):
                nn.init.zeros_(m.weight)
"""
    assert lines(sequential_subclass, InitViaChildren) == []


def test_children_loop_in_generic_init_function():
    source = HEADER + """\
def init_weights(model):
    for i, m in enumerate(model.children()):
        if isinstance(m, nn.Linear):
            m.weight.data.normal_(0, 0.02)
"""
    fixed = fix_text(source, [InitViaChildren])
    assert "enumerate(model.modules())" in fixed


def test_tutorial_weights_init_bias_is_unguarded():
    source = HEADER + """\
class myNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(10, 10, 3)
        self.bn = nn.BatchNorm2d(10)

    def weights_init(self):
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.normal_(module.weight, mean=0, std=1)
                nn.init.constant_(module.bias, 0)
"""
    findings = lint_text(source, [InitUnguardedBias])
    assert [f.line for f in findings] == [14]
    assert "module.bias" in findings[0].message and "Conv2d" in findings[0].message
    guarded = source.replace(
        "                nn.init.constant_(module.bias, 0)",
        "                if module.bias is not None:\n"
        "                    nn.init.constant_(module.bias, 0)")
    assert lines(guarded, InitUnguardedBias) == []


def test_unguarded_bias_is_off_by_default():
    assert InitUnguardedBias.default_enabled is False
    assert "Off by default" in InitUnguardedBias.documentation()


def test_norm_bias_only_when_the_file_turns_affine_off():
    source = HEADER + """\
def init(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.zeros_(m.bias)
"""
    assert lines(source, InitUnguardedBias) == []
    affine_off = source + "\nnorm = nn.BatchNorm2d(3, affine=False)\n"
    assert lines(affine_off, InitUnguardedBias) == [7]


def test_deprecated_init_fix_adds_underscore_through_any_alias():
    source = """\
import torch
from torch.nn import init
import torch.nn as nn

w = torch.empty(3, 3)
init.kaiming_normal(w)
nn.init.orthogonal(w)
torch.nn.init.dirac(torch.empty(2, 2, 3))
nn.init.kaiming_normal_(w)
"""
    findings = lint_text(source, [DeprecatedInit])
    assert [f.line for f in findings] == [6, 7, 8]
    assert all(f.fix is not None and f.fix.safe for f in findings)
    fixed = fix_text(source, [DeprecatedInit], unsafe=False)
    assert "init.kaiming_normal_(w)" in fixed
    assert "nn.init.orthogonal_(w)" in fixed
    assert "torch.nn.init.dirac_(" in fixed
    assert lines(fixed, DeprecatedInit) == []


def test_deprecated_init_imported_by_name_is_reported_without_fix():
    source = "import torch\nfrom torch.nn.init import xavier_uniform\n\n" \
        "xavier_uniform(torch.empty(2, 2))\n"
    findings = lint_text(source, [DeprecatedInit])
    assert [(f.line, f.fix) for f in findings] == [(4, None)]


def test_apply_inside_modules_loop():
    source = HEADER + """\
model = nn.Sequential(nn.Linear(2, 2))
for name, m in model.named_modules():
    m.apply(print)
for m in model.children():
    m.apply(print)
model.apply(print)
"""
    findings = lint_text(source, [ApplyInModulesLoop])
    assert [f.line for f in findings] == [6]
    assert "`m.apply(...)`" in findings[0].message


# A VGG-style model whose convolutions all sit in `features`: the children() loop tests for
# Conv2d, but the only direct children are a Sequential, a pooling layer and a Linear.
VGG_LIKE = HEADER + """\
class VGGish(nn.Module):
    def __init__(self, num_classes=10, init_weights=True):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
        )
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(128, num_classes)
        self.num_classes = num_classes
        self.temperature = 1 / num_classes
        if init_weights:
            self._initialize_weights()

    def _initialize_weights(self):
        for m in self.children():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
"""


def test_a_children_loop_that_never_reaches_the_layer_it_tests_for():
    findings = lint_text(VGG_LIKE, [InitViaChildren])
    assert [f.line for f in findings] == [VGG_LIKE.splitlines().index(
        "        for m in self.children():") + 1]
    message = findings[0].message
    # the Linear is a direct child and is initialised; the Conv2d layers are not
    assert "none of them is a `Conv2d`" in message and "Linear" not in message
    assert "inside `self.features`" in message
    assert fix_text(VGG_LIKE, [InitViaChildren]) == VGG_LIKE.replace(
        "self.children()", "self.modules()")


def test_a_direct_child_of_the_tested_type_keeps_the_general_message():
    # a Conv2d among the direct children: the loop initialises that one; the nested ones are
    # still missed, which the general message says
    source = VGG_LIKE.replace("self.avgpool = nn.AdaptiveAvgPool2d(1)",
                              "self.avgpool = nn.LazyConv2d(128, 1)")
    findings = lint_text(source, [InitViaChildren])
    assert len(findings) == 1 and "yields only direct submodules" in findings[0].message


def test_unknown_direct_children_are_not_guessed_about():
    # a child set from a parameter without a plain default, add_module, a base class from
    # outside the project: not every direct child is known, so only the general message
    variants = [
        VGG_LIKE.replace("num_classes=10, init_weights=True", "head, num_classes=10, "
                         "init_weights=True").replace("self.num_classes = num_classes",
                                                      "self.head = head"),
        VGG_LIKE.replace("self.num_classes = num_classes",
                         "self.add_module('extra', nn.Conv2d(3, 3, 1))"),
        VGG_LIKE.replace("class VGGish(nn.Module):", "from backbones import Base\n\n\n"
                         "class VGGish(Base):"),
    ]
    for source in variants:
        assert source != VGG_LIKE
        messages = [f.message for f in lint_text(source, [InitViaChildren])]
        assert all("none of them" not in m for m in messages), source
    # the loop hands each child on: the blocks may initialise what is inside them
    delegating = VGG_LIKE.replace('nn.init.normal_(m.weight, 0, 0.01)',
                                  'nn.init.normal_(m.weight, 0, 0.01)\n'
                                  '            else:\n                init_block(m)')
    assert lint_text(delegating, [InitViaChildren]) == []


def test_a_loop_that_reaches_inside_its_children_is_not_reported():
    # the nested layers are initialised through the child: its attributes, its items, its
    # own modules
    for reach in ("            elif isinstance(m, nn.Sequential):\n"
                  "                nn.init.zeros_(m[0].weight)\n",
                  "            elif isinstance(m, nn.Sequential):\n"
                  "                for layer in m:\n"
                  "                    if isinstance(layer, nn.Conv2d):\n"
                  "                        nn.init.zeros_(layer.weight)\n",
                  "            else:\n"
                  "                for name, p in m.named_parameters():\n"
                  "                    nn.init.zeros_(p)\n"):
        source = VGG_LIKE + reach
        assert lint_text(source, [InitViaChildren]) == [], reach
    # reading the layer's own settings is not reaching inside it
    own = VGG_LIKE.replace('mode="fan_out"', 'mode="fan_out" if m.groups == 1 else "fan_in"')
    assert own != VGG_LIKE
    assert len(lint_text(own, [InitViaChildren])) == 1


def test_a_model_built_in_a_script_then_moved_to_the_device():
    script = VGG_LIKE.replace("""        if init_weights:
            self._initialize_weights()

    def _initialize_weights(self):
        for m in self.children():""", """

model = VGGish()
model = model.cuda().eval()
if True:
    for m in model.children():""")
    assert script != VGG_LIKE
    findings = lint_text(script, [InitViaChildren])
    assert [f.line for f in findings] == [script.splitlines().index(
        "    for m in model.children():") + 1]
    assert "inside `model.features`" in findings[0].message
    # built in two places: which one the loop sees is not known
    twice = script.replace("model = model.cuda().eval()", "if torch.cuda.is_available():\n"
                           "    model = nn.Sequential(nn.Conv2d(3, 3, 1))")
    assert all("none of them" not in f.message for f in lint_text(twice, [InitViaChildren]))


# -- ML605 ------------------------------------------------------------------------------------

from modellint.rules.init import ParameterTruthValue  # noqa: E402

# the shape of a widely copied CIFAR helper: each layer type tests its bias by truth value
INIT_PARAMS = """\
import torch.nn as nn
import torch.nn.init as init

def reset_layers(model):
    for layer in model.modules():
        if isinstance(layer, nn.Conv2d):
            init.kaiming_normal_(layer.weight)
            if layer.bias:
                init.zeros_(layer.bias)
        elif isinstance(layer, nn.BatchNorm2d):
            init.ones_(layer.weight)
            init.zeros_(layer.bias)
        elif isinstance(layer, nn.Linear):
            init.normal_(layer.weight, std=0.01)
            if layer.bias:
                init.zeros_(layer.bias)
"""


def test_both_bias_tests_of_an_init_helper_are_reported_and_fixed():
    found = lint_text(INIT_PARAMS, [ParameterTruthValue])
    assert [f.line for f in found] == [8, 15]
    assert "`nn.Conv2d`" in found[0].message and "`nn.Linear`" in found[1].message
    fixed = fix_text(INIT_PARAMS, [ParameterTruthValue], unsafe=True)
    assert fixed.count("if layer.bias is not None:") == 2 and "if layer.bias:" not in fixed


def test_a_bias_test_without_a_known_layer_type_is_not_reported():
    # a classname test picks project modules too, whose `bias` may be a flag
    source = HEADER + (
        "def weights_init(m):\n"
        "    classname = m.__class__.__name__\n"
        "    if classname.find('Linear') != -1:\n"
        "        if m.bias:\n"
        "            nn.init.zeros_(m.bias)\n"
    )
    assert lint_text(source, [ParameterTruthValue]) == []


def test_conditions_that_compare_or_call_on_the_parameter_are_not_reported():
    source = HEADER + (
        "def init(model):\n"
        "    for m in model.modules():\n"
        "        if isinstance(m, nn.Linear):\n"
        "            if m.bias is not None and m.bias.requires_grad:\n"
        "                pass\n"
        "            while m.weight.abs().max() > 1:\n"
        "                m.weight.data.mul_(0.5)\n"
    )
    assert lint_text(source, [ParameterTruthValue]) == []
