"""The phases of a model run and the runner's own helpers, without torch: rule modules
import these when the plugin manager loads them, which a static-only run does too."""

from __future__ import annotations

import math
import os
import re
from typing import Any

from modellint import codes
from modellint.patterns import LazyPattern

# the phases a check can need; building the model and inspecting it always happen
FORWARD = "forward"  # an eval-mode forward on the given, configured or inferred input
REPEAT = "repeat"  # a second eval-mode forward on the same input
TWIN = "twin"  # a fresh instance loaded with the model's state_dict, run on the same input
TRAIN = "train"  # a train-mode forward and a backward from the outputs
MEMORY = "memory"  # the activations a train-mode forward saves for the backward
PHASES = (FORWARD, REPEAT, TWIN, TRAIN, MEMORY)

# the codes the runner reports itself (documented by `modellint.rules.core`)
NOT_CHECKED = codes.NOT_CHECKED
INTERNAL = codes.INTERNAL_ERROR

OOM = LazyPattern(r"out of memory|can't allocate memory|CUDA error: out of memory", re.I)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def short_path(path: str) -> str:
    """A path relative to the working folder when it is below it, else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def shape_text(shape) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def describe(module: Any) -> str:
    """`Conv2d(32, 32, kernel_size=(3, 3), ...)`: the type and its constructor arguments."""
    try:
        extra = module.extra_repr()
    except Exception:  # noqa: BLE001
        extra = ""
    extra = extra.replace("\n", " ")
    if len(extra) > 80:
        extra = extra[:77] + "..."
    return f"{type(module).__name__}({extra})"


def fingerprints_differ(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    if len(a) != len(b):
        return True
    for x, y in zip(a, b, strict=True):
        if math.isnan(x) and math.isnan(y):
            continue
        if not math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-5):
            return True
    return False


def attribute_location(run: Any, module: Any, attr: str, path: str) -> tuple[str, int] | None:
    """The line assigning `self.<attr>` in `module`'s class, else where `path` was built."""
    from modellint.runtime.sources import attribute_line

    return attribute_line(type(module), attr) or run.location_of(path)
