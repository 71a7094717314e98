"""The findings pipeline: the raw findings of every pass (the static pass's, at their nodes'
spans, with their fixes; the runtime pass's, `modellint run`'s and the Python API's, at their
lines) become `Finding`s here, and only here: each as the report names its file, in its
notebook cell, without those a suppression hides (`modellint.suppress`), once."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field, replace
from typing import Any

from modellint.finding import Finding, RawFinding, Related, line_finding, make_finding
from modellint.records import record


def _no_notebook(path: str) -> Any:
    return None


@record(frozen=True)
class Origin:
    """What the findings of one pass (or one model of it, or one file of the static pass)
    need to be shown: the rules that document their codes, how a file is named in the report,
    and what hides them."""

    pass_: str
    rules: Mapping[str, Any]
    # a real file's path as the report names it (relative, or as the linted file is shown)
    displays: Mapping[str, str] = field(default_factory=dict)
    # the path of a finding in no file (the model's label, the script)
    label: str = "<model>"
    # `modellint.suppress.Suppressions` (or one file's `FileSuppressions`): None hides nothing
    suppressions: Any = None
    # a code that no rule documents: reported as an error (True), or not at all
    unknown_codes: bool = True
    # a file that does not exist (`<string>`) is no file: the finding goes to `label`
    existing_files: bool = False
    # the configured model a finding is of (SARIF's target)
    target: str = ""
    # the notebook a file is (its joined cells are what the lines count), else None
    notebook: Callable[[str], Any] = _no_notebook
    # the lines of the one file these findings are in, as the pass read it (the static pass:
    # the text it linted, its path already as the report names it); None: each finding's
    # file is read for its line and named through `displays`
    lines: Sequence[str] | None = None


def findings_of(raws: Iterable[RawFinding], origin: Origin) -> list[Finding]:
    """The `Finding`s of `raws`, in their order, without those a suppression hides, each
    once (a finding equal to one before it, wherever it was reported from, is left out)."""
    out = []
    seen: set[Finding] = set()
    for raw in raws:
        rule = origin.rules.get(raw.code)
        if rule is None and not origin.unknown_codes:
            continue
        file: str | None = raw.file
        if file and origin.existing_files and not os.path.isfile(file):
            file = None
        book = origin.notebook(file) if file and raw.cell is None else None
        if origin.lines is not None:  # the static pass: the file's lines, its path as shown
            finding = _made(raw, rule, file or "", _line(origin.lines, raw.line), (), origin)
        else:
            from modellint.runtime.sources import source_line
            from modellint.runtime.specs import display_path

            displays = dict(origin.displays)
            # the other lines of the mistake, named in the message as the report names files
            related = tuple(Related(display_path(other, displays), line or 1, what)
                            for other, line, what in raw.related
                            if other and os.path.isfile(other))
            if file:
                text = (source_line(file, raw.line) if book is None
                        else _line(book.source.splitlines(), raw.line))
                finding = _made(raw, rule, display_path(file, displays), text, related, origin)
            else:
                finding = _made(replace(raw, line=1), rule, origin.label, "", related, origin)
        if origin.suppressions is not None and origin.suppressions.hides(finding, file):
            continue
        if file and book is not None:
            finding = in_cell(finding, book, file)
        elif file and raw.cell is not None:
            # a line of a notebook cell already (a cell that does not parse)
            book = origin.notebook(file)
            if book is not None:
                finding = replace(finding, notebook_line=book.file_line(raw.cell, raw.line))
        if finding in seen:
            continue
        seen.add(finding)
        out.append(finding)
    return out


def _made(raw: RawFinding, rule: Any, path: str, text: str, related: tuple[Related, ...],
          origin: Origin) -> Finding:
    """The `Finding` of `raw` at `path`, whose line `raw.line` reads `text`: at its span,
    else on the whole line."""
    message = raw.message + "".join(f"; {r.message}: {r.path}:{r.line}" for r in related)
    span = raw.span
    if span is None:
        return line_finding(rule, raw.code, message, path, raw.line, text, pass_=origin.pass_,
                            target=origin.target, related=related, severity=raw.severity)
    return make_finding(
        rule, raw.code, message, path, raw.line, span.column, span.end_line, span.end_column,
        severity=raw.severity, pass_=origin.pass_, fix=raw.fix, source_line=text,
        statement_line=span.statement_line, target=origin.target, cell=raw.cell,
        related=related)


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


def _line(lines: Sequence[str], line: int) -> str:
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
