"""`# noqa` comments: per line, and `# modellint: noqa` for the whole file."""

from __future__ import annotations

import re

_LINE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+\d+(?:[\s,]+[A-Za-z]+\d+)*))?", re.I)
_FILE = re.compile(
    r"[ \t\f]*#[ \t\f]*modellint:[ \t\f]*noqa"
    r"(?::[ \t\f]*(?P<codes>[A-Za-z]+\d+(?:[ \t\f,]+[A-Za-z]+\d+)*))?[ \t\f]*",
    re.I,
)
_SPLIT = re.compile(r"[\s,]+")
# Python ends a line at \n, \r\n or \r only; str.splitlines also splits at \f, \v, \x1c-\x1e,
# \x85, \u2028 and \u2029, which may stand in comments and strings
_LINE_END = re.compile(r"\r\n|\r|\n")

ALL = None


def _codes(text: str | None) -> frozenset[str] | None:
    if not text:
        return ALL
    return frozenset(code.upper() for code in _SPLIT.split(text.strip()) if code)


def file_exemption(source: str) -> tuple[bool, frozenset[str]]:
    """(whole file exempt, codes exempt in the whole file)."""
    whole = False
    codes: set[str] = set()
    if "modellint" not in source:
        return False, frozenset()
    for line in python_lines(source):
        match = _FILE.fullmatch(line)
        if match is None:
            continue
        found = _codes(match.group("codes"))
        if found is ALL:
            whole = True
        else:
            codes |= found
    return whole, frozenset(codes)


def line_suppresses(line: str, code: str) -> bool:
    """True when `line` carries a noqa that covers `code`."""
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
    """Where the code list of the first `# noqa: CODE, ...` comment on `line` ends (to add a
    code to it), or None when the line has none."""
    for match in _LINE.finditer(line):
        if match.group("codes"):
            return match.end("codes")
    return None
