"""Reporters turn findings into output. Built-in ones register through the plugin contract
(`modellint_add_reporters`) like any third-party reporter."""

from __future__ import annotations

import re
from dataclasses import field
from typing import IO, Any

from modellint.finding import Finding
from modellint.records import record

# What a terminal or log viewer would act on rather than show: C0 and C1 control characters
# (ESC starts ANSI sequences, \x9b is a one-byte CSI, \n and \r start a new line), the Unicode
# line and paragraph separators, the bidirectional overrides of "Trojan Source", and lone
# surrogates (the undecodable bytes of a file name), which no UTF-8 stream can write.
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if "\udc80" <= char <= "\udcff":  # a byte of a file name that was not UTF-8
        return f"\\x{ord(char) - 0xDC00:02x}"
    return char.encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """`text` from the linted repository (a path, a source line, a message quoting either) as
    human-readable output shows it: each control character as its Python escape (`\\x1b`,
    `\\n`), so that nothing in it can colour, move or clear the terminal or start a line of
    its own. Machine-readable formats (JSON, SARIF) keep the text exact instead."""
    return _UNPRINTABLE.sub(_escape, text)


@record
class Summary:
    files_checked: int = 0
    # files a .gitignore kept out of the folders walked (not linted)
    files_ignored: int = 0
    # how many of `files_checked` are Jupyter notebooks
    notebooks_checked: int = 0
    fixed: int = 0
    # rule code -> rule class, for reporters that describe rules (SARIF, GitHub summary)
    rules: dict[str, Any] = field(default_factory=dict)
    statistics: bool = False
    quiet: bool = False
    color: bool = False
    fix_mode: bool = False
    unsafe_fixes: bool = False
    # the runtime pass: models it tried, and how many of them it could not check
    models: int = 0
    models_unchecked: int = 0


def fixable(finding: Finding, summary: Summary) -> bool:
    """Whether this run's `--fix` would fix `finding` (an unsafe fix needs --unsafe-fixes)."""
    return finding.fix is not None and (finding.fix.safe or summary.unsafe_fixes)


@record(frozen=True)
class RuleCount:
    """One row of `--statistics`: how often a rule was reported, and how many it can fix."""

    code: str
    name: str
    count: int
    fixable: int


def statistics(findings: list[Finding], summary: Summary) -> list[RuleCount]:
    """The rules reported, most often first (ruff's `--statistics`)."""
    from collections import Counter

    counts = Counter((f.code, f.name) for f in findings)
    fixes = Counter(f.code for f in findings if fixable(f, summary))
    return [RuleCount(code, name, count, fixes[code]) for (code, name), count
            in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def files_phrase(count: int, notebooks: int) -> str:
    """`3 files`, or `3 files, 1 of them a notebook` when notebooks were linted."""
    files = f"{count} file{'' if count == 1 else 's'}"
    if not notebooks:
        return files
    if notebooks == count == 1:
        return "1 notebook"
    noun = "a notebook" if notebooks == 1 else "notebooks"
    return f"{files}, {notebooks} of them {noun}" if notebooks < count else \
        f"{count} notebook{'' if count == 1 else 's'}"


class Reporter:
    """Subclass and register under a format name with `modellint_add_reporters`."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def report(self, findings: list[Finding], summary: Summary) -> None:
        raise NotImplementedError
