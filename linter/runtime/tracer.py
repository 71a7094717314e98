"""The hook tracer: global forward pre/post hooks that see every module call of one model.

It records a row per call (path, type, input and output shapes, parameters, device, dtype),
keeps the stack of modules being run (the innermost one is where an exception came from), and
optionally checks inputs against parameters (ML702), outputs for NaN/Inf (ML704) and takes a
fingerprint of every output (ML705 compares two passes). Modules called while the model runs
but missing from `named_modules()` are collected for ML101/ML107.
"""

from __future__ import annotations

import sys
from dataclasses import field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.modules import module as module_hooks

from modellint.records import record
from modellint.runtime.phases import (  # noqa: F401 - imported from here too
    describe,
    fingerprints_differ,
    shape_text,
)

if TYPE_CHECKING:
    from modellint.runtime.sources import UserCode

FINGERPRINT_SAMPLE = 4096
RECENT_PRINTS = 4  # tensors whose fingerprint is kept for the next module's input


def tensors_in(value: Any, depth: int = 0):
    if isinstance(value, torch.Tensor):
        yield value
    elif depth > 4:
        return
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item, depth + 1)
    elif hasattr(value, "__dataclass_fields__") or hasattr(value, "to_tuple"):
        for item in getattr(value, "__dict__", {}).values():
            yield from tensors_in(item, depth + 1)


def shapes_of(value: Any) -> list[list[int]]:
    return [list(t.shape) for t in tensors_in(value)]


@record
class Row:
    index: int
    path: str
    type: str
    depth: int
    input_shapes: list[list[int]]
    output_shapes: list[list[int]] = field(default_factory=list)
    params: int = 0
    device: str = ""
    dtype: str = ""
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "type": self.type, "depth": self.depth,
            "input_shapes": self.input_shapes, "output_shapes": self.output_shapes,
            "params": self.params, "device": self.device, "dtype": self.dtype,
        }


@record
class Mismatch:
    path: str
    what: str  # "device" or "dtype"
    got: str
    expected: str
    shapes: list[list[int]]


def parameter_counts(model: nn.Module) -> dict[int, int]:
    """id(module) -> the parameters of the module and its children, a parameter shared
    between them counted once (what `sum(p.numel() for p in module.parameters())` gives),
    for every module at once: one walk up the tree instead of one walk down per module."""
    found: dict[int, dict[int, int]] = {}

    def visit(module: nn.Module) -> dict[int, int]:
        known = found.get(id(module))
        if known is not None:
            return known
        own = {id(p): p.numel() for p in module._parameters.values() if p is not None}
        for child in module._modules.values():
            if child is not None:
                own.update(visit(child))
        found[id(module)] = own
        return own

    visit(model)
    return {key: sum(sizes.values()) for key, sizes in found.items()}


def all_finite(tensor: torch.Tensor) -> bool:
    """No NaN or Inf in `tensor`. Its sum is finite only then (a NaN or an Inf makes the sum
    NaN or infinite), and a sum reads the tensor once without writing a mask as large as it
    (30x faster than `isfinite(t).all()` on a large activation); a sum that overflows with
    finite values alone is settled by the exact test."""
    if bool(torch.isfinite(tensor.sum())):
        return True
    return bool(torch.isfinite(tensor).all())


class Tracer:
    def __init__(
        self,
        model: nn.Module,
        *,
        rows: bool = True,
        numeric: bool = False,
        fingerprints: bool = False,
        where=None,
        keep_outputs: bool = False,
    ) -> None:
        self.model = model
        self.paths: dict[int, str] = {}
        for path, module in model.named_modules(remove_duplicate=False):
            self.paths.setdefault(id(module), path)
        self.record_rows = rows
        self.numeric = numeric
        self.fingerprinting = fingerprints
        self.where = where  # callable(path) telling the parent which module runs
        self.rows: list[Row] = []
        self.stack: list[tuple[int, str | None, Row | None, list[list[int]]]] = []
        self.called: set[str] = set()
        self.mismatches: list[Mismatch] = []
        self.non_finite: tuple[str, str] | None = None  # (path, description)
        # ("in"|"out", path, fingerprint) in execution order
        self.fingerprints: list[tuple[str, str, tuple[float, ...]]] = []
        # compare against another pass's fingerprints as they come: the first difference as
        # (kind, path, call site or None)
        self.reference: list[tuple[str, str, tuple[float, ...]]] | None = None
        self.first_difference: tuple[str, str, tuple[str, int, str] | None] | None = None
        # module objects called inside the model that it does not register (kept alive so
        # their ids stay unique): id -> (module, parent path, call site)
        self.unregistered: dict[int, tuple[nn.Module, str, tuple[str, int, str] | None]] = {}
        # floating outputs needing a gradient of each registered module called (kept on
        # request: they stand in for a model output when forward returns none)
        self.keep_outputs = keep_outputs
        self.outputs: list[torch.Tensor] = []
        self.user_code: UserCode | None = None  # set by the runner: whose frames are the user's
        self.failed_stack: list[str] = []
        self._handles: list[Any] = []
        self._param_cache: dict[int, tuple[torch.Tensor | None, int]] = {}
        self._recent_prints: list[tuple[torch.Tensor, tuple[int, int], list[float]]] = []
        self._counts: dict[int, int] | None = None

    # -- installation -----------------------------------------------------------------------
    def __enter__(self) -> Tracer:
        self._handles = [
            module_hooks.register_module_forward_pre_hook(self._pre),
            module_hooks.register_module_forward_hook(self._post),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._recent_prints = []

    def reset(self) -> None:
        self.rows.clear()
        self.stack.clear()
        self.fingerprints.clear()
        self.failed_stack = []

    # -- hooks ------------------------------------------------------------------------------
    def _own_param(self, module: nn.Module) -> tuple[torch.Tensor | None, int]:
        """The module's first own parameter (or floating buffer): the device and dtype it
        expects; and, for the rows, the parameters of the module and its children (0 when no
        rows are recorded: counting them at every module of every traced forward adds up)."""
        cached = self._param_cache.get(id(module))
        if cached is None:
            # module._parameters and _buffers as parameters()/buffers(recurse=False) read them,
            # without their generator machinery (this runs for every module of a forward)
            first: torch.Tensor | None = next(
                (p for p in module._parameters.values() if p is not None), None)
            if first is None:
                first = next((b for b in module._buffers.values()
                              if b is not None and b.is_floating_point()), None)
            count = 0
            if self.record_rows:
                if self._counts is None:
                    self._counts = parameter_counts(self.model)
                count = self._counts.get(id(module), 0)
            cached = (first, count)
            self._param_cache[id(module)] = cached
        return cached

    def _pre(self, module: nn.Module, args: tuple) -> None:
        path = self.paths.get(id(module))
        if path is None:
            if self.stack and id(module) not in self.unregistered:
                parent = next((p for _, p, _, _ in reversed(self.stack) if p is not None), "")
                if self.stack[-1][1] is not None:  # only the outermost unregistered module
                    site = None
                    if self.user_code is not None:
                        site = self.user_code.innermost_frame(sys._getframe(1))
                    self.unregistered[id(module)] = (module, parent, site)
            if self.stack:
                self.stack.append((id(module), None, None, []))
            return
        self.called.add(path)
        if self.where is not None:
            self.where(path)
        shapes = shapes_of(args)
        if self.fingerprinting:
            self._fingerprint("in", path, args)
        row = None
        first, count = self._own_param(module)
        if self.record_rows:
            row = Row(len(self.rows), path, type(module).__name__, path.count(".") + (1 if path else 0),
                      shapes, params=count)
            if first is not None:
                row.device, row.dtype = str(first.device), str(first.dtype).replace("torch.", "")
            self.rows.append(row)
        if first is not None:
            for tensor in tensors_in(args):
                if tensor.device != first.device and not (
                    tensor.device.type == "cpu" and tensor.dim() == 0
                ):
                    self.mismatches.append(Mismatch(path, "device", str(tensor.device),
                                                    str(first.device), shapes))
                    break
                if (
                    tensor.is_floating_point() and first.is_floating_point()
                    and tensor.dtype != first.dtype
                    and not torch.is_autocast_enabled()
                ):
                    self.mismatches.append(Mismatch(
                        path, "dtype", str(tensor.dtype).replace("torch.", ""),
                        str(first.dtype).replace("torch.", ""), shapes))
                    break
        self.stack.append((id(module), path, row, shapes))

    def _post(self, module: nn.Module, args: tuple, output: Any) -> None:
        key = id(module)
        while self.stack:
            top = self.stack.pop()
            if top[0] == key:
                break
        else:
            return
        path, row = top[1], top[2]
        if path is None:
            return
        if row is not None:
            row.output_shapes = shapes_of(output)
            row.done = True
        if self.keep_outputs:
            self.outputs.extend(t for t in tensors_in(output)
                                if t.is_floating_point() and t.requires_grad)
        if self.numeric and self.non_finite is None:
            with torch.no_grad():  # no autograd graph (or saved tensors) for the check
                for tensor in tensors_in(output):
                    if (tensor.is_floating_point() or tensor.is_complex()) and (
                        not all_finite(tensor)
                    ):
                        nan = bool(torch.isnan(tensor).any())
                        self.non_finite = (path, "NaN" if nan else "Inf")
                        break
        if self.fingerprinting:
            with torch.no_grad():
                self._fingerprint("out", path, output)

    def _tensor_print(self, tensor: torch.Tensor) -> list[float]:
        """The sum and the sum of magnitudes of a strided sample of `tensor` (enough to see two
        passes disagree, at a tiny cost). A module's input is mostly the output the module
        before it just produced: the same tensor, unchanged since (same version), is not
        read again."""
        key = (id(tensor), tensor._version)
        for known, version_key, found in self._recent_prints:
            if version_key == key and known is tensor:
                return found
        flat = tensor.detach().reshape(-1)
        if flat.numel() > FINGERPRINT_SAMPLE:
            flat = flat[:: flat.numel() // FINGERPRINT_SAMPLE]
        flat = flat.double()
        # read back in one transfer
        found = torch.stack((flat.sum(), flat.abs().sum())).tolist()
        # a few recent ones only: each holds its tensor alive
        self._recent_prints = [(tensor, key, found), *self._recent_prints[:RECENT_PRINTS - 1]]
        return found

    def _fingerprint(self, kind: str, path: str, value: Any) -> None:
        values = []
        for tensor in tensors_in(value):
            if tensor.is_floating_point():
                values.extend(self._tensor_print(tensor))
        event = (kind, path, tuple(values))
        index = len(self.fingerprints)
        self.fingerprints.append(event)
        if self.reference is not None and self.first_difference is None:
            if index >= len(self.reference) or fingerprints_differ(
                self.reference[index][2], event[2]
            ):
                site = None
                if kind == "in" and self.user_code is not None:
                    site = self.user_code.innermost_frame(sys._getframe(2))
                self.first_difference = (kind, path, site)

    # -- after an exception -----------------------------------------------------------------
    def innermost(self) -> str | None:
        """Path of the innermost registered module still on the stack (where it raised)."""
        for _, path, _, _ in reversed(self.stack):
            if path is not None:
                return path
        return None

    def unregistered_on_stack(self) -> tuple[nn.Module, str, tuple[str, int, str] | None] | None:
        """The innermost module still on the stack (where it raised) that the model does not
        register, as `unregistered` holds it: the module, its parent's path, its call site."""
        for key, path, _, _ in reversed(self.stack):
            if path is not None:
                return None
            if key in self.unregistered:
                return self.unregistered[key]
        return None

    def innermost_shapes(self) -> list[list[int]]:
        for _, path, _, shapes in reversed(self.stack):
            if path is not None:
                return shapes
        return []
