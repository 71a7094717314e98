"""Check one model: the enabled runtime checks of the registry over one run of it.

`ModelCheck(...).run()` returns an `Outcome`: raw findings (code, message, file, line), the
trace rows of the first forward, and notes. It runs in a worker subprocess for `check
--runtime` and in-process for the Python API, `trace` and the pytest plugin. The phases are
run by `modellint.runtime.run.Runner`; what is checked is the rule classes'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any

from torch import nn

from modellint.plugins import default_registry
from modellint.records import record
from modellint.runtime.phases import INTERNAL, NOT_CHECKED, first_line  # noqa: F401
from modellint.runtime.run import Raw, Runner


def runtime_codes(registry=None) -> set[str]:
    """Every code the runtime pass can report: the codes of the registered runtime checks,
    and those of rules run by the runtime pass without a check (the runner's own)."""
    registry = registry or default_registry()
    return set(registry.runtime_checks) | {
        code for code, rule in registry.rules.items() if "runtime" in rule.passes}


def checks_for(codes: Iterable[str] | None, registry=None) -> list[Any]:
    """Instances of the runtime checks of `codes` (None: all), in code order."""
    registry = registry or default_registry()
    chosen = registry.runtime_checks if codes is None else {
        c: registry.runtime_checks[c] for c in codes if c in registry.runtime_checks}
    return [chosen[code]() for code in sorted(chosen)]


@record
class Outcome:
    findings: list[Raw] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    inputs: str = ""
    parameters: int = 0
    built: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [f.to_json() for f in self.findings],
            "notes": self.notes, "inputs": self.inputs, "parameters": self.parameters,
            "built": self.built,
        }


class ModelCheck:
    """One model through the runtime checks of `enabled` codes (None: all of them), or
    through `checks` (instances) when given. The other arguments are `Runner`'s."""

    def __init__(
        self,
        *,
        factory: Callable[..., nn.Module] | None = None,
        instance: nn.Module | None = None,
        enabled: Iterable[str] | None = None,
        checks: list[Any] | None = None,
        **options: Any,
    ) -> None:
        if checks is None:
            checks = checks_for(enabled)
        own = (NOT_CHECKED, INTERNAL) if enabled is None else [
            c for c in (NOT_CHECKED, INTERNAL) if c in set(enabled)]
        self.runner = Runner(checks, factory=factory, instance=instance, own_codes=own,
                             **options)

    def run(self) -> Outcome:
        run = self.runner.run()
        first = run.first
        return Outcome(findings=list(run.findings), rows=first.rows if first else [],
                       notes=list(run.notes), inputs=run.inputs, parameters=run.parameters,
                       built=run.built)
