"""The static pass set up once for a run: the enabled rules, their options and the project
index, then one call per file (`Linter.lint` for Python text, `Linter.lint_notebook` for a
notebook's code cells)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from modellint.pipeline import Origin, findings_of
from modellint.records import record
from modellint.static.engine import (
    ENGINE_CODES,
    SYNTAX_ERROR,
    FileResult,
    engine_error,
    lint_source,
    syntax_error,
)
from modellint.static.notebook import Notebook, cell_lines

if TYPE_CHECKING:
    from modellint.finding import Finding
    from modellint.rule import StaticRule


@record
class NotebookLint:
    findings: list[Finding]  # each with its cell
    result: FileResult  # the engine's result for the joined source (its module, for --fix)


@record(frozen=True)
class Linter:
    rules: Sequence[type[StaticRule]]
    options: dict[str, Any]
    # the run's project index (`modellint.static.index.ProjectIndex`), None for a file alone
    index: Any = None

    def lint(self, path: str, data: bytes, disabled: frozenset[str] = frozenset(),
             tree: ast.Module | None = None) -> FileResult:
        """Every finding in the Python text `data` of the file `path` that no suppression
        hides; `disabled` codes are hidden in the whole file (not selected, or
        per-file-ignores). `tree`: CPython's parse of `data` when the caller has it."""
        return lint_source(path, data, self.rules, self.options, disabled, tree, self.index)

    def lint_notebook(self, path: str, notebook: Notebook,
                      disabled: frozenset[str] = frozenset()) -> NotebookLint:
        """Every finding in the notebook's code cells, each naming its cell (1-based) and its
        line and column in that cell. In a cell that does not parse each failing statement is
        an ML000 and is left out (`modellint.static.recover`); the cells are linted as one
        program, in order (their blanked lines are masked: `Notebook.cell_sources` puts them
        back). Through the project index `from models import Net` in a cell is the project's
        Net, as in a .py file."""
        findings: list[Finding] = []
        for cell in notebook.cells:
            if SYNTAX_ERROR[0] in disabled:
                break
            raws = [syntax_error(path, problem) for problem in cell.problems]
            if cell.error is not None:
                raws.insert(0, engine_error(SYNTAX_ERROR, path, *cell.error))
            if raws:
                raws = [replace(raw, cell=cell.number) for raw in raws]
                # lines of the cell (its failing statements are not in the joined cells)
                findings += findings_of(raws, Origin(
                    "static", ENGINE_CODES, lines=cell_lines(cell.source),
                    notebook=lambda _: notebook))
        if not notebook.source:
            return NotebookLint(findings, FileResult(path=path))
        result = lint_source(path, notebook.source.encode("utf-8"), self.rules, self.options,
                             disabled, notebook.tree, self.index, notebook)
        findings.extend(result.findings)
        return NotebookLint(findings, result)
