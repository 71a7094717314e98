"""Training behaviour as a regression test: what held in a watched run (`observe`), written as a
small versioned JSON baseline (`modellint run --record`), and read back to compare a later run
with (`--compare`; the rules of `modellint.rules.run_baseline` do the comparing).

The baseline is meant to be committed, so it is read as untrusted input: JSON only, a bounded
size, every field checked for its type (`load`); a file that is not a baseline of this version
is one `BaselineError` naming what is wrong. The format is documented in docs/run-baseline.md.

An observation is the baseline of one run plus `sites`: the user's lines of this run (where
each optimizer, scheduler, model call, freeze and cast was), which locate the findings and are
never written to the baseline (paths and lines move between commits).
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

from modellint.finding import RawFinding

VERSION = 1
FORMAT = "modellint-baseline"
MAX_BYTES = 8 * 1024 * 1024  # a baseline of a large model is well under 1 MiB
LOSS_WINDOW = 5  # losses averaged at each end of the run for its trend

_WRAPPERS = ("DistributedDataParallel", "DataParallel", "OptimizedModule")


class BaselineError(ValueError):
    """A baseline file that cannot be used: the message says why."""


# -- observing a run ---------------------------------------------------------------------------
def observe(recorder) -> dict[str, Any]:
    """What held in the watched run: the baseline of this run, with its `sites`."""
    sites: dict[str, Any] = {"models": {}, "optimizers": [], "params": {}}
    names: dict[int, str] = {}  # parameter id -> "Model.path"
    models: dict[str, Any] = {}
    owners: dict[int, str] = {}  # module id -> "Model.module path" (a layer)
    trained = {i for rec in recorder.optimizers.values() for i in rec.updated}
    for rec in recorder._whole_models():
        model, wrapper = _unwrap(rec.model)
        key = _unique(_class_name(model), models)
        params: dict[str, Any] = {}
        for path, sub in model.named_modules():
            for name, p in sub.named_parameters(recurse=False):
                full = f"{path}.{name}" if path else name
                if id(p) in names:
                    continue
                names[id(p)] = f"{key}.{full}"
                owners[id(sub)] = f"{key}.{path}" if path else key
                params[full] = {"shape": list(p.shape), "dtype": _dtype(p.dtype),
                                "device": p.device.type, "requires_grad": bool(p.requires_grad),
                                "trained": id(p) in trained}
                site = recorder.frozen_sites.get(id(p))
                cast = recorder.cast_sites.get(id(p))
                if site or cast:
                    sites["params"][f"{key}.{full}"] = {"frozen": site, "cast": cast}
        modes: dict[str, dict[str, int]] = {}
        for forward in rec.forwards:
            phase = modes.setdefault("grad" if forward.grad else "no_grad", {})
            mode = "train" if forward.training else "eval"
            phase[mode] = phase.get(mode, 0) + 1
        inputs: dict[str, list[str]] = {}
        for (phase_name, dtype, device) in rec.inputs:
            inputs.setdefault(phase_name, []).append(f"{dtype.replace('torch.', '')} {device}")
        models[key] = {"class": _class_name(model), "wrapper": wrapper,
                       "parameters": params, "modes": modes,
                       "inputs": {k: sorted(v) for k, v in sorted(inputs.items())}}
        first: dict[str, Any] = {}
        evals: dict[str, Any] = {}  # the last eval() before each first call in eval mode
        for forward in rec.forwards:
            phase_name = "grad" if forward.grad else "no_grad"
            mode = "train" if forward.training else "eval"
            name = f"{phase_name}.{mode}"
            if name not in first:
                first[name] = forward.site
                before = [site for site, _, order in rec.eval_sites if order < forward.order]
                if mode == "eval" and before:
                    evals[name] = before[-1]
        sites["models"][key] = {"calls": first, "evals": evals,
                                "inputs": {f"{p}.{d.replace('torch.', '')} {dev}": s
                                           for (p, d, dev), s in rec.inputs.items()},
                                "eval": rec.eval_sites[0][0] if rec.eval_sites else None}
    optimizers = []
    for opt_rec in recorder.optimizers.values():
        groups = []
        for index, group in enumerate(opt_rec.optimizer.param_groups):
            at_first = opt_rec.first_options or []
            groups.append({"params": [names.get(id(p), f"<not in a model: "
                                      f"{'x'.join(map(str, p.shape)) or 'scalar'}>")
                                      for p in group["params"]],
                           "options": at_first[index] if index < len(at_first) else
                           group_options(group)})
        schedulers = [s for s in recorder.schedulers.values()
                      if getattr(s.scheduler, "optimizer", None) is opt_rec.optimizer]
        lrs = [[row[i] for row in opt_rec.lrs if i < len(row)] for i in range(len(groups))]
        optimizers.append({"class": opt_rec.name, "groups": groups,
                           "schedulers": [s.name for s in schedulers],
                           # steps GradScaler skipped move the schedule by the data: not kept
                           "lr": None if opt_rec.skipped else [_runs(values) for values in lrs]})
        sites["optimizers"].append({"created": opt_rec.created,
                                    "schedulers": [s.created for s in schedulers],
                                    "steps": opt_rec.step_sites[:1]})
    layers: dict[str, Any] = {}
    for kind, bands in (("grad_norm", recorder.layers.grad), ("update_ratio",
                                                              recorder.layers.update)):
        for module, (low, high) in bands.items():
            layer = owners.get(module)
            if layer is None:
                continue
            band = layers.setdefault(layer, {}).setdefault(kind, [low, high])
            band[0], band[1] = min(band[0], low), max(band[1], high)
    losses = recorder.losses
    return {"format": FORMAT, "version": VERSION, "runs": 1, "steps": recorder.total_steps,
            "batches_per_epoch": recorder.batches_per_epoch,
            "models": models, "optimizers": optimizers,
            "layers": {k: {kind: [_round(v) for v in band] for kind, band in sorted(v.items())}
                       for k, v in sorted(layers.items())},
            "loss": _trend(losses), "ranks": None, "sites": sites}


def _class_name(model) -> str:
    """The model's class; FSDP2's `fully_shard` swaps it for a subclass made on the fly
    (`FSDPNet`): the user's class is named instead."""
    cls = type(model)
    if any(base.__name__ == "FSDPModule" for base in cls.__mro__[1:]):
        for base in cls.__mro__[1:]:
            if base.__name__ != "FSDPModule" and not base.__name__.startswith("FSDP"):
                return base.__name__
    return cls.__name__


def _unwrap(model) -> tuple[Any, str | None]:
    if _class_name(model) != type(model).__name__:
        return model, "fully_shard"
    wrapper = None
    for _ in range(3):
        name = type(model).__name__
        inner = getattr(model, "module", None) if name in ("DistributedDataParallel",
                                                            "DataParallel") else \
            getattr(model, "_orig_mod", None) if name == "OptimizedModule" else None
        if inner is None:
            break
        wrapper = name if wrapper is None else f"{wrapper}({name})"
        model = inner
    return model, wrapper


def _unique(name: str, taken: dict) -> str:
    if name not in taken:
        return name
    index = 2
    while f"{name}#{index}" in taken:
        index += 1
    return f"{name}#{index}"


def _dtype(dtype) -> str:
    return str(dtype).replace("torch.", "")


def group_options(group: dict) -> dict[str, Any]:
    """A group's options other than its parameters and the learning rate (compared as the
    schedule): numbers, booleans and short tuples of numbers. Taken at the optimizer's first
    step: a scheduler may change them later (OneCycleLR cycles the momentum)."""
    out: dict[str, Any] = {}
    for key, value in sorted(group.items()):
        if key in ("params", "lr", "initial_lr", "name"):
            continue
        if isinstance(value, bool) or value is None:
            out[key] = value
        elif isinstance(value, (int, float)) and math.isfinite(value):
            out[key] = _round(value)
        elif isinstance(value, (tuple, list)) and len(value) <= 4 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            out[key] = [_round(v) for v in value]
    return out


def _round(value: float) -> float:
    return float(f"{value:.6g}") if math.isfinite(value) else value


def _runs(values: list[float]) -> list[list[float]]:
    """[[value, how many steps in a row], ...]: a schedule as it reads."""
    out: list[list[float]] = []
    for value in values:
        value = _round(value)
        if out and out[-1][0] == value:
            out[-1][1] += 1
        else:
            out.append([value, 1])
    return out


def expand(runs: list[list[float]]) -> list[float]:
    return [value for value, count in runs for _ in range(int(count))]


def _trend(losses: list[float]) -> dict[str, Any] | None:
    finite = [v for v in losses if math.isfinite(v)]
    if len(finite) < 2 * LOSS_WINDOW:
        return None
    first = sum(finite[:LOSS_WINDOW]) / LOSS_WINDOW
    last = sum(finite[-LOSS_WINDOW:]) / LOSS_WINDOW
    ratio = last / first if first else 1.0
    trend = "decreasing" if ratio < 0.9 else "increasing" if ratio > 1.1 else "flat"
    return {"trend": trend, "first": _round(first), "last": _round(last)}


def agree_across_ranks(prints: list[list[dict]]) -> dict[str, Any] | None:
    """Under torchrun: whether the ranks held the same parameters after their first steps
    (the fingerprints `RanksDiverge` compares), and which parameters differed."""
    if len(prints) < 2:
        return None
    differ: list[str] = []
    first = prints[0]
    for index, entry in enumerate(first):
        for other in prints[1:]:
            if index >= len(other):
                continue
            for name, value in entry["params"].items():
                theirs = other[index]["params"].get(name)
                if theirs is not None and not math.isclose(value, theirs, rel_tol=1e-5,
                                                           abs_tol=1e-6) and name not in differ:
                    differ.append(name)
    return {"count": len(prints), "params_agree": not differ, "differ": differ[:20]}


# -- writing, merging ------------------------------------------------------------------------
def baseline_of(observation: dict[str, Any]) -> dict[str, Any]:
    """The part of an observation that is written (no sites)."""
    return {k: v for k, v in observation.items() if k != "sites"}


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two recorded runs in one baseline: bands widen to hold both runs' values, what differed
    between them stops being an invariant (a learning-rate schedule that differed is kept as
    null and not compared; a loss trend that differed becomes "any"; modes and inputs seen in
    either run are both allowed), and `runs` counts them (the margin around the bands narrows
    with it: see `margin`)."""
    out = json.loads(json.dumps(new))
    out["runs"] = int(old.get("runs", 1)) + 1
    for key, model in out["models"].items():
        before = old["models"].get(key)
        if before is None:
            continue
        for phase, modes in before.get("modes", {}).items():
            mine = model["modes"].setdefault(phase, {})
            for mode, count in modes.items():
                mine[mode] = mine.get(mode, 0) + count
        for phase, kinds in before.get("inputs", {}).items():
            model["inputs"][phase] = sorted(set(model["inputs"].get(phase, [])) | set(kinds))
        for name, param in model["parameters"].items():
            was = before.get("parameters", {}).get(name)
            if was is not None:  # trained in either run: it trains (a seed's zero gradient)
                param["trained"] = bool(param["trained"] or was.get("trained"))
    for layer, bands in out["layers"].items():
        for kind, band in bands.items():
            was = old["layers"].get(layer, {}).get(kind)
            if was:
                band[0], band[1] = min(band[0], was[0]), max(band[1], was[1])
    for index, opt in enumerate(out["optimizers"]):
        if index >= len(old["optimizers"]):
            break
        was = old["optimizers"][index].get("lr")
        for group, runs in enumerate(opt["lr"]):
            before = was[group] if was is not None and group < len(was) else None
            if before is None:
                opt["lr"] = None
                break
            a, b = expand(before), expand(runs)
            common = min(len(a), len(b))
            if a[:common] != b[:common]:
                opt["lr"] = None
                break
            if len(a) > len(b):  # the longer schedule is kept
                opt["lr"][group] = before
    if old.get("loss") and out.get("loss") and old["loss"]["trend"] != out["loss"]["trend"]:
        out["loss"]["trend"] = "any"
    return out


def margin(runs: int) -> float:
    """How far outside its band a layer's gradient norm or update ratio may go before it is a
    finding: 10x around a band seen in one run, 5x in two, 3x in three or more."""
    return 10.0 if runs <= 1 else 5.0 if runs == 2 else 3.0


def write(path: str, tree, baseline: dict[str, Any]) -> None:
    """The baseline at `path`, replaced atomically (`modellint.safe_write.replacing`)."""
    from modellint.safe_write import replacing

    text = dumps(baseline)
    with replacing(path, tree) as handle:
        handle.write(text)


def dumps(baseline: dict[str, Any]) -> str:
    """The baseline as it is written: objects one key a line, sorted; lists of plain values
    (shapes, bands, a schedule's runs) on one line, so that a diff reads as what changed."""
    return _dumps(baseline_of(baseline), "") + "\n"


def _dumps(value: Any, indent: str) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "  "
        items = [f"{inner}{json.dumps(str(k))}: {_dumps(v, inner)}"
                 for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value) or all(
                isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v)
                for v in value):
            return json.dumps(value, allow_nan=False)
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + _dumps(v, inner) for v in value) + "\n" + \
            indent + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "null"
    return json.dumps(value)


# -- reading (untrusted) ---------------------------------------------------------------------
def load(path: str) -> dict[str, Any]:
    """The baseline at `path`, checked field by field; BaselineError when it is not a readable
    regular file, not JSON, too large, or not a baseline of this version."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise BaselineError(f"{path} does not exist (record one with --record)") from None
    except OSError as exc:
        raise BaselineError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise BaselineError(f"{path} is a link; name the baseline file itself")
    if not stat.S_ISREG(info.st_mode):
        raise BaselineError(f"{path} is not a regular file")
    if info.st_size > MAX_BYTES:
        raise BaselineError(f"{path} is {info.st_size} bytes, more than a baseline's "
                            f"{MAX_BYTES}")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read {path}: {exc}") from None
    return parse(text, path)


def parse(text: str, where: str = "the baseline") -> dict[str, Any]:
    def constant(name: str):
        raise ValueError(f"{name} is not allowed")

    try:
        data = json.loads(text, parse_constant=constant)
    except (ValueError, RecursionError) as exc:
        raise BaselineError(f"{where} is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{where} is not a modellint baseline (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise BaselineError(f"{where} is a baseline of version {_short(data.get('version'))}; "
                            f"this modellint reads version {VERSION}: record it again "
                            f"(--record, or --compare with --update)")
    try:
        _check(data)
    except _Bad as exc:
        raise BaselineError(f"{where}: {exc}") from None
    return data


class _Bad(Exception):
    pass


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _need(value: Any, kind, where: str) -> Any:
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, float, (
        int, float)))
    if not ok:
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _Bad(f"`{where}` must be {names}, got {_short(value)}")
    return value


def _band(value: Any, where: str) -> None:
    _need(value, list, where)
    if len(value) != 2:
        raise _Bad(f"`{where}` must be [low, high]")
    for v in value:
        _need(v, (int, float), where)


def _check(data: dict[str, Any]) -> None:
    _need(data.get("runs"), int, "runs")
    _need(data.get("steps"), int, "steps")
    if data.get("batches_per_epoch") is not None:
        _need(data["batches_per_epoch"], int, "batches_per_epoch")
    for key, model in _need(data.get("models"), dict, "models").items():
        where = f"models.{key}"
        _need(model, dict, where)
        _need(model.get("class"), str, f"{where}.class")
        if model.get("wrapper") is not None:
            _need(model["wrapper"], str, f"{where}.wrapper")
        for name, param in _need(model.get("parameters"), dict, f"{where}.parameters").items():
            at = f"{where}.parameters.{name}"
            _need(param, dict, at)
            for field in ("dtype", "device"):
                _need(param.get(field), str, f"{at}.{field}")
            for field in ("requires_grad", "trained"):
                _need(param.get(field), bool, f"{at}.{field}")
            for size in _need(param.get("shape"), list, f"{at}.shape"):
                _need(size, int, f"{at}.shape")
        for phase, modes in _need(model.get("modes"), dict, f"{where}.modes").items():
            for mode, count in _need(modes, dict, f"{where}.modes.{phase}").items():
                _need(count, int, f"{where}.modes.{phase}.{mode}")
        for phase, kinds in _need(model.get("inputs"), dict, f"{where}.inputs").items():
            for kind in _need(kinds, list, f"{where}.inputs.{phase}"):
                _need(kind, str, f"{where}.inputs.{phase}")
    for index, opt in enumerate(_need(data.get("optimizers"), list, "optimizers")):
        where = f"optimizers[{index}]"
        _need(opt, dict, where)
        _need(opt.get("class"), str, f"{where}.class")
        for s in _need(opt.get("schedulers"), list, f"{where}.schedulers"):
            _need(s, str, f"{where}.schedulers")
        for g, group in enumerate(_need(opt.get("groups"), list, f"{where}.groups")):
            _need(group, dict, f"{where}.groups[{g}]")
            for name in _need(group.get("params"), list, f"{where}.groups[{g}].params"):
                _need(name, str, f"{where}.groups[{g}].params")
            _need(group.get("options"), dict, f"{where}.groups[{g}].options")
        if opt.get("lr") is not None:
            for g, runs in enumerate(_need(opt["lr"], list, f"{where}.lr")):
                for run in _need(runs, list, f"{where}.lr[{g}]"):
                    _band(run, f"{where}.lr[{g}]")
                    _need(run[1], int, f"{where}.lr[{g}]")
    for layer, bands in _need(data.get("layers"), dict, "layers").items():
        for kind, band in _need(bands, dict, f"layers.{layer}").items():
            _band(band, f"layers.{layer}.{kind}")
    loss = data.get("loss")
    if loss is not None:
        _need(loss, dict, "loss")
        if loss.get("trend") not in ("decreasing", "flat", "increasing", "any"):
            raise _Bad("`loss.trend` must be decreasing, flat, increasing or any")
    ranks = data.get("ranks")
    if ranks is not None:
        _need(ranks, dict, "ranks")
        _need(ranks.get("params_agree"), bool, "ranks.params_agree")


# -- comparing ---------------------------------------------------------------------------------
def compare(baseline: dict[str, Any], observed: dict[str, Any], registry, enabled,
            accept: list[str] | tuple[str, ...] = ()) -> list[RawFinding]:
    """The raw findings of the enabled baseline rules (those with `compare_baseline`), less
    the changes `accept` accepts: `CODE` (every change of that kind) or `CODE:GLOB` (those
    whose subject, a parameter, layer, model or optimizer, matches GLOB)."""
    from fnmatch import fnmatchcase

    raws: list[RawFinding] = []
    for code in sorted(enabled):
        check = registry.run_checks.get(code)
        compare_baseline = getattr(check, "compare_baseline", None)
        if compare_baseline is None:
            continue
        for raw in compare_baseline(baseline, observed):
            subject = raw.get("subject", "")
            if any(entry == code or (entry.startswith(code + ":")
                                     and fnmatchcase(subject, entry.partition(":")[2]))
                   for entry in accept):
                continue
            raws.append(RawFinding.from_json(raw))
    return raws

