"""GitHub Actions output: workflow-command annotations and a job summary.

Every line this reporter writes is a workflow command (`::error ...::...`), with the message and
each property escaped as GitHub's own toolkit does, so that no file name or message can end the
command early or start a new one. GitHub shows at most 10 annotations of each kind per step, so
the most severe findings are annotated first and one closing notice counts the rest.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from modellint.finding import Finding, Severity
from modellint.report import Reporter, Summary, files_phrase, printable

KIND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
# annotations GitHub shows per kind and step; more are dropped without a word
ANNOTATION_LIMIT = 10
# rows of the job summary's table of findings
SUMMARY_ROWS = 50


def escape_data(text: str) -> str:
    """The message part of a workflow command (as `@actions/core` escapes it). Line breaks
    travel as `%0D`/`%0A`, which the runner turns back into the exact text; every other control
    character (ESC, which the log viewer would act on) is shown as its escape instead."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return printable(text)


def escape_property(text: str) -> str:
    """A property value (`file=...`): also `:` and `,`, which would end the value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(kind: str, properties: Mapping[str, object], message: str) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{kind}{' ' + props if props else ''}::{escape_data(message)}"


def display_path(path: str, environ: Mapping[str, str] | None = None) -> str:
    """The finding's path relative to `$GITHUB_WORKSPACE` when it lies inside it, with `/`."""
    environ = os.environ if environ is None else environ
    workspace = environ.get("GITHUB_WORKSPACE")
    if workspace:
        absolute = Path(os.path.abspath(path))
        try:
            return absolute.relative_to(os.path.abspath(workspace)).as_posix()
        except ValueError:
            pass
    posix = Path(path).as_posix()
    return posix[2:] if posix.startswith("./") else posix


def annotation_order(finding: Finding) -> tuple:
    return (finding.severity.rank, finding.path, finding.cell or 0, finding.line, finding.column,
            finding.code)


def split_at_limits(findings: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(annotated, left out): at most ANNOTATION_LIMIT per kind, most severe first. When any
    finding is left out, one notice slot is kept for the closing notice that says so."""
    ordered = sorted(findings, key=annotation_order)
    per_kind = Counter(KIND[f.severity] for f in ordered)
    overflow = any(count > ANNOTATION_LIMIT for count in per_kind.values())
    limits = {kind: ANNOTATION_LIMIT for kind in KIND.values()}
    if overflow:
        limits["notice"] = ANNOTATION_LIMIT - 1
    taken: Counter[str] = Counter()
    annotated, left = [], []
    for finding in ordered:
        kind = KIND[finding.severity]
        if taken[kind] < limits[kind]:
            taken[kind] += 1
            annotated.append(finding)
        else:
            left.append(finding)
    return annotated, left


class GithubReporter(Reporter):
    def __init__(self, stream: IO[str], environ: Mapping[str, str] | None = None) -> None:
        super().__init__(stream)
        # GITHUB_WORKSPACE and GITHUB_STEP_SUMMARY (and the repository, for links) come from here
        self.environ = os.environ if environ is None else environ

    def report(self, findings: list[Finding], summary: Summary) -> None:
        environ = self.environ
        annotated, left = split_at_limits(findings)
        for finding in annotated:
            self.stream.write(self.annotation(finding, environ) + "\n")
        summary_file = environ.get("GITHUB_STEP_SUMMARY")
        if left:
            # the rest as plain log lines, so that the CI log holds every finding; each starts
            # with modellint's own word, so no file name can make it a workflow command
            for finding in left:
                self.stream.write(f"modellint: {self.log_line(finding, environ)}\n")
            where = "locally, or see the job summary," if summary_file else "locally"
            self.stream.write(
                workflow_command(
                    "notice",
                    {"title": "modellint"},
                    f"{_plural(len(left), 'more finding')} not annotated: GitHub shows at most "
                    f"{ANNOTATION_LIMIT} annotations of each kind per step; they are in the log "
                    f"above. Run `modellint check` {where} to see them with their source.",
                )
                + "\n"
            )
        if summary_file:
            with open(summary_file, "a", encoding="utf-8") as out:
                out.write(step_summary(findings, summary, environ))

    @staticmethod
    def log_line(finding: Finding, environ: Mapping[str, str]) -> str:
        """`path:line:col: CODE message`, escaped for a person to read."""
        target = f" (from {finding.target})" if finding.target else ""
        path = display_path(finding.path, environ)
        cell = f"cell {finding.cell}:" if finding.cell is not None else ""
        return printable(
            f"{path}:{cell}{finding.line}:{finding.column}: {finding.code} "
            f"{finding.message}{target}"
        )

    def annotation(self, finding: Finding, environ: Mapping[str, str]) -> str:
        path = display_path(finding.path, environ)
        if finding.cell is not None:
            # a notebook's finding: the line of the notebook file (its JSON) that holds the
            # cell's line, which is what GitHub shows of an .ipynb in a pull request's diff;
            # the cell, line and column are in the message
            properties: dict[str, object] = {
                "file": path, "line": finding.notebook_line or 1,
                "endLine": finding.notebook_line or 1,
            }
        else:
            properties = {
                "file": path,
                "line": finding.line,
                "endLine": max(finding.end_line, finding.line),
            }
        if finding.end_line == finding.line and finding.cell is None:
            properties["col"] = finding.column
            properties["endColumn"] = max(finding.end_column, finding.column)
        properties["title"] = f"modellint ({finding.code})"
        # the message is read by people: a line break in it is shown, not made, unlike in the
        # `file` property, where it must stay exact for GitHub to find the file
        return workflow_command(KIND[finding.severity], properties, self.log_line(finding, environ))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _code(text: str) -> str:
    """Text from the linted repository (a file name, a message quoting its code) as one
    Markdown table cell's plain text: a code span, inside which nothing is HTML, Markdown, a
    link, a mention or an emoji. Its fence is longer than any run of backticks in `text`, so
    the text cannot close it; `|` is escaped, which the table reads even inside a span."""
    text = printable(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    cell = text.replace("|", "\\|")
    # one space each side: the span drops it, and keeps a leading or trailing backtick inside
    return f"{fence} {cell} {fence}"


def _link(path: str, line: int, environ: Mapping[str, str], cell: int | None = None,
          file_line: int = 0) -> str:
    label = _code(f"{path}:cell {cell}:{line}" if cell is not None else f"{path}:{line}")
    if cell is not None:
        line = file_line or 1  # the notebook file's own line, which the blob view shows
    repository, sha = environ.get("GITHUB_REPOSITORY"), environ.get("GITHUB_SHA")
    if not (repository and sha) or path.startswith("/") or path.startswith("../"):
        return label
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    quoted = urllib.parse.quote(path, errors="surrogateescape")  # a file name's raw bytes
    url = f"{server}/{repository}/blob/{sha}/{quoted}#L{line}"
    return f"[{label}]({url})"


def step_summary(findings: list[Finding], summary: Summary, environ: Mapping[str, str]) -> str:
    """The Markdown appended to `$GITHUB_STEP_SUMMARY`."""
    lines = ["## modellint", ""]
    if not findings:
        lines.append(
            f"All checks passed ({files_phrase(summary.files_checked, summary.notebooks_checked)}).")
        return "\n".join(lines) + "\n\n"
    files = len({f.path for f in findings})
    severities = Counter(f.severity for f in findings)
    counts = ", ".join(
        _plural(severities[s], word) for s, word in
        ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.INFO, "note"))
        if severities[s]
    )
    lines += [f"Found {_plural(len(findings), 'finding')} in {_plural(files, 'file')} ({counts}).",
              "", "| Rule | Name | Count |", "| --- | --- | ---: |"]
    per_rule = Counter((f.code, f.name) for f in findings)
    for (code, name), count in sorted(per_rule.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {_code(code)} | {_code(name)} | {count} |")
    ordered = sorted(findings, key=annotation_order)
    shown = ordered[:SUMMARY_ROWS]
    lines += ["", "| Location | Rule | Severity | Message |", "| --- | --- | --- | --- |"]
    for f in shown:
        path = display_path(f.path, environ)
        lines.append(
            f"| {_link(path, f.line, environ, f.cell, f.notebook_line)} | {_code(f.code)} "
            f"| {f.severity.value} | {_code(f.message)} |"
        )
    if len(ordered) > len(shown):
        lines += ["", f"… and {len(ordered) - len(shown)} more."]
    return "\n".join(lines) + "\n\n"
