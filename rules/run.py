"""Checks of `modellint run` (and `modellint.watching()`): silent training mistakes seen in a
watched training run, reported at the user's lines.

The run halves of rules the static pass documents (ML301-ML307, ML312, ML321, and ML704 of
the runtime pass) read the record of the run (`modellint.watching.record.Recorder`), as do the rules
found only by running: ML003 (the script failed), ML319 (an optimizer holding parameters the
model no longer has), ML320 (trainable parameters never updated). This module imports no torch at load time: the static pass loads it.
"""

from __future__ import annotations

from collections import defaultdict

from modellint.hookspecs import hookimpl
from modellint.rule import (
    EPOCH_SCHEDULERS,
    PERIOD_ARGUMENT,
    SCRIPT_FAILED,
    Invalid,
    RunCheck,
    RunRule,
    Severity,
    source_tree,
)

# the examples of the run rules are small training scripts, run under `modellint.watch()`
_SETUP = ("import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, "
          "TensorDataset\n\ntorch.manual_seed(0)\ndata = TensorDataset(torch.randn(64, 8), "
          "torch.randn(64, 1))\nloader = DataLoader(data, batch_size=8)\n")
_LOOP = ("for epoch in range(4):\n    for x, y in loader:\n        optimizer.zero_grad()\n"
         "        nn.functional.mse_loss(model(x), y).backward()\n        optimizer.step()\n")


def _script(middle: str, loop: str = _LOOP) -> str:
    return _SETUP + middle + loop


def _invalid(code: str) -> Invalid:
    """An invalid example whose reported line ends with `  # <-`."""
    lines = code.split("\n")
    line = next(i for i, text in enumerate(lines, 1) if text.endswith("  # <-"))
    return Invalid(code.replace("  # <-", ""), line=line)


def _names(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _lr_text(values: list[float]) -> str:
    out: list[str] = []
    for v in values:
        text = f"{v:.3g}"
        if not out or out[-1] != text:
            out.append(text)
    return " → ".join(out[:6]) + (" → ..." if len(out) > 6 else "")


class GradientsNeverCleared(RunCheck):
    """ML303 at run time: an optimizer stepped on gradients accumulated since its previous
    step. Told apart from gradient accumulation, which clears them after each step."""

    code = "ML303"

    def check(self, record) -> None:
        manual = record.manual
        if len(manual.uncleared) >= 2 and len(manual.uncleared) * 2 >= manual.updates - 1:
            record.report(self.code, f"the parameters were updated by hand {manual.updates} "
                          f"times, {len(manual.uncleared)} of them on gradients never cleared "
                          f"since the previous `backward()`: it adds to `.grad`, so each update "
                          f"applies the sum of every gradient so far; call `model.zero_grad()` "
                          f"before each `backward()`", manual.uncleared[0])
        for rec in record.optimizers.values():
            closure = rec.uncleared_closure_calls
            if len(closure) >= 2 and len(closure) * 2 >= rec.closure_calls:
                record.report(self.code, f"`{rec.name}.step(closure)` evaluated the closure "
                              f"{len(closure)} of {rec.closure_calls} times on gradients not "
                              f"cleared since its previous evaluation: `backward()` adds to "
                              f"`.grad`, so the optimizer sees the sum of the gradients at "
                              f"every point it tried; call `optimizer.zero_grad()` at the start "
                              f"of the closure", closure[0])
                continue
            bad = rec.uncleared_steps
            if len(bad) < 2 or len(bad) * 2 < rec.steps - 1:
                continue
            site = bad[0][1]
            record.report(self.code, f"`{rec.name}.step()` ran {len(bad)} of {rec.steps} times "
                          f"on gradients never cleared since the previous step: `backward()` "
                          f"adds to `.grad`, so each step applies the sum of every gradient "
                          f"so far; call `optimizer.zero_grad()` once per step (after "
                          f"`step()` when accumulating)", site)


class PerEpochSchedulerPerBatch(RunCheck):
    """ML301 at run time: an epoch-based scheduler stepped more than once in one epoch."""

    code = "ML301"

    def check(self, record) -> None:
        for rec in record.schedulers.values():
            if rec.name not in EPOCH_SCHEDULERS or rec.explicit:
                continue
            per_epoch: dict = defaultdict(list)
            for site, opt_steps, epoch in rec.steps:
                if epoch is not None:
                    per_epoch[epoch].append((site, opt_steps))
            busy = [calls for calls in per_epoch.values()
                    if len(calls) >= 2 and calls[-1][1] > calls[0][1]]
            if not busy or self._counts_iterations(record, rec):
                continue
            calls = busy[0]
            opt = record.optimizers.get(id(getattr(rec.scheduler, "optimizer", None)))
            lrs = ""
            if opt is not None and opt.lrs:
                lrs = f"; learning rates applied: {_lr_text([row[0] for row in opt.lrs])}"
            record.report(self.code, f"`{rec.name}` counts epochs but `step()` ran "
                          f"{len(calls)} times in one epoch (once per batch){lrs}: its decay "
                          f"happens every few batches instead of every few epochs; call "
                          f"`scheduler.step()` once per epoch, after the batch loop",
                          calls[0][0])

    @staticmethod
    def _counts_iterations(record, rec) -> bool:
        """Whether a scheduler of an epoch kind was sized in iterations (stepping it per batch
        is then meant), from what is known, in this order: its constructor's arguments, read
        as the static ML301 reads them (`step_size=3 * len(loader)`: iterations;
        `T_max=args.epochs`: epochs); its period against the epoch loop's range (a period
        that fits in the planned epochs counts epochs, one beyond them iterations); the
        static kind of a constructor that names neither. Only a scheduler built where the
        source cannot be read, in no epoch loop of known range, is sized against the
        loader's length."""
        from modellint.rules.training import counts_iterations, period_counts_epochs

        call = _constructor(rec)
        if call is not None and counts_iterations(call):
            return True
        period = _period(rec)
        epochs = rec.epochs_planned
        if rec.name in PERIOD_ARGUMENT:
            if call is not None and period_counts_epochs(rec.name, call):
                return False
            return not (epochs and period is not None and period <= epochs)
        if period is None:  # a decay at every step (ExponentialLR): counts epochs
            return False
        if epochs:
            return period > epochs
        if call is not None:
            return False
        lengths = [loader.length for loader in record.loaders.values() if loader.length]
        return bool(lengths) and period >= max(lengths)


def _period(rec) -> int | None:
    """The number of `step()` calls the schedule is sized in (its first milestone)."""
    scheduler = rec.scheduler
    if rec.name == "MultiStepLR":
        milestones = list(getattr(scheduler, "milestones", {}) or [])
        return min(milestones) if milestones else None
    attribute = {"StepLR": "step_size", "CosineAnnealingLR": "T_max",
                 "PolynomialLR": "total_iters"}.get(rec.name)
    value = getattr(scheduler, attribute, None) if attribute else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _constructor(rec):
    """The scheduler's constructor call in the user's source (a LibCST node, for the static
    rule's readings of its arguments), or None where it cannot be read."""
    import ast
    import linecache

    import libcst as cst

    if rec.created is None:
        return None
    filename, line, _ = rec.created
    tree = source_tree(filename)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or 0):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", "")
            if name == rec.name:
                text = ast.get_source_segment("".join(linecache.getlines(filename)), node)
                try:
                    parsed = cst.parse_expression(text or "")
                except cst.ParserSyntaxError:
                    return None
                return parsed if isinstance(parsed, cst.Call) else None
    return None


class SchedulerBeforeOptimizerStep(RunCheck):
    """ML302 at run time: `scheduler.step()` before the first `optimizer.step()`."""

    code = "ML302"

    def check(self, record) -> None:
        for rec in record.schedulers.values():
            opt = record.optimizers.get(id(getattr(rec.scheduler, "optimizer", None)))
            if opt is None or not opt.steps or not rec.steps or rec.explicit:
                continue
            site, opt_steps, _ = rec.steps[0]
            if opt_steps:
                continue
            base = getattr(rec.scheduler, "base_lrs", None) or []
            applied = opt.lrs[0][0] if opt.lrs and opt.lrs[0] else None
            detail = ""
            if base and applied is not None and f"{base[0]:.3g}" != f"{applied:.3g}":
                detail = (f" (the first step used a learning rate of {applied:.3g}, not the "
                          f"initial {base[0]:.3g})")
            record.report(self.code, f"`{rec.name}.step()` ran before the first "
                          f"`optimizer.step()`: the schedule starts one step late and its "
                          f"first learning rate is never applied{detail}; call "
                          f"`scheduler.step()` after `optimizer.step()`", site)


class LossGraphsKept(RunCheck):
    """ML304 at run time: the losses of earlier steps stay alive with their graphs."""

    code = "ML304"

    def check(self, record) -> None:
        live = record.live_graphs
        if len(live) < 4 or max(live) < 3:
            return
        backward = record.backward_sites[0] if record.backward_sites else None
        site = record.graph_holder_site or backward
        holder = (f"`{record.graph_holder}` keeps them" if record.graph_holder
                  else "a running total or a list keeps them")
        record.report(self.code, f"the loss of every step stays alive with its autograd graph "
                      f"after `backward()` (up to {max(live)} earlier losses alive at once in "
                      f"{len(live)} steps): {holder}, and memory grows with each step; keep "
                      f"`loss.item()` or `loss.detach()` instead", site,
                      [(record.graph_holder_inner, "the helper keeps the loss here"),
                       (backward, "its `backward()`")])


def _forwards(record):
    for model in record.models.values():
        for forward in model.forwards:
            yield model, forward


class EvalInTrainMode(RunCheck):
    """ML306 at run time: a forward under no_grad while the model is in training mode."""

    code = "ML306"

    def check(self, record) -> None:
        for model, forward in _forwards(record):
            # only the model being trained: a momentum (key) encoder or a teacher updated
            # without gradients runs in training mode under no_grad by design
            trained = any(f.grad and f.reached[0] for f in model.forwards)
            if model.mode_dependent and trained and forward.training and not forward.grad \
                    and forward.site:
                record.report(self.code, f"`{model.name}` ran under `no_grad` while in training "
                              f"mode: dropout stays on and batch-norm statistics are updated "
                              f"by evaluation data; call `model.eval()` before evaluating "
                              f"(and `model.train()` after)", forward.site)


class EvalWithAutograd(RunCheck):
    """ML307 at run time: eval-mode forwards that build a graph no backward uses."""

    code = "ML307"

    def check(self, record) -> None:
        for model, forward in _forwards(record):
            if not forward.training and forward.grad and forward.needs_grad and \
                    not forward.reached[0] and forward.site:
                record.report(self.code, f"`{model.name}` ran in eval mode with autograd on "
                              f"and no backward used the graph: evaluation keeps every "
                              f"activation for a backward that never comes; wrap it in "
                              f"`torch.no_grad()` or `torch.inference_mode()`", forward.site)


class LeftInEvalMode(RunCheck):
    """ML312 at run time: a model put in eval mode, evaluated, then trained on in eval mode
    (never put back with `train()`)."""

    code = "ML312"

    def check(self, record) -> None:
        for model in record.models.values():
            if not model.mode_dependent:
                continue
            events = sorted([(f.order, "forward", f) for f in model.forwards]
                            + [(order, "eval", site) for site, _, order in model.eval_sites],
                            key=lambda e: e[0])
            eval_site, evaluated, late = None, False, []
            for _, kind, item in events:
                if kind == "eval":
                    eval_site, evaluated = item, False
                    continue
                if item.training:
                    eval_site = None
                elif not (item.grad and item.reached[0]):
                    evaluated = True
                elif eval_site is not None and evaluated and item.step < record.total_steps:
                    late.append((eval_site, item))
            if not late:
                continue
            site, forward = late[0]
            count = sum(1 for s, _ in late if s == site)
            record.report(self.code, f"`{model.name}` was put in eval mode here for an "
                          f"evaluation and then trained in eval mode ({count} training "
                          f"forward(s): dropout off, batch-norm statistics frozen); call "
                          f"`model.train()` before training again", site or forward.site,
                          [(forward.site, "trained in eval mode")])


def _model_params(record):
    params = {}
    names = {}
    for model in record.models.values():
        for name, p in model.model.named_parameters():
            params.setdefault(id(p), p)
            names.setdefault(id(p), name)
    return params, names


class ParamGroupsAtRuntime(RunCheck):
    """ML305 at run time: trainable parameters that get gradients in no optimizer, or the
    same parameters in two optimizers; and, given a model and its optimizer
    (`check_optimizer`), the parameters of its groups."""

    code = "ML305"

    def check(self, record) -> None:
        if not record.optimizers or not record.total_steps:
            return
        params, names = _model_params(record)
        owners: dict[int, list] = defaultdict(list)
        for rec in record.optimizers.values():
            for p in rec.params():
                if rec not in owners[id(p)]:
                    owners[id(p)].append(rec)
        orphans = [names[i] for i, p in params.items()
                   if p.requires_grad and i in record.grad_seen and i not in owners]
        main = max(record.optimizers.values(), key=lambda r: len(r.params()))
        if orphans and not _stale(record, main, params):
            record.report(self.code, f"{len(orphans)} trainable parameter(s) get gradients but "
                          f"are in no optimizer group ({_names(orphans)}): they never train; "
                          f"add them to `{main.name}`'s parameters or freeze them",
                          main.created)
        shared = [(i, recs) for i, recs in owners.items() if len(recs) > 1]
        if shared:
            second = shared[0][1][1]
            which = [names.get(i, "?") for i, _ in shared]
            record.report(self.code, f"{len(shared)} parameter(s) are held by two optimizers "
                          f"({_names(which)}): both update them at each step; give each "
                          f"parameter to one optimizer", second.created)


    def check_optimizer(self, model, optimizer, report) -> None:
        """ML305 of one model and its optimizer, given (`modellint.check_optimizer`): a
        parameter in two of its groups, a trainable one in none, a frozen one passed to it;
        each reported through `report(code, message, location)` at the model (None)."""
        names = {id(p): n for n, p in model.named_parameters()}
        seen: dict[int, list[int]] = {}
        for index, group in enumerate(optimizer.param_groups):
            for param in group["params"]:
                seen.setdefault(id(param), []).append(index)
        twice = [f"`{names.get(k, '?')}` (groups {', '.join(map(str, g))})"
                 for k, g in seen.items() if len(g) > 1]
        if twice:
            report(self.code, f"{len(twice)} parameter(s) are in more than one optimizer "
                   f"group: {', '.join(twice[:5])}; give each parameter one group", None)
        missing = [n for n, p in model.named_parameters()
                   if p.requires_grad and id(p) not in seen]
        if missing:
            report(self.code, f"{len(missing)} trainable parameter(s) are in no optimizer "
                   f"group and never update: {', '.join(f'`{n}`' for n in missing[:5])}"
                   f"{', ...' if len(missing) > 5 else ''}; add them or freeze them", None)
        frozen = [n for n, p in model.named_parameters()
                  if not p.requires_grad and id(p) in seen]
        if frozen:
            report(self.code, f"{len(frozen)} frozen parameter(s) (requires_grad=False) were "
                   f"passed to the optimizer: {', '.join(f'`{n}`' for n in frozen[:5])}; pass "
                   f"only `p for p in model.parameters() if p.requires_grad`", None)


def _stale(record, rec, params) -> list:
    """The parameters `rec` holds that are in no watched model and never got a gradient,
    when the optimizer also holds some of a model's (it was built for that model)."""
    held = rec.params()
    if not any(id(p) in params for p in held):
        return []
    return [p for p in held if id(p) not in params and id(p) not in rec.updated
            and p.grad is None]


class StaleOptimizerParameters(RunRule):
    """An optimizer holds parameters the model no longer has.

    ## What it does
    Watching a training run, reports an optimizer that holds parameters which are in none of
    the models it trains and never get a gradient, while the model has trainable parameters
    the optimizer does not hold: a layer was replaced after the optimizer was built. Reported
    at the assignment that replaced it (when the run saw it), with the optimizer's line.

    ## Why is this bad?
    The classic fine-tuning bug: `model.fc = nn.Linear(512, 10)` after
    `optimizer = SGD(model.parameters())`. The optimizer keeps updating the old, detached
    layer; the new head never trains, and the loss goes down only through the rest.

    ## Example
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model.fc = nn.Linear(512, 10)

    ## Use instead
        model.fc = nn.Linear(512, 10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    ## What it does not see
    Code it does not watch run: the rule has no static pass, so `modellint check` never
    reports it. Its one bench/bugs case (c-taglets-end-model-optimizer-stale-fc) is scored
    with the static pass, where it finds nothing: the model needs the taglets package and
    its trainer, and no script of the repository runs it on CPU in seconds.
    """

    code = "ML319"
    name = "optimizer-holds-stale-parameters"
    severity = Severity.ERROR
    valid = [_script("model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 1))\n"
                     "model[1] = nn.Linear(4, 1)\n"
                     "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n")]
    invalid = [_invalid(_script("model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 1))\n"
                                "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                                "model[1] = nn.Linear(4, 1)  # <-\n"))]

    def check(self, record) -> None:
        if not record.total_steps:
            return
        params, names = _model_params(record)
        held = {id(p) for rec in record.optimizers.values() for p in rec.params()}
        missing = [names[i] for i, p in params.items() if p.requires_grad and i not in held]
        if not missing:
            return
        for rec in record.optimizers.values():
            stale = _stale(record, rec, params)
            if not stale:
                continue
            shapes = ", ".join("x".join(str(d) for d in p.shape) for p in stale[:3])
            ids = {id(p) for p in stale}
            # at the assignment that replaced the layer, when it was seen
            site, name = next(((site, name) for site, name, old in record.replaced
                               if site and old & ids), (None, None))
            what = f"`{name}` was replaced here" if name else "a layer was replaced"
            record.report(self.code, f"`{rec.name}` holds {len(stale)} parameter(s) that "
                          f"are no longer in the model (shapes {shapes}) while the "
                          f"model's {_names(missing)} are in no optimizer: {what} after "
                          f"the optimizer was built; build the optimizer after changing "
                          f"the model", site or rec.created,
                          [(rec.created, f"`{rec.name}` built")] if site else None)


class ParametersNeverUpdated(RunRule):
    """Trainable parameters that no optimizer step changes.

    ## What it does
    Watching a training run, reports parameters that require a gradient and are held by an
    optimizer, but at none of the steps had a nonzero gradient with a learning rate above 0:
    no gradient reaches them, or their group's learning rate is 0. Reported where the gradient
    stops, the line that calls the first of their modules (its output detached, or not used
    in the loss), with the optimizer's line; a learning rate of 0 at the optimizer. Also an
    optimizer whose model several backward passes reached while nothing stepped at all (no
    `step()`, none skipped by `GradScaler`, no update by hand): `optimizer.step()` is never
    called.

    ## Why is this bad?
    The parameters stay at their initial values while the run looks healthy: a branch cut
    off from the loss (`.detach()`, an output not used), a head not called, or a parameter
    group given `lr=0`. They should be frozen (`requires_grad_(False)`) if that is intended.
    Without `step()` the gradients are computed and thrown away: nothing trains.

    ## Example
        optimizer = torch.optim.SGD([
            {"params": model.backbone.parameters(), "lr": 0.0},
            {"params": model.head.parameters()},
        ], lr=0.1)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()  # and no optimizer.step()

    ## Use instead
        model.backbone.requires_grad_(False)
        optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()

    ## What it does not see
    Code it does not watch run: the rule has no static pass, so `modellint check` never
    reports it. Its one bench/bugs case (c-pytorch-yolov3-sgd-lr-zero, a parameter group
    given `lr=0`) is scored with the static pass, where it finds nothing: the training
    script needs the whole repository, a dataset and far more than seconds a step on CPU.
    """

    code = "ML320"
    name = "parameters-never-updated"
    severity = Severity.WARNING
    valid = [_script("model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 1))\n"
                     "model[0].requires_grad_(False)\n"
                     "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n")]
    invalid = [_invalid(_script(
        "model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 1))\n"
        "optimizer = torch.optim.SGD([{'params': model[0].parameters(), 'lr': 0.0},  # <-\n"
        "                             {'params': model[1].parameters()}], lr=0.01)\n")),
               _invalid(_script("model = nn.Linear(8, 1)\n"
                                "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n",
                                "for epoch in range(4):\n    for x, y in loader:\n"
                                "        optimizer.zero_grad()\n"
                                "        nn.functional.mse_loss(model(x), y).backward()  # <-\n"))]

    def check(self, record) -> None:
        _never_stepped(self.code, record)
        params, names = _model_params(record)
        for rec in record.optimizers.values():
            if rec.steps < 3:
                continue
            stale = {id(p) for p in _stale(record, rec, params)}
            never = []
            lr_zero = True
            for index, group in enumerate(rec.optimizer.param_groups):
                for p in group["params"]:
                    if p.requires_grad and id(p) in params and id(p) not in rec.updated \
                            and id(p) not in stale:
                        never.append(names[id(p)])
                        if any(row[index] > 0 for row in rec.lrs if index < len(row)):
                            lr_zero = False
            if not never:
                continue
            why = ("their parameter group's learning rate is 0" if lr_zero else
                   "no gradient reaches them")
            # where the gradient stops: the call of the first module they belong to
            stop = None if lr_zero else next(
                ((path, record.ungraded_calls[path]) for path in
                 (name.rpartition(".")[0] for name in never)
                 if record.ungraded_calls.get(path)), None)
            if stop is not None:
                import linecache

                why = (f"no gradient reaches them: the output of `{stop[0]}` is detached here"
                       if ".detach()" in linecache.getline(*stop[1][:2]) else
                       f"no gradient reaches them: `{stop[0]}` is called here, but its output "
                       f"is not used in the loss")
            record.report(self.code, f"{len(never)} trainable parameter(s) held by "
                          f"`{rec.name}` never changed in {rec.steps} steps "
                          f"({_names(never)}): {why}; use them in the loss, or freeze "
                          f"them with `requires_grad_(False)`",
                          stop[1] if stop else rec.created,
                          [(rec.created, f"held by `{rec.name}` built")] if stop else None)


def _never_stepped(code: str, record) -> None:
    """An optimizer holding parameters of a model that several backward passes reached, while
    nothing stepped: no optimizer step, none skipped by GradScaler, no update by hand."""
    backwards = len(record.backward_sites)
    if record.total_steps or backwards < 3:
        return
    # the parameters of the models a backward pass reached
    reached = {id(p) for model in record.models.values()
               if any(f.reached[0] for f in model.forwards) for p in model.model.parameters()}
    for rec in record.optimizers.values():
        if rec.skipped or not any(id(p) in reached for p in rec.params()):
            continue
        record.report(code, f"`{rec.name}` took no step in "
                      f"{backwards} backward passes: the gradients are computed and never "
                      f"applied, so its parameters never change; call `optimizer.step()` "
                      f"after `backward()`", record.backward_sites[0],
                      [(rec.created, f"`{rec.name}` built")])


class SamplerEpochNotAdvanced(RunCheck):
    """ML321 at run time: a shuffling `DistributedSampler` iterated in two or more epochs with
    the same epoch number (`set_epoch` never called), reported at the epoch loop."""

    code = "ML321"

    def check(self, record) -> None:
        for rec in record.samplers.values():
            seen = rec.epochs_seen
            if len(seen) >= 2 and len(set(seen)) == 1 and getattr(rec.sampler, "shuffle", False):
                # at the epoch loop, where `set_epoch` belongs
                record.report(self.code, f"a shuffling `DistributedSampler` was iterated in "
                              f"{len(seen)} epochs with the same epoch number ({seen[0]}): "
                              f"every epoch has the same order; call "
                              f"`sampler.set_epoch(epoch)` at the start of each epoch",
                              rec.epoch_loop or rec.site,
                              [(rec.site, "iterated here")] if rec.epoch_loop else None)


class WorkersShareRandomState(RunRule):
    """DataLoader workers draw the same random numbers.

    ## What it does
    Watching a training run, fingerprints in each DataLoader worker every random generator
    it can see (Python's, NumPy's and torch's global ones, and generators the dataset holds
    as attributes) when the worker starts and after its first batch. Reports a loader whose
    workers all used a generator and left it in the same state: they drew identical numbers.

    ## Why is this bad?
    Each worker is a copy of the main process. A generator made in the dataset's
    `__init__` (`self.rng = np.random.default_rng(0)`), or a `worker_init_fn` that seeds
    every worker with one constant, gives every worker the same random crops, flips and
    noise: with 8 workers, 8 batches in a row share their augmentations.

    ## Example
        class Noisy(Dataset):
            def __init__(self):
                self.rng = np.random.default_rng(0)  # copied into every worker

    ## Use instead
        def worker_init_fn(worker_id):
            info = torch.utils.data.get_worker_info()
            info.dataset.rng = np.random.default_rng(info.seed)
    """

    code = "ML322"
    name = "workers-share-random-state"
    severity = Severity.WARNING
    _DATASET = ("import random\n\n\nclass Noisy(torch.utils.data.Dataset):\n"
                "    def __init__(self):\n        self.rng = random.Random(0)\n\n"
                "    def __len__(self):\n        return 64\n\n"
                "    def __getitem__(self, i):\n"
                "        return torch.full((8,), self.rng.random()), torch.zeros(1)\n\n\n")
    _SEED = ("def seed(worker_id):\n    info = torch.utils.data.get_worker_info()\n"
             "    info.dataset.rng = random.Random(info.seed)\n\n\n")
    _MAIN = ("if __name__ == '__main__':\n"
             "    loader = DataLoader(Noisy(), batch_size=8, num_workers=2{extra})\n"
             "    model = nn.Linear(8, 1)\n"
             "    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
             "    for x, y in loader:{mark}\n        optimizer.zero_grad()\n"
             "        nn.functional.mse_loss(model(x), y).backward()\n"
             "        optimizer.step()\n")
    valid = [_SETUP + _DATASET + _SEED + _MAIN.format(extra=", worker_init_fn=seed", mark="")]
    invalid = [_invalid(_SETUP + _DATASET + _MAIN.format(extra="", mark="  # <-"))]

    def check(self, record) -> None:
        for loader, names in record.worker_rngs():
            record.report(self.code, f"the DataLoader's workers all drew the same random "
                          f"numbers from {', '.join(names)}: each worker repeats the others' "
                          f"augmentations; seed each worker's generator from "
                          f"`torch.utils.data.get_worker_info().seed` in a `worker_init_fn`",
                          loader.site)


class RanksDiverge(RunRule):
    """Under torch.distributed, the ranks' parameters differ after an optimizer step.

    ## What it does
    `modellint run -- torchrun ...`: each rank sums each trainable parameter after its first
    optimizer steps; the sums of all ranks are compared, and the first step after which a
    parameter differs between ranks is reported, naming the parameters, at the call of the
    model they belong to, with the optimizer step.

    ## Why is this bad?
    Data-parallel training keeps one model: every rank must hold the same parameters. They
    drift apart when a trained module is outside the `DistributedDataParallel` wrapper, a
    layer is replaced or moved after wrapping, or a rank steps on its own gradients: each
    rank then trains its own model and the saved checkpoint is only rank 0's.

    ## Example
        backbone = DistributedDataParallel(Backbone())
        head = nn.Linear(512, 10)  # trained, but its gradients are never averaged

    ## Use instead
        model = DistributedDataParallel(nn.Sequential(Backbone(), nn.Linear(512, 10)))
    """

    code = "ML323"
    name = "ranks-diverge"
    severity = Severity.ERROR
    # needs several processes: tested under torchrun by tests/test_run.py (fixtures/training)

    def check(self, record) -> None:
        return None  # compared across ranks by `compare_ranks`

    @classmethod
    def compare_ranks(cls, prints: list[list[dict]]) -> list[dict]:
        import math

        first = prints[0]
        for index, entry in enumerate(first):
            differ = []
            for other in prints[1:]:
                if index >= len(other):
                    continue
                for name, value in entry["params"].items():
                    theirs = other[index]["params"].get(name)
                    if theirs is not None and not math.isclose(value, theirs, rel_tol=1e-5,
                                                               abs_tol=1e-6):
                        if name not in differ:
                            differ.append(name)
            if differ:
                step = entry.get("site")
                # at the call of the model whose parameters differ, the step as related
                model = differ[0].partition(".")[0]
                call = (entry.get("calls") or {}).get(model)
                site = call or step
                related = [{"file": step[0], "line": step[1],
                            "message": f"optimizer step {entry['step']}"}] if call and step \
                    else []
                return [{"code": cls.code, "message": f"after optimizer step {entry['step']} "
                         f"the ranks hold different values of {len(differ)} parameter(s) "
                         f"({_names(differ)}): their gradients are not averaged across ranks "
                         f"(outside the DistributedDataParallel wrapper, or replaced after "
                         f"wrapping); wrap the whole trained model once, after changing it",
                         "file": site[0] if site else None, "line": site[1] if site else 1,
                         "related": related}]
        return []


class NonFiniteInRun(RunCheck):
    """ML704 at run time: the first non-finite loss or gradient and the module that made it."""

    code = "ML704"

    def check(self, record) -> None:
        found = record.non_finite
        if found is None:
            return
        module = f"; the first module whose output was not finite: `{found.module}`" \
            if found.module else ""
        if found.what == "loss":
            text = f"the loss became {found.detail} at step {found.step}{module}"
        else:
            text = (f"{found.detail} became NaN/Inf at step {found.step}"
                    + (f" (in `{found.module}`)" if found.module else ""))
        record.report(self.code, text + "; check the learning rate, the inputs and the "
                      "operations there (log of 0, division by 0, overflow in float16)",
                      found.site)


class ScriptFailed(RunRule):
    """The watched training script stopped with an error before its step budget was spent.

    ## What it does
    `modellint run` reports a script that raised (or exited with a nonzero status) as one
    finding at its traceback's last line in the user's code. Whatever was observed before
    the failure is still checked and reported.

    ## Why is this bad?
    The run could not be watched for the whole budget, and the script itself has a bug (or
    needs arguments, data or a device that was not there).

    ## Example
        loss = criterion(model(x), y.float())  # raises: expected a Long target

    ## Use instead
        loss = criterion(model(x), y)
    """

    code = SCRIPT_FAILED
    name = "script-failed"
    severity = Severity.ERROR
    valid = [_script("model = nn.Linear(8, 1)\n"
                     "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n")]
    invalid = [_invalid(_script("model = nn.Linear(8, 1)\n"
                                "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n",
                                "for x, y in loader:\n"
                                "    model(x.view(8, 2, 4))  # <-\n"))]

    def check(self, record) -> None:
        crash = record.crash
        if crash is None:
            return
        record.report(self.code, f"the script stopped with {crash['error']} after "
                      f"{record.total_steps} optimizer step(s)", crash.get("site"))


RUN_RULES = [StaleOptimizerParameters, ParametersNeverUpdated, WorkersShareRandomState,
             RanksDiverge, ScriptFailed]
RUN_HALVES = [GradientsNeverCleared, PerEpochSchedulerPerBatch, SchedulerBeforeOptimizerStep,
              LossGraphsKept, EvalInTrainMode, EvalWithAutograd, LeftInEvalMode,
              ParamGroupsAtRuntime, NonFiniteInRun, SamplerEpochNotAdvanced]


@hookimpl
def modellint_add_rules():
    return [*RUN_RULES, *RUN_HALVES]
