"""The Python API: `modellint.check_model(...)` and `modellint.check_optimizer(...)`.

They run in the calling process (no worker subprocess): the caller's own code, typically a
test, already builds the model and its inputs.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

import torch
from torch import nn

from modellint.finding import Finding, RawFinding, Severity
from modellint.records import record
from modellint.runtime.engine import ModelCheck, default_registry, runtime_codes
from modellint.runtime.sources import class_location
from modellint.runtime.specs import normalise_inputs


@record
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


def runtime_findings(raws, registry=None, hidden: bool = True) -> list[Finding]:
    """The report's findings of raw runtime findings (through `modellint.pipeline`), paths
    as displayed, without those a noqa of their line or file hides (`hidden=False`: all)."""
    from modellint.pipeline import Origin, findings_of
    from modellint.suppress import Suppressions

    registry = registry or default_registry()
    return findings_of(raws, Origin("runtime", registry.rules, {}, label="<model>",
                                    suppressions=Suppressions(None, None) if hidden
                                    else None))


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
    return Report(findings=runtime_findings(outcome.findings), trace=[r.to_json() for r in outcome.rows],
                  inputs=outcome.inputs, notes=outcome.notes)


def check_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer) -> Report:
    """ML305: parameters in two optimizer groups, trainable parameters in none, frozen ones
    passed to the optimizer (the check of the rule's run-time half), at the model's class."""
    registry = default_registry()
    model_location = class_location(type(model)) or (None, 1)
    raws: list[RawFinding] = []

    def report(code: str, message: str, location: tuple[str, int] | None) -> None:
        file, line = location or model_location
        raws.append(RawFinding(code, message, file, line))

    for _, check in sorted(registry.run_checks.items()):
        if callable(getattr(check, "check_optimizer", None)):
            check().check_optimizer(model, optimizer, report)
    return Report(findings=runtime_findings(raws, registry))
