"""The one result type both passes produce."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Related:
    """Another line that takes part in a finding's mistake (SARIF's relatedLocations): the
    optimizer a replaced layer still feeds, the backward of a loss that is kept."""

    path: str
    line: int
    message: str


@dataclass
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
        return cls(
            code=data["code"],
            name=data["name"],
            message=data["message"],
            severity=Severity(data["severity"]),
            path=data["path"],
            line=data["line"],
            column=data["column"],
            end_line=data["end_line"],
            end_column=data["end_column"],
            pass_=data["pass"],
            cell=data.get("cell"),
            related=tuple(Related(r["path"], r["line"], r["message"])
                          for r in data.get("related", ())),
        )


def line_finding(rule: Any, code: str, message: str, path: str, line: int, text: str, *,
                 pass_: str, target: str = "") -> Finding:
    """A finding of `rule` (None: an unknown code, reported as an error) on the whole source
    line `line` of `path`, whose text is `text`: from its first non-blank character to its
    end."""
    return Finding(
        code=code, name=rule.name if rule is not None else code.lower(), message=message,
        severity=rule.severity if rule is not None else Severity.ERROR, path=path, line=line,
        column=len(text) - len(text.lstrip()) + 1 if text else 1, end_line=line,
        end_column=len(text.rstrip()) + 1 if text else 1, pass_=pass_, source_line=text,
        statement_line=line, target=target,
    )
