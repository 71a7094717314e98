"""Linting code that does not parse: each failing statement is blanked, the rest is linted.

Old training scripts stop parsing on new Pythons (`x.cuda(async=True)`: `async` is a keyword
since 3.7) and a single syntax error would hide every other mistake in them. CPython's parser
does not recover, so recovery works on the text: at the error CPython reports, the smallest
statement that holds it (a simple statement, or a compound statement with its body and its
`else`/`except` clauses, with the decorators of a `def` or `class`; a method's statement
inside an otherwise valid class) is replaced by text of the same line count, `pass` at its
indentation on its first line and empty lines after. Every other line is left as it was, so
every position there is unchanged. The text is parsed again, up to `MAX_ERRORS` times; past
that the rest of the file is blanked and named in one last problem. Each round costs one parse
and one linear scan of the text.

Statements are found without a parser by a scan of the text that knows strings, comments,
brackets and line continuations (`_Layout`): the statements that start each line, their
indentation, and which end with brackets still open at the end of the file.

A problem carries a mechanical fix where there is one: `async=` as a keyword argument of the
torch methods that took it before PyTorch 0.4 (`.cuda`, `.to`, `.copy_`, `.type`) is
`non_blocking=`, the same argument renamed; offered only when the statement then parses.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings

from modellint.records import record

# syntax errors recovered from in one file; the rest of a file with more is not linted (a file
# that is not Python at all would otherwise cost a parse per line)
MAX_ERRORS = 20

# the torch methods whose `async` argument became `non_blocking` in PyTorch 0.4
ASYNC_METHODS = frozenset({"cuda", "to", "copy_", "type"})

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_TOKEN = re.compile(
    r"""(?P<string>'''(?:[^'\\]|\\.|'(?!''))*(?:'''|(?P<open3>\Z))
        |\"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|(?P<open4>\Z))
        |'(?:[^'\\\r\n]|\\(?:\r\n|.))*'?
        |"(?:[^"\\\r\n]|\\(?:\r\n|.))*"?)
    |(?P<comment>\#[^\r\n]*)
    |(?P<continuation>\\(?:\r\n|\r|\n))
    |(?P<newline>\r\n|\r|\n)
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])""",
    re.X | re.S,
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_CLAUSE = re.compile(r"(?:elif|else|except|finally)\b")
_DEFINITION = re.compile(r"(?:async[ \t]+)?(?:def|class)\b")
# a line that starts a statement of its own: where a statement whose bracket is never closed
# is cut (`foo(1, 2` and then, at the same indentation, `def g():`)
_STATEMENT_WORD = re.compile(
    r"(?:@|(?:async[ \t]+)?(?:def|class|for|with)\b|(?:if|while|try|return|import|from|elif"
    r"|else|except|finally|raise|assert|del|global|nonlocal|pass|break|continue)\b)")
_INDENTED_BLOCK = re.compile(r"expected an indented block after .* on line (\d+)$")
# IndentationErrors of the statement's own first line: `pass` there would fail the same way
_WRONG_INDENT = ("unexpected indent", "unindent does not match", "inconsistent use of tabs")


@record(frozen=True)
class Edit:
    """Replace columns `start` to `end` (0-based, characters) of line `line` by `text`."""

    line: int
    start: int
    end: int
    text: str


@record(frozen=True)
class Problem:
    """One syntax error: CPython's message and position, the lines of the statement that was
    blanked for it, and the edits of its mechanical fix (none when there is none)."""

    message: str
    line: int
    column: int
    first_line: int
    last_line: int
    edits: tuple[Edit, ...] = ()
    fix_description: str = ""


@record(frozen=True)
class Recovery:
    """`text` with the statements of `problems` blanked (as many lines, every other line as it
    was), and CPython's parse of it (None only when Python cannot parse even the blanked text:
    nesting or memory beyond its limits)."""

    text: str
    tree: ast.Module | None
    problems: tuple[Problem, ...]


def _parse(text: str) -> tuple[ast.Module | None, SyntaxError | None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CPython's SyntaxWarnings are not ours to print
            return ast.parse(text), None
    except SyntaxError as exc:
        return None, exc
    except (ValueError, MemoryError, RecursionError):
        return None, None


def recover(text: str, error: SyntaxError | None = None) -> Recovery:
    """The recovery of `text` (itself, without problems, when it parses); `error`: CPython's
    error on it, when the caller has it."""
    tree = None
    if error is None:
        tree, error = _parse(text)
        if error is None:
            return Recovery(text, tree, ())
    lines = _LINE.findall(text)
    if not lines or lines[-1].endswith(("\n", "\r")):
        lines.append("")  # the line after the last line end, where an error at the end is
    original = list(lines)
    problems: list[Problem] = []
    while error is not None:
        layout = _Layout(lines)
        line = min(max(error.lineno or len(lines), 1), len(lines))
        message = f"{type(error).__name__}: {error.msg}"
        if len(problems) == MAX_ERRORS:
            first = layout.statement(line)
            top = layout.top_level(first)
            first = top[0] if top is not None else first
            _blank(lines, first, len(lines), "")
            problems.append(Problem(
                f"{message} (modellint stops after {MAX_ERRORS} syntax errors in one file: the "
                f"rest of the file, from line {first}, was not linted)",
                line, error.offset or 1, first, len(lines)))
            tree, error = _parse(_joined(lines))
            if error is not None:
                # the scan's statements were wrong: nothing of the file is linted
                _blank(lines, 1, len(lines), "")
                tree, _ = _parse(_joined(lines))
            break
        column = error.offset or 1
        first, last = layout.extent(line, error.msg)
        wrong_indent = error.msg.startswith(_WRONG_INDENT)
        tree, error, lines, (first, last) = _blank_checked(lines, layout, first, last,
                                                           wrong_indent)
        edits, description = _async_fix(original, first, last)
        problems.append(Problem(message, line, column, first, last, edits, description))
    return Recovery(_joined(lines), tree, tuple(problems))


def _blank_checked(lines: list[str], layout: _Layout, first: int, last: int,
                   wrong_indent: bool) -> tuple[ast.Module | None, SyntaxError | None,
                                                list[str], tuple[int, int]]:
    """Blank lines `first` to `last` and parse: `pass` in their place, or nothing (for a line
    indented wrongly, or when `pass` breaks the code around it), or, when both break the code
    before them or fail themselves, the whole top-level statement. (tree, next error, the
    blanked lines, the lines blanked)."""
    indent = layout.indent(first)
    attempts = [(first, last, ""), (first, last, indent + "pass")]
    if not wrong_indent:
        attempts.reverse()
    top = layout.top_level(first)
    if top is not None:
        attempts.append((top[0], max(top[1], last), ""))
    best = None
    for start, end, replacement in attempts:
        candidate = list(lines)
        _blank(candidate, start, end, replacement)
        tree, error = _parse(_joined(candidate))
        if error is None or (error.lineno or 0) > end:
            return tree, error, candidate, (start, end)
        if best is None:
            best = (tree, error, candidate, (start, end))
    assert best is not None  # there are two attempts at least
    return best


def _blank(lines: list[str], first: int, last: int, replacement: str) -> None:
    """Lines `first` to `last` (1-based) emptied, `replacement` on the first, their ends kept."""
    for number in range(first, last + 1):
        line = lines[number - 1]
        end = line[len(line.rstrip("\r\n")):]
        content = replacement if number == first else ""
        if not content and end.startswith("\n") and number > 1 and lines[number - 2].endswith(
                "\r"):
            content = " "  # an empty line would join the line end before it into one `\r\n`
        lines[number - 1] = content + end


def _joined(lines: list[str]) -> str:
    return "".join(lines)


class _Layout:
    """Where the statements of a text that may not parse start and end, by a scan that knows
    strings, comments, brackets and backslash continuations (not Python's grammar)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        count = len(lines)
        # line -> the first line of the statement it belongs to (0: blank or comment only)
        self.starts = [0] * (count + 2)
        # first lines of statements whose brackets are still open at the end of the text
        self.unclosed: set[int] = set()
        continued = [False] * (count + 2)
        text = "".join(lines)
        depth = 0
        line = 1
        open_string = False
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup
            if kind == "newline":
                continued[line + 1] = depth > 0
                line += 1
            elif kind == "continuation":
                continued[line + 1] = True
                line += 1
            elif kind == "open":
                depth += 1
            elif kind == "close":
                depth = max(depth - 1, 0)
            elif match.group("string") is not None:
                breaks = len(_LINE_BREAK.findall(match.group()))
                for number in range(line + 1, line + breaks + 1):
                    continued[number] = True
                line += breaks
                open_string = match.group("open3") is not None or match.group(
                    "open4") is not None
        for number in range(1, count + 1):
            if continued[number] and self.starts[number - 1]:
                self.starts[number] = self.starts[number - 1]
            else:
                code = lines[number - 1].strip()
                self.starts[number] = number if code and not code.startswith("#") else 0
        last = next((n for n in range(count, 0, -1) if self.starts[n]), 0)
        if last and depth > 0 and not open_string:
            self.unclosed.add(self.starts[last])

    def code(self, number: int) -> str:
        return self.lines[number - 1].strip()

    def indent(self, number: int) -> str:
        line = self.lines[number - 1]
        return line[: len(line) - len(line.lstrip(" \t\f"))]

    def width(self, number: int) -> int:
        return len(self.indent(number).replace("\f", "").expandtabs(8))

    def statement(self, number: int) -> int:
        """The first line of the statement at line `number` (of the nearest one before it, on
        a blank line; the first of the text when there is none)."""
        for candidate in range(number, 0, -1):
            if self.starts[candidate]:
                return self.starts[candidate]
        return next((n for n in range(1, len(self.lines) + 1) if self.starts[n]), 1)

    def end(self, start: int) -> int:
        """The last line of the statement that starts at `start`, its own lines only (a block
        header without its body); a statement whose brackets are never closed ends before the
        next line at its indentation or less that starts a statement."""
        number = start
        while number < len(self.lines) and self.starts[number + 1] == start:
            number += 1
        if start in self.unclosed:
            for candidate in range(start + 1, number + 1):
                if (self.width(candidate) <= self.width(start)
                        and _STATEMENT_WORD.match(self.code(candidate))):
                    return candidate - 1
        return number

    def _next(self, after: int) -> int | None:
        """The first line of the next statement after line `after`."""
        for number in range(after + 1, len(self.lines) + 1):
            if self.starts[number] == number:
                return number
        return None

    def block_end(self, start: int) -> int:
        """The last line of the statement at `start` with its indented body."""
        end = self.end(start)
        width = self.width(start)
        following = self._next(end)
        while following is not None and self.width(following) > width:
            end = self.end(following)
            following = self._next(end)
        return end

    def extent(self, line: int, message: str) -> tuple[int, int]:
        """(first, last) lines of the smallest statement to blank for a syntax error at line
        `line` with CPython's `message`."""
        header = _INDENTED_BLOCK.search(message)
        if header is not None:
            # the error is reported where the body should start: the header is what fails
            line = int(header.group(1))
        start = self.statement(min(max(line, 1), len(self.lines)))
        width = self.width(start)
        # a failing clause takes its whole statement: `else:` alone cannot stand
        if _CLAUSE.match(self.code(start)):
            for candidate in range(start - 1, 0, -1):
                if self.starts[candidate] != candidate or self.width(candidate) > width:
                    continue
                if self.width(candidate) < width:
                    break
                start = candidate
                if not _CLAUSE.match(self.code(candidate)):
                    break
        first = start
        # a decorator takes what it decorates, and a definition its decorators
        while self.code(start).startswith("@"):
            following = self._next(self.end(start))
            if following is None or self.width(following) != width:
                break
            start = following
        if _DEFINITION.match(self.code(start)):
            candidate = first - 1
            while candidate > 0:
                if self.starts[candidate] == 0:
                    candidate -= 1
                    continue
                owner = self.starts[candidate]
                if self.width(owner) != width or not self.code(owner).startswith("@"):
                    break
                first = owner
                candidate = owner - 1
        last = self.block_end(start)
        # and a statement its clauses
        following = self._next(last)
        while (following is not None and self.width(following) == width
               and _CLAUSE.match(self.code(following))):
            last = self.block_end(following)
            following = self._next(last)
        return first, last

    def top_level(self, line: int) -> tuple[int, int] | None:
        """(first, last) lines of the top-level statement that holds line `line`, with its
        decorators and clauses; None when it is at the top level already."""
        start = self.statement(line)
        if self.width(start) == 0:
            return None
        for candidate in range(start - 1, 0, -1):
            if self.starts[candidate] == candidate and self.width(candidate) == 0:
                return self.extent(candidate, "")
        return None


def _async_fix(lines: list[str], first: int, last: int) -> tuple[tuple[Edit, ...], str]:
    """The edits that rename `async=` to `non_blocking=` in the calls of `ASYNC_METHODS` in
    lines `first` to `last` of the original text, when the statement then parses."""
    statement = lines[first - 1:last]
    text = "".join(statement)
    if "async" not in text:
        return (), ""
    readline = io.StringIO(text).readline
    edits = []
    # the name of the call each open bracket belongs to (None: not a method call)
    opened: list[str | None] = []
    previous: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type in (tokenize.NL, tokenize.COMMENT):
                continue
            if token.type == tokenize.OP and token.string in ("(", "[", "{"):
                method = None
                if (token.string == "(" and len(previous) >= 2 and previous[-1].type ==
                        tokenize.NAME and previous[-2].string == "."):
                    method = previous[-1].string
                opened.append(method)
            elif token.type == tokenize.OP and token.string in (")", "]", "}"):
                if opened:
                    opened.pop()
            elif (token.string == "=" and previous and previous[-1].string == "async"
                  and len(previous) >= 2 and previous[-2].string in ("(", ",")
                  and opened and opened[-1] in ASYNC_METHODS):
                keyword = previous[-1]
                edits.append(Edit(first + keyword.start[0] - 1, keyword.start[1],
                                  keyword.end[1], "non_blocking"))
            previous = [*previous[-1:], token]
    except (tokenize.TokenError, SyntaxError):
        pass
    if not edits:
        return (), ""
    fixed = apply_edits("".join(statement), [
        Edit(edit.line - first + 1, edit.start, edit.end, edit.text) for edit in edits])
    # a statement inside a block is parsed inside one
    indented = statement[0][:1] in (" ", "\t", "\f")
    tree, _ = _parse(("if 1:\n" if indented else "") + fixed)
    if tree is None:
        return (), ""
    return tuple(edits), "rename `async=` to `non_blocking=` (its name since PyTorch 0.4)"


def apply_edits(text: str, edits: list[Edit] | tuple[Edit, ...]) -> str:
    """`text` with `edits` made (lines numbered from 1 in `text`); edits that overlap an
    earlier one are left out."""
    lines = _LINE.findall(text)
    done: dict[int, list[Edit]] = {}
    for edit in sorted(edits, key=lambda e: (e.line, e.start)):
        if not 0 < edit.line <= len(lines):
            continue
        row = done.setdefault(edit.line, [])
        if row and row[-1].end > edit.start:
            continue
        row.append(edit)
    for number, row in done.items():
        line = lines[number - 1]
        for edit in reversed(row):
            line = line[:edit.start] + edit.text + line[edit.end:]
        lines[number - 1] = line
    return "".join(lines)
