"""Training memory from a traced forward (ML707, `modellint trace --memory`).

Parameters, gradients and optimizer state follow from the parameters; activations are
measured: every tensor autograd saves for the backward pass during a train-mode forward is
seen through `torch.autograd.graph.saved_tensors_hooks` (on `meta` too, where nothing is
allocated), counted once per storage, parameters excluded, and charged to the module that was
running when it was saved. The sum is the model's own activation memory at the peak of a
training step (the end of the forward), not a guess from its size; transient workspace and
the allocator's rounding come on top.
"""

from __future__ import annotations

import math
import re
from dataclasses import field
from typing import Any

import torch
from torch import nn

from modellint.records import record

# optimizer state tensors per trainable parameter (same shape and dtype as the parameter):
# SGD with momentum keeps `momentum_buffer` (none with momentum=0), Adam/AdamW keep
# `exp_avg` and `exp_avg_sq`
OPTIMIZER_STATES = {"sgd": 1, "adam": 2, "adamw": 2}
OPTIMIZER_NAMES = {"sgd": "SGD with momentum", "adam": "Adam", "adamw": "AdamW"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(i?)B\s*$")
_POWERS = {"K": 1, "M": 2, "G": 3, "T": 4}


def parse_size(text: str) -> int:
    """`"80GB"` -> 80·10⁹ bytes, `"80GiB"` -> 80·2³⁰ bytes."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size such as \"80GB\": {text!r}")
    number, unit, binary = match.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** _POWERS[unit])


UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def size_text(n: float, unit: str | None = None) -> str:
    """`n` bytes in `unit` (default: the largest unit in which `n` is at least 1)."""
    if unit is None:
        unit = next(u for i, u in reversed(list(enumerate(UNITS)))
                    if abs(n) >= 1024 ** i or i == 0)
    if unit == "B":
        return f"{n:,.0f} B"
    value = n / 1024 ** UNITS.index(unit)
    if value and abs(value) < 0.001:  # a tiny part of a large total
        return f"<0.001 {unit}"
    if value and abs(value) < 0.05:  # a small part of a large total: two significant digits
        return f"{value:.{1 - math.floor(math.log10(abs(value)))}f} {unit}"
    return f"{value:,.1f} {unit}"


def unit_for(*sizes: float) -> str:
    """The one unit for a set of sizes read side by side: the largest unit in which the
    largest of them is at least 10 (`1,054.1 GiB`, not `1.0 TiB` beside `263.2 GiB`)."""
    largest = max((abs(n) for n in sizes), default=0)
    for index in range(len(UNITS) - 1, 0, -1):
        if largest >= 10 * 1024 ** index:
            return UNITS[index]
    return "B" if largest < 1024 else "KiB"


def _bytes(numel: int, dtype: torch.dtype, target: torch.dtype | None) -> int:
    if target is not None and dtype.is_floating_point:
        return numel * target.itemsize
    return numel * dtype.itemsize


class ActivationMeter:
    """Counts the tensors autograd saves for backward while active (a context manager).

    `module_of` is a callable giving the path of the module running now (a `Tracer`'s
    `innermost`), used to charge each saved tensor to a module.
    """

    def __init__(self, model: nn.Module, module_of=None) -> None:
        self.module_of = module_of
        self._params = {id(p) for p in model.parameters()}
        self._param_storages = set()
        for p in model.parameters():
            if not p.is_meta:
                self._param_storages.add(p.untyped_storage().data_ptr())
        self.saved: dict[Any, tuple[int, torch.dtype, str]] = {}  # key -> (numel, dtype, path)
        self._keep: list[torch.Tensor] = []
        self._context: torch.autograd.graph.saved_tensors_hooks | None = None

    def _pack(self, tensor: torch.Tensor):
        base = tensor._base if tensor._base is not None else tensor
        if id(tensor) in self._params or id(base) in self._params:
            return tensor
        if tensor.is_meta:
            key: Any = ("meta", id(base))
            self._keep.append(base)  # its id stays unique while counted
        else:
            ptr = tensor.untyped_storage().data_ptr()
            if ptr in self._param_storages:
                return tensor
            key = (str(tensor.device), ptr)
        if key not in self.saved:
            storage = tensor.untyped_storage().nbytes()
            numel = storage // max(tensor.dtype.itemsize, 1)
            path = (self.module_of() if self.module_of is not None else None) or ""
            self.saved[key] = (numel, tensor.dtype, path)
        return tensor

    @staticmethod
    def _unpack(tensor):
        return tensor

    def __enter__(self) -> ActivationMeter:
        self._context = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        assert self._context is not None
        self._context.__exit__(*exc)
        self._context = None
        self._keep = []

    def total(self, dtype: torch.dtype | None = None) -> int:
        return sum(_bytes(n, d, dtype) for n, d, _ in self.saved.values())

    def by_module(self, dtype: torch.dtype | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for numel, d, path in self.saved.values():
            out[path] = out.get(path, 0) + _bytes(numel, d, dtype)
        return out


@record
class MemoryEstimate:
    """Bytes of one training step: parameters, gradients, optimizer state, activations."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    optimizer_name: str
    dtype: str
    batch: int | None
    trainable: int = 0
    by_module: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer + self.activations

    def to_json(self) -> dict[str, Any]:
        return {
            "parameters": self.parameters, "gradients": self.gradients,
            "optimizer": self.optimizer, "activations": self.activations, "total": self.total,
            "optimizer_name": self.optimizer_name, "dtype": self.dtype, "batch": self.batch,
            "trainable_parameters": self.trainable,
            "activations_by_module": [list(item) for item in self.by_module],
        }

    def parts_text(self) -> str:
        return (f"parameters {size_text(self.parameters)}, gradients "
                f"{size_text(self.gradients)}, {OPTIMIZER_NAMES[self.optimizer_name]} state "
                f"{size_text(self.optimizer)}, activations {size_text(self.activations)}")

    def render(self, target: int | None = None, unit: str | None = None) -> str:
        """The summary; `unit`: the one unit of its figures (default: `unit_for` them)."""
        batch = f"batch {self.batch}, " if self.batch is not None else ""
        lines = [f"training memory ({batch}{self.dtype}, "
                 f"{OPTIMIZER_NAMES[self.optimizer_name]}):"]
        states = OPTIMIZER_STATES[self.optimizer_name]
        rows = [
            ("parameters", self.parameters, ""),
            ("gradients", self.gradients, f"{self.trainable:,} trainable"),
            ("optimizer state", self.optimizer, f"{states} per trainable parameter"),
            ("activations", self.activations, "saved for backward, traced"),
            ("total", self.total, ""),
        ]
        # one unit for every figure of the summary, so that they read side by side
        unit = unit or unit_for(self.total, target or 0)
        for name, value, note in rows:
            lines.append(f"  {name:<16}{size_text(value, unit):>14}"
                         + (f"  ({note})" if note else ""))
        top = [(p, b) for p, b in self.by_module if b > 0][:5]
        if top:
            lines.append("  largest activations: " + ", ".join(
                f"{p or '(model)'} {size_text(b, unit)}" for p, b in top))
        if target is not None:
            verdict = "exceeds" if self.total > target else "fits in"
            lines.append(f"  {verdict} the target {size_text(target, unit)} "
                         f"({100 * self.total / target:.0f} %)")
        return "\n".join(lines)


def estimate(model: nn.Module, meter: ActivationMeter | None, *, optimizer: str = "adamw",
             dtype: str | None = None, batch: int | None = None) -> MemoryEstimate:
    """The memory of one training step of `model` with `optimizer`, its floating tensors
    counted as `dtype` (None: as they are)."""
    if optimizer not in OPTIMIZER_STATES:
        raise ValueError(f"unknown optimizer {optimizer!r} (choose sgd, adam or adamw)")
    target = DTYPES[dtype] if dtype else None
    seen: set[int] = set()
    params = trainable_bytes = trainable = 0
    for p in model.parameters():  # shared (tied) parameters once
        if id(p) in seen:
            continue
        seen.add(id(p))
        size = _bytes(p.numel(), p.dtype, target)
        params += size
        if p.requires_grad:
            trainable_bytes += size
            trainable += p.numel()
    for b in model.buffers():
        params += _bytes(b.numel(), b.dtype, target)
    activations = meter.total(target) if meter is not None else 0
    by_module = sorted((meter.by_module(target) if meter is not None else {}).items(),
                       key=lambda item: -item[1])
    name = dtype or _dominant_dtype(model)
    return MemoryEstimate(
        parameters=params, gradients=trainable_bytes,
        optimizer=OPTIMIZER_STATES[optimizer] * trainable_bytes, activations=activations,
        optimizer_name=optimizer, dtype=name, batch=batch, trainable=trainable,
        by_module=by_module,
    )


def _dominant_dtype(model: nn.Module) -> str:
    counts: dict[str, int] = {}
    for p in model.parameters():
        key = str(p.dtype).replace("torch.", "")
        counts[key] = counts.get(key, 0) + p.numel()
    return max(counts, key=counts.__getitem__) if counts else "float32"
