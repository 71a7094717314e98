"""`# noqa` comments: per line, and `# modellint: noqa` for the whole file."""

from __future__ import annotations

import re

_LINE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+\d+(?:[\s,]+[A-Za-z]+\d+)*))?", re.I)
_FILE = re.compile(
    r"^\s*#\s*modellint:\s*noqa(?::\s*(?P<codes>[A-Za-z]+\d+(?:[\s,]+[A-Za-z]+\d+)*))?\s*$",
    re.I | re.M,
)
_SPLIT = re.compile(r"[\s,]+")

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
    for match in _FILE.finditer(source):
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
