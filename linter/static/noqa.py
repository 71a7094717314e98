"""`# noqa` comments: per line, and `# modellint: noqa` for the whole file.

Only real comments suppress: a `# noqa` inside a string or a docstring is text (the tokenizer
decides which `#` starts a comment). The regular expressions only pick the candidate lines, so
that a file without any is never tokenized."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

from modellint.patterns import LazyPattern

# compiled when a file first mentions noqa (most never do): these two were a millisecond of
# every run's start
_LINE = LazyPattern(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+\d+(?:[\s,]+[A-Za-z]+\d+)*))?", re.I)
_FILE = LazyPattern(
    r"[ \t\f]*#[ \t\f]*modellint:[ \t\f]*noqa"
    r"(?::[ \t\f]*(?P<codes>[A-Za-z]+\d+(?:[ \t\f,]+[A-Za-z]+\d+)*))?[ \t\f]*",
    re.I,
)
_SPLIT = LazyPattern(r"[\s,]+")
# Python ends a line at \n, \r\n or \r only; str.splitlines also splits at \f, \v, \x1c-\x1e,
# \x85, \u2028 and \u2029, which may stand in comments and strings
_LINE_END = re.compile(r"\r\n|\r|\n")

ALL = None


def _codes(text: str | None) -> frozenset[str] | None:
    if not text:
        return ALL
    return frozenset(code.upper() for code in _SPLIT.split(text.strip()) if code)


def comments(source: str) -> dict[int, tuple[int, str]]:
    """line number -> (column, text) of the comment that ends that line, for each line of
    `source` (numbered as Python numbers them) that ends in one. In a file that stops
    tokenizing (a syntax error), the comments before that point."""
    found: dict[int, tuple[int, str]] = {}
    # newline=None: lines end at \n, \r\n and \r, as Python's own line numbers count them
    readline = io.StringIO(source, newline=None).readline
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = (token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def file_exemption(source: str) -> tuple[bool, frozenset[str]]:
    """(whole file exempt, codes exempt in the whole file)."""
    whole = False
    codes: set[str] = set()
    if "modellint" not in source:
        return False, frozenset()
    candidates = [
        (number, line, match) for number, line in enumerate(python_lines(source), 1)
        if (match := _FILE.fullmatch(line)) is not None
    ]
    real = comments(source) if candidates else {}
    for number, line, match in candidates:
        # the comment alone on its line, not a line of a docstring or other string
        indent = len(line) - len(line.lstrip(" \t\f"))
        if real.get(number, (-1, ""))[0] != indent:
            continue
        found = _codes(match.group("codes"))
        if found is ALL:
            whole = True
        else:
            codes |= found
    return whole, frozenset(codes)


def line_suppresses(line: str, code: str) -> bool:
    """True when `line` (a comment, or a line whose comments are not known) carries a noqa
    that covers `code`."""
    if "noqa" not in line.lower():
        return False
    for match in _LINE.finditer(line):
        found = _codes(match.group("codes"))
        if found is ALL or code in found:
            return True
    return False


def python_lines(text: str) -> list[str]:
    """The lines of `text` as Python counts them (line N of a finding is item N - 1)."""
    return _LINE_END.split(text)


def codes_end(line: str) -> int | None:
    """Where the code list of the first `# noqa: CODE, ...` in `line` (a comment) ends (to
    add a code to it), or None when it has none."""
    for match in _LINE.finditer(line):
        if match.group("codes"):
            return match.end("codes")
    return None


def noqa_insertion(line: str, comment: tuple[int, str] | None,
                   codes: Sequence[str]) -> tuple[int, int, str]:
    """(start, end, text): the edit of `line` that makes its noqa cover `codes`: added to the
    code list of its `# noqa: ...` comment (`comment` is the line's real comment, with its
    column), else a new `  # noqa: CODE` at the end of the line."""
    listed = ", ".join(codes)
    if comment is not None:
        column, text = comment
        end = codes_end(text)
        if end is not None:
            return column + end, column + end, f", {listed}"
    stop = len(line.rstrip())
    return stop, len(line), f"  # noqa: {listed}"


def add_codes(source: str, codes_by_line: dict[int, set[str]]) -> tuple[str, list[int], list[int]]:
    """`source` with a noqa for `codes_by_line` (line number -> codes) on each of those lines:
    (the new source, the lines that got one, the lines that cannot hold a comment: their end
    lies inside a string that goes on, or after a backslash that continues them)."""
    readline = io.StringIO(source, newline=None).readline
    found: dict[int, tuple[int, str]] = {}
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = (token.start[1], token.string)
            elif token.start[0] < token.end[0]:
                inside.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return source, [], sorted(codes_by_line)
    pieces = re.split(r"(\r\n|\r|\n)", source)  # lines and their ends, alternating
    added, skipped = [], []
    for number, codes in sorted(codes_by_line.items()):
        index = 2 * (number - 1)
        if index >= len(pieces):
            continue
        line = pieces[index]
        comment = found.get(number)
        missing = sorted(code for code in codes
                         if comment is None or not line_suppresses(comment[1], code))
        if not missing:
            continue
        if number in inside or line.rstrip().endswith("\\"):
            skipped.append(number)
            continue
        start, end, text = noqa_insertion(line, comment, missing)
        pieces[index] = line[:start] + text + line[end:]
        added.append(number)
    return "".join(pieces), added, skipped
