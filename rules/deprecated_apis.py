"""Data for ML905 (deprecated torch APIs and arguments), ML909 (TorchScript), ML906 (torchvision
legacy weights) and ML318 (private torch helpers with public twins).

Facts come from PyTorch's documentation, deprecation warnings and release notes. Adding an API
to ML905 is one entry in `DEPRECATED_APIS`; tests/test_rules_torch_api.py generates a test for
every entry.
"""

from __future__ import annotations

from typing import NamedTuple


class DeprecatedApi(NamedTuple):
    """One deprecated (or removed) torch API.

    `fix`: "rename" (the replacement takes the same arguments: a safe fix), "rename-one-arg"
    (the same only when called with one positional argument and nothing else: a safe fix then,
    none otherwise), "add-arg" (rename and add `add_arg`, only when no positional argument is
    passed: an unsafe fix), "pack-list" (pass the positional arguments as one list: unsafe),
    or None (the arguments or results change: no automatic fix).
    """

    replacement: str
    deprecated: tuple[int, ...]
    removed: tuple[int, ...] | None = None
    fix: str | None = None
    add_arg: str = ""
    note: str = ""


_LINALG_REMOVED = (1, 13)  # the 1.9 deprecations removed by pytorch/pytorch#70982 and siblings
_TORCHAO_QUANTIZE = "torchao.quantization.quantize_"
_TORCHAO_PT2E = "torchao.quantization.pt2e.quantize_pt2e."
_TORCHAO_EAGER = "eager mode quantization is `quantize_(model, config)` there"
_TORCHAO_FX = ("FX graph mode quantization becomes PT2E quantization on an exported graph "
               "(`torch.export.export`) with a torchao quantizer")

DEPRECATED_APIS: dict[str, DeprecatedApi] = {
    # torch.linalg replaced the old linear algebra functions (1.9 deprecations)
    "torch.solve": DeprecatedApi(
        "torch.linalg.solve", (1, 9), _LINALG_REMOVED,
        note="its arguments are reversed and it does not return the LU factorization"),
    "torch.symeig": DeprecatedApi(
        "torch.linalg.eigh", (1, 9), _LINALG_REMOVED,
        note="it reads the lower triangle by default (`UPLO='U'` for the old behaviour)"),
    "torch.eig": DeprecatedApi(
        "torch.linalg.eig", (1, 9), _LINALG_REMOVED, note="it returns complex tensors"),
    "torch.lstsq": DeprecatedApi(
        "torch.linalg.lstsq", (1, 9), _LINALG_REMOVED, note="its arguments are reversed"),
    "torch.matrix_rank": DeprecatedApi(
        "torch.linalg.matrix_rank", (1, 9), _LINALG_REMOVED,
        note="`symmetric=` is called `hermitian=`"),
    "torch.qr": DeprecatedApi(
        "torch.linalg.qr", (1, 9), fix="rename-one-arg",
        note="`some=False` becomes `mode='complete'`"),
    "torch.cholesky": DeprecatedApi(
        "torch.linalg.cholesky", (1, 9), fix="rename-one-arg",
        note="`upper=True` becomes `.mH` of the result"),
    "torch.svd": DeprecatedApi(
        "torch.linalg.svd", (1, 9),
        note="it returns `Vh` rather than `V` and `some=True` is `full_matrices=False`"),
    "torch.chain_matmul": DeprecatedApi(
        "torch.linalg.multi_dot", (1, 9), fix="pack-list",
        note="it takes one list of tensors"),
    "torch.ger": DeprecatedApi("torch.outer", (1, 9), fix="rename"),
    "torch.norm": DeprecatedApi(
        "torch.linalg.vector_norm", (1, 9),
        note="use `torch.linalg.matrix_norm` for the norm of a matrix"),
    "torch.triangular_solve": DeprecatedApi(
        "torch.linalg.solve_triangular", (1, 11),
        note="its arguments are reversed and `upper=` is required"),
    "torch.lu": DeprecatedApi(
        "torch.linalg.lu_factor", (1, 13),
        note="`get_infos=True` becomes `torch.linalg.lu_factor_ex`"),
    "torch.lu_solve": DeprecatedApi(
        "torch.linalg.lu_solve", (1, 13), note="its arguments are reversed"),
    "torch.range": DeprecatedApi(
        "torch.arange", (0, 4), note="its end is exclusive (`torch.arange(start, end + step)`)"),
    # nn
    "torch.nn.UpsamplingNearest2d": DeprecatedApi(
        "torch.nn.Upsample", (0, 4), note="pass `mode='nearest'`"),
    "torch.nn.UpsamplingBilinear2d": DeprecatedApi(
        "torch.nn.Upsample", (0, 4), note="pass `mode='bilinear', align_corners=True`"),
    "torch.nn.functional.upsample": DeprecatedApi(
        "torch.nn.functional.interpolate", (0, 4), fix="rename"),
    "torch.nn.functional.upsample_nearest": DeprecatedApi(
        "torch.nn.functional.interpolate", (0, 4), note="pass `mode='nearest'`"),
    "torch.nn.functional.upsample_bilinear": DeprecatedApi(
        "torch.nn.functional.interpolate", (0, 4),
        note="pass `mode='bilinear', align_corners=True`"),
    "torch.nn.Container": DeprecatedApi(
        "torch.nn.Module", (0, 4), fix="rename",
        note="all of its functionality is in `nn.Module`"),
    "torch.nn.utils.weight_norm": DeprecatedApi(
        "torch.nn.utils.parametrizations.weight_norm", (2, 1),
        note="the state dict keys become `parametrizations.weight.original0/1`"),
    "torch.nn.utils.stateless.functional_call": DeprecatedApi(
        "torch.func.functional_call", (2, 0), fix="rename"),
    # testing, defaults, attention
    "torch.testing.assert_allclose": DeprecatedApi(
        "torch.testing.assert_close", (1, 12), note="its default tolerances differ"),
    "torch.set_default_tensor_type": DeprecatedApi(
        "torch.set_default_dtype", (2, 1),
        note="use `torch.set_default_dtype` and `torch.set_default_device`"),
    "torch.has_cuda": DeprecatedApi(
        "torch.backends.cuda.is_built", (2, 1), note="it is a function: call it"),
    "torch.has_cudnn": DeprecatedApi(
        "torch.backends.cudnn.is_available", (2, 1), note="it is a function: call it"),
    "torch.has_mps": DeprecatedApi(
        "torch.backends.mps.is_built", (2, 1), note="it is a function: call it"),
    "torch.has_mkldnn": DeprecatedApi(
        "torch.backends.mkldnn.is_available", (2, 1), note="it is a function: call it"),
    # CUDA memory statistics: the caching allocator's memory is "reserved" since 1.4
    "torch.cuda.memory_cached": DeprecatedApi("torch.cuda.memory_reserved", (1, 4), fix="rename"),
    "torch.cuda.max_memory_cached": DeprecatedApi(
        "torch.cuda.max_memory_reserved", (1, 4), fix="rename"),
    "torch.cuda.reset_max_memory_cached": DeprecatedApi(
        "torch.cuda.reset_peak_memory_stats", (1, 4), fix="rename",
        note="it resets every peak statistic, as the deprecated name already does"),
    "torch.distributed.reduce_op": DeprecatedApi(
        "torch.distributed.ReduceOp", (1, 0), fix="rename"),
    # torch._six, the Python 2 compatibility module, was removed in 2.0
    "torch._six.string_classes": DeprecatedApi(
        "str", (2, 0), (2, 0), note="`(str, bytes)` where bytes were accepted too"),
    "torch._six.int_classes": DeprecatedApi("int", (2, 0), (2, 0)),
    "torch._six.container_abcs": DeprecatedApi("collections.abc", (2, 0), (2, 0)),
    "torch._six.inf": DeprecatedApi("math.inf", (2, 0), (2, 0)),
    "torch._six.nan": DeprecatedApi("math.nan", (2, 0), (2, 0)),
    "torch.backends.cuda.sdp_kernel": DeprecatedApi(
        "torch.nn.attention.sdpa_kernel", (2, 3),
        note="it takes a list of `torch.nn.attention.SDPBackend` values"),
    # device-specific AMP (2.4)
    "torch.cuda.amp.autocast": DeprecatedApi(
        "torch.amp.autocast", (2, 4), fix="add-arg", add_arg='"cuda"',
        note='it takes the device type first (`"cuda"`)'),
    "torch.cpu.amp.autocast": DeprecatedApi(
        "torch.amp.autocast", (2, 4), fix="add-arg", add_arg='"cpu"',
        note='it takes the device type first (`"cpu"`)'),
    "torch.cuda.amp.GradScaler": DeprecatedApi(
        "torch.amp.GradScaler", (2, 4), fix="add-arg", add_arg='"cuda"',
        note='it takes the device first (`"cuda"`)'),
    "torch.cpu.amp.GradScaler": DeprecatedApi(
        "torch.amp.GradScaler", (2, 4), fix="add-arg", add_arg='"cpu"',
        note='it takes the device first (`"cpu"`)'),
    "torch.cuda.amp.custom_fwd": DeprecatedApi(
        "torch.amp.custom_fwd", (2, 4), fix="add-arg", add_arg='device_type="cuda"',
        note='it needs `device_type="cuda"`'),
    "torch.cuda.amp.custom_bwd": DeprecatedApi(
        "torch.amp.custom_bwd", (2, 4), fix="add-arg", add_arg='device_type="cuda"',
        note='it needs `device_type="cuda"`'),
    # functorch moved into torch.func (2.0)
    "functorch.vmap": DeprecatedApi("torch.func.vmap", (2, 0), fix="rename"),
    "functorch.grad": DeprecatedApi("torch.func.grad", (2, 0), fix="rename"),
    "functorch.grad_and_value": DeprecatedApi("torch.func.grad_and_value", (2, 0), fix="rename"),
    "functorch.vjp": DeprecatedApi("torch.func.vjp", (2, 0), fix="rename"),
    "functorch.jvp": DeprecatedApi("torch.func.jvp", (2, 0), fix="rename"),
    "functorch.jacrev": DeprecatedApi("torch.func.jacrev", (2, 0), fix="rename"),
    "functorch.jacfwd": DeprecatedApi("torch.func.jacfwd", (2, 0), fix="rename"),
    "functorch.hessian": DeprecatedApi("torch.func.hessian", (2, 0), fix="rename"),
    "functorch.functionalize": DeprecatedApi("torch.func.functionalize", (2, 0), fix="rename"),
    "functorch.make_functional": DeprecatedApi(
        "torch.func.functional_call", (2, 0),
        note="it takes the module and a dict of parameters on each call"),
    "functorch.make_functional_with_buffers": DeprecatedApi(
        "torch.func.functional_call", (2, 0),
        note="it takes the module and dicts of parameters and buffers on each call"),
    "functorch.combine_state_for_ensemble": DeprecatedApi(
        "torch.func.stack_module_state", (2, 0),
        note="it returns stacked parameter and buffer dicts for `functional_call`"),
    "torch.nn.utils.clip_grad_norm": DeprecatedApi(
        "torch.nn.utils.clip_grad_norm_", (0, 4), fix="rename",
        note="the deprecated name only forwards its arguments to it"),
    # torch.ao.quantization: deprecated for torchao (the warning announces removal in 2.10; the
    # functions are still present in 2.14). torchao's APIs take other arguments: no fix.
    **{
        f"{namespace}.{name}": DeprecatedApi(
            replacement, (2, 9), note=f"torch.ao.quantization moved to torchao; {note}")
        for namespace in ("torch.ao.quantization", "torch.quantization")
        for name, replacement, note in (
            ("quantize", _TORCHAO_QUANTIZE, _TORCHAO_EAGER),
            ("quantize_dynamic", _TORCHAO_QUANTIZE, _TORCHAO_EAGER),
            ("quantize_qat", _TORCHAO_QUANTIZE, _TORCHAO_EAGER),
            ("prepare", _TORCHAO_QUANTIZE, _TORCHAO_EAGER),
            ("prepare_qat", _TORCHAO_QUANTIZE, _TORCHAO_EAGER),
            ("convert", _TORCHAO_QUANTIZE, _TORCHAO_EAGER),
            ("quantize_fx.prepare_fx", _TORCHAO_PT2E + "prepare_pt2e", _TORCHAO_FX),
            ("quantize_fx.prepare_qat_fx", _TORCHAO_PT2E + "prepare_qat_pt2e", _TORCHAO_FX),
            ("quantize_fx.convert_fx", _TORCHAO_PT2E + "convert_pt2e", _TORCHAO_FX),
        )
    },
    # torchvision 0.16, released with torch 2.1
    "torchvision.transforms.v2.ToTensor": DeprecatedApi(
        "torchvision.transforms.v2.ToImage", (2, 1),
        note="follow it with `v2.ToDtype(torch.float32, scale=True)` (deprecated in torchvision "
        "0.16, which ships with torch 2.1)"),
}

# ML905, argument level: `scheduler.step(epoch)` (the EPOCH_DEPRECATION_WARNING of
# torch.optim.lr_scheduler, 1.4). Schedulers whose `step` takes something else positionally
# (`ReduceLROnPlateau.step(metrics)`) or documents a fractional epoch
# (`CosineAnnealingWarmRestarts.step(epoch + i / iters)`) are not reported.
SCHEDULER_STEP_EPOCH = DeprecatedApi(
    "scheduler.step()", (1, 4),
    note="the scheduler counts its own steps; to resume, load its `state_dict()`")
STEP_TAKES_OTHER_ARGUMENTS = frozenset({"ReduceLROnPlateau", "CosineAnnealingWarmRestarts"})

# ML905, argument level: `size_average=` and `reduce=` of the losses, deprecated in 0.4.1 for
# `reduction=` (still accepted, with a warning, in 2.14). Callable -> positions of
# `size_average` and `reduce` among its positional parameters (read from torch's signatures;
# tests/test_rules_torch_api.py checks them against the installed torch).
LEGACY_REDUCTION = DeprecatedApi(
    "reduction=", (0, 4, 1),
    note="`size_average`/`reduce` map to `reduction=` as (None or True, None or True) -> "
    "'mean', (False, None or True) -> 'sum', (any, False) -> 'none', and they override "
    "`reduction=` when given",
)
LEGACY_REDUCTION_LOSSES: dict[str, tuple[int, int]] = {
    "torch.nn.BCELoss": (1, 2),
    "torch.nn.BCEWithLogitsLoss": (1, 2),
    "torch.nn.CosineEmbeddingLoss": (1, 2),
    "torch.nn.CrossEntropyLoss": (1, 3),
    "torch.nn.HingeEmbeddingLoss": (1, 2),
    "torch.nn.KLDivLoss": (0, 1),
    "torch.nn.L1Loss": (0, 1),
    "torch.nn.MSELoss": (0, 1),
    "torch.nn.MarginRankingLoss": (1, 2),
    "torch.nn.MultiLabelMarginLoss": (0, 1),
    "torch.nn.MultiLabelSoftMarginLoss": (1, 2),
    "torch.nn.MultiMarginLoss": (3, 4),
    "torch.nn.NLLLoss": (1, 3),
    "torch.nn.PoissonNLLLoss": (2, 4),
    "torch.nn.SmoothL1Loss": (0, 1),
    "torch.nn.SoftMarginLoss": (0, 1),
    "torch.nn.TripletMarginLoss": (4, 5),
    "torch.nn.functional.binary_cross_entropy": (3, 4),
    "torch.nn.functional.binary_cross_entropy_with_logits": (3, 4),
    "torch.nn.functional.cosine_embedding_loss": (4, 5),
    "torch.nn.functional.cross_entropy": (3, 5),
    "torch.nn.functional.hinge_embedding_loss": (3, 4),
    "torch.nn.functional.kl_div": (2, 3),
    "torch.nn.functional.l1_loss": (2, 3),
    "torch.nn.functional.margin_ranking_loss": (4, 5),
    "torch.nn.functional.mse_loss": (2, 3),
    "torch.nn.functional.multi_margin_loss": (5, 6),
    "torch.nn.functional.multilabel_margin_loss": (2, 3),
    "torch.nn.functional.multilabel_soft_margin_loss": (3, 4),
    "torch.nn.functional.nll_loss": (3, 5),
    "torch.nn.functional.poisson_nll_loss": (4, 6),
    "torch.nn.functional.smooth_l1_loss": (2, 3),
    "torch.nn.functional.soft_margin_loss": (2, 3),
    "torch.nn.functional.triplet_margin_loss": (7, 8),
}

# ML909 (off by default): TorchScript, deprecated in 2.11 in favour of torch.export (each of
# these warns "... is deprecated. Please switch to ..."). None has an automatic fix: exporting
# needs example inputs and gives another kind of program.
_TORCHSCRIPT = (2, 11)
TORCHSCRIPT_APIS: dict[str, DeprecatedApi] = {
    "torch.jit.script": DeprecatedApi(
        "torch.export.export", _TORCHSCRIPT,
        note="`torch.compile` where the goal is speed in Python"),
    "torch.jit.trace": DeprecatedApi(
        "torch.export.export", _TORCHSCRIPT,
        note="`torch.compile` where the goal is speed in Python"),
    "torch.jit.trace_module": DeprecatedApi("torch.export.export", _TORCHSCRIPT),
    "torch.jit.script_method": DeprecatedApi("torch.compile", _TORCHSCRIPT),
    "torch.jit.save": DeprecatedApi(
        "torch.export.save", _TORCHSCRIPT, note="it saves an `ExportedProgram`"),
    "torch.jit.load": DeprecatedApi(
        "torch.export.load", _TORCHSCRIPT, note="it loads a file written by `torch.export.save`"),
    "torch.jit.freeze": DeprecatedApi("torch.compile", _TORCHSCRIPT),
    "torch.jit.optimize_for_inference": DeprecatedApi("torch.compile", _TORCHSCRIPT),
    "torch.jit.fork": DeprecatedApi("torch.compile", _TORCHSCRIPT),
    "torch.jit.wait": DeprecatedApi("torch.compile", _TORCHSCRIPT),
    "torch.jit.interface": DeprecatedApi("torch.compile", _TORCHSCRIPT),
}

# ML318: private torch helpers -> (public twin, torch release that made the twin public,
# whether the twin is a drop-in rename: a safe fix when True, an unsafe one otherwise)
PRIVATE_TWINS: dict[str, tuple[str, tuple[int, ...], bool]] = {
    "torch.utils.data._utils.collate.default_collate": ("torch.utils.data.default_collate", (1, 11), True),
    "torch.utils.data._utils.collate.default_convert": ("torch.utils.data.default_convert", (1, 11), True),
    "torch._C._get_tracing_state": ("torch.jit.is_tracing", (1, 6), False),
    "torch.nn.utils._stateless.functional_call": ("torch.func.functional_call", (2, 0), True),
    "torch._dynamo.disable": ("torch.compiler.disable", (2, 1), True),
    "torch._dynamo.reset": ("torch.compiler.reset", (2, 1), True),
    "torch._dynamo.allow_in_graph": ("torch.compiler.allow_in_graph", (2, 1), True),
    "torch._dynamo.is_compiling": ("torch.compiler.is_compiling", (2, 3), True),
}

# ML906: torchvision builder -> (weights that `pretrained=True` loaded, weights that
# `pretrained_backbone=True` loaded); None where that depends on other arguments or does not
# exist. Keys of builders in a sub-package carry it (`detection.fasterrcnn_resnet50_fpn`).
# Read from torchvision's own legacy-argument declarations (torchvision >= 0.13).
TORCHVISION_LEGACY_WEIGHTS: dict[str, tuple[str | None, str | None]] = {
    'alexnet': ('AlexNet_Weights.IMAGENET1K_V1', None),
    'convnext_base': ('ConvNeXt_Base_Weights.IMAGENET1K_V1', None),
    'convnext_large': ('ConvNeXt_Large_Weights.IMAGENET1K_V1', None),
    'convnext_small': ('ConvNeXt_Small_Weights.IMAGENET1K_V1', None),
    'convnext_tiny': ('ConvNeXt_Tiny_Weights.IMAGENET1K_V1', None),
    'densenet121': ('DenseNet121_Weights.IMAGENET1K_V1', None),
    'densenet161': ('DenseNet161_Weights.IMAGENET1K_V1', None),
    'densenet169': ('DenseNet169_Weights.IMAGENET1K_V1', None),
    'densenet201': ('DenseNet201_Weights.IMAGENET1K_V1', None),
    'detection.fasterrcnn_mobilenet_v3_large_320_fpn': ('FasterRCNN_MobileNet_V3_Large_320_FPN_Weights.COCO_V1', 'MobileNet_V3_Large_Weights.IMAGENET1K_V1'),
    'detection.fasterrcnn_mobilenet_v3_large_fpn': ('FasterRCNN_MobileNet_V3_Large_FPN_Weights.COCO_V1', 'MobileNet_V3_Large_Weights.IMAGENET1K_V1'),
    'detection.fasterrcnn_resnet50_fpn': ('FasterRCNN_ResNet50_FPN_Weights.COCO_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.fasterrcnn_resnet50_fpn_v2': ('FasterRCNN_ResNet50_FPN_V2_Weights.COCO_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.fcos_resnet50_fpn': ('FCOS_ResNet50_FPN_Weights.COCO_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.keypointrcnn_resnet50_fpn': (None, 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.maskrcnn_resnet50_fpn': ('MaskRCNN_ResNet50_FPN_Weights.COCO_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.maskrcnn_resnet50_fpn_v2': ('MaskRCNN_ResNet50_FPN_V2_Weights.COCO_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.mobilenet_backbone': (None, None),
    'detection.resnet_fpn_backbone': (None, None),
    'detection.retinanet_resnet50_fpn': ('RetinaNet_ResNet50_FPN_Weights.COCO_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.retinanet_resnet50_fpn_v2': ('RetinaNet_ResNet50_FPN_V2_Weights.COCO_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'detection.ssd300_vgg16': ('SSD300_VGG16_Weights.COCO_V1', 'VGG16_Weights.IMAGENET1K_FEATURES'),
    'detection.ssdlite320_mobilenet_v3_large': ('SSDLite320_MobileNet_V3_Large_Weights.COCO_V1', 'MobileNet_V3_Large_Weights.IMAGENET1K_V1'),
    'efficientnet_b0': ('EfficientNet_B0_Weights.IMAGENET1K_V1', None),
    'efficientnet_b1': ('EfficientNet_B1_Weights.IMAGENET1K_V1', None),
    'efficientnet_b2': ('EfficientNet_B2_Weights.IMAGENET1K_V1', None),
    'efficientnet_b3': ('EfficientNet_B3_Weights.IMAGENET1K_V1', None),
    'efficientnet_b4': ('EfficientNet_B4_Weights.IMAGENET1K_V1', None),
    'efficientnet_b5': ('EfficientNet_B5_Weights.IMAGENET1K_V1', None),
    'efficientnet_b6': ('EfficientNet_B6_Weights.IMAGENET1K_V1', None),
    'efficientnet_b7': ('EfficientNet_B7_Weights.IMAGENET1K_V1', None),
    'efficientnet_v2_l': ('EfficientNet_V2_L_Weights.IMAGENET1K_V1', None),
    'efficientnet_v2_m': ('EfficientNet_V2_M_Weights.IMAGENET1K_V1', None),
    'efficientnet_v2_s': ('EfficientNet_V2_S_Weights.IMAGENET1K_V1', None),
    'googlenet': ('GoogLeNet_Weights.IMAGENET1K_V1', None),
    'inception_v3': ('Inception_V3_Weights.IMAGENET1K_V1', None),
    'maxvit_t': ('MaxVit_T_Weights.IMAGENET1K_V1', None),
    'mnasnet0_5': ('MNASNet0_5_Weights.IMAGENET1K_V1', None),
    'mnasnet0_75': ('MNASNet0_75_Weights.IMAGENET1K_V1', None),
    'mnasnet1_0': ('MNASNet1_0_Weights.IMAGENET1K_V1', None),
    'mnasnet1_3': ('MNASNet1_3_Weights.IMAGENET1K_V1', None),
    'mobilenet_v2': ('MobileNet_V2_Weights.IMAGENET1K_V1', None),
    'mobilenet_v3_large': ('MobileNet_V3_Large_Weights.IMAGENET1K_V1', None),
    'mobilenet_v3_small': ('MobileNet_V3_Small_Weights.IMAGENET1K_V1', None),
    'optical_flow.raft_large': ('Raft_Large_Weights.C_T_SKHT_V2', None),
    'optical_flow.raft_small': ('Raft_Small_Weights.C_T_V2', None),
    'quantization.googlenet': (None, None),
    'quantization.inception_v3': (None, None),
    'quantization.mobilenet_v2': (None, None),
    'quantization.mobilenet_v3_large': (None, None),
    'quantization.resnet18': (None, None),
    'quantization.resnet50': (None, None),
    'quantization.resnext101_32x8d': (None, None),
    'quantization.resnext101_64x4d': (None, None),
    'quantization.shufflenet_v2_x0_5': (None, None),
    'quantization.shufflenet_v2_x1_0': (None, None),
    'quantization.shufflenet_v2_x1_5': (None, None),
    'quantization.shufflenet_v2_x2_0': (None, None),
    'regnet_x_16gf': ('RegNet_X_16GF_Weights.IMAGENET1K_V1', None),
    'regnet_x_1_6gf': ('RegNet_X_1_6GF_Weights.IMAGENET1K_V1', None),
    'regnet_x_32gf': ('RegNet_X_32GF_Weights.IMAGENET1K_V1', None),
    'regnet_x_3_2gf': ('RegNet_X_3_2GF_Weights.IMAGENET1K_V1', None),
    'regnet_x_400mf': ('RegNet_X_400MF_Weights.IMAGENET1K_V1', None),
    'regnet_x_800mf': ('RegNet_X_800MF_Weights.IMAGENET1K_V1', None),
    'regnet_x_8gf': ('RegNet_X_8GF_Weights.IMAGENET1K_V1', None),
    'regnet_y_128gf': (None, None),
    'regnet_y_16gf': ('RegNet_Y_16GF_Weights.IMAGENET1K_V1', None),
    'regnet_y_1_6gf': ('RegNet_Y_1_6GF_Weights.IMAGENET1K_V1', None),
    'regnet_y_32gf': ('RegNet_Y_32GF_Weights.IMAGENET1K_V1', None),
    'regnet_y_3_2gf': ('RegNet_Y_3_2GF_Weights.IMAGENET1K_V1', None),
    'regnet_y_400mf': ('RegNet_Y_400MF_Weights.IMAGENET1K_V1', None),
    'regnet_y_800mf': ('RegNet_Y_800MF_Weights.IMAGENET1K_V1', None),
    'regnet_y_8gf': ('RegNet_Y_8GF_Weights.IMAGENET1K_V1', None),
    'resnet101': ('ResNet101_Weights.IMAGENET1K_V1', None),
    'resnet152': ('ResNet152_Weights.IMAGENET1K_V1', None),
    'resnet18': ('ResNet18_Weights.IMAGENET1K_V1', None),
    'resnet34': ('ResNet34_Weights.IMAGENET1K_V1', None),
    'resnet50': ('ResNet50_Weights.IMAGENET1K_V1', None),
    'resnext101_32x8d': ('ResNeXt101_32X8D_Weights.IMAGENET1K_V1', None),
    'resnext101_64x4d': ('ResNeXt101_64X4D_Weights.IMAGENET1K_V1', None),
    'resnext50_32x4d': ('ResNeXt50_32X4D_Weights.IMAGENET1K_V1', None),
    'segmentation.deeplabv3_mobilenet_v3_large': ('DeepLabV3_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1', 'MobileNet_V3_Large_Weights.IMAGENET1K_V1'),
    'segmentation.deeplabv3_resnet101': ('DeepLabV3_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1', 'ResNet101_Weights.IMAGENET1K_V1'),
    'segmentation.deeplabv3_resnet50': ('DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'segmentation.fcn_resnet101': ('FCN_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1', 'ResNet101_Weights.IMAGENET1K_V1'),
    'segmentation.fcn_resnet50': ('FCN_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1', 'ResNet50_Weights.IMAGENET1K_V1'),
    'segmentation.lraspp_mobilenet_v3_large': ('LRASPP_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1', 'MobileNet_V3_Large_Weights.IMAGENET1K_V1'),
    'shufflenet_v2_x0_5': ('ShuffleNet_V2_X0_5_Weights.IMAGENET1K_V1', None),
    'shufflenet_v2_x1_0': ('ShuffleNet_V2_X1_0_Weights.IMAGENET1K_V1', None),
    'shufflenet_v2_x1_5': ('ShuffleNet_V2_X1_5_Weights.IMAGENET1K_V1', None),
    'shufflenet_v2_x2_0': ('ShuffleNet_V2_X2_0_Weights.IMAGENET1K_V1', None),
    'squeezenet1_0': ('SqueezeNet1_0_Weights.IMAGENET1K_V1', None),
    'squeezenet1_1': ('SqueezeNet1_1_Weights.IMAGENET1K_V1', None),
    'swin_b': ('Swin_B_Weights.IMAGENET1K_V1', None),
    'swin_s': ('Swin_S_Weights.IMAGENET1K_V1', None),
    'swin_t': ('Swin_T_Weights.IMAGENET1K_V1', None),
    'swin_v2_b': ('Swin_V2_B_Weights.IMAGENET1K_V1', None),
    'swin_v2_s': ('Swin_V2_S_Weights.IMAGENET1K_V1', None),
    'swin_v2_t': ('Swin_V2_T_Weights.IMAGENET1K_V1', None),
    'vgg11': ('VGG11_Weights.IMAGENET1K_V1', None),
    'vgg11_bn': ('VGG11_BN_Weights.IMAGENET1K_V1', None),
    'vgg13': ('VGG13_Weights.IMAGENET1K_V1', None),
    'vgg13_bn': ('VGG13_BN_Weights.IMAGENET1K_V1', None),
    'vgg16': ('VGG16_Weights.IMAGENET1K_V1', None),
    'vgg16_bn': ('VGG16_BN_Weights.IMAGENET1K_V1', None),
    'vgg19': ('VGG19_Weights.IMAGENET1K_V1', None),
    'vgg19_bn': ('VGG19_BN_Weights.IMAGENET1K_V1', None),
    'video.mc3_18': ('MC3_18_Weights.KINETICS400_V1', None),
    'video.mvit_v1_b': ('MViT_V1_B_Weights.KINETICS400_V1', None),
    'video.mvit_v2_s': ('MViT_V2_S_Weights.KINETICS400_V1', None),
    'video.r2plus1d_18': ('R2Plus1D_18_Weights.KINETICS400_V1', None),
    'video.r3d_18': ('R3D_18_Weights.KINETICS400_V1', None),
    'video.s3d': ('S3D_Weights.KINETICS400_V1', None),
    'video.swin3d_b': ('Swin3D_B_Weights.KINETICS400_V1', None),
    'video.swin3d_s': ('Swin3D_S_Weights.KINETICS400_V1', None),
    'video.swin3d_t': ('Swin3D_T_Weights.KINETICS400_V1', None),
    'vit_b_16': ('ViT_B_16_Weights.IMAGENET1K_V1', None),
    'vit_b_32': ('ViT_B_32_Weights.IMAGENET1K_V1', None),
    'vit_h_14': (None, None),
    'vit_l_16': ('ViT_L_16_Weights.IMAGENET1K_V1', None),
    'vit_l_32': ('ViT_L_32_Weights.IMAGENET1K_V1', None),
    'wide_resnet101_2': ('Wide_ResNet101_2_Weights.IMAGENET1K_V1', None),
    'wide_resnet50_2': ('Wide_ResNet50_2_Weights.IMAGENET1K_V1', None),
}
