"""The Python API: `modellint.check_model(...)` and `modellint.check_optimizer(...)`.

They run in the calling process (no worker subprocess): the caller's own code, typically a
test, already builds the model and its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from modellint.finding import Finding, Severity, line_finding
from modellint.runtime.engine import ModelCheck, default_registry, runtime_codes
from modellint.runtime.sources import class_location, source_line
from modellint.runtime.specs import display_path, normalise_inputs


@dataclass
class Report:
    """What `check_model` found: `findings`, `ok` (no error or warning), `trace` (one row per
    module call of the first forward: path, type, input/output shapes, params, device, dtype)."""

    findings: list[Finding] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    inputs: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.severity is not Severity.INFO for f in self.findings)

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def __str__(self) -> str:
        if not self.findings:
            return "modellint: no findings"
        lines = [f"{f.path}:{f.line}: {f.code} [{f.severity.value}] {f.message}"
                 for f in self.findings]
        return "\n".join(lines)

    def __bool__(self) -> bool:
        return self.ok


def runtime_finding(code: str, message: str, file: str | None, line: int) -> Finding:
    """A raw runtime finding (a run's `Raw`) as a report's finding, its path as displayed."""
    rule = default_registry().rules.get(code)
    text = source_line(file, line) if file else ""
    path = display_path(file, {}) if file else "<model>"
    return line_finding(rule, code, message, path, line, text, pass_="runtime")


def _selected(select, ignore) -> set[str]:
    """The runtime codes `select` / `ignore` choose (default: every one, on by default or
    not)."""
    from modellint.session import Session

    settings = Session.default(select or ("ALL",), ignore).settings
    return set(settings.enabled) & runtime_codes(settings.registry)


def check_model(model_or_factory, *example_inputs, device: str = "cpu", inputs=None,
                kwargs: dict | None = None, select=None, ignore=None, train: bool = True,
                target_gpu_memory: str | int | None = None, **input_kwargs) -> Report:
    """Run the runtime checks on a model (an `nn.Module`, or a class/function that builds one,
    which also enables ML505 and records the lines that built each sub-module).

    `example_inputs` (and keyword `input_kwargs`) are fed to `forward`; without them, `inputs`
    (shapes or specs as in `[[tool.modellint.runtime.models]]`) or an inferred input is used.
    `target_gpu_memory` (`"80GB"` or bytes) enables ML707.
    """
    memory_target = None
    if target_gpu_memory is not None:
        from modellint.runtime.memory import parse_size

        memory_target = (parse_size(target_gpu_memory) if isinstance(target_gpu_memory, str)
                         else int(target_gpu_memory))
    enabled = _selected(select, ignore)
    given = None
    if example_inputs or input_kwargs:
        given = (tuple(example_inputs), dict(input_kwargs))
    specs = normalise_inputs(inputs, "inputs") if inputs is not None else None
    if isinstance(model_or_factory, nn.Module):
        if device != "meta":
            model_or_factory.to(device)
        check = ModelCheck(instance=model_or_factory, given=given, specs=specs, device=device,
                           enabled=enabled, label=type(model_or_factory).__name__, train=train,
                           memory_target=memory_target)
    else:
        label = getattr(model_or_factory, "__name__", repr(model_or_factory))
        check = ModelCheck(factory=model_or_factory, kwargs=kwargs or {}, given=given,
                           specs=specs, device=device, enabled=enabled, label=label, train=train,
                           memory_target=memory_target)
    outcome = check.run()
    findings = [runtime_finding(r.code, r.message, r.file, r.line) for r in outcome.findings]
    return Report(findings=findings, trace=[r.to_json() for r in outcome.rows],
                  inputs=outcome.inputs, notes=outcome.notes)


def check_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer) -> Report:
    """ML305: parameters in two optimizer groups, trainable parameters in none, frozen ones
    passed to the optimizer."""
    names = {id(p): n for n, p in model.named_parameters()}
    seen: dict[int, list[int]] = {}
    for index, group in enumerate(optimizer.param_groups):
        for param in group["params"]:
            seen.setdefault(id(param), []).append(index)
    loc = class_location(type(model))
    file, line = loc if loc else (None, 1)
    findings = []
    twice = [f"`{names.get(k, '?')}` (groups {', '.join(map(str, g))})"
             for k, g in seen.items() if len(g) > 1]
    if twice:
        findings.append(runtime_finding(
            "ML305", f"{len(twice)} parameter(s) are in more than one optimizer group: "
            f"{', '.join(twice[:5])}; give each parameter one group", file, line))
    missing = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in seen]
    if missing:
        findings.append(runtime_finding(
            "ML305", f"{len(missing)} trainable parameter(s) are in no optimizer group and "
            f"never update: {', '.join(f'`{n}`' for n in missing[:5])}"
            f"{', ...' if len(missing) > 5 else ''}; add them or freeze them", file, line))
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad and id(p) in seen]
    if frozen:
        findings.append(runtime_finding(
            "ML305", f"{len(frozen)} frozen parameter(s) (requires_grad=False) were passed to "
            f"the optimizer: {', '.join(f'`{n}`' for n in frozen[:5])}; pass only "
            f"`p for p in model.parameters() if p.requires_grad`", file, line))
    return Report(findings=findings)
