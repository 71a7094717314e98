"""Which findings a user has hidden: one step that every finding goes through, whichever pass
(static or runtime) made it.

A finding is hidden when its code is not selected or is ignored (`select`, `ignore`, their
command-line forms), when `per-file-ignores` ignores it in its file, when its file carries a
`# modellint: noqa` (all codes or some), or when the line it is on, or the first line of the
statement it is in, carries a `# noqa` that covers it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from functools import cached_property
from pathlib import Path

from modellint import codes
from modellint.finding import Finding
from modellint.records import record
from modellint.static.noqa import comments, file_exemption, line_suppresses, python_lines

# what the engine reports about a file it could not lint (syntax error, internal error):
# shown whatever `select` says, hidden only by `ignore`, per-file-ignores and file noqa
ALWAYS_SHOWN = (codes.SYNTAX_ERROR, codes.INTERNAL_ERROR)


def shown_codes(config, enabled: Iterable[str]) -> frozenset[str]:
    """The codes a run reports: the enabled ones, and the engine's own unless ignored."""
    from modellint.config import matches

    return frozenset({*enabled, *(c for c in ALWAYS_SHOWN if not matches(c, config.ignore))})


def hidden_codes(config, shown: Iterable[str], path: Path) -> frozenset[str]:
    """The codes of `shown` hidden in the whole of `path` by `per-file-ignores`."""
    from modellint.config import file_ignores, matches

    ignored = list(file_ignores(config, path)) if config is not None else []
    return frozenset(code for code in shown if ignored and matches(code, ignored))


@record
class FileSuppressions:
    """What hides findings in one file."""

    # codes shown in this run (None: all)
    shown: frozenset[str] | None = None
    # codes hidden in the whole file: per-file-ignores and `# modellint: noqa: CODE`
    codes: frozenset[str] = frozenset()
    # `# modellint: noqa`: nothing in the file is reported
    whole: bool = False
    # the file's text, for line noqa
    text: str = field(default="", repr=False)

    @classmethod
    def of(cls, text: str, hidden: frozenset[str] = frozenset(),
           shown: frozenset[str] | None = None) -> FileSuppressions:
        whole, codes = file_exemption(text)
        return cls(shown=shown, codes=hidden | codes, whole=whole, text=text)

    @cached_property
    def lines(self) -> Sequence[str]:
        """The file's lines as Python counts them (split once, when a finding needs them)."""
        return python_lines(self.text) if self.text else ()

    def hides_code(self, code: str) -> bool:
        """True when `code` is hidden everywhere in this file (its rule need not run)."""
        return self.whole or code in self.codes or (self.shown is not None
                                                   and code not in self.shown)

    @cached_property
    def comments(self) -> dict[int, tuple[int, str]]:
        """The file's real comments by line (tokenized once, when a line mentions noqa)."""
        return comments(self.text)

    def _suppresses(self, number: int, code: str) -> bool:
        """Whether the comment ending line `number` has a noqa covering `code`."""
        if not 0 < number <= len(self.lines) or "noqa" not in self.lines[number - 1].lower():
            return False
        return line_suppresses(self.comments.get(number, (0, ""))[1], code)

    def hides(self, finding: Finding, path: str | None = None) -> bool:
        """Whether `finding` (in this file: `path` is not read) is hidden."""
        if self.hides_code(finding.code):
            return True
        # a finding that points at no statement (a file that does not parse, an internal
        # error) is not hidden by a noqa on whatever line it names
        if not finding.statement_line:
            return False
        if not self.lines:  # the file's text is not known: its line as the finding quotes it
            return line_suppresses(finding.source_line, finding.code)
        return self._suppresses(finding.line, finding.code) or (
            finding.statement_line != finding.line
            and self._suppresses(finding.statement_line, finding.code))

    def visible(self, findings: Iterable[Finding]) -> list[Finding]:
        return [finding for finding in findings if not self.hides(finding)]


class Suppressions:
    """The suppressions of one run, file by file, for findings made outside the static
    engine (the runtime pass): the same `FileSuppressions` the engine applies, built from the
    file's text."""

    def __init__(self, config, shown: frozenset[str] | None,
                 read: Callable[[str], str] | None = None) -> None:
        self.config = config
        self.shown = shown
        self._read = read or read_text
        self._files: dict[str, FileSuppressions] = {}

    def of_file(self, path: str) -> FileSuppressions:
        if path not in self._files:
            hidden = hidden_codes(self.config, self.shown or (), Path(path))
            try:
                text = self._read(path)
            except (OSError, ValueError):  # unreadable, or not text: only line 1 is known
                text = ""
            self._files[path] = FileSuppressions.of(text, hidden, self.shown)
        return self._files[path]

    def hides(self, finding: Finding, path: str | None) -> bool:
        """`path`: the real file the finding is in (None: it is in no file)."""
        if path is None:
            return FileSuppressions(shown=self.shown).hides_code(finding.code)
        return self.of_file(path).hides(finding)


def read_text(path: str) -> str:
    from modellint.static.discover import read_file_bytes
    from modellint.static.source import decode

    text, _ = decode(read_file_bytes(path))
    return text
