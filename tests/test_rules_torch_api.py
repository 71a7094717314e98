"""Torch API rules (ML905–ML908, ML316–ML318): the deprecation table entry by entry, import
spellings, target versions, fixes, and torchvision's legacy weights table against torchvision."""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import warnings

import pytest

from modellint.finding import Severity
from modellint.fix import apply_fixes
from modellint.static.engine import lint_source
from modellint.testing import _options, fix_text, lint_text
from rules.deprecated_apis import (
    DEPRECATED_APIS,
    LEGACY_REDUCTION_LOSSES,
    PRIVATE_TWINS,
    TORCHSCRIPT_APIS,
    TORCHVISION_LEGACY_WEIGHTS,
)
from rules.torch_api import (
    CheckpointUseReentrant,
    DeprecatedTorchApi,
    DeprecatedTorchScript,
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
    # the default target (2.6), or the release that deprecated the API when that is later
    target = max((2, 6), api.deprecated)
    removed = api.removed is not None and target >= api.removed
    [(code, at, severity)] = findings(source, DeprecatedTorchApi, target_torch_version=target)
    assert (code, at) == ("ML905", line)
    assert severity == (Severity.ERROR if removed else Severity.WARNING)
    [finding] = lint_text(source, [DeprecatedTorchApi], {"target_torch_version": target})
    assert f"`{api.replacement}`" in finding.message
    # before the deprecation, nothing is reported
    before = (*api.deprecated[:-1], api.deprecated[-1] - 1)
    assert findings(source, DeprecatedTorchApi, target_torch_version=before) == []
    fixed = fix_text(source, [DeprecatedTorchApi], {"target_torch_version": target})
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
    api = DEPRECATED_APIS[qualified]
    target = max((2, 6), api.deprecated)
    assert [line for _, line, _ in findings(
        source, DeprecatedTorchApi, target_torch_version=target)] == [1]
    fixed = fix_text(source, [DeprecatedTorchApi], {"target_torch_version": target})
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


def _resolve(qualified):
    """The object a dotted name names, importing the longest importable module prefix."""
    parts = qualified.split(".")
    if len(parts) == 1:
        return getattr(importlib.import_module("builtins"), qualified)
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise ImportError(qualified)


def test_table_replacements_exist_in_installed_torch():
    torch = pytest.importorskip("torch")

    outside_torch = []
    for qualified, api in {**DEPRECATED_APIS, **TORCHSCRIPT_APIS}.items():
        if api.replacement.startswith("torchao."):
            # torch.ao.quantization moved to torchao, a separate package
            outside_torch.append(api.replacement)
            continue
        replacement = _resolve(api.replacement)
        # torch._six's names were values (`inf`) and modules (`container_abcs`)
        assert callable(replacement) or qualified.startswith("torch._six."), (
            qualified, api.replacement)
        # the deprecated spelling itself still resolves unless the table says it is removed
        if api.removed is None:
            assert _resolve(qualified) is not None, qualified
    assert outside_torch, "the torchao entries are checked by the next test"
    for private, (public, _, _) in PRIVATE_TWINS.items():
        module, _, name = public.rpartition(".")
        assert hasattr(importlib.import_module(module), name), (private, public)
    assert torch is not None


def test_torchao_replacements_exist_when_torchao_is_installed():
    pytest.importorskip("torchao")
    for qualified, api in DEPRECATED_APIS.items():
        if api.replacement.startswith("torchao."):
            replacement = _resolve(api.replacement)
        # torch._six's names were values (`inf`) and modules (`container_abcs`)
        assert callable(replacement) or qualified.startswith("torch._six."), (
            qualified, api.replacement)


def _fix_once(source, rules, options=None, unsafe=True):
    result = lint_source("example.py", source.encode(), list(rules), _options(options))
    if result.module is None:  # nothing found: the tree is not kept
        return source, 0
    return apply_fixes(result.module, result.findings, unsafe, source)


def _generated_sources():
    for qualified, api in sorted(DEPRECATED_APIS.items()):
        target = max((2, 6), api.deprecated)
        args = "" if api.fix == "add-arg" else "a, b"
        header = _imports(qualified)
        module, _, name = qualified.rpartition(".")
        yield (f"{header}\nresult = {qualified}({args})\n", target)
        yield (f"from {module} import {name}\n\nresult = {name}(a)\n", target)
    for qualified in sorted(LEGACY_REDUCTION_LOSSES):
        for flags in ("size_average=False", "reduce=False", "size_average=True, reduce=None",
                      "size_average=avg", "size_average=avg, reduce=flag",
                      "reduction='sum', size_average=False"):
            yield (f"import torch\n\nresult = {qualified}(x, {flags})\n", (2, 6))


@pytest.mark.parametrize(("source", "target"), list(_generated_sources()))
def test_fixed_code_parses_and_fix_is_idempotent(source, target):
    options = {"target_torch_version": target}
    fixed, count = _fix_once(source, [DeprecatedTorchApi], options)
    ast.parse(fixed)
    again, more = _fix_once(fixed, [DeprecatedTorchApi], options)
    assert (again, more) == (fixed, 0)
    if count:
        # a fixed finding is not reported again
        assert len(lint_text(fixed, [DeprecatedTorchApi], options)) < len(
            lint_text(source, [DeprecatedTorchApi], options))


# -- ML905: size_average= / reduce= -----------------------------------------------------------


def test_legacy_reduction_table_matches_torch_signatures():
    """Every torch.nn loss and functional loss that takes `size_average` is in the table, at
    the positions its signature gives."""
    nn = pytest.importorskip("torch.nn")
    functional = importlib.import_module("torch.nn.functional")
    found = {}
    for namespace, prefix in ((nn, "torch.nn"), (functional, "torch.nn.functional")):
        for name in dir(namespace):
            obj = getattr(namespace, name)
            if name.startswith("_") or not callable(obj):
                continue
            try:
                parameters = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if "size_average" not in parameters:
                continue
            positional = [p.name for p in parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            found[f"{prefix}.{name}"] = (positional.index("size_average"),
                                         positional.index("reduce"))
            assert "reduction" in parameters, name
    assert found == LEGACY_REDUCTION_LOSSES


_FLAG_VALUES = (None, "None", "True", "False")  # None: not passed


def _legacy_flags():
    for average, reduce in itertools.product(_FLAG_VALUES, repeat=2):
        if average is None and reduce is None:
            continue
        yield ", ".join(f"{key}={value}" for key, value in (
            ("size_average", average), ("reduce", reduce)) if value is not None)


@pytest.mark.parametrize("loss", sorted(q for q in LEGACY_REDUCTION_LOSSES if "functional" not in q))
@pytest.mark.parametrize("flags", list(_legacy_flags()))
def test_legacy_reduction_fix_builds_the_same_loss(loss, flags):
    """The safe fix of literal flags gives the module the same `reduction` torch derives."""
    torch = pytest.importorskip("torch")
    source = f"import torch\n\ncriterion = {loss}({flags})\n"
    [finding] = lint_text(source, [DeprecatedTorchApi])
    assert finding.severity == Severity.WARNING and finding.fix.safe
    fixed = fix_text(source, [DeprecatedTorchApi], unsafe=False)
    assert "size_average" not in fixed and "reduce=" not in fixed
    before, after = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(source, before)  # noqa: S102 - our own generated source
    exec(fixed, after)  # noqa: S102
    assert after["criterion"].reduction == before["criterion"].reduction
    assert torch is not None


_FUNCTIONAL_CALLS = {
    "torch.nn.functional.mse_loss": "x, t",
    "torch.nn.functional.l1_loss": "x, t",
    "torch.nn.functional.smooth_l1_loss": "x, t",
    "torch.nn.functional.binary_cross_entropy_with_logits": "x, p",
    "torch.nn.functional.nll_loss": "x.log_softmax(1), y",
    "torch.nn.functional.cross_entropy": "x, y",
    "torch.nn.functional.kl_div": "x.log_softmax(1), p",
}


@pytest.mark.parametrize("function", sorted(_FUNCTIONAL_CALLS))
@pytest.mark.parametrize("flags", list(_legacy_flags()))
def test_legacy_reduction_fix_computes_the_same_functional_loss(function, flags):
    torch = pytest.importorskip("torch")
    setup = ("import torch\n\ntorch.manual_seed(0)\nx = torch.randn(4, 3)\n"
             "t = torch.randn(4, 3)\np = torch.rand(4, 3)\ny = torch.tensor([0, 2, 1, 2])\n")
    source = f"{setup}value = {function}({_FUNCTIONAL_CALLS[function]}, {flags})\n"
    fixed = fix_text(source, [DeprecatedTorchApi], unsafe=False)
    assert "size_average" not in fixed and "reduce=" not in fixed
    before, after = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(source, before)  # noqa: S102 - our own generated source
        exec(fixed, after)  # noqa: S102
    assert torch.equal(before["value"], after["value"])


def test_legacy_flags_override_an_explicit_reduction():
    source = "import torch.nn as nn\n\nc = nn.MSELoss(reduction='none', size_average=True)\n"
    assert fix_text(source, [DeprecatedTorchApi]) == (
        'import torch.nn as nn\n\nc = nn.MSELoss(reduction="mean")\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nn = pytest.importorskip("torch.nn")
        assert nn.MSELoss(reduction="none", size_average=True).reduction == "mean"


def test_variable_legacy_flags_get_an_unsafe_conditional_fix():
    source = ("import torch.nn.functional as F\n\n"
              "def loss(x, y, avg, red):\n    return F.mse_loss(x, y, size_average=avg, reduce=red)\n")
    [finding] = lint_text(source, [DeprecatedTorchApi])
    assert not finding.fix.safe
    assert fix_text(source, [DeprecatedTorchApi], unsafe=False) == source
    fixed = fix_text(source, [DeprecatedTorchApi])
    assert 'reduction=("mean" if avg else "sum") if red else "none"' in fixed
    # why unsafe: torch reads a None flag as True, the conditional as False
    torch = pytest.importorskip("torch")
    before, after = {}, {}
    exec(source, before)  # noqa: S102
    exec(fixed, after)  # noqa: S102
    x, y = torch.ones(2), torch.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for avg, red in itertools.product((True, False), repeat=2):
            assert torch.equal(before["loss"](x, y, avg, red), after["loss"](x, y, avg, red))
        assert not torch.equal(before["loss"](x, y, None, True), after["loss"](x, y, None, True))


def test_positional_legacy_flags_are_reported_not_fixed():
    source = "import torch.nn as nn\n\nc = nn.NLLLoss(None, False)\nd = nn.NLLLoss(w)\n"
    assert findings(source, DeprecatedTorchApi) == [("ML905", 3, Severity.WARNING)]
    assert fix_text(source, [DeprecatedTorchApi]) == source


def test_legacy_flags_fix_keeps_a_multi_line_call():
    source = ("import torch.nn as nn\n\nc = nn.CrossEntropyLoss(\n    weight=w,\n"
              "    size_average=False,\n    ignore_index=-1,\n    reduce=True,\n)\n")
    assert fix_text(source, [DeprecatedTorchApi]) == (
        "import torch.nn as nn\n\nc = nn.CrossEntropyLoss(\n    weight=w,\n"
        '    reduction="sum",\n    ignore_index=-1,\n)\n')


def test_legacy_flags_of_other_callables_are_not_reported():
    source = ("import torch\nfrom functools import reduce\n\n"
              "def my_loss(x, size_average=True):\n    return x\n\n"
              "a = my_loss(1, size_average=False)\nb = torch.nn.HuberLoss(reduction='sum')\n"
              "c = torch.sum(x)\n")
    assert findings(source, DeprecatedTorchApi) == []
    before = "import torch.nn as nn\n\nc = nn.MSELoss(size_average=False)\n"
    assert findings(before, DeprecatedTorchApi, target_torch_version=(0, 4)) == []


def test_quantization_entries_follow_the_target_version():
    source = "import torch\n\nq = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear})\n"
    assert findings(source, DeprecatedTorchApi, target_torch_version=(2, 8)) == []
    [finding] = lint_text(source, [DeprecatedTorchApi], {"target_torch_version": (2, 11)})
    assert finding.severity == Severity.WARNING and finding.fix is None
    assert "torchao.quantization.quantize_" in finding.message
    fx = "from torch.ao.quantization.quantize_fx import prepare_fx\n"
    [finding] = lint_text(fx, [DeprecatedTorchApi], {"target_torch_version": (2, 11)})
    assert "prepare_pt2e" in finding.message


# -- ML909 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("qualified", sorted(TORCHSCRIPT_APIS))
def test_every_torchscript_entry_is_info_from_2_11(qualified):
    api = TORCHSCRIPT_APIS[qualified]
    source = f"import torch\n\nresult = {qualified}(a)\n"
    [finding] = lint_text(source, [DeprecatedTorchScript], {"target_torch_version": (2, 11)})
    assert (finding.code, finding.line, finding.severity) == ("ML909", 3, Severity.INFO)
    assert f"`{api.replacement}`" in finding.message and finding.fix is None
    assert lint_text(source, [DeprecatedTorchScript], {"target_torch_version": (2, 10)}) == []
    # ML905 does not report TorchScript
    assert lint_text(source, [DeprecatedTorchApi], {"target_torch_version": (2, 11)}) == []


def test_torchscript_rule_is_off_by_default_and_ignores_markers():
    assert DeprecatedTorchScript.default_enabled is False
    source = ("import torch\n\n@torch.jit.ignore\ndef f(x):\n    return x\n\n"
              "if torch.jit.is_scripting() or torch.jit.is_tracing():\n    pass\n")
    assert lint_text(source, [DeprecatedTorchScript], {"target_torch_version": (2, 11)}) == []


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


# -- ML905: scheduler.step(epoch) -------------------------------------------------------------

STEP_EPOCH = """\
import torch

def train(model, epochs):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [30, 60])
    for epoch in range(epochs):
        sched.step(epoch=epoch)
"""


def test_the_epoch_argument_of_scheduler_step_is_reported_from_torch_1_4():
    [finding] = lint_text(STEP_EPOCH, [DeprecatedTorchApi])
    assert finding.line == 7 and "MultiStepLR" in finding.message
    assert "deprecated since torch 1.4" in finding.message
    assert findings(STEP_EPOCH, DeprecatedTorchApi, target_torch_version=(1, 3)) == []


def test_a_project_scheduler_step_with_an_argument_is_not_reported():
    source = STEP_EPOCH.replace("torch.optim.lr_scheduler.MultiStepLR(opt, [30, 60])",
                                "WarmupScheduler(opt)")
    assert findings(source, DeprecatedTorchApi) == []


def test_torch_six_imports_are_removed_api():
    source = "from torch._six import container_abcs, inf\n"
    found = lint_text(source, [DeprecatedTorchApi])
    assert [f.severity for f in found] == [Severity.ERROR, Severity.ERROR]
    assert "was removed in torch 2.0: use `collections.abc`" in found[0].message


# -- ML912 ------------------------------------------------------------------------------------

from rules.torch_api import LegacyAutogradFunction  # noqa: E402

# a pre-1.5 style Function: instance methods, state on self, an instance called
LEGACY_FUNCTION = """\
import torch
from torch.autograd import Function


class MSTFn(Function):
    def forward(self, dists):
        self.save_for_backward(dists)
        return dists.min()

    def backward(self, grad_output):
        dists, = self.saved_tensors
        return grad_output * torch.ones_like(dists)


def smoothed(dists):
    return MSTFn()(dists)
"""


def test_a_legacy_function_is_reported_at_its_forward_and_at_the_instance_call():
    found = lint_text(LEGACY_FUNCTION, [LegacyAutogradFunction])
    assert [f.line for f in found] == [6, 16]
    assert "`MSTFn.forward` is an instance method" in found[0].message
    assert "`MSTFn.apply(...)`" in found[1].message
    fixed = fix_text(LEGACY_FUNCTION, [LegacyAutogradFunction])
    assert "return MSTFn.apply(dists)" in fixed


def test_a_function_class_of_another_file_is_not_known_and_not_reported():
    source = "from .ops import MSTFn\n\ny = MSTFn()(x)\n"
    assert lint_text(source, [LegacyAutogradFunction]) == []
