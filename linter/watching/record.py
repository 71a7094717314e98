"""The instrumentation of a watched training run and the record it keeps.

`Recorder.install()` patches or hooks, through public hooks where torch has them:
optimizer steps (`register_optimizer_step_pre_hook`), every module call (global forward
pre-hook and hook: the top-level calls are the model's forwards, their mode and grad mode),
`Module.train` (where a model is put in eval mode), `torch.autograd.backward` (the loss, its
graph, whether gradients were cleared), learning-rate schedulers' `step`, DataLoader
iteration (each epoch cut after `batches_per_epoch` batches) and `DistributedSampler`; and,
through `modellint.watching.numerics`, gradient clipping and the losses' inputs.
`uninstall()` undoes all of it. It holds no rule logic: the run checks
(`modellint.rule.RunCheck`) read the record after the run and report through
`Recorder.report`.

Everything recorded names the user's source line: the innermost frame outside torch, the
standard library, site-packages and modellint.
"""

from __future__ import annotations

import linecache
import math
import os
import re
import sys
import time
import warnings
import weakref
from dataclasses import field
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from modellint.finding import RawFinding
from modellint.records import record
from modellint.runtime.phases import first_line
from modellint.runtime.sources import UserCode
from modellint.watching import numerics
from modellint.watching.numerics import NumericsRecord

if TYPE_CHECKING:
    from torch.autograd.graph import Node

Site = tuple[str, int, str]


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modellint_file(filename: str) -> bool:
    """A file of modellint itself (its frames are never the user's)."""
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep)


class BudgetSpent(BaseException):  # noqa: N818 - not an error: the run's budget is spent
    """Raised (in-process runs) when the step budget is spent; `watch()` swallows it."""


class _Sentinel:
    """Lives as long as the autograd node it is attached to (in the node's `metadata`)."""

    __slots__ = ("__weakref__",)


@record
class OptimizerRecord:
    optimizer: Any
    index: int
    created: Site | None = None
    steps: int = 0
    # `scaler.step(opt)` calls that GradScaler skipped (inf/NaN in the scaled gradients): the
    # script asked for a step, in the right order, and mixed precision dropped it
    skipped: int = 0
    step_sites: list[Site | None] = field(default_factory=list)  # None: outside the user's code
    # backward passes since the last step, and whether its gradients were seen cleared
    backwards_since_step: int = 0
    cleared_since_step: bool = True
    # steps taken on gradients accumulated over an earlier step: (step number, site)
    uncleared_steps: list[tuple[int, Site | None]] = field(default_factory=list)
    lrs: list[list[float]] = field(default_factory=list)  # per step, per group
    grad_norms: list[float] = field(default_factory=list)
    sample: list[Any] = field(default_factory=list)  # a few parameters to tell cleared grads
    updated: set[int] = field(default_factory=set)  # ids of params given a nonzero grad, lr > 0
    epochs_at_step: list[Any] = field(default_factory=list)
    # `step(closure)` (LBFGS): closure evaluations after the first of a step, and the
    # backward sites of those that ran on gradients not cleared since the previous evaluation
    closure_calls: int = 0
    uncleared_closure_calls: list[Site | None] = field(default_factory=list)
    # observing: each group's options at the first step (a scheduler may cycle momentum)
    first_options: list[dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        return type(self.optimizer).__name__

    def params(self) -> list[Any]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]


@record
class SchedulerRecord:
    scheduler: Any
    created: Site | None = None
    # each user call of step(): (site, steps of its optimizer before it, epoch key)
    steps: list[tuple[Site | None, int, Any]] = field(default_factory=list)
    explicit: bool = False  # step(epoch) was called: the script sets the position itself
    # the turns of the epoch loop around its first step (`for epoch in range(90)`), if known
    epochs_planned: int | None = None

    @property
    def name(self) -> str:
        return type(self.scheduler).__name__


@record
class ManualRecord:
    """Training without an optimizer step (`p.data.add_(-lr * p.grad)` over
    `model.parameters()`): a few trainable parameters with gradients, whose values are compared
    at each look (each top-level forward and backward) while no optimizer has stepped; a change
    is one update by hand."""

    sample: list[Any] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    models: int = 0  # the watched models when the sample was taken
    updates: int = 0
    since_backward: bool = False  # an update since the last backward
    # backward sites of updates made on gradients never cleared since the previous backward
    uncleared: list[Site | None] = field(default_factory=list)


@record
class Forward:
    """One top-level call of a model with parameters."""

    training: bool
    grad: bool
    site: Site | None
    step: int  # optimizer steps taken before it
    order: int = 0  # among the forwards and eval() calls of the run
    reached: list[bool] = field(default_factory=lambda: [False])  # a gradient reached its output
    needs_grad: bool = False  # its output requires a gradient


@record
class ModelRecord:
    model: Any
    name: str
    mode_dependent: bool
    forwards: list[Forward] = field(default_factory=list)
    # each `eval()` of the model: (site, steps taken before it, order)
    eval_sites: list[tuple[Site | None, int, int]] = field(default_factory=list)
    # observing (a baseline): (phase, dtype, device) of the first tensor of each top-level
    # call -> the first line that made such a call
    inputs: dict[tuple[str, str, str], Site | None] = field(default_factory=dict)


@record
class LoaderRecord:
    loader: Any
    epochs: int = 0
    length: int | None = None
    site: Site | None = None
    batches: int = 0
    # passes over it: iterations a loop ran over, or that gave more than one batch (not a
    # `next(iter(loader))` that peeks at one); the epochs of the train loader
    passes: int = 0


@record
class SamplerRecord:
    sampler: Any
    epochs_seen: list[int] = field(default_factory=list)
    site: Site | None = None  # where it was first iterated (the batch loop)
    epoch_loop: Site | None = None  # the loop around that, if any: where set_epoch belongs


@record
class NonFinite:
    what: str  # "loss" or "gradient"
    step: int
    site: Site | None
    module: str | None
    detail: str


class LayerBands:
    """Observing: per layer (the module owning parameters directly), the lowest and highest
    gradient norm and update/weight ratio (the norm of a step's change over the weight's norm)
    over the sampled steps: the first 10, then every 10th (the copies of the weights cost a
    step's memory). Norms are of the layer's parameters together (weight and bias)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.grad: dict[int, list[float]] = {}  # module id -> [low, high]
        self.update: dict[int, list[float]] = {}
        self._owner: dict[int, int] = {}  # parameter id -> module id
        self._models = -1
        self._before: list[tuple[Any, Any]] = []  # (parameter, its copy before the step)

    @staticmethod
    def sampled(steps: int) -> bool:
        return steps < 10 or steps % 10 == 0

    def _owners(self) -> dict[int, int]:
        if self._models != len(self.recorder.models):
            self._models = len(self.recorder.models)
            for rec in self.recorder.models.values():
                for sub in rec.model.modules():
                    for p in sub.parameters(recurse=False):
                        self._owner.setdefault(id(p), id(sub))
        return self._owner

    def before_step(self, rec: OptimizerRecord) -> None:
        owners = self._owners()
        params = [p for p in rec.params() if p.grad is not None and not p.grad.is_sparse
                  and id(p) in owners]
        if not params:
            return
        with torch.no_grad():
            squares: dict[int, float] = {}
            for p, norm in zip(params, _norms([p.grad for p in params]), strict=True):
                layer = owners[id(p)]
                squares[layer] = squares.get(layer, 0.0) + norm * norm
            for layer, square in squares.items():
                _widen(self.grad, layer, math.sqrt(square))
            self._before = [(p, p.detach().clone()) for p in params]

    def after_step(self, rec: OptimizerRecord) -> None:
        if not self._before:
            return
        owners = self._owners()
        weights: dict[int, float] = {}
        changes: dict[int, float] = {}
        kept = [(p, old) for p, old in self._before if p.shape == old.shape]
        with torch.no_grad():
            olds = [old for _, old in kept]
            deltas: list[Any]
            try:
                deltas = list(torch._foreach_sub([p.detach() for p, _ in kept], olds))
            except Exception:  # noqa: BLE001 - mixed devices or dtypes: one at a time
                deltas = [p.detach() - old for p, old in kept]
            for (p, _), weight, change in zip(kept, _norms(olds), _norms(deltas), strict=True):
                layer = owners[id(p)]
                weights[layer] = weights.get(layer, 0.0) + weight * weight
                changes[layer] = changes.get(layer, 0.0) + change * change
        for layer, weight in weights.items():
            if weight > 0:
                _widen(self.update, layer, math.sqrt(changes[layer] / weight))
        self._before = []


def _norms(tensors: list[Any]) -> list[float]:
    """The norms of `tensors`, read back to the host at once (one copy, not one per tensor)."""
    if not tensors:
        return []
    try:
        norms = torch._foreach_norm(tensors)
        return torch.stack([n.float() for n in norms]).cpu().tolist()
    except Exception:  # noqa: BLE001 - mixed devices or dtypes: one at a time
        return [float(t.float().norm()) for t in tensors]


def _widen(bands: dict[int, list[float]], key: int, value: float) -> None:
    if not math.isfinite(value):
        return
    band = bands.get(key)
    if band is None:
        bands[key] = [value, value]
    else:
        band[0], band[1] = min(band[0], value), max(band[1], value)


class Recorder:
    def __init__(self, *, steps: int | None = None, batches_per_epoch: int | None = None,
                 on_budget=None, observe: bool = False) -> None:
        self.budget = steps
        # a baseline is recorded or compared (`modellint.watching.baseline`): what it needs
        # beyond the checks is kept (per-layer bands, inputs, where parameters were changed)
        self.observe = observe
        self.layers = LayerBands(self)
        self.frozen_sites: dict[int, Site | None] = {}  # parameter id -> its requires_grad_(False)
        self.cast_sites: dict[int, Site | None] = {}  # parameter id -> its .to()/.half() call
        self._applying = 0
        self.batches_per_epoch = batches_per_epoch
        self.on_budget = on_budget
        self.user = UserCode()
        self.total_steps = 0
        self.optimizers: dict[int, OptimizerRecord] = {}
        self.schedulers: dict[int, SchedulerRecord] = {}
        self.models: dict[int, ModelRecord] = {}
        self.loaders: dict[int, LoaderRecord] = {}
        self.samplers: dict[int, SamplerRecord] = {}
        self.manual = ManualRecord()
        # backward passes since the last step (an optimizer's or by hand): an accumulation or
        # a step that never comes
        self.backwards_since_step = 0
        self._closure: tuple[OptimizerRecord, int] | None = None  # the closure being evaluated
        self._stepping = False  # inside an optimizer's step
        self.losses: list[float] = []
        self.backward_sites: list[Site | None] = []
        self.loss_graphs: list[tuple[int, weakref.ref]] = []  # (step, sentinel of its graph)
        self.live_graphs: list[int] = []  # per step: earlier steps' losses still holding graphs
        self.graph_holder: str | None = None  # the user's variable that holds them
        self.graph_holder_site: Site | None = None  # the line that adds a loss to it
        # where a helper object (an AverageMeter) adds the loss to its attribute, when the
        # holder is one: `self.sum += val * n` in its `update`
        self.graph_holder_inner: Site | None = None
        # submodules assigned over ones whose parameters an optimizer holds:
        # (site of the assignment, attribute name, ids of the old module's parameters)
        self.replaced: list[tuple[Site | None, str, set[int]]] = []
        # submodules of a model holding parameters no gradient reached at an optimizer's
        # first step: their id -> path in the model, until their next call is seen
        self._ungraded: dict[int, str] = {}
        # path of such a submodule -> the user's line that called it
        self.ungraded_calls: dict[str, Site | None] = {}
        self.non_finite: NonFinite | None = None
        self.crash: dict[str, Any] | None = None
        self.grad_seen: set[int] = set()
        # under torch.distributed: per step, a sum of each trainable parameter, to compare ranks
        self.rank_prints: list[dict[str, Any]] = []
        self.stopped: str | None = None
        # set by another thread (the timeout): the run stops at the next hook it reaches
        self.stop_requested: str | None = None
        self.findings: list[RawFinding] = []
        self.notes: list[str] = []
        self.started = time.monotonic()
        self._depth = 0
        self._order = 0
        self._leaf_outputs: list[tuple[str, Any]] = []
        # GradScaler.scale outputs -> the loss they scaled, whose value is the real loss
        self._scaled: dict[int, tuple[weakref.ref, float]] = {}
        self._names: dict[int, str] = {}  # module id -> path in its model (for non-finite)
        self._last_loader: LoaderRecord | None = None
        self._train_loader: LoaderRecord | None = None
        self._undo: list[Any] = []
        self._installed = False
        self.probe_dir: str | None = None
        self.probed: dict[str, Any] = {}
        self.numerics = NumericsRecord()  # gradient clipping and the losses' inputs

    # -- reporting ------------------------------------------------------------------------
    def report(self, code: str, message: str, site: Site | None,
               related: list[tuple[Site | None, str]] | None = None) -> None:
        """A finding at `site`; `related`: (site, what it is) of the other lines of the
        mistake, each named at the end of the message and in SARIF's relatedLocations. The
        same finding twice is shown once (by the pipeline: `modellint.pipeline`)."""
        file, line = (site[0], site[1]) if site else (None, 1)
        self.findings.append(RawFinding(code, message, file, line, tuple(
            (other[0], other[1], what) for other, what in related or ()
            if other and (other[0], other[1]) != (file, line))))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def site(self, depth: int = 2) -> Site | None:
        return self.user.innermost_frame(sys._getframe(depth))

    # -- install / uninstall --------------------------------------------------------------
    def install(self) -> Recorder:
        if self._installed:
            return self
        from torch.amp.grad_scaler import GradScaler
        from torch.nn.modules import module as module_mod
        from torch.optim import lr_scheduler
        from torch.optim import optimizer as optimizer_mod
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        self._undo.append(optimizer_mod.register_optimizer_step_pre_hook(self._step_pre).remove)
        self._undo.append(optimizer_mod.register_optimizer_step_post_hook(self._step_post).remove)
        self._undo.append(module_mod.register_module_forward_pre_hook(self._forward_pre).remove)
        self._undo.append(module_mod.register_module_forward_hook(
            self._forward_post, always_call=True).remove)
        recorder = self

        def patch(owner, name, make):
            original = owner.__dict__[name]
            setattr(owner, name, make(original))
            self._undo.append(lambda: setattr(owner, name, original))

        def opt_init(original):
            def __init__(opt, *args, **kwargs):
                original(opt, *args, **kwargs)
                if recorder._installed and type(opt).__init__ is not None:
                    rec = recorder._optimizer(opt)
                    if rec.created is None:
                        rec.created = recorder.site()
            return __init__

        patch(torch.optim.Optimizer, "__init__", opt_init)

        def train(original):
            def train(module, mode=True):
                if recorder._installed and not mode and id(module) in recorder.models:
                    rec = recorder.models[id(module)]
                    recorder._order += 1
                    rec.eval_sites.append((recorder.site(), recorder.total_steps,
                                           recorder._order))
                return original(module, mode)
            return train

        patch(nn.Module, "train", train)

        def setattr_(original):
            def __setattr__(module, name, value):
                if recorder._installed and recorder.optimizers and isinstance(value, nn.Module):
                    old = module.__dict__.get("_modules", {}).get(name)
                    if old is not None and old is not value:
                        recorder._replacing(name, old)
                return original(module, name, value)
            return __setattr__

        patch(nn.Module, "__setattr__", setattr_)
        if self.observe:
            patch(nn.Module, "requires_grad_", self._requires_grad_patch)
            patch(nn.Module, "_apply", self._apply_patch)

        def backward(original):
            def backward(tensors, *args, **kwargs):
                if recorder._installed:
                    recorder._backward(tensors, recorder.site())
                return original(tensors, *args, **kwargs)
            backward.__wrapped__ = original
            return backward

        original_backward = torch.autograd.backward
        torch.autograd.backward = backward(original_backward)
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))

        for cls in {lr_scheduler.LRScheduler, lr_scheduler.ReduceLROnPlateau}:
            patch(cls, "step", self._scheduler_step_patch)
        patch(GradScaler, "scale", self._scaler_scale_patch)
        patch(GradScaler, "step", self._scaler_step_patch)
        patch(DataLoader, "__iter__", self._loader_iter_patch)
        patch(DistributedSampler, "__iter__", self._sampler_iter_patch)
        self._undo.extend(numerics.install(self))
        patch(warnings, "showwarning", self._showwarning_patch)
        self._installed = True
        return self

    def uninstall(self) -> None:
        self._installed = False
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception:  # noqa: BLE001 - undo the rest
                pass

    # -- optimizers -----------------------------------------------------------------------
    def _optimizer(self, opt) -> OptimizerRecord:
        rec = self.optimizers.get(id(opt))
        if rec is None or rec.optimizer is not opt:
            rec = OptimizerRecord(opt, len(self.optimizers))
            self.optimizers[id(opt)] = rec
        return rec

    def _replacing(self, name: str, old) -> None:
        """`model.fc = nn.Linear(...)` over a module whose parameters an optimizer holds."""
        held = {id(p) for rec in self.optimizers.values() for p in rec.params()}
        ids = {id(p) for p in old.parameters()}
        if ids & held:
            self.replaced.append((self.site(3), name, ids))

    def _step_pre(self, opt, args, kwargs) -> tuple[tuple, dict] | None:
        if self.budget is not None and self.total_steps >= self.budget:
            self.stop("steps")
        if self.stop_requested:
            self.stop(self.stop_requested)
        site = self.site()
        rec = self._optimizer(opt)
        if rec.created is None:
            rec.created = site
        if rec.steps and rec.backwards_since_step and not rec.cleared_since_step:
            rec.uncleared_steps.append((rec.steps + 1, site))
        rec.backwards_since_step = 0
        rec.cleared_since_step = False
        lrs = []
        for group in opt.param_groups:
            try:
                lrs.append(float(group.get("lr", 0.0)))
            except (TypeError, ValueError):
                lrs.append(float("nan"))
        rec.lrs.append(lrs)
        rec.step_sites.append(site)
        self._train_loader = self._last_loader
        rec.epochs_at_step.append(self._epoch_key())
        grads = []
        with torch.no_grad():
            for group, lr in zip(opt.param_groups, lrs, strict=False):
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    grads.append(g)
                    if id(p) not in rec.updated and lr > 0 and not g.is_sparse:
                        if bool(g.ne(0).any()):
                            rec.updated.add(id(p))
            norm = float("nan")
            if grads:
                try:
                    norm = float(torch.nn.utils.get_total_norm(
                        [g for g in grads if not g.is_sparse], foreach=True))
                except Exception:  # noqa: BLE001 - mixed devices, sparse: no norm
                    norm = float("nan")
            rec.grad_norms.append(norm)
            if grads and self.non_finite is None and not math.isfinite(norm):
                self._non_finite_grad(opt, rec)
        sample = [p for p in rec.params() if p.grad is not None][:4]
        if sample:
            rec.sample = sample
        if self.observe and rec.first_options is None:
            from modellint.watching.baseline import group_options

            rec.first_options = [group_options(group) for group in opt.param_groups]
        if self.observe and self.layers.sampled(self.total_steps):
            self.layers.before_step(rec)
        self._stepping = True
        return self._watch_closure(rec, args, kwargs)

    def _watch_closure(self, rec: OptimizerRecord, args, kwargs):
        """`step(closure)`: the step's arguments with the closure wrapped, so that the first
        backward of each evaluation after the first can tell whether the gradients were
        cleared since the previous one (None when the step has no closure)."""
        # `args` begins with the optimizer itself
        if len(args) > 1 and callable(args[1]):
            closure, place = args[1], 1
        elif callable(kwargs.get("closure")):
            closure, place = kwargs["closure"], 0
        else:
            return None
        recorder, calls = self, [0]

        def watched_closure(*a, **k):
            calls[0] += 1
            recorder._closure = (rec, calls[0])
            try:
                return closure(*a, **k)
            finally:
                recorder._closure = None
                if not rec.sample:
                    rec.sample = [p for p in rec.params() if p.grad is not None][:4]

        if not place:
            return args, {**kwargs, "closure": watched_closure}
        return (args[0], watched_closure, *args[2:]), kwargs

    def _step_post(self, opt, args, kwargs) -> None:
        rec = self._optimizer(opt)
        rec.steps += 1
        if self.observe:
            self.layers.after_step(rec)
        self._stepped()
        if rec.steps == 1:
            self._watch_ungraded(rec)
        if len(self.rank_prints) < 5 and _distributed():
            self._fingerprint_params(opt)
        if self.total_steps <= 3:  # which trainable parameters get gradients at all
            for model in self.models.values():
                for p in model.model.parameters():
                    if p.requires_grad and p.grad is not None:
                        self.grad_seen.add(id(p))

    def _stepped(self) -> None:
        """A step taken, by an optimizer or by hand."""
        self.total_steps += 1
        self.backwards_since_step = 0
        self._closure = None
        self._stepping = False
        self._count_live_graphs()

    def _watch_ungraded(self, rec: OptimizerRecord) -> None:
        """The submodules owning parameters `rec` holds that its first step found without a
        gradient: their next call names the line where the gradient stops (ML320)."""
        lrs = rec.lrs[-1] if rec.lrs else []
        waiting = {id(p) for group, lr in zip(rec.optimizer.param_groups, lrs, strict=False)
                   if lr > 0 for p in group["params"]
                   if p.requires_grad and id(p) not in rec.updated}
        if not waiting:
            return
        for model in self.models.values():
            for path, sub in model.model.named_modules():
                if path and any(id(p) in waiting for p in sub.parameters(recurse=False)):
                    self._ungraded.setdefault(id(sub), path)

    def _fingerprint_params(self, opt) -> None:
        rec = self._optimizer(opt)
        site = rec.step_sites[-1] if rec.step_sites else None
        sums = {}
        with torch.no_grad():
            for model in self.models.values():
                for name, p in model.model.named_parameters():
                    # a sharded parameter (FSDP2's DTensor) holds each rank's own shard
                    if p.requires_grad and name not in sums and not _sharded(p):
                        sums[f"{model.name}.{name}"] = float(p.detach().double().sum())
        calls = {model.name: model.forwards[0].site for model in self.models.values()
                 if model.forwards and model.forwards[0].site}
        self.rank_prints.append({"step": self.total_steps, "site": site, "params": sums,
                                 "calls": calls})

    def stop(self, reason: str) -> None:
        self.stopped = reason
        if self.on_budget is not None:
            self.on_budget(reason)
        raise BudgetSpent(reason)

    # -- backward -------------------------------------------------------------------------
    def _backward(self, tensors, site: Site | None) -> None:
        roots = [tensors] if isinstance(tensors, torch.Tensor) else [
            t for t in (tensors or ()) if isinstance(t, torch.Tensor)]
        if (self.budget is not None and not self.total_steps
                and self.backwards_since_step >= self.no_step_limit()):
            self.stop("steps")
        self.backward_sites.append(site)
        for rec in self.optimizers.values():
            rec.backwards_since_step += 1
            if not rec.cleared_since_step and _cleared(rec.sample):
                rec.cleared_since_step = True
        if self._closure is not None:  # the first backward of this evaluation of the closure
            rec, call = self._closure
            self._closure = None
            if call > 1:
                rec.closure_calls += 1
                if not _cleared(rec.sample):
                    rec.uncleared_closure_calls.append(site)
        self._look_for_manual_update()
        manual = self.manual
        if manual.since_backward:
            manual.since_backward = False
            if not _cleared(manual.sample):
                manual.uncleared.append(site)
        self.backwards_since_step += 1
        if not roots:
            return
        root = roots[0]
        scaled = self._scaled.pop(id(root), None)
        if scaled is not None and scaled[0]() is root:
            # an overflow of the scaled loss is GradScaler's to handle (it skips the step)
            self.losses.append(scaled[1])
            if self.non_finite is None and not math.isfinite(scaled[1]):
                self._non_finite_loss(scaled[1], site)
        elif root.numel() == 1:
            with torch.no_grad():
                value = float(root.detach().float())
            self.losses.append(value)
            if self.non_finite is None and not math.isfinite(value):
                self._non_finite_loss(value, site)
        # kept only to name the module of a non-finite loss: let the backward free them
        self._leaf_outputs = []
        if root.grad_fn is not None:
            try:
                sentinel = _Sentinel()
                # torch's Node declares metadata a method; grad_fn objects hold a dict
                root.grad_fn.metadata["modellint"] = sentinel  # type: ignore[index]
                self.loss_graphs.append((self.total_steps, weakref.ref(sentinel)))
            except Exception:  # noqa: BLE001 - a node without metadata
                pass
        if len(self.loss_graphs) > 64:
            self.loss_graphs = [(s, r) for s, r in self.loss_graphs if r() is not None][-64:]

    def no_step_limit(self) -> int:
        """Backward passes without any step after which a run stops (an accumulation over
        more micro-batches than this is taken for a step that never comes)."""
        return max(64, 4 * (self.budget or 0))

    def accumulating(self, extra: int) -> bool:
        """Whether backward passes since the last step wait for one (gradient accumulation
        over more batches than `batches_per_epoch`): the epoch is not cut then, for up to
        `no_step_limit()` more batches."""
        self._look_for_manual_update()
        return self.backwards_since_step > 0 and extra < self.no_step_limit()

    def _look_for_manual_update(self) -> None:
        """While no optimizer has stepped: whether the sampled trainable parameters changed
        since the last look (an update by hand), which counts as a step."""
        manual = self.manual
        # an optimizer trains (or is taking its step, LBFGS's closure): nothing to look for
        if self.total_steps > manual.updates or self._stepping:
            return
        if manual.models != len(self.models):  # each model's first and last trainable ones
            manual.models = len(self.models)
            manual.sample = []
            for model in self.models.values():
                # a parameter in shared memory (Hogwild) changes with the other processes'
                # steps: not an update by hand in this one
                trainable = [p for p in model.model.parameters()
                             if p.requires_grad and not p.is_shared()]
                for p in trainable[:1] + trainable[-1:]:
                    if all(p is not q for q in manual.sample):
                        manual.sample.append(p)
            manual.sample = manual.sample[:8]
            manual.values = [_head(p) for p in manual.sample]
            return
        with torch.no_grad():
            now = [_head(p) for p in manual.sample]
            changed = any(not torch.equal(a, b) for a, b in zip(now, manual.values, strict=True))
        manual.values = now
        if not changed:
            return
        if self.budget is not None and self.total_steps >= self.budget:
            self.stop("steps")
        manual.updates += 1
        manual.since_backward = True
        self._train_loader = self._last_loader
        self._stepped()

    def _count_live_graphs(self) -> None:
        step = self.total_steps
        self.live_graphs.append(sum(1 for s, r in self.loss_graphs
                                    if s < step - 1 and r() is not None))
        if self.live_graphs[-1] >= 3 and self.graph_holder is None:
            found = self._find_graph_holder()
            if found is not None:
                self.graph_holder, frame = found
                self.graph_holder_site = _accumulation_site(frame.f_code, self.graph_holder)
                owner, _, attribute = self.graph_holder.partition(".")
                if attribute:  # kept by a helper object: where its method adds to it
                    helper = type(frame.f_locals.get(owner))
                    sites = (_accumulation_site(code, f"self.{attribute}")
                             for code in _methods(helper))
                    self.graph_holder_inner = next((s for s in sites if s is not None), None)

    def _find_graph_holder(self) -> tuple[str, FrameType] | None:
        """The name of the user's variable that keeps earlier losses' graphs alive (a tensor
        whose graph reaches a loss's node, or a list or dict of such tensors; `meter.sum`
        for such an attribute of an object of the user's code), with the frame of the code
        it lives in."""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if self.user(frame.f_code.co_filename):
                for name, value in list(frame.f_locals.items()):
                    if _keeps_losses(value):
                        return name, frame
                    # an object of the user's code (an AverageMeter) keeping them in an
                    # attribute: `meter.update(loss)` adds to `self.sum`
                    if not isinstance(value, (torch.Tensor, list, tuple, dict, nn.Module,
                                              type)) and self._user_object(value):
                        try:
                            attributes = dict(object.__getattribute__(value, "__dict__"))
                        except (AttributeError, TypeError):
                            continue
                        for attribute, held in attributes.items():
                            if _keeps_losses(held):
                                return f"{name}.{attribute}", frame
            frame = frame.f_back
        return None

    def _user_object(self, value) -> bool:
        module = sys.modules.get(type(value).__module__)
        return bool(self.user(getattr(module, "__file__", None) or ""))

    def _non_finite_loss(self, value: float, site: Site | None) -> None:
        module = None
        for name, out in self._leaf_outputs:
            try:
                if not bool(torch.isfinite(out).all()):
                    module = name
                    break
            except Exception:  # noqa: BLE001
                continue
        detail = repr(value)
        if module is None and self._leaf_outputs:
            detail += " while every module's output was finite (the loss computation overflowed)"
        self.non_finite = NonFinite("loss", self.total_steps + 1, site, module, detail)

    def _non_finite_grad(self, opt, rec: OptimizerRecord) -> None:
        names = self._param_names()
        bad = None
        for p in rec.params():
            if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
                bad = names.get(id(p), "")
                break
        if bad is None:  # the norm failed for another reason (mixed devices)
            return
        site = self.backward_sites[-1] if self.backward_sites else None
        module = bad.rpartition(".")[0] if bad else None
        self.non_finite = NonFinite("gradient", self.total_steps + 1, site, module or None,
                                    f"the gradient of `{bad}`" if bad else "a gradient")

    def _param_names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        for rec in self.models.values():
            for name, p in rec.model.named_parameters():
                names.setdefault(id(p), name)
        return names

    # -- forwards -------------------------------------------------------------------------
    def _forward_pre(self, module, args) -> None:
        if self.stop_requested and self._depth == 0:
            self.stop(self.stop_requested)
        self._depth += 1
        if self._depth != 1:
            return
        self._leaf_outputs = []
        rec = self.models.get(id(module))
        if rec is None or rec.model is not module:
            if not any(True for _ in module.parameters()):
                return
            rec = ModelRecord(module, type(module).__name__, _mode_dependent(module))
            self.models[id(module)] = rec
            for name, sub in module.named_modules():
                self._names.setdefault(id(sub), name)
        self._look_for_manual_update()
        grad = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        if self.observe:
            tensor = _first_tensor(args)
            if tensor is not None:
                key = ("grad" if grad else "no_grad", str(tensor.dtype), tensor.device.type)
                if key not in rec.inputs:
                    rec.inputs[key] = self.site()
        self._order += 1
        rec.forwards.append(Forward(module.training, grad, self.site(), self.total_steps,
                                    self._order))
        if len(rec.forwards) > 4096:
            del rec.forwards[1024:2048]

    def _forward_post(self, module, args, output) -> None:
        self._depth = max(self._depth - 1, 0)
        if self._depth == 0:
            rec = self.models.get(id(module))
            if rec is not None and rec.model is module and self.non_finite is None:
                tensor = _first_tensor(output)
                if tensor is not None and tensor.is_floating_point():
                    self._leaf_outputs.append((f"{rec.name}'s own forward", tensor))
            if rec is not None and rec.model is module and rec.forwards:
                forward = rec.forwards[-1]
                tensor = _first_tensor(output)
                if tensor is not None and tensor.requires_grad and forward.grad:
                    forward.needs_grad = True
                    reached = forward.reached

                    def hook(grad, reached=reached):
                        reached[0] = True

                    try:
                        tensor.register_hook(hook)
                    except RuntimeError:
                        pass
            return
        if self._ungraded and id(module) in self._ungraded:
            path = self._ungraded.pop(id(module))
            self.ungraded_calls.setdefault(path, self.site())
        if self.non_finite is None and torch.is_grad_enabled() and not any(
                True for _ in module.children()):
            tensor = _first_tensor(output)
            if tensor is not None and tensor.is_floating_point():
                self._leaf_outputs.append((self._names.get(id(module), type(module).__name__),
                                           tensor))

    # -- where parameters were frozen or cast (observing) -----------------------------------
    def _requires_grad_patch(self, original):
        recorder = self

        def requires_grad_(module, requires_grad=True):
            if recorder._installed and not requires_grad:
                site = recorder.site()
                for p in module.parameters():
                    recorder.frozen_sites.setdefault(id(p), site)
            return original(module, requires_grad)
        return requires_grad_

    def _apply_patch(self, original):
        recorder = self

        def _apply(module, fn, *args, **kwargs):
            recorder._applying += 1
            try:
                result = original(module, fn, *args, **kwargs)
            finally:
                recorder._applying -= 1
            if recorder._installed and not recorder._applying:  # the user's own call
                site = recorder.site()
                for p in module.parameters():
                    recorder.cast_sites[id(p)] = site
            return result
        return _apply

    # -- schedulers -----------------------------------------------------------------------
    def _scheduler_step_patch(self, original):
        from torch.optim import lr_scheduler

        recorder = self

        def step(scheduler, *args, **kwargs):
            if recorder._installed:
                # `step(epoch)` sets the schedule's position itself: no order or count to check
                explicit = not isinstance(scheduler, lr_scheduler.ReduceLROnPlateau) and (
                    bool(args) or kwargs.get("epoch") is not None)
                recorder._scheduler_step(scheduler, sys._getframe(1), explicit)
            return original(scheduler, *args, **kwargs)

        return step

    def _showwarning_patch(self, original):
        """torch's warnings name the caller of the function that warns (`stacklevel=2`):
        where that caller is modellint's wrapper (`scheduler.step()` before
        `optimizer.step()`), the user's line that called it instead."""
        recorder = self

        def showwarning(message, category, filename, lineno, file=None, line=None):
            if recorder._installed and modellint_file(filename):
                site = recorder.user.innermost_frame(sys._getframe(1))
                if site is not None:
                    filename, lineno, line = site[0], site[1], None
            return original(message, category, filename, lineno, file, line)
        return showwarning

    # -- mixed precision ------------------------------------------------------------------
    def _scaler_scale_patch(self, original):
        recorder = self

        def scale(scaler, outputs):
            scaled = original(scaler, outputs)
            if (recorder._installed and isinstance(outputs, torch.Tensor)
                    and isinstance(scaled, torch.Tensor) and outputs.numel() == 1):
                with torch.no_grad():
                    value = float(outputs.detach().float())
                recorder._scaled = {k: v for k, v in recorder._scaled.items()
                                    if v[0]() is not None}
                recorder._scaled[id(scaled)] = (weakref.ref(scaled), value)
            return scaled
        return scale

    def _scaler_step_patch(self, original):
        recorder = self

        def step(scaler, optimizer, *args, **kwargs):
            rec = recorder._optimizer(optimizer) if recorder._installed else None
            before = rec.steps if rec is not None else 0
            result = original(scaler, optimizer, *args, **kwargs)
            if rec is not None and rec.steps == before:
                rec.skipped += 1
            return result
        return step

    def _scheduler_step(self, scheduler, caller, explicit: bool = False) -> None:
        rec = self.schedulers.get(id(scheduler))
        if rec is None or rec.scheduler is not scheduler:
            rec = SchedulerRecord(scheduler)
            self.schedulers[id(scheduler)] = rec
        name = caller.f_code.co_name
        site = self.user.innermost_frame(caller)
        if name in ("_initial_step", "__init__"):  # the constructor's own step
            rec.created = rec.created or site
            return
        if not self.user(caller.f_code.co_filename) and "lr_scheduler" in caller.f_code.co_filename:
            return  # stepped by a SequentialLR / ChainedScheduler
        opt = getattr(scheduler, "optimizer", None)
        opt_rec = self.optimizers.get(id(opt))
        steps = opt_rec.steps + opt_rec.skipped if opt_rec is not None else 0
        if explicit:
            rec.explicit = True
            return
        if not rec.steps:
            from modellint.watching.loops import enclosing_loops, planned_epochs

            rec.epochs_planned = planned_epochs(enclosing_loops(caller, self.user))
        rec.steps.append((site, steps, self._epoch_key()))

    # -- data -----------------------------------------------------------------------------
    def _epoch_key(self):
        loader = self._train_loader
        return None if loader is None else (id(loader.loader), loader.epochs)

    def _loader_iter_patch(self, original):
        recorder = self

        def __iter__(loader):
            if recorder._installed and getattr(loader, "num_workers", 0) > 0:
                recorder._probe_workers(loader)
            iterator = original(loader)
            if not recorder._installed:
                return iterator
            rec = recorder.loaders.get(id(loader))
            if rec is None or rec.loader is not loader:
                rec = LoaderRecord(loader, site=recorder.site())
                try:
                    rec.length = len(loader)
                except TypeError:
                    rec.length = None
                recorder.loaders[id(loader)] = rec
            rec.epochs += 1
            return _CutIterator(iterator, rec, recorder)

        return __iter__

    def _probe_workers(self, loader) -> None:
        from modellint.watching.workers import CollateProbe, InitProbe

        if isinstance(loader.collate_fn, CollateProbe):
            return
        if self.probe_dir is None:
            import tempfile

            self.probe_dir = tempfile.mkdtemp(prefix="modellint-workers-")
        key = str(id(loader))
        self.probed[key] = loader
        try:
            loader.worker_init_fn = InitProbe(loader.worker_init_fn, self.probe_dir, key)
            loader.collate_fn = CollateProbe(loader.collate_fn, self.probe_dir, key)
        except Exception:  # noqa: BLE001 - a DataLoader subclass that refuses: not probed
            pass

    def cleanup(self) -> None:
        if self.probe_dir is not None:
            import shutil

            shutil.rmtree(self.probe_dir, ignore_errors=True)

    def worker_rngs(self) -> list[tuple[Any, list[str]]]:
        """(loader record, generators its workers used in lockstep) for each probed loader."""
        if self.probe_dir is None:
            return []
        from modellint.watching.workers import identical, read

        out: list[tuple[Any, list[str]]] = []
        for (key, _), names in identical(read(self.probe_dir)).items():
            loader = self.probed.get(key)
            rec = self.loaders.get(id(loader)) if loader is not None else None
            if rec is not None and all(rec is not other for other, _ in out):
                out.append((rec, names))
        return out

    def _sampler_iter_patch(self, original):
        recorder = self

        def __iter__(sampler):
            if recorder._installed:
                rec = recorder.samplers.get(id(sampler))
                if rec is None or rec.sampler is not sampler:
                    from modellint.watching.loops import enclosing_loops, epoch_loop

                    loops = enclosing_loops(sys._getframe(1), recorder.user)
                    loop = epoch_loop(loops)
                    rec = SamplerRecord(sampler, site=recorder.site(),
                                        epoch_loop=loop.site if loop is not None else None)
                    recorder.samplers[id(sampler)] = rec
                rec.epochs_seen.append(int(getattr(sampler, "epoch", 0)))
            return original(sampler)

        return __iter__

    # -- summary --------------------------------------------------------------------------
    def _whole_models(self) -> list[ModelRecord]:
        """The models called, less those called also as a part of another (`model.encoder(x)`
        beside `model(x)`)."""
        parts = {id(sub) for rec in self.models.values() for sub in rec.model.modules()
                 if sub is not rec.model}
        return [rec for rec in self.models.values() if id(rec.model) not in parts]

    def summary(self) -> dict[str, Any]:
        opts = list(self.optimizers.values())
        return {
            "steps": self.total_steps,
            "manual_steps": self.manual.updates,
            "optimizers": len(opts),
            "models": len(self._whole_models()),
            "epochs": (self._train_loader.passes if self._train_loader is not None else
                       max((rec.passes for rec in self.loaders.values()), default=0)),
            "seconds": round(time.monotonic() - self.started, 2),
            "stopped": self.stopped,
            "losses": self.losses[-1000:],
            "lrs": [rec.lrs for rec in opts],
            "grad_norms": [rec.grad_norms for rec in opts],
        }


class _CutIterator:
    """A DataLoader iterator that stops after `batches_per_epoch` batches."""

    def __init__(self, iterator, rec: LoaderRecord, recorder: Recorder) -> None:
        self._iterator = iterator
        self._rec = rec
        self._recorder = recorder
        self._count = 0
        self._pass = False

    def __iter__(self):  # a `for` loop over the loader: one pass
        self._count_pass()
        return self

    def _count_pass(self) -> None:
        if not self._pass:
            self._pass = True
            self._rec.passes += 1

    def __next__(self):
        limit = self._recorder.batches_per_epoch
        if limit is not None and self._count >= limit and self._recorder._installed \
                and not self._recorder.accumulating(self._count - limit):
            raise StopIteration
        batch = next(self._iterator)
        self._count += 1
        if self._count == 2:
            self._count_pass()
        self._rec.batches += 1
        self._recorder._last_loader = self._rec
        return batch

    def __len__(self) -> int:
        length = len(self._iterator)
        limit = self._recorder.batches_per_epoch
        return length if limit is None else min(length, limit)

    def __getattr__(self, name: str):
        return getattr(self._iterator, name)


def _accumulation_site(code: CodeType, name: str) -> Site | None:
    """The first line of `code` that adds to `name` (`name += ...`, `name = name + ...`,
    `name.append(...)`, `name[key] = ...`; for an attribute of a helper object, `meter.sum`,
    also a call of its method, `meter.update(loss)`): where the kept losses go in. None when
    no such line is found (the finding stays on the `backward()` line)."""
    owner = name.rpartition(".")[0]
    names = re.escape(name)
    # a method call with arguments: `meter.update(loss)`, not `meter.reset()`
    calls = rf"|^\s*{re.escape(owner)}\.\w+\(\s*[^)\s]" if owner and owner != "self" else ""
    adds = re.compile(rf"^\s*{names}\s*(?:[-+*/]=|=\s*{names}\b|\.(?:append|"
                      rf"extend|insert|add)\(|\[[^\]]*\]\s*=[^=]){calls}")
    for line in sorted({line for _, _, line in code.co_lines() if line}):
        if adds.match(linecache.getline(code.co_filename, line)):
            return code.co_filename, line, code.co_name
    return None


def _methods(cls) -> list[CodeType]:
    """The code of the functions a class defines (for the line of a helper method)."""
    return [value.__code__ for value in vars(cls).values()
            if isinstance(getattr(value, "__code__", None), CodeType)]


def _keeps_losses(value) -> bool:
    """A tensor whose graph reaches an earlier loss (not the last loss itself), or a list or
    dict whose last three items are (or hold) losses."""
    if isinstance(value, torch.Tensor):
        return _holds_loss_graph(value, own=False)
    if isinstance(value, (list, tuple, dict)):
        items = list(value.values()) if isinstance(value, dict) else list(value)
        return len(items) >= 3 and all(_holds_loss_graph(item) for item in items[-3:])
    return False


def _holds_loss_graph(value, own: bool = True, limit: int = 256) -> bool:
    """Whether a tensor's graph reaches the node of a loss `backward()` was called on (its
    own node counts when `own`)."""
    if not isinstance(value, torch.Tensor) or value.grad_fn is None:
        return False
    seen: set[int] = set()
    stack: list[Node | None] = [value.grad_fn]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        try:
            # torch's Node declares metadata a method; grad_fn objects hold a dict
            if "modellint" in node.metadata and (own or node is not value.grad_fn):  # type: ignore[operator]
                return True
            stack.extend(next_node for next_node, _ in node.next_functions)
        except Exception:  # noqa: BLE001 - a node without metadata
            continue
    return False


def _distributed() -> bool:
    try:
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    except Exception:  # noqa: BLE001
        return False


def _sharded(p) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - a torch built without distributed
        return False
    return isinstance(p, DTensor)


def _head(p) -> Any:
    """A copy of a parameter's first values, to tell when it changes."""
    return p.detach().reshape(-1)[:1024].clone()


def _cleared(sample: list[Any]) -> bool:
    """Whether the sampled parameters' gradients are cleared (None or all zero)."""
    with torch.no_grad():
        for p in sample:
            g = p.grad
            if g is None:
                continue
            if g.is_sparse:
                return False
            flat = g.reshape(-1)
            if bool(flat[:4096].ne(0).any()):
                return False
    return True


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    if isinstance(value, dict):
        for item in value.values():
            found = _first_tensor(item)
            if found is not None:
                return found
    if hasattr(value, "logits") and isinstance(getattr(value, "logits", None), torch.Tensor):
        return value.logits
    return None


_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
            nn.FeatureAlphaDropout)
_MODE_TYPES = (*_DROPOUT, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def _mode_dependent(model) -> bool:
    """Whether the model computes differently in train and eval mode (dropout, batch norm)."""
    try:
        return any(isinstance(m, _MODE_TYPES) and not (isinstance(m, _DROPOUT) and m.p == 0)
                   for m in model.modules())
    except Exception:  # noqa: BLE001
        return False


def crash_record(exc: BaseException, user: UserCode) -> dict[str, Any]:
    site = user.innermost_traceback(exc.__traceback__)
    return {"error": first_line(exc), "site": site}
