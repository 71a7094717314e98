"""Lint one file: decode, parse once, run every enabled rule in one batched LibCST pass."""

from __future__ import annotations

import ast
import contextlib
import io
import tokenize
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from modellint.finding import Finding, Severity
from modellint.rule import StaticRule
from modellint.static import noqa
from modellint.static.context import FileContext
from modellint.static.walk import dispatch_table, walk

SYNTAX_ERROR = ("ML000", "syntax-error")
INTERNAL_ERROR = ("ML001", "internal-error")


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    # kept so that --fix can transform the tree the findings point into
    module: cst.Module | None = None
    source: str | None = None
    encoding: str = "utf-8"
    tracebacks: list[str] = field(default_factory=list)


class _Tracker(cst.BatchableCSTVisitor):
    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context

    def get_visitors(self):
        # LibCST filters methods on __name__, which would drop the `visit_X = _statement` aliases
        return {
            name: getattr(self, name)
            for name in dir(type(self))
            if name.startswith(("visit_", "leave_"))
        }


class _Enter(_Tracker):
    """Runs first for each node: records imports, classes, functions and statements."""

    def visit_Import(self, node: cst.Import) -> None:
        self.context.imports.add_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.context.imports.add_import_from(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.context.register_class(node)
        self.context.class_stack.append(node)
        self.context.statement_stack.append(node)
        self.context.scopes.append({})

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.context.function_stack.append(node)
        self.context.statement_stack.append(node)
        self.context.scopes.append({})

    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self.context.scopes[-1]
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                scope[target.target.value] = node.value

    def _statement(self, node: cst.CSTNode) -> None:
        self.context.statement_stack.append(node)

    visit_SimpleStatementLine = _statement
    visit_If = _statement
    visit_For = _statement
    visit_While = _statement
    visit_With = _statement
    visit_Try = _statement
    visit_TryStar = _statement
    visit_Match = _statement


class _Leave(_Tracker):
    """Runs last for each node: pops what `_Enter` pushed."""

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.context.class_stack.pop()
        self.context.statement_stack.pop()
        self.context.scopes.pop()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.context.function_stack.pop()
        self.context.statement_stack.pop()
        self.context.scopes.pop()

    def _statement(self, node: cst.CSTNode) -> None:
        self.context.statement_stack.pop()

    leave_SimpleStatementLine = _statement
    leave_If = _statement
    leave_For = _statement
    leave_While = _statement
    leave_With = _statement
    leave_Try = _statement
    leave_TryStar = _statement
    leave_Match = _statement


def decode(data: bytes) -> tuple[str, str]:
    """(text, encoding) honouring a PEP 263 coding cookie; raises ValueError with a message."""
    if b"\x00" in data:
        raise ValueError("file contains NUL bytes; it is not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise ValueError(f"cannot read the coding declaration: {exc.msg}") from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"cannot decode as {encoding} (byte 0x{data[exc.start]:02x} at offset {exc.start});"
            " add a coding declaration or save the file as UTF-8"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, encoding


def _finding(code_name: tuple[str, str], path: str, message: str, line: int, col: int,
             source_line: str = "") -> Finding:
    return Finding(
        code=code_name[0], name=code_name[1], message=message, severity=Severity.ERROR,
        path=path, line=line, column=col, end_line=line, end_column=col,
        source_line=source_line,
    )


def _syntax_error_from_ast(path: str, text: str) -> Finding | None:
    try:
        ast.parse(text)
    except SyntaxError as exc:
        line = exc.lineno or 1
        lines = text.splitlines()
        return _finding(
            SYNTAX_ERROR, path, f"SyntaxError: {exc.msg}", line, exc.offset or 1,
            lines[line - 1] if 0 < line <= len(lines) else "",
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        return _finding(SYNTAX_ERROR, path, f"cannot parse: {exc}", 1, 1)
    return None


def lint_source(
    path: str,
    data: bytes,
    rules: Sequence[type[StaticRule]],
    options: dict[str, Any],
    disabled_codes: frozenset[str] = frozenset(),
) -> FileResult:
    """Every finding of `rules` in one file. `disabled_codes` are ignored for this file."""
    result = FileResult(path=path)
    try:
        text, result.encoding = decode(data)
    except ValueError as exc:
        result.findings.append(_finding(SYNTAX_ERROR, path, str(exc), 1, 1))
        return result
    result.source = text
    whole_file, file_codes = noqa.file_exemption(text)
    if whole_file:
        return result
    disabled = disabled_codes | file_codes
    active = [
        rule for rule in rules
        if rule.code not in disabled
        and (not rule.triggers or any(word in text for word in rule.triggers))
    ]
    if not active:
        error = _syntax_error_from_ast(path, text)
        if error is not None and SYNTAX_ERROR[0] not in disabled:
            result.findings.append(error)
        return result
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        # prefer CPython's wording and position when it agrees that the file is invalid
        error = _syntax_error_from_ast(path, text) or _finding(
            SYNTAX_ERROR, path, f"SyntaxError: {exc.message}", exc.raw_line,
            exc.raw_column + 1,
        )
        if SYNTAX_ERROR[0] not in disabled:
            result.findings.append(error)
        return result
    except RecursionError:
        error = _syntax_error_from_ast(path, text)
        if error is not None:
            result.findings.append(error)
        else:
            result.findings.append(_finding(
                INTERNAL_ERROR, path, "the file is nested too deeply for the parser; "
                "it was not linted", 1, 1))
        return result
    result.module = module
    result.findings.extend(run_rules(path, text, module, active, options, result.tracebacks))
    return result


def run_rules(
    path: str,
    text: str,
    module: cst.Module,
    rules: Sequence[type[StaticRule]],
    options: dict[str, Any],
    tracebacks: list[str],
) -> list[Finding]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = FileContext(path, text, options)
    instances = [rule(context) for rule in rules]
    findings: list[Finding] = []
    try:
        with contextlib.ExitStack() as stack:
            # only the metadata that enabled rules declare is computed
            if any(rule.METADATA_DEPENDENCIES for rule in instances):
                for rule in instances:
                    stack.enter_context(rule.resolve(wrapper))
            walk(module, dispatch_table([_Enter(context), *instances, _Leave(context)]))
    except RecursionError:
        findings.append(_finding(
            INTERNAL_ERROR, path, "the file is nested too deeply to be linted", 1, 1))
        return findings
    except Exception as exc:  # noqa: BLE001 - the engine itself failed on this file
        tracebacks.append("".join(traceback.format_exception(exc)))
        findings.append(_finding(
            INTERNAL_ERROR, path, f"modellint failed on this file: {type(exc).__name__}: {exc}",
            1, 1))
        return findings
    for rule in instances:
        if rule.error is not None:
            exc = rule.error
            tracebacks.append("".join(traceback.format_exception(exc)))
            findings.append(_finding(
                INTERNAL_ERROR, path,
                f"rule {rule.code} ({rule.name}) failed: {type(exc).__name__}: {exc}", 1, 1))
    if not context.reports:
        return findings
    positions = wrapper.resolve(PositionProvider)
    lines = text.splitlines()
    statements = None
    for rule, node, message, fix, severity, statement in context.reports:
        span = positions[node]
        line = span.start.line
        if statement:
            statement_line = positions[statement[0]].start.line
        else:
            # reported after the walk (from leave_Module): find the statement around the node
            if statements is None:
                statements = [
                    (code_range.start.line, code_range.end.line)
                    for each, code_range in positions.items()
                    if isinstance(each, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
                ]
            around = [start for start, end in statements if start <= line <= end]
            statement_line = max(around) if around else line
        if noqa.line_suppresses(_line(lines, line), rule.code) or (
            statement_line != line
            and noqa.line_suppresses(_line(lines, statement_line), rule.code)
        ):
            continue
        findings.append(
            Finding(
                code=rule.code, name=rule.name, message=message, severity=severity,
                path=path, line=line, column=span.start.column + 1, end_line=span.end.line,
                end_column=span.end.column + 1, fix=fix, source_line=_line(lines, line),
                statement_line=statement_line,
            )
        )
    return findings


def _line(lines: list[str], number: int) -> str:
    return lines[number - 1] if 0 < number <= len(lines) else ""
