"""Example inputs: made from configured specs, or inferred from the layer that consumes the
input (Conv, Linear, Embedding, RNN, Transformer layers), with batch 2."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from modellint.records import record

BATCH = 2
SEQ = 16
SIZES_2D = (32, 28, 64, 224, 16, 299, 24, 48, 96, 128, 8, 12, 20, 36, 40, 56, 72, 80, 112, 160,
            192, 256, 320, 384, 512)
SIZES_1D = (64, 32, 128, 256, 16, 100, 200, 500, 1000, 28, 8)
SIZES_3D = (16, 8, 32, 28, 64)


def make(spec: dict[str, Any], device: str, generator: torch.Generator | None = None):
    dtype = getattr(torch, spec["dtype"])
    shape = spec["shape"]
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device="cpu", generator=generator).bool().to(device)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
    return torch.randint(spec["low"], spec["high"], shape, generator=generator).to(
        device=device, dtype=dtype)


def make_all(specs: list[dict[str, Any]], device: str, seed: int = 1234):
    generator = torch.Generator().manual_seed(seed)
    args, kwargs = [], {}
    for spec in specs:
        value = make(spec, device, generator)
        if spec.get("name"):
            kwargs[spec["name"]] = value
        else:
            args.append(value)
    return args, kwargs


def spec_text(specs: list[dict[str, Any]]) -> str:
    parts = []
    for spec in specs:
        text = "[" + ", ".join(str(d) for d in spec["shape"]) + "]"
        if spec["dtype"] != "float32":
            text += f" {spec['dtype']}"
            if not spec["dtype"].startswith(("float", "bfloat", "bool")):
                text += f" in [{spec['low']}, {spec['high']})"
        if spec.get("name"):
            text = f"{spec['name']}={text}"
        parts.append(text)
    return ", ".join(parts)


def _spec(shape, dtype="float32", low=0, high=2, name=None) -> dict[str, Any]:
    return {"shape": list(shape), "dtype": dtype, "low": low, "high": high, "name": name}


@record
class Inference:
    """Candidate inputs for a model, in the order to try them; `source` names the layer."""

    candidates: list[list[dict[str, Any]]]
    source: str  # e.g. "`features.0` (Conv2d, in_channels=3)"
    sized: bool  # whether the candidates differ in a spatial/sequence size


def forward_arity(model: nn.Module) -> tuple[int, list[str]]:
    """(number of required positional inputs of forward, their names)."""
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return 1, ["input"]
    names = [
        p.name for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(names), names


def first_consumer(model: nn.Module):
    kinds = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
             nn.ConvTranspose3d, nn.Linear, nn.Bilinear, nn.Embedding, nn.EmbeddingBag,
             nn.RNNBase, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.Transformer,
             nn.TransformerEncoder, nn.MultiheadAttention, nn.LazyLinear)
    for path, module in model.named_modules():
        if isinstance(module, kinds):
            return path, module
    return None, None


def infer(model: nn.Module) -> Inference | None:
    path, layer = first_consumer(model)
    if layer is None:
        return None
    where = f"`{path}`" if path else "the model"
    if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d,
                          nn.ConvTranspose2d, nn.ConvTranspose3d)):
        dims = len(layer.kernel_size)
        sizes = {1: SIZES_1D, 2: SIZES_2D, 3: SIZES_3D}[dims]
        declared = declared_image_size(model) if dims == 2 else None
        if declared is not None:  # the size the model says it was built for, first
            sizes = (declared, *(size for size in sizes if size != declared))
        channels = layer.in_channels
        candidates = [[_spec((BATCH, channels, *([s] * dims)))] for s in sizes]
        return Inference(candidates, f"{where} ({type(layer).__name__}, in_channels={channels})",
                         True)
    if isinstance(layer, nn.Bilinear):
        return Inference([[_spec((BATCH, layer.in1_features)), _spec((BATCH, layer.in2_features))]],
                         f"{where} (Bilinear)", False)
    if isinstance(layer, nn.Linear) and not isinstance(layer, nn.LazyLinear):
        return Inference([[_spec((BATCH, layer.in_features))]],
                         f"{where} (Linear, in_features={layer.in_features})", False)
    if isinstance(layer, (nn.Embedding, nn.EmbeddingBag)):
        high = layer.num_embeddings
        return Inference([[_spec((BATCH, SEQ), "int64", 0, high)]],
                         f"{where} ({type(layer).__name__}, num_embeddings={high})", False)
    if isinstance(layer, nn.RNNBase):
        shape = (BATCH, SEQ, layer.input_size) if layer.batch_first else (SEQ, BATCH,
                                                                          layer.input_size)
        return Inference([[_spec(shape)]],
                         f"{where} ({type(layer).__name__}, input_size={layer.input_size}, "
                         f"batch_first={layer.batch_first})", False)
    if isinstance(layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
                          nn.TransformerEncoder, nn.Transformer, nn.MultiheadAttention)):
        d_model, batch_first = _transformer_dims(layer)
        if d_model is None:
            return None
        shape = (BATCH, SEQ, d_model) if batch_first else (SEQ, BATCH, d_model)
        count, _ = forward_arity(model)
        specs = [_spec(shape) for _ in range(max(1, count))]
        return Inference([specs], f"{where} ({type(layer).__name__}, d_model={d_model}, "
                         f"batch_first={batch_first})", False)
    return None


# where vision models keep the input size they were built for (timm's PatchEmbed and
# VisionTransformer, torchvision's VisionTransformer, Hugging Face configs' `image_size`)
_IMAGE_SIZE_ATTRIBUTES = ("img_size", "image_size", "input_size", "input_resolution")


def declared_image_size(model: nn.Module) -> int | None:
    """The square image size the model or one of its modules declares, if any."""
    for module in model.modules():
        for attribute in _IMAGE_SIZE_ATTRIBUTES:
            value = getattr(module, attribute, None)
            if isinstance(value, (tuple, list)):
                value = value[-1] if len(value) in (2, 3) and len(set(value[-2:])) == 1 else None
            if isinstance(value, int) and not isinstance(value, bool) and 4 <= value <= 4096:
                return value
    return None


def _transformer_dims(layer: nn.Module) -> tuple[int | None, bool]:
    if isinstance(layer, nn.MultiheadAttention):
        return layer.embed_dim, layer.batch_first
    if isinstance(layer, nn.Transformer):
        return layer.d_model, layer.batch_first
    if isinstance(layer, nn.TransformerEncoder):
        layer = layer.layers[0]
    attn = getattr(layer, "self_attn", None)
    if attn is None:
        return None, False
    return attn.embed_dim, bool(getattr(layer, "batch_first", attn.batch_first))
