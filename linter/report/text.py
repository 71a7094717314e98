"""Text and concise output, as ruff and flake8 print it."""

from __future__ import annotations

from modellint.finding import Finding, Severity
from modellint.report import Reporter, Summary, files_phrase, fixable, printable, statistics

_COLORS = {
    "path": "\033[1m",
    "code": "\033[1;31m",
    "warning": "\033[1;33m",
    "info": "\033[1;36m",
    "caret": "\033[31m",
    "dim": "\033[2m",
}
_RESET = "\033[0m"


def _paint(text: str, style: str, color: bool) -> str:
    return f"{_COLORS[style]}{text}{_RESET}" if color else text


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _fix_marker(finding: Finding, summary: Summary) -> str:
    return "[*] " if fixable(finding, summary) else ""


class ConciseReporter(Reporter):
    excerpt = False
    # ruff's concise line, which tools parse; the full text format also names the severity
    show_severity = False

    def headline(self, finding: Finding, summary: Summary) -> str:
        style = {"error": "code", "warning": "warning", "info": "info"}[finding.severity.value]
        # a notebook's finding names its cell first, as ruff prints it: `nb.ipynb:cell 7:12:5:`
        cell = f"cell {finding.cell}:" if finding.cell is not None else ""
        location = _paint(
            f"{printable(finding.path)}:{cell}{finding.line}:{finding.column}:", "path",
            summary.color,
        )
        code = _paint(printable(finding.code), style, summary.color)
        target = f" (from {printable(finding.target)})" if finding.target else ""
        message = printable(finding.message)
        severity = (
            _paint(f"{finding.severity.value}:", style, summary.color) + " "
            if self.show_severity else ""
        )
        return f"{location} {code} {_fix_marker(finding, summary)}{severity}{message}{target}"

    def report(self, findings: list[Finding], summary: Summary) -> None:
        write = self.stream.write
        if summary.statistics:  # the table alone, as ruff prints it
            write(self.statistics(findings, summary))
            return
        for finding in findings:
            write(self.headline(finding, summary) + "\n")
            if self.excerpt and finding.source_line:
                write(self.excerpt_lines(finding, summary))
        if not summary.quiet:
            write(self.closing(findings, summary))

    def excerpt_lines(self, finding: Finding, summary: Summary) -> str:
        line = finding.source_line.expandtabs(1).rstrip()
        gutter = str(finding.line)
        pad = " " * len(gutter)
        start = max(finding.column - 1, 0)
        if finding.end_line == finding.line:
            width = max(finding.end_column - finding.column, 1)
        else:
            width = max(len(line) - start, 1)
        # columns count characters of the source; an escaped one takes more room on screen
        marked = line[start:start + width]
        start += len(printable(line[:start])) - len(line[:start])
        width += len(printable(marked)) - len(marked)
        carets = _paint("^" * width, "caret", summary.color)
        return (
            f"{pad} |\n{gutter} | {printable(line)}\n{pad} | {' ' * start}{carets}\n\n"
        )

    def statistics(self, findings: list[Finding], summary: Summary) -> str:
        lines = []
        for row in statistics(findings, summary):
            marker = "[*] " if row.fixable else ""
            fixes = f" ({row.fixable} fixable)" if row.fixable else ""
            lines.append(f"{row.count:>5}\t{printable(row.code)}\t{marker}{printable(row.name)}"
                         f"{fixes}")
        return "\n".join(lines) + ("\n" if lines else "")

    @staticmethod
    def ignored(summary: Summary) -> list[str]:
        """The line that says the walk left files out, so that "0 files" is never a mystery."""
        if not summary.files_ignored:
            return []
        return [f"{_plural(summary.files_ignored, 'file')} ignored by .gitignore (not linted; "
                "name a file to lint it, --show-files lists them)."]

    def closing(self, findings: list[Finding], summary: Summary) -> str:
        parts = self._closing_parts(findings, summary)
        if summary.models_unchecked:
            # last, so that a run which checked less than it was asked to never reads as clean
            parts.append(f"{summary.models_unchecked} of {_plural(summary.models, 'model')} "
                         "not checked by the runtime pass: see ML002.")
        return "\n".join(parts) + "\n"

    def _closing_parts(self, findings: list[Finding], summary: Summary) -> list[str]:
        parts = []
        if summary.fixed:
            parts.append(f"Fixed {_plural(summary.fixed, 'finding')}.")
        if not findings:
            if not summary.fixed:
                parts.append(f"All checks passed "
                             f"({files_phrase(summary.files_checked, summary.notebooks_checked)}).")
            parts.extend(self.ignored(summary))
            return parts
        files = len({f.path for f in findings})
        notebooks = len({f.path for f in findings
                         if f.cell is not None or f.path.endswith(".ipynb")})
        fixable = sum(1 for f in findings if _fix_marker(f, summary))
        hidden = sum(
            1 for f in findings if f.fix is not None and not f.fix.safe and not summary.unsafe_fixes
        )
        noun = f"{len(findings)} remaining" if summary.fix_mode else _plural(len(findings), "finding")
        line = f"Found {noun} in {files_phrase(files, notebooks)}"
        line += f" ({fixable} fixable)." if fixable else "."
        parts.append(line)
        parts.extend(self.ignored(summary))
        infos = sum(1 for f in findings if f.severity is Severity.INFO)
        if infos == len(findings):  # why a run with findings exits 0
            parts.append(f"Only {_plural(infos, 'info finding')}; exit 0.")
        elif infos:
            parts.append(f"{_plural(infos, 'info finding')} of these does not change the exit code."
                         if infos == 1 else
                         f"{infos} info findings of these do not change the exit code.")
        if hidden:
            parts.append(f"{hidden} more fixable with --unsafe-fixes.")
        return parts


class TextReporter(ConciseReporter):
    excerpt = True
    show_severity = True
