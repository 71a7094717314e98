"""The one result type every pass produces, `Finding` (frozen, made by `make_finding` only),
and what the passes report before it is made, `RawFinding`."""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any

from modellint.records import record


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


@record(frozen=True)
class Fix:
    """Replace LibCST nodes of the parsed file by new ones (or, in a file that does not
    parse, edit its text: `edits`).

    `replacements` maps an original node (by identity) to its replacement. `safe` fixes are
    applied by `--fix`; unsafe ones only with `--unsafe-fixes`.
    """

    replacements: tuple[tuple[Any, Any], ...]
    description: str
    safe: bool = True
    # text edits (`modellint.static.recover.Edit`) instead, for a file that has no tree: a
    # statement that does not parse
    edits: tuple[Any, ...] = ()

    @property
    def applicability(self) -> str:
        """`safe` or `unsafe`, the word ruff's JSON uses."""
        return "safe" if self.safe else "unsafe"


@record(frozen=True)
class Related:
    """Another line that takes part in a finding's mistake (SARIF's relatedLocations): the
    optimizer a replaced layer still feeds, the backward of a loss that is kept."""

    path: str
    line: int
    message: str


@record(frozen=True)
class Span:
    """Where in its line a finding is, for a pass that knows (the static pass's reported
    node): its first column (from 1), the line and column it ends at, and the first line of
    the statement it is in (a noqa there hides it; 0: in no statement, as the engine's
    findings about a file it could not lint)."""

    column: int
    end_line: int
    end_column: int
    statement_line: int = 0


@record(frozen=True)
class RawFinding:
    """What every pass reports, through `report(code, message, location)`: the code, the
    message and where, a file and a line of it (None: in no file), and the other lines of
    the mistake ((file, line, what it is) each). A pass that knows more of the place says it:
    the `span` of a node (else the finding covers its whole line), a `fix`, a `severity`
    other than its rule's, the notebook `cell` whose line `line` is (else a line of the file,
    or of a notebook's joined cells). `modellint.pipeline.findings_of` makes the `Finding`s
    of them."""

    code: str
    message: str
    file: str | None = None
    line: int = 1
    related: tuple[tuple[str, int, str], ...] = ()
    span: Span | None = None
    fix: Fix | None = None
    severity: Severity | None = None
    cell: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "file": self.file,
                "line": self.line, **({"related": [
                    {"file": file, "line": line, "message": what}
                    for file, line, what in self.related]} if self.related else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RawFinding:
        return cls(data["code"], data["message"], data.get("file"), data.get("line") or 1,
                   tuple((r.get("file"), r.get("line") or 1, r.get("message", ""))
                         for r in data.get("related") or ()))


@record(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    pass_: str = "static"
    fix: Fix | None = field(default=None, compare=False, repr=False)
    source_line: str = field(default="", compare=False, repr=False)
    # first line of the statement the finding is in: a noqa there suppresses it
    statement_line: int = field(default=0, compare=False, repr=False)
    target: str = field(default="", compare=False)
    # a notebook's finding: the cell (1-based, counting every cell as ruff does); `line` and
    # `end_line` are then lines of that cell, and `notebook_line` the line of the notebook
    # file (its JSON) that holds `line`, for viewers that open the file itself
    cell: int | None = None
    notebook_line: int = field(default=0, compare=False)
    related: tuple[Related, ...] = field(default=(), compare=False)

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.message)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "severity": self.severity.value,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "cell": self.cell,
            "fixable": self.fixable,
            "fix": None if self.fix is None else {
                "applicability": self.fix.applicability, "message": self.fix.description,
            },
            "pass": self.pass_,
            **({"related": [{"path": r.path, "line": r.line, "message": r.message}
                            for r in self.related]} if self.related else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return make_finding(
            None, data["code"], data["message"], data["path"], data["line"], data["column"],
            data["end_line"], data["end_column"], name=data["name"],
            severity=Severity(data["severity"]), pass_=data["pass"], cell=data.get("cell"),
            related=tuple(Related(r["path"], r["line"], r["message"])
                          for r in data.get("related", ())),
        )


def make_finding(rule: Any, code: str, message: str, path: str, line: int, column: int = 1,
                 end_line: int | None = None, end_column: int | None = None, *,
                 name: str | None = None, severity: Severity | None = None,
                 pass_: str = "static", fix: Fix | None = None, source_line: str = "",
                 statement_line: int = 0, target: str = "", cell: int | None = None,
                 notebook_line: int = 0, related: tuple[Related, ...] = ()) -> Finding:
    """The one place a `Finding` is made. `rule` (None: a code no rule documents, or the
    name and severity are given) gives its name and severity; it ends where it starts unless
    told."""
    return Finding(
        code=code,
        name=name if name is not None else rule.name if rule is not None else code.lower(),
        message=message,
        severity=severity if severity is not None
        else rule.severity if rule is not None else Severity.ERROR,
        path=path, line=line, column=column,
        end_line=line if end_line is None else end_line,
        end_column=column if end_column is None else end_column,
        pass_=pass_, fix=fix, source_line=source_line, statement_line=statement_line,
        target=target, cell=cell, notebook_line=notebook_line, related=related,
    )


def line_finding(rule: Any, code: str, message: str, path: str, line: int, text: str, *,
                 pass_: str, target: str = "", related: tuple[Related, ...] = (),
                 severity: Severity | None = None) -> Finding:
    """A finding of `rule` (None: an unknown code, reported as an error) on the whole source
    line `line` of `path`, whose text is `text`: from its first non-blank character to its
    end."""
    return make_finding(
        rule, code, message, path, line,
        len(text) - len(text.lstrip()) + 1 if text else 1, line,
        len(text.rstrip()) + 1 if text else 1, pass_=pass_, source_line=text,
        statement_line=line, target=target, related=related, severity=severity,
    )
