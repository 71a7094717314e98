"""The findings pipeline of the passes that report lines: raw findings (code, message, file,
line) of the runtime pass, of `modellint run` and of the Python API become `Finding`s here, and
only here: each at its line as the report names its file, in its notebook cell, without those
a suppression hides (`modellint.suppress`, the step the static engine applies too), once."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from modellint.finding import Finding, RawFinding, Related, line_finding


def _no_notebook(path: str) -> Any:
    return None


@dataclass(frozen=True)
class Origin:
    """What the findings of one pass (or one model of it) need to be shown: the rules that
    document their codes, how a file is named in the report, and what hides them."""

    pass_: str
    rules: Mapping[str, Any]
    # a real file's path as the report names it (relative, or as the linted file is shown)
    displays: Mapping[str, str] = field(default_factory=dict)
    # the path of a finding in no file (the model's label, the script)
    label: str = "<model>"
    # `modellint.suppress.Suppressions`: None hides nothing
    suppressions: Any = None
    # a code that no rule documents: reported as an error (True), or not at all
    unknown_codes: bool = True
    # a file that does not exist (`<string>`) is no file: the finding goes to `label`
    existing_files: bool = False
    # the configured model a finding is of (SARIF's target)
    target: str = ""
    # the notebook a file is (its joined cells are what the lines count), else None
    notebook: Callable[[str], Any] = _no_notebook


def findings_of(raws: Iterable[RawFinding], origin: Origin) -> list[Finding]:
    """The `Finding`s of `raws`, in their order, without those a suppression hides."""
    from modellint.runtime.sources import source_line
    from modellint.runtime.specs import display_path

    out = []
    for raw in raws:
        rule = origin.rules.get(raw.code)
        if rule is None and not origin.unknown_codes:
            continue
        file: str | None = raw.file
        if file and origin.existing_files and not os.path.isfile(file):
            file = None
        # the other lines of the mistake, named in the message as the report names files
        related = tuple(Related(display_path(other, dict(origin.displays)), line or 1, what)
                        for other, line, what in raw.related
                        if other and os.path.isfile(other))
        message = raw.message + "".join(f"; {r.message}: {r.path}:{r.line}" for r in related)
        book = origin.notebook(file) if file else None
        if file:
            text = source_line(file, raw.line) if book is None else _line(book.source, raw.line)
            finding = line_finding(rule, raw.code, message, display_path(
                file, dict(origin.displays)), raw.line, text, pass_=origin.pass_,
                target=origin.target, related=related)
        else:
            finding = line_finding(rule, raw.code, message, origin.label, 1, "",
                                   pass_=origin.pass_, target=origin.target, related=related)
        if origin.suppressions is not None and origin.suppressions.hides(finding, file):
            continue
        if file and book is not None:
            finding = in_cell(finding, book, file)
        out.append(finding)
    return out


def in_cell(finding: Finding, book, file: str) -> Finding:
    """`finding` (its lines those of the notebook's joined cells) at its cell and line there,
    as the static pass reports; `nb.ipynb:14` in its message as `nb.ipynb:cell 3:2`."""
    import re

    from modellint.runtime.phases import short_path
    from modellint.static.notebook import place

    def cell_line(match: re.Match[str]) -> str:
        cell, line = book.locate(int(match.group(2)))
        return f"{match.group(1)}:cell {cell}:{line}"

    return replace(place(book, finding), message=re.sub(
        rf"({re.escape(short_path(file))}):(\d+)\b", cell_line, finding.message))


def _line(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def merge(static: list[Finding], runtime: list[Finding]) -> list[Finding]:
    """Static findings plus runtime ones, a mistake found by both passes at one line once."""
    seen = {(f.code, os.path.realpath(f.path), f.line) for f in static}
    out = list(static)
    for finding in runtime:
        key = (finding.code, os.path.realpath(finding.path), finding.line)
        if key in seen:
            continue
        seen.add(key)
        out.append(finding)
    return out
