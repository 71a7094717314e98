"""The findings of a watched run: the run checks on the record, then the one pipeline (rule,
line, suppression) every pass uses."""

from __future__ import annotations

import os
from typing import Any

from modellint.finding import Finding, Related, line_finding


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


def to_findings(raws: list[dict[str, Any]], registry, enabled, suppressions=None,
                displays: dict[str, str] | None = None, label: str = "<run>") -> list[Finding]:
    """Findings of a run: each at its user line, suppressed by noqa and per-file-ignores."""
    from modellint.runtime.sources import source_line
    from modellint.runtime.specs import display_path
    from modellint.suppress import Suppressions

    suppressions = suppressions or Suppressions(None, None)
    out = []
    for raw in raws:
        code = raw["code"]
        rule = registry.rules.get(code)
        if code not in enabled and code not in ("ML001",):
            continue
        file, line = raw.get("file"), raw.get("line") or 1
        # the other lines of the mistake, named in the message as the report names files
        related = tuple(Related(display_path(r["file"], displays or {}), r.get("line") or 1,
                                r["message"])
                        for r in raw.get("related") or () if r.get("file")
                        and os.path.isfile(r["file"]))
        message = raw["message"] + "".join(f"; {r.message}: {r.path}:{r.line}" for r in related)
        if file and os.path.isfile(file):
            finding = line_finding(rule, code, message, display_path(file, displays or {}),
                                   line, source_line(file, line), pass_="run")
        else:
            file = None
            finding = line_finding(rule, code, message, label, 1, "", pass_="run")
        finding.related = related
        if not suppressions.hides(finding, file):
            out.append(finding)
    out.sort(key=lambda f: f.sort_key())
    return out
