"""Lint one file: decode, parse once, run every enabled rule in one batched LibCST pass."""

from __future__ import annotations

import ast
import bisect
import contextlib
import sys
import warnings
from collections.abc import Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, ClassVar, cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from modellint import codes
from modellint.config import DEFAULT_MAX_CODE_BYTES
from modellint.finding import Finding, Fix, RawFinding, Severity, Span
from modellint.pipeline import Origin, findings_of
from modellint.records import record
from modellint.rule import StaticRule
from modellint.static.context import FileContext
from modellint.static.outline import MAIN_STACK_NESTING, Outline
from modellint.static.parse import (
    DEEP_RECURSION_LIMIT,
    SYNTAX_ERROR,
    call_deeply,
    parse_with_libcst,
    traceback_text,
)
from modellint.static.source import DecodeError, decode, mentioned_in
from modellint.static.walk import (
    children_kept,
    dispatch_table,
    every_node,
    visitor_names,
    walk,
)
from modellint.suppress import FileSuppressions

if TYPE_CHECKING:
    from modellint.static.recover import Problem

INTERNAL_ERROR = (codes.INTERNAL_ERROR, "internal-error")


@record(frozen=True)
class _EngineCode:
    """Names one of the engine's own codes for the pipeline (their rule classes are in
    `modellint.rules.core`, which the static pass does not import)."""

    name: str
    severity: Severity = Severity.ERROR


ENGINE_CODES = {code: _EngineCode(name) for code, name in (SYNTAX_ERROR, INTERNAL_ERROR)}


@record
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    # what the lint reported, made the `findings` by `lint_source` (through the pipeline)
    raws: list[RawFinding] = field(default_factory=list, repr=False)
    # kept so that --fix can transform the tree the findings point into
    module: cst.Module | None = None
    source: str | None = None
    encoding: str = "utf-8"
    tracebacks: list[str] = field(default_factory=list)
    # a RecursionError happened: `lint_source` retries with a deep stack
    too_deep: bool = False
    # the module classes the runtime pass would build (name, line): the static pass's index
    # of them, so that the runtime pass does not parse the file again
    classes: tuple[tuple[str, int], ...] = ()
    suppressions: FileSuppressions = field(default_factory=FileSuppressions)
    # the file does not parse: its failing statements were blanked (one ML000 each) and the
    # rest linted; `source` is the file's text, `module` None (only ML000's text edits fix it)
    recovered: bool = False


class _Tracker(cst.BatchableCSTVisitor):
    # the visit_/leave_ methods a subclass defines, set by __init_subclass__
    _visitor_names: ClassVar[tuple[str, ...]]

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # LibCST filters methods on __name__, which would drop the `visit_X = _statement` aliases
        cls._visitor_names = visitor_names(cls, _Tracker)

    def get_visitors(self):
        return {name: getattr(self, name) for name in self._visitor_names}


class _Enter(_Tracker):
    """Runs first for each node: records imports, classes, functions and statements."""

    def visit_Module(self, node: cst.Module) -> None:
        self.context.module_node = node

    def visit_Import(self, node: cst.Import) -> None:
        self.context.imports.add_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.context.imports.add_import_from(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.context.register_class(node)
        self.context.class_stack.append(node)
        self._statement(node)
        self.context.scopes.append({})

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        stack = self.context.statement_stack
        if stack and isinstance(stack[-1], cst.ClassDef):
            self.context.method_owners[id(node)] = stack[-1]
        self.context.function_stack.append(node)
        self._statement(node)
        self.context.scopes.append({})

    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self.context.scopes[-1]
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                scope[target.target.value] = node.value

    def _statement(self, node: cst.CSTNode) -> None:
        self.context.statement_stack.append(node)
        if len(self.context.statement_stack) == 1:
            self.context.mark_top_level(node)

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
        self._statement(node)
        self.context.scopes.pop()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.context.function_stack.pop()
        self._statement(node)
        self.context.scopes.pop()

    def _statement(self, original_node: cst.CSTNode) -> None:
        self.context.statement_stack.pop()
        if not self.context.statement_stack:
            self.context.mark_top_level(None)

    leave_SimpleStatementLine = _statement
    leave_If = _statement
    leave_For = _statement
    leave_While = _statement
    leave_With = _statement
    leave_Try = _statement
    leave_TryStar = _statement
    leave_Match = _statement


def error_finding(code_name: tuple[str, str], path: str, message: str, line: int,
                  col: int) -> Finding:
    """The finding of `engine_error` when no lint made it (the file cannot be read, linting
    it failed): through the pipeline, which hides nothing here."""
    return findings_of([engine_error(code_name, path, message, line, col)],
                       Origin("static", ENGINE_CODES, lines=()))[0]


def engine_error(code_name: tuple[str, str], path: str, message: str, line: int,
                 col: int) -> RawFinding:
    """What the engine reports about a file it could not lint (ML000, ML001): an error at one
    point, in no statement (a line noqa does not hide it; see `modellint.suppress`)."""
    return RawFinding(code_name[0], message, path, line, span=Span(col, line, col))


def _parse_with_cpython(path: str, text: str
                        ) -> tuple[ast.Module | None, str, list[RawFinding]]:
    """(tree, the text it is the parse of, ML000s): `text` itself when it parses; when this
    Python cannot parse it (a syntax error, syntax newer than this Python), the recovery of it
    (`modellint.static.recover`: each failing statement blanked, one ML000 for each), or no
    tree (nesting beyond CPython's own limits)."""
    try:
        with warnings.catch_warnings():
            # CPython warns about odd but valid code (`1if x else 2`); not ours to print
            warnings.simplefilter("ignore")
            return ast.parse(text), text, []
    except SyntaxError as exc:
        # (imported here: most files parse, and the recovery's tokenizer is costly to load)
        from modellint.static.recover import recover

        recovery = recover(text, exc)
        return recovery.tree, recovery.text, [
            syntax_error(path, problem) for problem in recovery.problems]
    except RecursionError as exc:
        return None, text, [engine_error(
            SYNTAX_ERROR, path,
            f"the code is nested too deeply for Python to parse (RecursionError: {exc})", 1, 1)]
    except (ValueError, MemoryError) as exc:
        return None, text, [engine_error(SYNTAX_ERROR, path, f"cannot parse: {exc}", 1, 1)]


def syntax_error(path: str, problem: Problem) -> RawFinding:
    """The ML000 of one statement that does not parse, with its mechanical fix if any (a text
    edit: the file has no tree to change)."""
    found = engine_error(SYNTAX_ERROR, path, problem.message, problem.line, problem.column)
    if problem.edits:
        found = replace(found, fix=Fix((), problem.fix_description, True, edits=problem.edits))
    return found


def lint_source(
    path: str,
    data: bytes,
    rules: Sequence[type[StaticRule]],
    options: dict[str, Any],
    disabled_codes: frozenset[str] = frozenset(),
    tree: ast.Module | None = None,
    index: Any = None,
    notebook: Any = None,
) -> FileResult:
    """Every finding of `rules` in one file that no suppression hides. `disabled_codes` are
    hidden in the whole file (not selected, or per-file-ignores). `tree`: CPython's parse of
    `data` when the caller already has it (a notebook's cells); `index` is the run's project
    index (`modellint.static.index.ProjectIndex`), None for a file alone. `notebook`: the
    notebook whose joined code cells `data` is (`modellint.static.notebook.Notebook`): its
    findings are then placed in their cells."""
    with children_kept():
        result = _lint_source(path, data, rules, options, disabled_codes, False, tree, index)
        if result.too_deep:
            result = call_deeply(_lint_source, path, data, rules, options, disabled_codes,
                                 True, tree, index)
    if result.raws:
        # the one findings pipeline of every pass (modellint.pipeline): spans, suppression
        # (modellint.suppress), notebook cells, each finding once
        suppressions = result.suppressions
        result.findings = findings_of(result.raws, Origin(
            "static", {**{rule.code: rule for rule in rules}, **ENGINE_CODES},
            suppressions=suppressions, lines=suppressions.lines,
            notebook=(lambda _: notebook) if notebook is not None else _no_notebook))
        result.raws = []
    return result


def _no_notebook(path: str) -> None:
    return None


def _lint_source(
    path: str,
    data: bytes,
    rules: Sequence[type[StaticRule]],
    options: dict[str, Any],
    disabled_codes: frozenset[str],
    deep: bool,
    tree: ast.Module | None = None,
    index: Any = None,
) -> FileResult:
    result = FileResult(path=path, suppressions=FileSuppressions(codes=disabled_codes))
    try:
        text, result.encoding = decode(data)
    except DecodeError as exc:
        result.raws.append(engine_error(SYNTAX_ERROR, path, str(exc), exc.line, exc.column))
        return result
    result.source = text
    result.suppressions = FileSuppressions.of(text, disabled_codes)
    if result.suppressions.whole:
        return result  # nothing in it is reported
    limit = options.get("max_code_bytes", DEFAULT_MAX_CODE_BYTES)
    if len(data) > limit:
        # parsed, it would take gigabytes (LibCST's tree: up to 2.5 GB per MiB of code)
        result.raws.append(engine_error(INTERNAL_ERROR, path, too_much_code(len(data), limit),
                                        1, 1))
        return result
    mentions = mentioned_in(text)
    active = [
        rule for rule in rules
        if not result.suppressions.hides_code(rule.code)
        and (not rule.triggers or any(map(mentions, rule.triggers)))
    ]
    # CPython decides whether the file is Python, whatever rules are selected: LibCST also
    # accepts syntax newer than this Python, and crashes on nesting CPython refuses. The
    # project index parsed most files already: what the lint needs of that parse is kept
    outline = index.outline(path, data) if index is not None and tree is None else None
    if outline is None:
        if tree is None:
            # a file that does not parse is linted without its failing statements
            tree, text, problems = _parse_with_cpython(path, text)
            result.raws.extend(problems)
            result.recovered = bool(problems)
            if tree is None:
                return result
        outline = Outline.of(tree, text)
        del tree
    if not result.recovered:
        # the runtime pass imports the file: one that does not parse has no models to build
        result.classes = outline.classes
    if not active:
        return result
    nesting, lines = outline.nesting, outline.lines
    if nesting > DEEP_RECURSION_LIMIT:
        result.raws.append(engine_error(
            INTERNAL_ERROR, path, f"the file is nested too deeply ({nesting} levels) for the "
            "parser; it was not linted", 1, 1))
        return result
    if nesting > MAIN_STACK_NESTING and not deep:
        result.too_deep = True
        return result
    try:
        module = parse_with_libcst(text)
    except cst.ParserSyntaxError as exc:
        # CPython parsed it: one of LibCST's own limits (on implicitly concatenated strings)
        result.raws.append(engine_error(
            INTERNAL_ERROR, path, "the file is valid Python but beyond the limits of modellint's "
            f"parser ({exc.message}); it was not linted", exc.raw_line, exc.raw_column + 1))
        return result
    except RecursionError:
        result.too_deep = True
        result.raws.append(engine_error(
            INTERNAL_ERROR, path, "the file is nested too deeply for the parser; "
            "it was not linted", 1, 1))
        return result
    try:
        result.raws.extend(run_rules(path, text, module, active, options, result.tracebacks,
                                         index, lines))
    except RecursionError:
        result.too_deep = True
        result.raws.append(engine_error(
            INTERNAL_ERROR, path, "the file is nested too deeply to be linted", 1, 1))
        return result
    if not result.recovered:
        # fixes change the tree: one of a recovered text would write the blanked statements
        result.module = module
    return result


def too_much_code(size: int, limit: int) -> str:
    """The ML001 message of a file holding more code than `max-code-bytes`."""
    return (f"the file holds {size:,} bytes of code, more than the limit of {limit:,} bytes for "
            "one file (`max-code-bytes` in [tool.modellint], or --max-code-bytes, raises it); "
            "it was not linted")


def _rule_failed(path: str, rule: type[StaticRule], exc: BaseException,
                 tracebacks: list[str]) -> RawFinding:
    tracebacks.append(traceback_text(exc))
    return engine_error(
        INTERNAL_ERROR, path,
        f"rule {rule.code} ({rule.name}) failed: {type(exc).__name__}: {exc}", 1, 1)


def run_rules(
    path: str,
    text: str,
    module: cst.Module,
    rules: Sequence[type[StaticRule]],
    options: dict[str, Any],
    tracebacks: list[str],
    index: Any = None,
    starts: list[tuple[int, list[int] | None]] | None = None,
) -> list[RawFinding]:
    """What `rules` report, each at its node's span (the pipeline makes the findings of
    them); raises RecursionError when the tree is too deep to walk. `starts`:
    `statement_lines` of CPython's parse of `text`, when the caller has it."""
    context = FileContext(path, text, options, index)
    instances: list[StaticRule] = []
    try:
        return _run_rules(context, instances, path, module, rules, tracebacks, starts)
    finally:
        # the rules, the context and its semantic model refer to each other, and to the
        # file's tree: left to the garbage collector, each tree stayed alive through the lint
        # of the files after it, until a collection that walked all of it (a twentieth of a
        # cold run's CPU)
        for rule in instances:
            state = getattr(rule, "__dict__", None)
            if state is not None:
                state.clear()
        context.release()


def _run_rules(context: FileContext, instances: list[StaticRule], path: str,
               module: cst.Module, rules: Sequence[type[StaticRule]], tracebacks: list[str],
               starts: list[tuple[int, list[int] | None]] | None) -> list[RawFinding]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    findings: list[RawFinding] = []
    for rule_class in rules:
        try:
            instances.append(rule_class(context))
        except Exception as exc:  # noqa: BLE001 - becomes an ML001 finding
            findings.append(_rule_failed(path, rule_class, exc, tracebacks))
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
        tracebacks.append(traceback_text(exc))
        findings.append(engine_error(
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
    tops = context.top_level_of_reports()
    positions = _Positions(starts, module, [
        (node, top)
        for (_, reported, *_, statement), top in zip(context.reports, tops, strict=True)
        for node in (reported, *statement)
    ])
    failed: set[str] = set()
    for rule, node, message, fix, severity, statement in context.reports:
        span = positions.span(node)
        if span is None:
            # a node the rule built itself, or one from another tree
            if rule.code not in failed:
                failed.add(rule.code)
                findings.append(_rule_failed(path, type(rule), ValueError(
                    f"reported a {type(node).__name__} node that is not in this file"), tracebacks))
            continue
        line = span.start.line
        statement_span = positions.span(statement[0]) if statement else None
        if statement_span is not None:
            statement_line = statement_span.start.line
        else:
            # reported after the walk (from leave_Module): the innermost statement around it
            statement_line = positions.statement_around(node)
        findings.append(RawFinding(
            rule.code, message, path, line,
            span=Span(span.start.column + 1, span.end.line, span.end.column + 1, statement_line),
            fix=fix, severity=severity))
    return findings


class _Positions:
    """Where reported nodes are. LibCST's PositionProvider generates the code of the whole
    module and keeps a range for every node: for a 100,000-line file that was half the time
    and a fifth of the memory, for a handful of findings. This keeps ranges only for the
    top-level statements that hold a reported node, and in a class only for the members
    (methods, assignments) that hold one (the code of those before them is generated to count
    lines). The language server lints a file on every pause in typing: a 1,000-line file
    with findings in two methods costs the positions of those two methods."""

    def __init__(self, lines: list[tuple[int, list[int] | None]] | None, module: cst.Module,
                 wanted: Sequence[tuple[cst.CSTNode, cst.CSTNode | None]]) -> None:
        """`wanted`: (node, the top-level statement it was reported in, or None). `lines`:
        where CPython puts each top-level statement and class member (`statement_lines`):
        then no code is generated to count lines."""
        self.module = module
        self._lines = _first_lines(module.body, lines) if lines is not None else None
        self._index = {id(statement): i for i, statement in enumerate(module.body)}
        self._owner: dict[cst.CSTNode, int] = {}
        # node -> (top-level index, member index in that class's body, or None: all of it)
        self._unit: dict[cst.CSTNode, tuple[int, int | None]] = {}
        self._ranges: dict[tuple[int, int | None], tuple[Any, int]] = {}
        self._all: tuple[Any, int] | None = None
        self._whole: Any = None
        # (start, end) lines of the statements in one PositionProvider result, sorted
        self._statements: dict[int, list[tuple[int, int]]] = {}
        lost = []
        for node, top in wanted:
            index = self._index.get(id(top)) if top is not None else None
            if index is None:
                lost.append(node)
            else:
                self._owner[node] = index
        self._find(lost)
        self._compute(list(self._owner))

    def _located(self, node: cst.CSTNode) -> tuple[Any, int] | None:
        if self._all is not None:
            return self._all if node in self._all[0] else None
        unit = self._unit.get(node)
        found = self._ranges.get(unit) if unit is not None else None
        return found if found is not None and node in found[0] else None

    def span(self, node: cst.CSTNode) -> CodeRange | None:
        located = self._located(node)
        if located is None and node in self._owner:
            # reported while the walk was in another top-level statement
            del self._owner[node]
            self._unit.pop(node, None)
            self._find([node])
            if node in self._owner:
                self._compute([node])
                located = self._located(node)
        if located is None:
            # the module itself, its header or footer, or a node from elsewhere: rare
            if self._whole is None:
                self._whole = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(
                    PositionProvider)
            return self._whole.get(node)
        ranges, offset = located
        found = ranges[node]
        return CodeRange(
            CodePosition(found.start.line + offset, found.start.column),
            CodePosition(found.end.line + offset, found.end.column),
        )

    def statement_around(self, node: cst.CSTNode) -> int:
        """The first line of the innermost statement that holds `node`."""
        span = self.span(node)
        if span is None:
            raise ValueError(f"a {type(node).__name__} node that is not in this file")
        line = span.start.line
        located = self._located(node)
        if located is None:
            return line
        ranges, offset = located
        statements = self._statements.get(id(ranges))
        if statements is None:
            statements = self._statements[id(ranges)] = sorted(
                (code_range.start.line, code_range.end.line)
                for each, code_range in ranges.items()
                if isinstance(each, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            )
        # the statement that starts last among those that start at or before the node's line
        # and end at or after it (a statement that starts later cannot hold it)
        there = line - offset
        for start, end in reversed(statements[: bisect.bisect_right(statements, (there, sys.maxsize))]):
            if end >= there:
                return start + offset
        return line

    def _find(self, nodes: Sequence[cst.CSTNode]) -> None:
        """The top-level statement of each of `nodes`, by one walk over the module."""
        lost = {id(node) for node in nodes}
        if not lost:
            return
        for index, statement in enumerate(self.module.body):
            for each in every_node(statement):
                if id(each) in lost:
                    lost.discard(id(each))
                    self._owner[each] = index
            if not lost:
                return

    def _assign_units(self, nodes: Sequence[cst.CSTNode]) -> None:
        """The unit of each of `nodes`: its class member when all the nodes of that class
        found here lie in members, else its whole top-level statement."""
        by_index: dict[int, list[cst.CSTNode]] = {}
        for node in nodes:
            by_index.setdefault(self._owner[node], []).append(node)
        for index, group in by_index.items():
            members = _members(self.module.body[index])
            places: dict[int, int] = {}
            if members:
                wanted = {id(node) for node in group}
                for number, member in enumerate(members):
                    for each in every_node(member):
                        if id(each) in wanted:
                            places[id(each)] = number
            whole = len(places) < len({id(node) for node in group})
            for node in group:
                self._unit[node] = (index, None if whole else places[id(node)])

    def _compute(self, nodes: Sequence[cst.CSTNode]) -> None:
        """Ranges for the units of `nodes`: one PositionProvider pass over a module made of
        them alone (a class keeps its header and the members wanted); each one's offset is
        its first line there against its line in the file."""
        if self._all is not None:
            return
        self._assign_units(nodes)
        units = {self._unit[node] for node in nodes} - self._ranges.keys()
        if not units:
            return
        body = self.module.body
        size = sum(len(_members(statement)) or 1 for statement in body)
        if 2 * len(units) > size:
            # findings all over the file: one pass over all of it costs less
            self._all = (MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(
                PositionProvider), 0)
            return
        # a statement computed whole before is whole again
        for index, member in list(units):
            if (index, None) in self._ranges or (member is not None and (index, None) in units):
                units.discard((index, member))
                units.add((index, None))
        units -= self._ranges.keys()
        if not units:
            return
        chosen: dict[int, set[int] | None] = {}
        for index, member in units:
            if member is None:
                chosen[index] = None
            else:
                group = chosen.setdefault(index, set())
                if group is not None:
                    group.add(member)
        indices = sorted(chosen)
        if self._lines is not None and self._compute_by_lines(chosen, indices):
            return
        line = 1 + sum(_line_count(self.module.code_for_node(h)) for h in self.module.header)
        firsts, counts = [], []
        for statement in body[: indices[-1] + 1]:
            firsts.append(line)
            counts.append(_line_count(self.module.code_for_node(statement)))
            line += counts[-1]
        alone_body = []
        placed: list[tuple[int, int | None, int]] = []  # (index, member, lines left out before)
        first_there = 1
        for index in indices:
            statement = body[index]
            members = chosen[index]
            if members is None:
                alone_body.append(statement)
                placed.append((index, None, firsts[index] - first_there))
                first_there += counts[index]
                continue
            every = _members(statement)
            left_out = 0
            kept = []
            for number, part in enumerate(every):
                if number in members:
                    kept.append(part)
                    placed.append((index, number, firsts[index] - first_there + left_out))
                else:
                    left_out += _line_count(self.module.code_for_node(part))
            cls = cast(cst.ClassDef, statement)  # only a class has `_members`
            alone_body.append(cls.with_changes(body=cls.body.with_changes(body=kept)))
            first_there += counts[index] - left_out
        alone = self.module.with_changes(header=(), body=alone_body, footer=())
        ranges = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        for index, member, offset in placed:
            self._ranges[(index, member)] = (ranges, offset)


    def _compute_by_lines(self, chosen: dict[int, set[int] | None], indices: list[int]) -> bool:
        """`_compute` with the lines CPython gave: each unit's offset is its first line in
        the file against its first line in the module made of the units alone. False when a
        class's members do not match CPython's (then lines are counted from the code)."""
        lines = self._lines
        if lines is None:
            return False
        body = self.module.body
        alone_body = []
        placed: list[tuple[int, int | None, cst.CSTNode, int]] = []  # (index, member, node, line)
        for index in indices:
            statement = body[index]
            first, member_lines = lines[index]
            members = chosen[index]
            if members is None:
                alone_body.append(statement)
                placed.append((index, None, statement, first))
                continue
            every = _members(statement)
            matched = _first_lines(every, [(n, None) for n in member_lines or ()])
            if matched is None:
                return False
            kept = [member for number, member in enumerate(every) if number in members]
            placed.extend((index, number, every[number], matched[number][0])
                          for number in sorted(members))
            cls = cast(cst.ClassDef, statement)  # only a class has `_members`
            alone_body.append(cls.with_changes(body=cls.body.with_changes(body=kept)))
        alone = self.module.with_changes(header=(), body=alone_body, footer=())
        ranges = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        for index, member, node, line in placed:
            self._ranges[(index, member)] = (ranges, line - ranges[node].start.line)
        return True


def _first_lines(statements: Sequence[cst.CSTNode],
                 lines: Sequence[tuple[int, Any]]) -> list[tuple[int, Any]] | None:
    """`lines` (one per statement CPython parsed) matched to LibCST's `statements`: a simple
    statement line (`a = 1; b = 2`) is one LibCST statement and several of CPython's. None
    when they do not match."""
    out = []
    at = 0
    for statement in statements:
        if at >= len(lines):
            return None
        out.append(lines[at])
        at += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return out if at == len(lines) else None


def _members(statement: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """The statements of a class's indented body (none for anything else, or a class of one
    member: nothing to leave out)."""
    if isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
        members = statement.body.body
        return members if len(members) > 1 else ()
    return ()


def _line_count(code: str) -> int:
    """How many line ends `code` has, as Python counts them."""
    return code.count("\n") + code.count("\r") - code.count("\r\n")

