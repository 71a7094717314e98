"""The findings of a watched run: the run checks on the record, then the one pipeline (rule,
line, suppression) every pass uses."""

from __future__ import annotations

from modellint.codes import INTERNAL_ERROR
from modellint.finding import Finding, RawFinding


def run_checks(recorder, registry, codes) -> None:
    """Every enabled run check on the record; a check that fails is an internal error."""
    from modellint.runtime.phases import INTERNAL, first_line

    for code in sorted(codes):
        check = registry.run_checks.get(code)
        if check is None:
            continue
        try:
            check().check(recorder)
        except Exception as exc:  # noqa: BLE001 - one failing check must not hide the others
            recorder.report(INTERNAL, f"the run check of {code} failed: {first_line(exc)}",
                            None)


def to_findings(raws: list[RawFinding], registry, enabled, suppressions=None,
                displays: dict[str, str] | None = None, label: str = "<run>") -> list[Finding]:
    """Findings of a run (through `modellint.pipeline`): each at its user line, suppressed
    by noqa and per-file-ignores; those of codes not `enabled` dropped (but ML001)."""
    from modellint.pipeline import Origin, findings_of
    from modellint.suppress import Suppressions

    kept = [raw for raw in raws if raw.code in enabled or raw.code == INTERNAL_ERROR]
    out = findings_of(kept, Origin("run", registry.rules, displays or {}, label=label,
                                   suppressions=suppressions or Suppressions(None, None),
                                   existing_files=True))
    out.sort(key=lambda f: f.sort_key())
    return out
