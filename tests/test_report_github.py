"""`--format github`: workflow commands as the Actions runner parses them, limits, job summary."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from modellint.finding import Finding, Severity
from modellint.plugins import load_registry
from modellint.report import Summary, printable
from modellint.report.github import GithubReporter, escape_data, escape_property

BAD = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(x):\n        return x\n"
HOSTILE_NAMES = [
    "%0A::error file=x::evil.py",
    "line\n::error file=y::injected,title=z.py",
    "cr\r::warning::w.py",
]


def parse_runner_line(line: str):
    """A workflow command as the Actions runner reads one line of output (ActionCommand
    .TryParseV2): None when the line is not a command."""
    line = line.lstrip()
    if not line.startswith("::"):
        return None
    end = line.find("::", 2)
    if end < 0:
        return None
    info, data = line[2:end], line[end + 2 :]
    name, _, props = info.partition(" ")
    properties = {}
    for pair in filter(None, props.strip().split(",")):
        key, _, value = pair.partition("=")
        properties[key] = _unescape(value, prop=True)
    return name, properties, _unescape(data, prop=False)


def _unescape(text: str, prop: bool) -> str:
    pairs = [("%0D", "\r"), ("%0A", "\n")]
    if prop:
        pairs += [("%3A", ":"), ("%2C", ",")]
    for escaped, char in [*pairs, ("%25", "%")]:
        text = text.replace(escaped, char)
    return text


def finding(path="net.py", line=5, severity=Severity.ERROR, code="ML105", message="msg",
            end_line=None, column=9, end_column=16):
    return Finding(code=code, name="method-missing-self", message=message, severity=severity,
                   path=path, line=line, column=column,
                   end_line=line if end_line is None else end_line, end_column=end_column)


def render(findings, environ=None, summary=None):
    out = io.StringIO()
    GithubReporter(out, environ=environ or {}).report(findings, summary or Summary())
    return out.getvalue().splitlines()


def test_annotation_properties_and_message():
    [line] = render([finding()])
    assert line == (
        "::error file=net.py,line=5,endLine=5,col=9,endColumn=16,title=modellint (ML105)"
        "::net.py:5:9: ML105 msg"
    )
    name, props, data = parse_runner_line(line)
    assert (name, props["file"], props["title"], data) == (
        "error", "net.py", "modellint (ML105)", "net.py:5:9: ML105 msg")


def test_kind_follows_severity_and_columns_only_on_one_line():
    lines = render([
        finding(severity=Severity.WARNING),
        finding(path="b.py", severity=Severity.INFO, end_line=7),
    ])
    warning, notice = (parse_runner_line(line) for line in lines)
    assert warning[0] == "warning" and "col" in warning[1]
    assert notice[0] == "notice"
    assert notice[1]["endLine"] == "7" and "col" not in notice[1] and "endColumn" not in notice[1]


def test_escaping_keeps_every_message_and_name_on_one_command():
    assert escape_data("100%\r\n") == "100%25%0D%0A"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    hostile = "bad `x`\n::error file=evil.py::owned 100%"
    lines = render([finding(path=name, message=hostile) for name in HOSTILE_NAMES])
    assert len(lines) == len(HOSTILE_NAMES)
    for name, line in zip(sorted(HOSTILE_NAMES), lines, strict=True):
        kind, props, data = parse_runner_line(line)
        assert kind == "error"
        assert set(props) == {"file", "line", "endLine", "col", "endColumn", "title"}
        assert props["file"] == name
        # the message is for people: its line breaks are shown as `\n`, not made
        assert data == printable(f"{name}:5:9: ML105 {hostile}")
        assert "\n" not in data and "\r" not in data


def test_most_severe_first_then_capped_per_kind_with_closing_notice():
    findings = (
        [finding(path=f"e{i:02}.py", severity=Severity.ERROR) for i in range(12)]
        + [finding(path=f"a{i:02}.py", severity=Severity.WARNING) for i in range(11)]
        + [finding(path=f"n{i:02}.py", severity=Severity.INFO) for i in range(10)]
    )
    lines = render(list(reversed(findings)))
    commands = [c for c in map(parse_runner_line, lines) if c is not None]
    kinds = [c[0] for c in commands]
    assert kinds == ["error"] * 10 + ["warning"] * 10 + ["notice"] * 10
    errors = [c[1]["file"] for c in commands if c[0] == "error"]
    assert errors == [f"e{i:02}.py" for i in range(10)]
    # one notice slot is kept for the closing notice, so GitHub shows it
    notes = [c[1].get("file") for c in commands if c[0] == "notice"]
    assert notes[:9] == [f"n{i:02}.py" for i in range(9)] and notes[9] is None
    assert commands[-1][2].startswith("4 more findings not annotated")
    # what is not annotated is still in the CI log, as plain lines before the notice
    plain = [line for line in lines if parse_runner_line(line) is None]
    assert plain == [f"modellint: {path}:5:9: ML105 msg"
                     for path in ("e10.py", "e11.py", "a10.py", "n09.py")]
    assert lines[-1].startswith("::notice")


def test_plain_log_lines_past_the_limit_cannot_become_commands():
    hostile = "::error file=x.py::forged\x1b[2J\nline"
    findings = [finding(path=f"e{i:02}.py") for i in range(10)]
    findings.append(finding(path="z.py", message=hostile))
    lines = render(findings)
    assert len(lines) == 12  # ten annotations, one log line, the notice: no line was forged
    [plain] = [line for line in lines if parse_runner_line(line) is None]
    assert plain == "modellint: z.py:5:9: ML105 ::error file=x.py::forged\\x1b[2J\\nline"


def test_no_closing_notice_within_limits():
    lines = render([finding(path=f"e{i}.py") for i in range(10)])
    assert len(lines) == 10 and all(parse_runner_line(x)[0] == "error" for x in lines)


def test_paths_relative_to_workspace(tmp_path):
    inside = tmp_path / "pkg" / "net.py"
    [line] = render([finding(path=str(inside))], {"GITHUB_WORKSPACE": str(tmp_path)})
    assert parse_runner_line(line)[1]["file"] == "pkg/net.py"
    [line] = render([finding(path="/elsewhere/net.py")], {"GITHUB_WORKSPACE": str(tmp_path)})
    assert parse_runner_line(line)[1]["file"] == "/elsewhere/net.py"


def test_step_summary_counts_rules_and_links_findings(tmp_path):
    summary_file = tmp_path / "summary.md"
    summary_file.write_text("earlier step\n")
    environ = {
        "GITHUB_STEP_SUMMARY": str(summary_file), "GITHUB_WORKSPACE": str(tmp_path),
        "GITHUB_REPOSITORY": "octo/models", "GITHUB_SHA": "abc123",
        "GITHUB_SERVER_URL": "https://github.com",
    }
    findings = [
        finding(path=str(tmp_path / "net.py"), message="`forward` has | no self"),
        finding(path=str(tmp_path / "a b.py"), line=2, code="ML000", message="SyntaxError"),
        finding(path=str(tmp_path / "c.py"), line=3, severity=Severity.WARNING),
    ]
    render(findings, environ, Summary(files_checked=4))
    text = summary_file.read_text()
    assert text.startswith("earlier step\n## modellint")
    assert "Found 3 findings in 3 files (2 errors, 1 warning)." in text
    assert "| ` ML105 ` | ` method-missing-self ` | 2 |" in text
    assert "https://github.com/octo/models/blob/abc123/a%20b.py#L2" in text
    assert "`` `forward` has \\| no self ``" in text
    # errors before warnings in the table
    assert text.index("net.py:5") < text.index("c.py:3")


def test_step_summary_when_clean(tmp_path):
    summary_file = tmp_path / "summary.md"
    render([], {"GITHUB_STEP_SUMMARY": str(summary_file)}, Summary(files_checked=3))
    assert "All checks passed (3 files)." in summary_file.read_text()


def test_registered_through_the_plugin_hook():
    assert load_registry(entry_points=False).reporters["github"] is GithubReporter


@pytest.mark.skipif(sys.platform == "win32", reason="file names with newlines")
def test_hostile_file_names_through_the_cli(tmp_path):
    for name in HOSTILE_NAMES:
        (tmp_path / name).write_text(BAD)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "broken.py").write_text("def f(:\n")
    env = {**os.environ, "GITHUB_WORKSPACE": str(tmp_path),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    proc = subprocess.run(
        [sys.executable, "-m", "modellint", "check", ".", "--format", "github",
         "--select", "ML105,ML000", "--no-cache"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    commands = [parse_runner_line(line) for line in lines]
    assert all(commands), lines  # every line is exactly one command
    by_file = {props["file"]: (kind, props, data) for kind, props, data in commands}
    assert sorted(by_file) == sorted([*HOSTILE_NAMES, "sub/broken.py"])
    for name in HOSTILE_NAMES:
        kind, props, data = by_file[name]
        assert kind == "error" and props["title"] == "modellint (ML105)"
        assert props["line"] == "5" and data.startswith(f"{printable(name)}:5:")
    assert by_file["sub/broken.py"][1]["title"] == "modellint (ML000)"
    assert "method-missing-self" in Path(tmp_path / "summary.md").read_text()


def summary_cells(text: str) -> list[list[str]]:
    """The cells of the findings table (Location, Rule, Severity, Message), split where GitHub's
    Markdown splits a table row: at each `|` without a backslash before it."""
    rows = text.split("| Location | Rule | Severity | Message |\n| --- | --- | --- | --- |\n")[1]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]]
            for row in rows.strip().splitlines() if row.startswith("|")]


def code_span_text(cell: str) -> str:
    """What a cell that is exactly one code span shows (CommonMark: the span closes only at a
    run of backticks as long as the one that opened it; one space is dropped each side), or
    fail: anything outside the span would be read as Markdown or HTML."""
    match = re.fullmatch(r"(`+) (.*) \1", cell, re.S)
    assert match, cell
    fence, inner = match.groups()
    assert len(fence) not in {len(run) for run in re.findall("`+", inner)}, cell
    return inner.replace("\\|", "|")


def test_step_summary_shows_repository_text_as_plain_text(tmp_path):
    """The job summary is rendered as Markdown with HTML: what a message quotes from the code,
    and a file name, show as their text, whatever backticks, tags and links they hold."""
    summary_file = tmp_path / "summary.md"
    environ = {"GITHUB_STEP_SUMMARY": str(summary_file), "GITHUB_WORKSPACE": str(tmp_path),
               "GITHUB_REPOSITORY": "octo/models", "GITHUB_SHA": "abc123"}
    messages = [
        "`torch.load(\"<img src=x onerror=alert(1)>\")` loads [a](https://evil.example) **all**",
        "``` `` ` closes | every <b>span</b> @octocat #1 $x$ &lt;",
        "`` trailing `",
    ]
    path = tmp_path / "a`b<i>c</i>[d](e).py"
    render([finding(path=str(path), line=i + 1, message=m) for i, m in enumerate(messages)],
           environ, Summary(files_checked=1))
    rows = summary_cells(summary_file.read_text())
    assert [code_span_text(message) for *_, message in rows] == messages
    for i, (location, rule, severity, _) in enumerate(rows):
        label, url = re.fullmatch(r"\[(.*)\]\((\S+)\)", location).groups()
        assert code_span_text(label) == f"a`b<i>c</i>[d](e).py:{i + 1}"
        assert url.startswith("https://github.com/octo/models/blob/abc123/a%60b%3Ci%3E")
        assert code_span_text(rule) == "ML105" and severity == "error"
