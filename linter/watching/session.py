"""The in-process API of `modellint run`: `modellint.watch()`; its findings are made by
`modellint.watching.findings`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from modellint.finding import Finding, RawFinding
from modellint.watching.findings import run_checks, to_findings

if TYPE_CHECKING:
    from modellint.runtime.api import Report


class Watch:
    """`with modellint.watching() as w: train(...)`: the run's findings in `w.report`.

    `steps` stops the run (quietly, at the next `optimizer.step()`) once that many steps
    are taken; `batches_per_epoch` cuts each DataLoader iteration. `select` / `ignore` choose
    codes as on the command line. `baseline` (a path): compare the run with the baseline
    recorded there (ML330-ML339), or record it there when the file does not exist yet or
    `update` is given; `accept`: changes expected, as the `baseline-accept` configuration key
    takes them (["ML331", "ML330:Net.head.*"]).
    """

    def __init__(self, *, steps: int | None = None, batches_per_epoch: int | None = None,
                 select=None, ignore=None, baseline: str | os.PathLike | None = None,
                 update: bool = False, accept=()) -> None:
        from modellint.watching.record import Recorder

        self.baseline_path = os.fspath(baseline) if baseline is not None else None
        self.baseline = None
        if self.baseline_path is not None and os.path.lexists(self.baseline_path) \
                and not update:
            from modellint.watching.baseline import load

            self.baseline = load(self.baseline_path)  # BaselineError (a ValueError) if unusable
        self.update, self.accept = update, list(accept)
        self.recorder = Recorder(steps=steps, batches_per_epoch=batches_per_epoch,
                                 observe=self.baseline_path is not None)
        self.select, self.ignore = select, ignore
        self.report: Report | None = None
        self.observation: dict[str, Any] | None = None

    def __enter__(self) -> Watch:
        self.recorder.install()
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        from modellint.runtime.api import Report
        from modellint.watching.record import BudgetSpent

        self.recorder.uninstall()
        registry, enabled = _registry_and_codes(self.select, self.ignore)
        run_checks(self.recorder, registry, enabled)
        self.recorder.cleanup()
        raws = list(self.recorder.findings)
        failed = kind is not None and not issubclass(kind, BudgetSpent)
        if self.baseline_path is not None:
            raws += self._baseline(registry, enabled, may_write=not failed)
        findings = to_findings(raws, registry, enabled)
        self.report = Report(findings=findings, notes=list(self.recorder.notes))
        return kind is not None and issubclass(kind, BudgetSpent)

    def _baseline(self, registry, enabled, may_write: bool) -> list[RawFinding]:
        """Compared with the baseline when there is one; written when there is none yet, or
        `update`, and the block did not fail (`may_write`)."""
        from modellint.watching.baseline import compare, observe, write

        assert self.baseline_path is not None
        self.observation = observe(self.recorder)
        if self.baseline is not None:
            return compare(self.baseline, self.observation, registry, enabled, self.accept)
        if not may_write:
            return []
        folder = os.path.dirname(os.path.abspath(self.baseline_path))
        write(self.baseline_path, [folder], self.observation)
        self.recorder.note(f"baseline written to {self.baseline_path}")
        return []

    @property
    def findings(self) -> list[Finding]:
        return self.report.findings if self.report is not None else []

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def __str__(self) -> str:
        return str(self.report) if self.report is not None else "modellint: still watching"


def _registry_and_codes(select, ignore):
    """The registry and the run codes of `select` / `ignore` (default: the default-on ones)."""
    from modellint.session import Session

    settings = Session.default(select, ignore).settings
    return settings.registry, set(settings.run_codes())


def watch(*, steps: int | None = None, batches_per_epoch: int | None = None, select=None,
          ignore=None, baseline: str | os.PathLike | None = None, update: bool = False,
          accept=()) -> Watch:
    """Watch the training code run inside the `with` block; see `Watch`. `baseline`: a file
    (docs/run-baseline.md) recorded from this run when it does not exist (or `update`), and
    compared with it when it does (ML330-ML339; `accept` as the `baseline-accept` key)."""
    return Watch(steps=steps, batches_per_epoch=batches_per_epoch, select=select, ignore=ignore,
                 baseline=baseline, update=update, accept=accept)
