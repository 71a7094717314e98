"""Checks of `modellint run --compare BASELINE` (and `modellint.watch(baseline=...)`): what held
in a recorded run (the baseline, `modellint.watching.baseline`) and no longer holds in this one.

Each rule compares the baseline with this run's observation in `compare_baseline(baseline,
observed)`, both plain dicts, and returns the findings as the run's raw findings, at the user's
line of this run that made the change when it is known (`observed["sites"]`): the optimizer's
construction, the scheduler's, the `requires_grad_(False)` or `.to()` call, the model's call.
Each message gives the baseline's value and this run's. Each finding names its `subject` (a
parameter, layer, model or optimizer), which `baseline-accept` in the configuration matches.

The examples need a recorded baseline: they are run by tests/test_run_baseline.py, which
records fixture scripts and compares changed copies of them.
"""

from __future__ import annotations

import math
from typing import Any

from modellint.hookspecs import hookimpl
from modellint.rule import Invalid, RunRule, Severity, Valid
from modellint.rules.run import _lr_text as _text
from modellint.rules.run import _names

Raw = dict[str, Any]

# the examples: a small seeded training script, recorded as the baseline (the `baseline`
# option of each example), then the example compared with it, both under `modellint.watch()`
_BASE = ("import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, "
         "TensorDataset\n\ntorch.manual_seed(0)\ndata = TensorDataset(torch.randn(64, 8), "
         "torch.randn(64, 1))\nloader = DataLoader(data, batch_size=8)\n"
         "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1))\n"
         "optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)\n"
         "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)\n"
         "for epoch in range(4):\n    model.train()\n    for x, y in loader:\n"
         "        optimizer.zero_grad()\n"
         "        nn.functional.mse_loss(model(x), y).backward()\n"
         "        optimizer.step()\n    scheduler.step()\n")
_RECORDED = {"baseline": _BASE}


def _same_script_other_seed() -> Valid:
    return Valid(_BASE.replace("manual_seed(0)", "manual_seed(1)"), _RECORDED)


def _changed(old: str, new: str) -> Invalid:
    """The baseline's script with `old` replaced by `new` (several parts: `|` between them),
    reported at the line that ends with `  # <-`."""
    code = _BASE
    for before, after in zip(old.split("|"), new.split("|"), strict=True):
        assert before in code, before
        code = code.replace(before, after, 1)
    lines = code.split("\n")
    line = next(i for i, text in enumerate(lines, 1) if text.endswith("  # <-"))
    return Invalid(code.replace("  # <-", ""), line=line, options=_RECORDED)


def _raw(code: str, message: str, site, subject: str, related=()) -> Raw:
    return {"code": code, "message": message, "file": site[0] if site else None,
            "line": site[1] if site else 1, "subject": subject,
            "related": [{"file": s[0], "line": s[1], "message": what}
                        for s, what in related if s and (not site or s[:2] != site[:2])]}


def _sites(observed: dict) -> dict:
    return observed.get("sites") or {"models": {}, "optimizers": [], "params": {}}


def _model_call(observed: dict, key: str, phase: str = "grad"):
    calls = (_sites(observed)["models"].get(key) or {}).get("calls") or {}
    return next((site for name, site in calls.items() if name.startswith(phase)), None) or \
        next(iter(calls.values()), None)


def _optimizer_site(observed: dict, index: int):
    sites = _sites(observed)["optimizers"]
    return sites[index]["created"] if index < len(sites) else None


def _holder(observed: dict, name: str) -> int | None:
    """The index of the optimizer holding the parameter `name` (Model.path) in this run."""
    for index, opt in enumerate(observed["optimizers"]):
        if any(name in group["params"] for group in opt["groups"]):
            return index
    return None


def _common_models(baseline: dict, observed: dict):
    for key, before in baseline["models"].items():
        now = observed["models"].get(key)
        if now is not None:
            yield key, before, now


def _schedule(runs) -> list[float]:
    return [value for value, count in runs for _ in range(int(count))]


class ParameterNoLongerTrains(RunRule):
    """A parameter that trained in the baseline run no longer changes.

    ## What it does
    `modellint run --compare BASELINE`: reports the parameters that had a nonzero gradient
    with a learning rate above 0 in the recorded run and have none in this one, grouped by
    why: frozen (`requires_grad_(False)`, reported at that call when it was seen), left out
    of every optimizer (a new parameter filter: at the optimizer), or reached by no gradient
    or given a learning rate of 0 (at the optimizer).

    ## Why is this bad?
    A refactor that stops a head from training leaves a run that looks healthy: the loss
    still goes down through the rest of the model, and nothing fails.

    ## Example
        optimizer = torch.optim.AdamW(
            [p for n, p in model.named_parameters() if "backbone" in n], lr=1e-3)

    ## Use instead
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    """

    code = "ML330"
    name = "parameter-no-longer-trains"
    severity = Severity.ERROR

    valid = [_same_script_other_seed()]
    invalid = [_changed("optimizer = torch.optim",
                        "model[0].requires_grad_(False)  # <-\noptimizer = torch.optim")]

    def check(self, record) -> None:
        return None  # compared with the baseline by `compare_baseline`

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        if not observed.get("steps") or not baseline.get("steps"):
            return []
        found: dict[tuple, list[str]] = {}
        for key, before, now in _common_models(baseline, observed):
            for name, param in before["parameters"].items():
                new = now["parameters"].get(name)
                if not param.get("trained") or new is None or new["trained"]:
                    continue
                full = f"{key}.{name}"
                holder = _holder(observed, full)
                frozen = (_sites(observed)["params"].get(full) or {}).get("frozen")
                if not new["requires_grad"]:
                    why = ("frozen here (`requires_grad_(False)`)" if frozen else
                           "frozen (`requires_grad` is False)")
                    site = frozen or _optimizer_site(observed, holder or 0)
                elif holder is None:
                    why = "held by no optimizer now (it was in the baseline's)"
                    site, frozen = _optimizer_site(observed, 0), None
                else:
                    why = "no gradient reaches it, or its group's learning rate is 0"
                    site, frozen = _optimizer_site(observed, holder), None
                found.setdefault((why, tuple(site) if site else None), []).append(full)
        out = []
        for (why, site), names in found.items():
            out.append(_raw(cls.code, f"{len(names)} parameter(s) that trained in the "
                            f"baseline no longer change ({_names(names)}): {why}; "
                            f"baseline: trained, now: not trained", site, names[0]))
        return out


class LearningRateScheduleChanged(RunRule):
    """The learning rate of a parameter group differs from the baseline's at some step.

    ## What it does
    `modellint run --compare BASELINE`: compares the learning rate each parameter group was
    stepped with, step by step over the steps both runs took, and reports the first step
    where it differs (or a different scheduler), at the scheduler's construction (the
    optimizer's when there is none), with both schedules.

    ## Why is this bad?
    A config change or a swapped scheduler moves the schedule silently: warmup gone, a decay
    every batch instead of every epoch, a base rate 10x off. The run still trains, worse.

    ## Example
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5)  # was 30

    ## Use instead
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
    """

    code = "ML331"
    name = "learning-rate-schedule-changed"
    severity = Severity.WARNING

    valid = [_same_script_other_seed()]
    invalid = [_changed("step_size=1, gamma=0.5)\n", "step_size=2, gamma=0.5)  # <-\n")]

    def check(self, record) -> None:
        return None

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        out = []
        for index, (before, now) in enumerate(zip(baseline["optimizers"],
                                                  observed["optimizers"], strict=False)):
            sites = _sites(observed)["optimizers"]
            mine = sites[index] if index < len(sites) else {}
            site = next((s for s in mine.get("schedulers", []) if s), None) or mine.get("created")
            related = [(mine.get("created"), f"`{now['class']}` built")] if site != mine.get(
                "created") else []
            schedulers = ""
            if before["schedulers"] != now["schedulers"]:
                schedulers = (f" (schedulers: baseline {', '.join(before['schedulers']) or 'none'}"
                              f", now {', '.join(now['schedulers']) or 'none'})")
            if before.get("lr") is None or now.get("lr") is None:
                continue
            for group, (old_runs, new_runs) in enumerate(zip(before["lr"], now["lr"],
                                                            strict=False)):
                old, new = _schedule(old_runs), _schedule(new_runs)
                step = next((i for i, (a, b) in enumerate(zip(old, new, strict=False))
                             if not math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-12)), None)
                if step is None:
                    continue
                common = min(len(old), len(new))
                cut = (baseline.get("batches_per_epoch"), observed.get("batches_per_epoch"))
                budget = (f" (the baseline's epochs were cut after {cut[0] or 'no'} batches, "
                          f"this run's after {cut[1] or 'no'}: record and compare with the "
                          f"same --batches-per-epoch)" if cut[0] != cut[1] else "")
                out.append(_raw(cls.code, f"the learning rate of `{now['class']}`'s group "
                                f"{group} differs from the baseline's at step {step + 1}: "
                                f"baseline {old[step]:.3g}, now {new[step]:.3g}{schedulers}; "
                                f"baseline schedule {_text(old[:common])}, now "
                                f"{_text(new[:common])}{budget}", site,
                                f"optimizers[{index}]",
                                related))
                break
        return out


class ModeChangedInPhase(RunRule):
    """A model ran in another mode (train/eval) in a phase than in the baseline.

    ## What it does
    `modellint run --compare BASELINE`: for each model and phase (calls with gradients, the
    training phase; calls without, evaluation), compares the modes it was called in, and
    reports a mode the baseline never saw in that phase at the first such call (with the
    `eval()` call as a related line).

    ## Why is this bad?
    A moved `model.eval()` or a forgotten `model.train()` changes dropout and batch norm
    silently: training in eval mode uses the running statistics and no dropout; evaluating
    in train mode reports noisy, batch-dependent metrics and updates the statistics.

    ## Example
        model.eval()
        for x, y in loader:  # training, in eval mode now
            loss_fn(model(x), y).backward()

    ## Use instead
        model.train()
        for x, y in loader:
            loss_fn(model(x), y).backward()
    """

    code = "ML332"
    name = "mode-changed-in-phase"
    severity = Severity.ERROR

    valid = [_same_script_other_seed()]
    invalid = [_changed("    model.train()|mse_loss(model(x), y).backward()\n",
                        "    model.eval()|mse_loss(model(x), y).backward()  # <-\n")]

    def check(self, record) -> None:
        return None

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        out = []
        phases = {"grad": "with gradients (training)", "no_grad": "without gradients "
                  "(evaluation)"}
        for key, before, now in _common_models(baseline, observed):
            for phase, modes in before["modes"].items():
                mine = now["modes"].get(phase)
                if not mine:
                    continue
                old = sorted(m for m, n in modes.items() if n)
                new = sorted(m for m, n in mine.items() if n)
                added = [m for m in new if m not in old]
                if not added:
                    continue
                sites = _sites(observed)["models"].get(key) or {}
                site = (sites.get("calls") or {}).get(f"{phase}.{added[0]}")
                evals = (sites.get("evals") or {}).get(f"{phase}.{added[0]}") or sites.get(
                    "eval")
                out.append(_raw(cls.code, f"`{key}` was called in {added[0]} mode "
                                f"{phases.get(phase, phase)}: baseline {'/'.join(old)} mode "
                                f"only, now {', '.join(f'{m} {mine[m]}x' for m in new)}",
                                site, key, [(evals, "`eval()` called here")] if evals else []))
        return out


class DtypeOrDeviceChanged(RunRule):
    """A model's parameters or inputs have another dtype or device than in the baseline.

    ## What it does
    `modellint run --compare BASELINE`: compares each parameter's dtype and device, and the
    dtype and device of the first tensor each model is called with in each phase, and reports
    a change at the `.to()` / `.half()` call that made it when it was seen (the model's call
    otherwise), with both values.

    ## Why is this bad?
    A parameter that became float16 without a GradScaler, inputs that are float64 now, or a
    model left on the CPU on one code path: the run still works, slower or less accurately.

    ## Example
        model = Net().double()

    ## Use instead
        model = Net()
    """

    code = "ML333"
    name = "dtype-or-device-changed"
    severity = Severity.WARNING

    valid = [_same_script_other_seed()]
    invalid = [_changed("torch.randn(64, 8)|nn.Linear(16, 1))\n",
                        "torch.randn(64, 8).double()|nn.Linear(16, 1)).double()  # <-\n")]

    def check(self, record) -> None:
        return None

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        out = []
        for key, before, now in _common_models(baseline, observed):
            changed: dict[tuple, list[str]] = {}
            for name, param in before["parameters"].items():
                new = now["parameters"].get(name)
                if new is None:
                    continue
                was = f"{param['dtype']} {param['device']}"
                became = f"{new['dtype']} {new['device']}"
                if was != became:
                    changed.setdefault((was, became), []).append(f"{key}.{name}")
            for (was, became), names in changed.items():
                cast = (_sites(observed)["params"].get(names[0]) or {}).get("cast")
                out.append(_raw(cls.code, f"{len(names)} parameter(s) of `{key}` "
                                f"({_names(names)}) are {became} now: baseline {was}, now "
                                f"{became}", cast or _model_call(observed, key), names[0]))
            for phase, kinds in before["inputs"].items():
                mine = now["inputs"].get(phase)
                if not mine or set(mine) <= set(kinds):
                    continue
                new_kinds = [k for k in mine if k not in kinds]
                site = ((_sites(observed)["models"].get(key) or {}).get("inputs") or {}).get(
                    f"{phase}.{new_kinds[0]}")
                out.append(_raw(cls.code, f"`{key}` is called with {new_kinds[0]} inputs "
                                f"{'with' if phase == 'grad' else 'without'} gradients: "
                                f"baseline {', '.join(kinds)}, now {', '.join(mine)}",
                                site, f"{key}.inputs"))
        return out


class ParamGroupsChanged(RunRule):
    """The optimizers, their parameter groups or the groups' options differ from the baseline.

    ## What it does
    `modellint run --compare BASELINE`: compares the optimizers (their kinds, in order of
    construction), the parameters each group holds and each group's options other than the
    learning rate (weight decay, momentum, betas, ...), and reports a difference at the
    optimizer's construction, naming the parameters that moved and both values.

    ## Why is this bad?
    A new parameter filter that sends the norms into the weight-decayed group, a head left out
    of the optimizer, a momentum lost in a config refactor: training changes, silently.

    ## Example
        decay = [p for n, p in model.named_parameters() if "bias" not in n]  # norms now too

    ## Use instead
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    """

    code = "ML334"
    name = "param-groups-changed"
    severity = Severity.WARNING

    valid = [_same_script_other_seed()]
    invalid = [_changed("momentum=0.9)\n", "momentum=0.5)  # <-\n")]

    def check(self, record) -> None:
        return None

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        out = []
        old_kinds = [o["class"] for o in baseline["optimizers"]]
        new_kinds = [o["class"] for o in observed["optimizers"]]
        if old_kinds != new_kinds:
            out.append(_raw(cls.code, f"the optimizers differ from the baseline's: baseline "
                            f"{', '.join(old_kinds) or 'none'}, now "
                            f"{', '.join(new_kinds) or 'none'}", _optimizer_site(observed, 0),
                            "optimizers"))
        for index, (before, now) in enumerate(zip(baseline["optimizers"],
                                                  observed["optimizers"], strict=False)):
            if before["class"] != now["class"]:
                continue
            site = _optimizer_site(observed, index)
            old_groups, new_groups = before["groups"], now["groups"]
            if len(old_groups) != len(new_groups):
                out.append(_raw(cls.code, f"`{now['class']}` has {len(new_groups)} parameter "
                                f"group(s): baseline {len(old_groups)}, now {len(new_groups)}",
                                site, f"optimizers[{index}]"))
                continue
            for g, (old, new) in enumerate(zip(old_groups, new_groups, strict=True)):
                gone = [n for n in old["params"] if n not in set(new["params"])]
                came = [n for n in new["params"] if n not in set(old["params"])]
                if gone or came:
                    parts = []
                    if gone:
                        parts.append(f"no longer holds {len(gone)} ({_names(gone)})")
                    if came:
                        parts.append(f"now holds {len(came)} more ({_names(came)})")
                    out.append(_raw(cls.code, f"group {g} of `{now['class']}` "
                                    f"{' and '.join(parts)}: baseline {len(old['params'])} "
                                    f"parameter(s), now {len(new['params'])}", site,
                                    f"optimizers[{index}].groups[{g}]"))
                for option in sorted(set(old["options"]) | set(new["options"])):
                    a, b = old["options"].get(option), new["options"].get(option)
                    if a != b:
                        out.append(_raw(cls.code, f"the option `{option}` of group {g} of "
                                        f"`{now['class']}` changed: baseline {a}, now {b}",
                                        site, f"optimizers[{index}].groups[{g}].{option}"))
        return out


class RanksNoLongerAgree(RunRule):
    """Under torchrun, the ranks hold different parameters where they agreed in the baseline.

    ## What it does
    `modellint run --compare BASELINE -- torchrun ...`: the baseline records whether the
    ranks held the same parameters after their first optimizer steps; this run's ranks are
    compared the same way, and parameters that differ now are reported at the optimizer's
    step.

    ## Why is this bad?
    A model no longer wrapped in `DistributedDataParallel` on one code path, or a module
    added outside the wrapper: each rank trains its own copy and the checkpoint is rank 0's.

    ## Example
        if args.compile:
            model = torch.compile(model)  # and the DDP wrapper is only in the else branch

    ## Use instead
        model = DistributedDataParallel(model)
        if args.compile:
            model = torch.compile(model)
    """

    code = "ML335"
    name = "ranks-no-longer-agree"
    severity = Severity.ERROR

    def check(self, record) -> None:
        return None

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        before, now = baseline.get("ranks"), observed.get("ranks")
        if not before or not now or not before.get("params_agree") or now["params_agree"]:
            return []
        sites = _sites(observed)["optimizers"]
        step = next((s["steps"][0] for s in sites if s.get("steps")), None)
        differ = list(now.get("differ") or [])
        return [_raw(cls.code, f"the {now['count']} ranks hold different values of "
                     f"{len(differ)} parameter(s) ({_names(differ)}) after their first "
                     f"steps: baseline all ranks agree, now they differ", step, "ranks")]


def _band_rule(code: str, kind: str, what: str):
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        runs = int(baseline.get("runs", 1))
        slack = 10.0 if runs <= 1 else 5.0 if runs == 2 else 3.0
        out = []
        left: dict[str, list[str]] = {}
        for layer, bands in baseline["layers"].items():
            band = bands.get(kind)
            mine = (observed["layers"].get(layer) or {}).get(kind)
            if not band or not mine:
                continue
            low, high = band[0] / slack, band[1] * slack
            if mine[1] > high and mine[1] > 1e-12:
                left.setdefault(layer.partition(".")[0], []).append(
                    f"`{layer}` {mine[1]:.3g} above {band[0]:.3g}..{band[1]:.3g}")
            elif mine[0] < low and band[0] > 1e-12:
                left.setdefault(layer.partition(".")[0], []).append(
                    f"`{layer}` {mine[0]:.3g} below {band[0]:.3g}..{band[1]:.3g}")
        for model, layers in left.items():
            out.append(_raw(code, f"the {what} of {len(layers)} layer(s) of `{model}` left "
                            f"the baseline's band (x{slack:g} around it, from "
                            f"{runs} recorded run(s)): {'; '.join(layers[:3])}"
                            f"{' ...' if len(layers) > 3 else ''} (baseline band, now)",
                            _model_call(observed, model), f"{model}.{kind}"))
        return out
    return classmethod(compare_baseline)


class GradientNormBandLeft(RunRule):
    """A layer's gradient norm left the band it kept in the baseline.

    ## What it does
    `modellint run --compare BASELINE`: the baseline keeps, per layer, the lowest and highest
    gradient norm over the sampled steps; a layer of this run whose norm goes more than the
    margin (10x for a baseline of one run, 5x of two, 3x of three or more) above or below it
    is reported at the model's call, with both values.

    ## Why is this bad?
    Gradients 100x larger or smaller than a known-good run's come from a changed loss
    scale or reduction (`sum` for `mean`), a normalisation lost in the data, an
    initialisation changed: the run goes on, diverging or learning nothing.

    ## Example
        loss = F.cross_entropy(logits, y, reduction="sum")  # was the mean

    ## Use instead
        loss = F.cross_entropy(logits, y)
    """

    code = "ML336"
    name = "gradient-norm-band-left"
    severity = Severity.WARNING

    valid = [_same_script_other_seed()]
    invalid = [_changed("nn.functional.mse_loss(model(x), y).backward()\n",
                        "(1000 * nn.functional.mse_loss(model(x), y)).backward()  # <-\n")]

    def check(self, record) -> None:
        return None

    compare_baseline = _band_rule("ML336", "grad_norm", "gradient norm")


class UpdateRatioBandLeft(RunRule):
    """A layer's update/weight ratio left the band it kept in the baseline.

    ## What it does
    `modellint run --compare BASELINE`: the baseline keeps, per layer, the lowest and highest
    ratio of a step's change to the weight's norm over the sampled steps; a layer of this
    run outside it by more than the margin (as for ML336) is reported at the model's call.

    ## Why is this bad?
    The update/weight ratio is how fast a layer learns (around 1e-3 is healthy): one 100x
    larger or smaller than a known-good run's means a changed learning rate, weight decay or
    optimizer for that layer, or a layer that hardly moves any more.

    ## Example
        optimizer = torch.optim.SGD(model.parameters(), lr=10.0)  # was 0.1

    ## Use instead
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    """

    code = "ML337"
    name = "update-ratio-band-left"
    severity = Severity.WARNING

    valid = [_same_script_other_seed()]
    invalid = [_changed("mse_loss(model(x), y).backward()\n",
                        "mse_loss(model(x), y).backward()  # <-\n"
                        "        optimizer.param_groups[0]['lr'] = 5.0\n")]

    def check(self, record) -> None:
        return None

    compare_baseline = _band_rule("ML337", "update_ratio", "update/weight ratio")


class LossTrendChanged(RunRule):
    """The loss went down in the baseline and does not now.

    ## What it does
    `modellint run --compare BASELINE`: the baseline keeps the loss's trend (the mean of the
    last 5 losses against the first 5: decreasing below 0.9x); a run whose loss decreased in
    the baseline and does not decrease at all now (the last 5 at or above the first 5) is
    reported at the first optimizer step, with both runs' losses.

    ## Why is this bad?
    The plainest sign that the change stopped training: labels shuffled apart from their
    inputs, a loss computed on the wrong tensor, a learning rate of 0.

    ## Example
        loss = loss_fn(model(x), y[torch.randperm(len(y))])

    ## Use instead
        loss = loss_fn(model(x), y)
    """

    code = "ML338"
    name = "loss-trend-changed"
    severity = Severity.WARNING

    valid = [_same_script_other_seed()]
    invalid = [_changed("backward()\n        optimizer.step()\n",
                        "backward()\n        optimizer.param_groups[0]['lr'] = 0.0\n"
                        "        optimizer.step()  # <-\n")]

    def check(self, record) -> None:
        return None

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        before, now = baseline.get("loss"), observed.get("loss")
        if not before or not now or before.get("trend") != "decreasing":
            return []
        if not now["last"] >= now["first"]:
            return []
        sites = _sites(observed)["optimizers"]
        step = next((s["steps"][0] for s in sites if s.get("steps")), None)
        return [_raw(cls.code, f"the loss no longer goes down: baseline "
                     f"{before['first']:.4g} → {before['last']:.4g} (decreasing), now "
                     f"{now['first']:.4g} → {now['last']:.4g} ({now['trend']})", step, "loss")]


class ModelsChanged(RunRule):
    """The models, their wrappers or their parameters differ from the baseline's.

    ## What it does
    `modellint run --compare BASELINE`: compares the models called (by class), the wrapper
    around each (`DistributedDataParallel`, `torch.compile`) and each model's parameters
    (names and shapes), and reports a model gone, a wrapper gone or added, and parameters
    added, removed or reshaped, at the model's call.

    ## Why is this bad?
    A model no longer wrapped in DDP on one code path trains on each rank apart; a layer
    added or resized by a config change is a different model than the one that was known to
    train.

    ## Example
        model = Net() if args.single else DistributedDataParallel(Net())

    ## Use instead
        model = DistributedDataParallel(Net())
    """

    code = "ML339"
    name = "models-changed"
    severity = Severity.WARNING

    valid = [_same_script_other_seed()]
    invalid = [_changed("nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1)|"
                        "mse_loss(model(x), y).backward()\n",
                        "nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1)|"
                        "mse_loss(model(x), y).backward()  # <-\n")]

    def check(self, record) -> None:
        return None

    @classmethod
    def compare_baseline(cls, baseline: dict, observed: dict) -> list[Raw]:
        out = []
        gone = [k for k in baseline["models"] if k not in observed["models"]]
        came = [k for k in observed["models"] if k not in baseline["models"]]
        if gone or came:
            site = _model_call(observed, came[0]) if came else _optimizer_site(observed, 0)
            out.append(_raw(cls.code, f"the models called differ from the baseline's: "
                            f"baseline {', '.join(baseline['models']) or 'none'}, now "
                            f"{', '.join(observed['models']) or 'none'}", site, "models"))
        for key, before, now in _common_models(baseline, observed):
            site = _model_call(observed, key)
            if before.get("wrapper") != now.get("wrapper"):
                out.append(_raw(cls.code, f"`{key}` is wrapped differently: baseline "
                                f"{before.get('wrapper') or 'not wrapped'}, now "
                                f"{now.get('wrapper') or 'not wrapped'}", site,
                                f"{key}.wrapper"))
            old, new = before["parameters"], now["parameters"]
            removed = [n for n in old if n not in new]
            added = [n for n in new if n not in old]
            reshaped = [n for n in old if n in new and old[n]["shape"] != new[n]["shape"]]
            parts = []
            if removed:
                parts.append(f"{len(removed)} removed ({_names(removed)})")
            if added:
                parts.append(f"{len(added)} added ({_names(added)})")
            if reshaped:
                n = reshaped[0]
                parts.append(f"{len(reshaped)} reshaped (`{n}`: baseline "
                             f"{'x'.join(map(str, old[n]['shape']))}, now "
                             f"{'x'.join(map(str, new[n]['shape']))})")
            if parts:
                out.append(_raw(cls.code, f"the parameters of `{key}` differ from the "
                                f"baseline's: {'; '.join(parts)}", site, f"{key}.parameters"))
        return out


BASELINE_RULES = [ParameterNoLongerTrains, LearningRateScheduleChanged, ModeChangedInPhase,
                  DtypeOrDeviceChanged, ParamGroupsChanged, RanksNoLongerAgree,
                  GradientNormBandLeft, UpdateRatioBandLeft, LossTrendChanged, ModelsChanged]


@hookimpl
def modellint_add_rules():
    return BASELINE_RULES
