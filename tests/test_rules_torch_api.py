"""Torch API rules (ML905–ML908, ML316–ML318): the deprecation table entry by entry, import
spellings, target versions, fixes, and torchvision's legacy weights table against torchvision."""

from __future__ import annotations

import pytest

from modellint.finding import Severity
from modellint.testing import fix_text, lint_text
from rules.deprecated_apis import DEPRECATED_APIS, PRIVATE_TWINS, TORCHVISION_LEGACY_WEIGHTS
from rules.torch_api import (
    CheckpointUseReentrant,
    DeprecatedTorchApi,
    NonPublicTorchApi,
    RedundantNoGrad,
    RequiresGradTypo,
    TorchvisionPretrainedArgument,
    ZeroGradKeepsMemory,
)


def findings(source, rule, **options):
    return [(f.code, f.line, f.severity) for f in lint_text(source, [rule], options)]


def _imports(qualified):
    head = qualified.split(".")[0]
    return "import torch\n" + (f"import {head}\n" if head != "torch" else "")


# -- ML905: one generated test per table entry ----------------------------------------------


@pytest.mark.parametrize("qualified", sorted(DEPRECATED_APIS))
def test_every_table_entry_is_reported_with_its_severity_and_fix(qualified):
    api = DEPRECATED_APIS[qualified]
    header = _imports(qualified)
    line = header.count("\n") + 2
    args = "" if api.fix == "add-arg" else "a"
    source = f"{header}\nresult = {qualified}({args})\n"
    removed = api.removed is not None and (2, 6) >= api.removed
    [(code, at, severity)] = findings(source, DeprecatedTorchApi)
    assert (code, at) == ("ML905", line)
    assert severity == (Severity.ERROR if removed else Severity.WARNING)
    [finding] = lint_text(source, [DeprecatedTorchApi])
    assert f"`{api.replacement}`" in finding.message
    # before the deprecation, nothing is reported
    before = (*api.deprecated[:-1], api.deprecated[-1] - 1)
    assert findings(source, DeprecatedTorchApi, target_torch_version=before) == []
    fixed = fix_text(source, [DeprecatedTorchApi])
    if api.fix in ("rename", "rename-one-arg"):
        assert fixed == f"{header}\nresult = {api.replacement}(a)\n"
    elif api.fix == "add-arg":
        assert fixed == f"{header}\nresult = {api.replacement}({api.add_arg})\n"
    elif api.fix == "pack-list":
        assert fixed == f"{header}\nresult = {api.replacement}([a])\n"
    else:
        assert fixed == source


@pytest.mark.parametrize("qualified", sorted(DEPRECATED_APIS))
def test_every_table_entry_is_reported_at_its_import(qualified):
    module, _, name = qualified.rpartition(".")
    source = f"from {module} import {name}\n\nresult = {name}(a)\n"
    assert [line for _, line, _ in findings(source, DeprecatedTorchApi)] == [1]
    fixed = fix_text(source, [DeprecatedTorchApi])
    api = DEPRECATED_APIS[qualified]
    if api.fix == "rename":
        new_module, _, new_name = api.replacement.rpartition(".")
        alias = "" if new_name == name else f" as {name}"
        assert fixed == f"from {new_module} import {new_name}{alias}\n\nresult = {name}(a)\n"
    else:
        assert fixed == source  # the call sites would need new arguments


def test_removed_api_severity_follows_the_target_version():
    source = "import torch\n\nX, _ = torch.solve(B, A)\n"
    assert findings(source, DeprecatedTorchApi, target_torch_version=(1, 8)) == []
    assert findings(source, DeprecatedTorchApi, target_torch_version=(1, 12)) == [
        ("ML905", 3, Severity.WARNING)
    ]
    assert findings(source, DeprecatedTorchApi, target_torch_version="1.13") == [
        ("ML905", 3, Severity.ERROR)
    ]


def test_autocast_fix_keeps_keywords_and_the_torch_alias():
    source = "import torch as th\n\nwith th.cuda.amp.autocast(dtype=th.bfloat16):\n    pass\n"
    assert fix_text(source, [DeprecatedTorchApi]) == (
        'import torch as th\n\nwith th.amp.autocast("cuda", dtype=th.bfloat16):\n    pass\n'
    )
    # a positional `enabled` would become the device type: no fix
    positional = "import torch\n\nwith torch.cuda.amp.autocast(True):\n    pass\n"
    assert findings(positional, DeprecatedTorchApi) == [("ML905", 3, Severity.WARNING)]
    assert fix_text(positional, [DeprecatedTorchApi]) == positional
    # unsafe: not applied by the safe pass
    assert fix_text(source, [DeprecatedTorchApi], unsafe=False) == source


def test_submodule_alias_is_reported_but_not_fixed_without_torch():
    source = "from torch.cuda import amp\n\nscaler = amp.GradScaler()\n"
    assert findings(source, DeprecatedTorchApi) == [("ML905", 3, Severity.WARNING)]
    assert fix_text(source, [DeprecatedTorchApi]) == source


def test_custom_fwd_with_arguments_gets_device_type():
    source = ("import torch\n\nclass F(torch.autograd.Function):\n"
              "    @staticmethod\n    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)\n"
              "    def forward(ctx, x):\n        return x\n")
    fixed = fix_text(source, [DeprecatedTorchApi])
    assert '@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")' in fixed


def test_mixed_import_is_reported_per_name_and_left_alone():
    source = "from torch import ger, outer\n"
    assert findings(source, DeprecatedTorchApi) == [("ML905", 1, Severity.WARNING)]
    assert fix_text(source, [DeprecatedTorchApi]) == source
    source = "from torch.cuda.amp import GradScaler, autocast\n"
    assert len(findings(source, DeprecatedTorchApi)) == 2
    assert fix_text(source, [DeprecatedTorchApi]) == source


def test_chain_matmul_fix_packs_the_arguments():
    source = "import torch\n\ny = torch.chain_matmul(a, b, c)\n"
    assert fix_text(source, [DeprecatedTorchApi]) == (
        "import torch\n\ny = torch.linalg.multi_dot([a, b, c])\n"
    )


def test_local_names_and_other_libraries_are_not_reported():
    source = ("import numpy as np\nimport scipy.linalg\n\ndef solve(a, b):\n    return a\n\n"
              "x = solve(a, b)\ny = np.linalg.qr(a)\nz = scipy.linalg.lu(a)\n")
    assert findings(source, DeprecatedTorchApi) == []


def test_table_replacements_exist_in_installed_torch():
    torch = pytest.importorskip("torch")
    import importlib

    for qualified, api in DEPRECATED_APIS.items():
        module, _, name = api.replacement.rpartition(".")
        assert hasattr(importlib.import_module(module), name), (qualified, api.replacement)
    for private, (public, _, _) in PRIVATE_TWINS.items():
        module, _, name = public.rpartition(".")
        assert hasattr(importlib.import_module(module), name), (private, public)
    assert torch is not None


# -- ML318 ------------------------------------------------------------------------------------


def test_private_collate_import_and_attribute_forms():
    source = ("import torch.utils.data\n\n"
              "batch = torch.utils.data._utils.collate.default_collate(items)\n")
    assert findings(source, NonPublicTorchApi) == [("ML318", 3, Severity.WARNING)]
    assert fix_text(source, [NonPublicTorchApi]) == (
        "import torch.utils.data\n\nbatch = torch.utils.data.default_collate(items)\n"
    )
    aliased = "from torch.utils.data._utils.collate import default_collate as collate\n"
    assert fix_text(aliased, [NonPublicTorchApi]) == (
        "from torch.utils.data import default_collate as collate\n"
    )


def test_private_twin_needs_the_target_version():
    source = "import torch\n\nif torch._dynamo.is_compiling():\n    pass\n"
    assert findings(source, NonPublicTorchApi, target_torch_version=(2, 2)) == []
    assert len(findings(source, NonPublicTorchApi, target_torch_version=(2, 3))) == 1


def test_tracing_state_fix_is_unsafe():
    source = "import torch\n\nif torch._C._get_tracing_state():\n    pass\n"
    assert fix_text(source, [NonPublicTorchApi], unsafe=False) == source


# -- ML906 ------------------------------------------------------------------------------------


def test_legacy_weights_table_matches_torchvision():
    models = pytest.importorskip("torchvision.models")
    import importlib

    for key, (weights, backbone) in TORCHVISION_LEGACY_WEIGHTS.items():
        sub, _, builder = key.rpartition(".")
        package = importlib.import_module("torchvision.models" + (f".{sub}" if sub else ""))
        found = getattr(package, builder, None) or getattr(
            importlib.import_module(package.__name__ + ".backbone_utils"), builder
        )
        assert callable(found), key
        if weights is not None:
            enum, member = weights.split(".")
            assert getattr(getattr(package, enum), member), key
        if backbone is not None:
            enum, member = backbone.split(".")
            assert getattr(getattr(models, enum), member), key


def test_detection_builder_fix_uses_its_subpackage():
    source = ("import torchvision\n\n"
              "m = torchvision.models.detection.fasterrcnn_resnet50_fpn(pretrained=True)\n")
    fixed = fix_text(source, [TorchvisionPretrainedArgument])
    assert fixed == (
        "import torchvision\n\nm = torchvision.models.detection.fasterrcnn_resnet50_fpn("
        "weights=torchvision.models.detection.FasterRCNN_ResNet50_FPN_Weights.COCO_V1)\n"
    )
    tv = pytest.importorskip("torchvision")
    expr = fixed.split("weights=")[1].rstrip(")\n")
    assert eval(expr, {"torchvision": tv}) is not None  # noqa: S307 - the fix names real weights


def test_pretrained_without_a_reachable_enum_is_reported_not_fixed():
    source = "from torchvision.models import resnet50\n\nm = resnet50(pretrained=True)\n"
    assert findings(source, TorchvisionPretrainedArgument) == [("ML906", 3, Severity.WARNING)]
    assert fix_text(source, [TorchvisionPretrainedArgument]) == source
    quantized = ("import torchvision\n\n"
                 "m = torchvision.models.quantization.resnet50(pretrained=True, quantize=True)\n")
    assert len(findings(quantized, TorchvisionPretrainedArgument)) == 1
    assert fix_text(quantized, [TorchvisionPretrainedArgument]) == quantized
    both = "import torchvision\n\nm = torchvision.models.vgg16(pretrained=True, weights=None)\n"
    assert fix_text(both, [TorchvisionPretrainedArgument]) == both


def test_non_torchvision_pretrained_is_ignored():
    source = ("import timm\nfrom mylib.models import resnet50\n\n"
              "a = timm.create_model('resnet50', pretrained=True)\nb = resnet50(pretrained=True)\n")
    assert findings(source, TorchvisionPretrainedArgument) == []


# -- ML907 / ML908 ----------------------------------------------------------------------------


def test_checkpoint_with_star_args_gets_the_keyword_after_them():
    source = "import torch.utils.checkpoint\n\ny = torch.utils.checkpoint.checkpoint(f, *xs)\n"
    assert fix_text(source, [CheckpointUseReentrant]) == (
        "import torch.utils.checkpoint\n\n"
        "y = torch.utils.checkpoint.checkpoint(f, *xs, use_reentrant=False)\n"
    )
    assert fix_text(source, [CheckpointUseReentrant], unsafe=False) == source


def test_require_grad_typo_on_self_is_a_class_attribute():
    source = "class Net:\n    def freeze(self):\n        self.require_grad = False\n"
    assert findings(source, RequiresGradTypo) == []
    source = "def freeze(m):\n    m.weight.require_grad = False\n"
    assert findings(source, RequiresGradTypo) == [("ML908", 2, Severity.ERROR)]


# -- ML316 / ML317 ----------------------------------------------------------------------------


def test_redundant_no_grad_with_several_items_is_reported_without_fix():
    source = ("import torch\n\n@torch.no_grad\ndef f(model, x):\n"
              "    with torch.no_grad(), open('log') as fh:\n        return model(x)\n")
    assert findings(source, RedundantNoGrad) == [("ML316", 5, Severity.WARNING)]
    assert fix_text(source, [RedundantNoGrad]) == source


def test_redundant_no_grad_fix_keeps_nested_blocks():
    source = ("import torch\n\n@torch.inference_mode()\ndef f(model, xs):\n"
              "    with torch.inference_mode():\n        for x in xs:\n"
              "            model(x)\n    return xs\n")
    assert fix_text(source, [RedundantNoGrad]) == (
        "import torch\n\n@torch.inference_mode()\ndef f(model, xs):\n"
        "    for x in xs:\n        model(x)\n    return xs\n"
    )


def test_zero_grad_keeps_memory_is_off_by_default_and_ignores_other_arguments():
    assert ZeroGradKeepsMemory.default_enabled is False
    source = "import torch\n\nopt.zero_grad(set_to_none=True)\nopt.zero_grad(x=False)\n"
    assert findings(source, ZeroGradKeepsMemory) == []
