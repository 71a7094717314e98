"""What `modellint run` sees of gradient clipping and of the losses' inputs (ML324, ML326,
ML327): `clip_grad_norm_` / `clip_grad_value_` and the classification and regression losses
of `torch.nn.functional` (which the loss modules call) are wrapped while the recorder is
installed. A wrapper only looks at shapes, autograd nodes and gradient versions: no tensor
value is read, so a watched step costs what it did.

The wrappers are frames between the caller and torch's function: a warning torch gives with
`stacklevel` from inside one would name this file. The two that can (a regression loss whose
shapes differ, an empty generator given to a clip) are given by the wrapper itself, naming
the line torch would name, and torch's function gets arguments it does not warn about.
"""

from __future__ import annotations

import types
import warnings
import weakref
from dataclasses import field
from typing import TYPE_CHECKING, Any

import torch

from modellint.records import record

if TYPE_CHECKING:
    from modellint.watching.record import Recorder, Site

CLIPS = ("clip_grad_norm_", "clip_grad_value_")
CLASSIFICATION = ("nll_loss", "cross_entropy")
REGRESSION = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
# autograd nodes between a (log-)softmax and the loss that keep its meaning
_PASS_THROUGH = ("ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0", "LogBackward0")
_SOFTMAX = {"LogSoftmaxBackward0": "log_softmax", "SoftmaxBackward0": "softmax"}


@record
class Clip:
    """One call of a clipping function: the gradients it left, to tell whether the step
    that follows applies them."""

    function: str
    site: Site | None
    backwards: int  # backward calls before it
    grads: dict[int, tuple[Any, Any, int]]  # id(param) -> (param, weakref to its grad, version)


@record
class ClipRecord:
    """Per optimizer: steps that came after a clip of its parameters, and those whose
    gradients a `backward()` after the clip had changed."""

    checked: int = 0
    late: list[tuple[Clip, Site | None]] = field(default_factory=list)  # (clip, backward after)


@record
class LossMisuse:
    function: str
    site: Site | None
    detail: dict[str, Any]
    calls: int = 1


@record
class NumericsRecord:
    pending: list[Clip] = field(default_factory=list)
    clips: dict[int, ClipRecord] = field(default_factory=dict)  # id(optimizer) -> record
    # (code, site) -> the first misuse seen there, counted
    losses: dict[tuple[str, Any], LossMisuse] = field(default_factory=dict)


def install(recorder: Recorder) -> list[Any]:
    """Wrap the clipping and loss functions for `recorder`; the undo callables."""
    import torch.nn.functional as functional
    import torch.nn.utils as nn_utils
    from torch.nn.utils import clip_grad
    from torch.optim import optimizer as optimizer_mod

    numerics = recorder.numerics
    undo: list[Any] = []

    def replace(owner, name, wrapper) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        setattr(owner, name, wrapper(original, name))
        undo.append(lambda: setattr(owner, name, original))

    def clip_wrapper(original, name):
        def clip(parameters, *args, **kwargs):
            if not recorder._installed:
                return original(parameters, *args, **kwargs)
            params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            if not params and isinstance(parameters, types.GeneratorType):
                warnings.warn("`parameters` is an empty generator, no gradient clipping will "
                              "occur.", stacklevel=2)
            result = original(params, *args, **kwargs)
            _clipped(recorder, name, params)
            return result
        clip.__wrapped__ = original
        return clip

    def loss_wrapper(original, name):
        check = _check_classification if name in CLASSIFICATION else _check_regression

        def loss(input, target, *args, **kwargs):
            if not recorder._installed or not isinstance(input, torch.Tensor) \
                    or not isinstance(target, torch.Tensor):
                return original(input, target, *args, **kwargs)
            found = check(input, target)
            if found is None:
                return original(input, target, *args, **kwargs)
            code, detail = found
            site = recorder.site()
            key = (code, site)
            if key in numerics.losses:
                numerics.losses[key].calls += 1
            else:
                numerics.losses[key] = LossMisuse(name, site, detail)
            if code == "ML327":
                warnings.warn(f"Using a target size ({target.size()}) that is different to the "
                              f"input size ({input.size()}). This will likely lead to incorrect "
                              f"results due to broadcasting. Please ensure they have the same "
                              f"size.", stacklevel=2)
                input, target = torch.broadcast_tensors(input, target)
            return original(input, target, *args, **kwargs)
        loss.__wrapped__ = original
        return loss

    for name in CLIPS:
        for owner in (clip_grad, nn_utils):
            replace(owner, name, clip_wrapper)
    for name in (*CLASSIFICATION, *REGRESSION):
        replace(functional, name, loss_wrapper)
    undo.append(optimizer_mod.register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: _step(recorder, opt)).remove)
    return undo


def _clipped(recorder: Recorder, function: str, params: list[Any]) -> None:
    grads = {}
    for p in params:
        if isinstance(p, torch.Tensor):
            g = p.grad
            grads[id(p)] = (p, None if g is None else weakref.ref(g),
                            -1 if g is None else g._version)
    numerics = recorder.numerics
    numerics.pending.append(Clip(function, recorder.site(), len(recorder.backward_sites), grads))
    if len(numerics.pending) > 64:  # clips no step ever followed (a clip-only helper)
        del numerics.pending[:32]


def _changed(entry: tuple[Any, Any, int]) -> bool:
    p, ref, version = entry
    g = p.grad
    if g is None:
        return False
    return ref is None or ref() is not g or g._version != version


def _step(recorder: Recorder, opt) -> None:
    """At an optimizer step: did a `backward()` after the last clip of its parameters
    change the gradients the clip left?"""
    numerics = recorder.numerics
    if not numerics.pending or not recorder._installed:
        return
    ids = {id(p) for group in opt.param_groups for p in group["params"]}
    mine = [clip for clip in numerics.pending if ids & clip.grads.keys()]
    if not mine:
        return
    numerics.pending = [clip for clip in numerics.pending if clip not in mine]
    last = mine[-1]
    rec = numerics.clips.setdefault(id(opt), ClipRecord())
    rec.checked += 1
    if len(recorder.backward_sites) > last.backwards and any(
            _changed(entry) for key, entry in last.grads.items() if key in ids):
        rec.late.append((last, recorder.backward_sites[last.backwards]))


def _check_classification(input, target) -> tuple[str, dict[str, Any]] | None:
    """ML326: the loss's input is a (log-)softmax over dim 0, the batch, of a batch with
    classes on dim 1."""
    if input.dim() < 2 or input.shape[0] < 2:
        return None
    node, through_view = input.grad_fn, False
    for _ in range(4):
        if node is None or type(node).__name__ not in _PASS_THROUGH:
            break
        through_view = through_view or type(node).__name__ != "LogBackward0"
        node = node.next_functions[0][0] if node.next_functions else None
    kind = _SOFTMAX.get(type(node).__name__) if node is not None else None
    if kind is None:
        return None
    try:
        dim = int(node._saved_dim)
        shape = tuple(node._saved_result.shape)
    except (AttributeError, RuntimeError):
        return None
    if dim >= 2 ** 63:  # a negative dim, saved unsigned
        dim -= 2 ** 64
    if not shape or dim % len(shape) != 0 or shape[0] < 2:
        return None
    classes = input.shape[1]
    # a square (N, N) input is a similarity matrix (CLIP-style contrastive losses): over dim 0
    # with the diagonal as targets is the other direction of the loss, on purpose
    if shape[0] == classes or (through_view and shape[-1] != classes):
        return None
    return "ML326", {"kind": kind, "shape": shape, "classes": classes}


def _check_regression(input, target) -> tuple[str, dict[str, Any]] | None:
    """ML327: input and target of different shapes that broadcast to a larger one."""
    if input.shape == target.shape:
        return None
    try:
        broadcast = torch.broadcast_shapes(input.shape, target.shape)
    except RuntimeError:
        return None  # torch raises its own error
    if broadcast.numel() <= max(input.numel(), target.numel()):
        return None
    return "ML327", {"input": tuple(input.shape), "target": tuple(target.shape),
                     "broadcast": tuple(broadcast)}
