"""Lint one file: decode, parse once, run every enabled rule in one batched LibCST pass."""

from __future__ import annotations

import ast
import contextlib
import io
import sys
import threading
import tokenize
import traceback
import warnings
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
# LibCST walks trees recursively (metadata, code generation, fixes): a deeply nested expression
# is retried in a thread with a larger stack and recursion limit
DEEP_RECURSION_LIMIT = 50_000
DEEP_STACK_SIZE = 512 * 1024 * 1024


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    # kept so that --fix can transform the tree the findings point into
    module: cst.Module | None = None
    source: str | None = None
    encoding: str = "utf-8"
    tracebacks: list[str] = field(default_factory=list)
    # a RecursionError happened: `lint_source` retries with a deep stack
    too_deep: bool = False


class _Tracker(cst.BatchableCSTVisitor):
    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # LibCST filters methods on __name__, which would drop the `visit_X = _statement` aliases
        cls._visitor_names = tuple(
            name for name in dir(cls)
            if name.startswith(("visit_", "leave_"))
            and not getattr(getattr(cls, name), "_is_no_op", False)
        )

    def get_visitors(self):
        return {name: getattr(self, name) for name in self._visitor_names}


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
        stack = self.context.statement_stack
        if stack and isinstance(stack[-1], cst.ClassDef):
            self.context.method_owners[id(node)] = stack[-1]
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


class DecodeError(ValueError):
    """The bytes of a file are not text; `line` and `column` point at the first bad byte."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


def decode(data: bytes) -> tuple[str, str]:
    """(text, encoding) honouring a PEP 263 coding cookie; raises DecodeError with a message."""
    if b"\x00" in data:
        at = data.index(b"\x00")
        line = data.count(b"\n", 0, at) + 1
        raise DecodeError(
            "file contains NUL bytes; it is not Python source", line,
            at - (data.rfind(b"\n", 0, at) + 1) + 1,
        )
    problem = None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        # also raised, without a cookie, for a first line that is not UTF-8: say which byte
        encoding, problem = "utf-8", exc.msg
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DecodeError(
            f"cannot decode line {line} as {encoding} (byte 0x{data[exc.start]:02x});"
            " add a coding declaration or save the file as UTF-8",
            line, exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1,
        ) from None
    if problem is not None:
        raise DecodeError(f"cannot read the coding declaration: {problem}")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, encoding


def call_deeply(function, *args):
    """`function(*args)` in a thread with a large stack and recursion limit, for trees nested
    too deeply for the defaults."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            outcome.append((False, exc))

    try:
        stack = threading.stack_size(DEEP_STACK_SIZE)
    except (ValueError, RuntimeError):  # the platform cannot: run as usual
        return function(*args)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEEP_RECURSION_LIMIT))
    try:
        thread = threading.Thread(target=target, name="modellint-deep")
        thread.start()
        thread.join()
    finally:
        threading.stack_size(stack)
        sys.setrecursionlimit(limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _finding(code_name: tuple[str, str], path: str, message: str, line: int, col: int,
             source_line: str = "") -> Finding:
    return Finding(
        code=code_name[0], name=code_name[1], message=message, severity=Severity.ERROR,
        path=path, line=line, column=col, end_line=line, end_column=col,
        source_line=source_line,
    )


def _syntax_error_from_ast(path: str, text: str) -> Finding | None:
    try:
        with warnings.catch_warnings():
            # CPython warns about odd but valid code (`1if x else 2`); not ours to print
            warnings.simplefilter("ignore")
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
    result = _lint_source(path, data, rules, options, disabled_codes)
    if result.too_deep:
        result = call_deeply(_lint_source, path, data, rules, options, disabled_codes)
    return result


def _lint_source(
    path: str,
    data: bytes,
    rules: Sequence[type[StaticRule]],
    options: dict[str, Any],
    disabled_codes: frozenset[str],
) -> FileResult:
    result = FileResult(path=path)
    try:
        text, result.encoding = decode(data)
    except DecodeError as exc:
        if SYNTAX_ERROR[0] not in disabled_codes:
            result.findings.append(_finding(SYNTAX_ERROR, path, str(exc), exc.line, exc.column))
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
        result.too_deep = True
        error = _syntax_error_from_ast(path, text)
        if error is not None:
            result.findings.append(error)
        else:
            result.findings.append(_finding(
                INTERNAL_ERROR, path, "the file is nested too deeply for the parser; "
                "it was not linted", 1, 1))
        return result
    try:
        result.findings.extend(run_rules(path, text, module, active, options, result.tracebacks))
    except RecursionError:
        result.too_deep = True
        result.findings.append(_finding(
            INTERNAL_ERROR, path, "the file is nested too deeply to be linted", 1, 1))
        return result
    result.module = module
    return result


def _rule_failed(path: str, rule: type[StaticRule], exc: BaseException,
                 tracebacks: list[str]) -> Finding:
    tracebacks.append("".join(traceback.format_exception(exc)))
    return _finding(
        INTERNAL_ERROR, path,
        f"rule {rule.code} ({rule.name}) failed: {type(exc).__name__}: {exc}", 1, 1)


def run_rules(
    path: str,
    text: str,
    module: cst.Module,
    rules: Sequence[type[StaticRule]],
    options: dict[str, Any],
    tracebacks: list[str],
) -> list[Finding]:
    """The findings of `rules`; raises RecursionError when the tree is too deep to walk."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = FileContext(path, text, options)
    findings: list[Finding] = []
    instances = []
    for rule in rules:
        try:
            instances.append(rule(context))
        except Exception as exc:  # noqa: BLE001 - becomes an ML001 finding
            findings.append(_rule_failed(path, rule, exc, tracebacks))
    try:
        with contextlib.ExitStack() as stack:
            # only the metadata that enabled rules declare is computed
            if any(rule.METADATA_DEPENDENCIES for rule in instances):
                for rule in instances:
                    stack.enter_context(rule.resolve(wrapper))
            walk(module, dispatch_table([_Enter(context), *instances, _Leave(context)]))
    except RecursionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine itself failed on this file
        tracebacks.append("".join(traceback.format_exception(exc)))
        findings.append(_finding(
            INTERNAL_ERROR, path, f"modellint failed on this file: {type(exc).__name__}: {exc}",
            1, 1))
        return findings
    for rule in instances:
        if isinstance(rule.error, RecursionError):
            raise rule.error
    for rule in instances:
        if rule.error is not None:
            findings.append(_rule_failed(path, type(rule), rule.error, tracebacks))
    if not context.reports:
        return findings
    positions = wrapper.resolve(PositionProvider)
    lines = text.splitlines()
    statements = None
    failed: set[str] = set()
    for rule, node, message, fix, severity, statement in context.reports:
        if node not in positions:
            # a node the rule built itself, or one from another tree
            if rule.code not in failed:
                failed.add(rule.code)
                findings.append(_rule_failed(path, type(rule), ValueError(
                    f"reported a {type(node).__name__} node that is not in this file"), tracebacks))
            continue
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
