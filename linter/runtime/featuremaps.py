"""`modellint trace --feature-maps DIR [--layers GLOB] [--image FILE]`: the output channels of
chosen layers as PNG grids (what the network sees), one file per layer call.

Each grid shows the first sample's channels (up to `MAX_CHANNELS`) as grey images, each
channel scaled to its own range, `ceil(sqrt(channels))` per row, made with
`torchvision.utils.make_grid` and written with `torchvision.utils.save_image`. Small maps are
enlarged by a whole factor (each value a square of pixels, no smoothing) until their longer
side is at least `MIN_TILE` pixels: a 5×5 map is a legible 65×65 square, not 5 pixels.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re

import torch
from torch import nn

MAX_CHANNELS = 64
PADDING = 2
MIN_TILE = 64  # pixels on the longer side of each map in the grid
# torchvision's ImageNet statistics, which its classification models were trained with
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class FeatureMapError(Exception):
    pass


def enlargement(height: int, width: int) -> int:
    """The whole factor by which maps of height×width are enlarged in the grid."""
    return max(1, math.ceil(MIN_TILE / max(height, width, 1)))


def grid_size(channels: int, height: int, width: int) -> tuple[int, int]:
    """(height, width) in pixels of the grid written for `channels` maps of height×width."""
    shown = min(channels, MAX_CHANNELS)
    per_row = math.ceil(math.sqrt(shown))
    rows = math.ceil(shown / per_row)
    factor = enlargement(height, width)
    return (rows * (height * factor + PADDING) + PADDING,
            per_row * (width * factor + PADDING) + PADDING)


class FeatureMaps:
    """Forward hooks on the modules whose path matches one of `patterns` (fnmatch; default:
    every Conv2d) keeping the first sample of each 4-D output."""

    def __init__(self, model: nn.Module, patterns: list[str] | str | None) -> None:
        if isinstance(patterns, str):
            patterns = [patterns]
        self.maps: list[tuple[str, torch.Tensor]] = []
        self.matched: list[str] = []
        self._handles = []
        for path, module in model.named_modules():
            if not patterns:
                if not isinstance(module, nn.Conv2d):
                    continue
            elif not any(fnmatch.fnmatchcase(path or "(model)", p) for p in patterns):
                continue
            self.matched.append(path)
            self._handles.append(module.register_forward_hook(self._hook(path)))

    def _hook(self, path: str):
        def keep(module, args, output):
            tensor = output[0] if isinstance(output, (tuple, list)) and output else output
            if isinstance(tensor, torch.Tensor) and tensor.dim() == 4 and (
                tensor.is_floating_point()
            ):
                self.maps.append((path, tensor[0].detach().float().cpu()))
        return keep

    def __enter__(self) -> FeatureMaps:
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def write(self, directory: str) -> list[str]:
        from torchvision.utils import make_grid, save_image

        os.makedirs(directory, exist_ok=True)
        written = []
        for index, (path, maps) in enumerate(self.maps):
            channels = maps[:MAX_CHANNELS].unsqueeze(1)  # [C, 1, H, W]
            factor = enlargement(*channels.shape[-2:])
            if factor > 1:
                channels = channels.repeat_interleave(factor, dim=2).repeat_interleave(
                    factor, dim=3)
            grid = make_grid(channels, nrow=math.ceil(math.sqrt(channels.shape[0])),
                             padding=PADDING, normalize=True, scale_each=True, pad_value=1.0)
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", path or "model")
            file = os.path.join(directory, f"{index:03d}_{name}.png")
            save_image(grid, file)
            written.append(file)
        return written


def notes(image: str | None, kwargs: dict) -> list[str]:
    """What a user should know before reading the grids: noise in, noise out; random filters
    without trained weights."""
    found = []
    if image is None:
        found.append("the input is random noise (no --image FILE): the grids show how the "
                     "layers respond to noise, and look like noise; pass --image FILE to see "
                     "what the network makes of a picture")
    if not kwargs.get("weights") and not kwargs.get("pretrained"):
        found.append("the model was built without `weights=` (untrained): the grids show "
                     "randomly initialised filters, unless its constructor loads trained "
                     "weights itself; for a torchvision model pass "
                     "--kwargs '{\"weights\": \"DEFAULT\"}'")
    return found


def load_image(file: str, shape: list[int], device: str) -> torch.Tensor:
    """A picture as a model input of `shape` ([N, C, H, W] or [C, H, W]): resized, scaled to
    [0, 1] and normalised with ImageNet's mean and std (grey for one channel)."""
    from torchvision.io import ImageReadMode, read_image
    from torchvision.transforms.functional import normalize, resize

    dims = list(shape)[-3:]
    if len(dims) != 3 or dims[0] not in (1, 3):
        raise FeatureMapError(f"--image needs an input of shape [N, 1 or 3, H, W], got {shape}")
    channels, height, width = dims
    mode = ImageReadMode.RGB if channels == 3 else ImageReadMode.GRAY
    try:
        image = read_image(file, mode=mode)
    except (RuntimeError, OSError, ValueError) as exc:
        raise FeatureMapError(f"cannot read the image {file}: {exc}") from None
    image = resize(image, [height, width], antialias=True).float() / 255.0
    if channels == 3:
        image = normalize(image, MEAN, STD)
    else:
        image = normalize(image, [sum(MEAN) / 3], [sum(STD) / 3])
    return image.unsqueeze(0).to(device)
