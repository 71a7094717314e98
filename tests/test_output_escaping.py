"""Terminal and log injection: nothing a linted repository names or writes (a file name, a source
line) reaches the terminal or a CI log as a control character. Human-readable formats show each
one as its escape (`\\x1b`, `\\n`); JSON and SARIF keep the text exact."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from modellint.finding import Finding, Severity
from modellint.report import Summary, printable
from modellint.report.github import GithubReporter
from modellint.report.text import TextReporter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="file names with control chars")

# ML105 at line 5, column 9 (`forward` has no `self`); the comment carries escape sequences
HOSTILE_SOURCE = (
    "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
    "    def forward(x):  # \x1b[2J\x1b]0;owned\x07\x1b[31mred\u202e\x9b1m\n"
    "        return x\n"
)
ESC_NAME = "evil\x1b[2J\x1b[1;1H.py"
# a file name that, printed raw, would start a line of its own that looks like a finding
FORGING_NAME = "x\nforged.py:1:1: ML999 fake finding\nz.py"
# modellint's own colours, the only escape sequences it may print
OWN_SGR = re.compile(rb"\x1b\[(?:1|1;31|1;33|1;36|31|2|0)m")


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ.pop("PYTHONPATH", None)
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "modellint", "check", ".", "--select", "ML105", "--no-cache",
         *args],
        cwd=tmp_path, env=environ, capture_output=True, timeout=120,
    )


@pytest.fixture
def hostile_tree(tmp_path):
    for name in (ESC_NAME, FORGING_NAME):
        (tmp_path / name).write_text(HOSTILE_SOURCE)
    # a name that is not UTF-8: its byte is shown, and no strict UTF-8 stream chokes on it
    (tmp_path / os.fsdecode(b"bad\xff.py")).write_text(HOSTILE_SOURCE)
    return tmp_path


@pytest.mark.parametrize("fmt", ["text", "concise"])
def test_no_control_character_reaches_the_terminal(hostile_tree, fmt):
    proc = run(hostile_tree, "--format", fmt, "--color", "never",
               env={"PYTHONIOENCODING": "utf-8:strict"})
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.decode("utf-8")  # strict: every byte of it is UTF-8
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", out), out
    headlines = [line for line in out.splitlines() if re.search(r":5:9: ML105 ", line)]
    assert sorted(headlines)[0].startswith("bad\\xff.py:5:9: ML105 ")
    assert any(line.startswith("evil\\x1b[2J\\x1b[1;1H.py:5:9: ML105 ") for line in headlines)
    forged = "x\\nforged.py:1:1: ML999 fake finding\\nz.py:5:9: ML105 "
    assert any(line.startswith(forged) for line in headlines)
    # one line per finding: the newlines in the name forge none
    assert len(headlines) == 3
    assert not any(line.startswith("forged.py") for line in out.splitlines())
    if fmt == "text":
        assert "# \\x1b[2J\\x1b]0;owned\\x07\\x1b[31mred\\u202e\\x9b1m" in out


def test_with_colour_only_modellints_own_escapes_are_printed(hostile_tree):
    proc = run(hostile_tree, "--color", "always")
    assert proc.returncode == 1
    assert OWN_SGR.search(proc.stdout)
    assert b"\x1b" not in OWN_SGR.sub(b"", proc.stdout)
    assert b"\x9b" not in proc.stdout


def test_messages_on_stderr_are_escaped_too(tmp_path):
    (tmp_path / ESC_NAME).write_text(HOSTILE_SOURCE)
    os.chmod(tmp_path / ESC_NAME, 0o444)  # --fix cannot write it, and says so on stderr
    proc = run(tmp_path, "--fix")
    assert "not writable" in proc.stderr.decode()
    assert b"\x1b" not in proc.stderr
    assert "evil\\x1b[2J\\x1b[1;1H.py" in proc.stderr.decode()


def test_runtime_trace_errors_are_escaped(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "modellint", "trace", f"{ESC_NAME}:Net"],
                          cwd=tmp_path, env=environ, capture_output=True, timeout=120)
    assert proc.returncode == 2
    assert b"\x1b" not in proc.stderr
    assert "evil\\x1b[2J\\x1b[1;1H.py" in proc.stderr.decode()


def test_carets_stay_under_the_flagged_code_after_an_escaped_character():
    finding = Finding(
        code="ML105", name="method-missing-self", message="msg", severity=Severity.ERROR,
        path="net.py", line=5, column=10, end_line=5, end_column=17,
        source_line="\x1b[31m    forward(x)",
    )
    out = io.StringIO()
    TextReporter(out).report([finding], Summary(quiet=True))
    _, _, source, carets, *_ = out.getvalue().splitlines()
    assert source == "5 | \\x1b[31m    forward(x)"
    assert carets.index("^") == source.index("forward") and carets.count("^") == len("forward")


def test_github_format_passes_no_escape_or_line_break(hostile_tree):
    summary = hostile_tree / "summary.md"
    proc = run(hostile_tree, "--format", "github",
               env={"GITHUB_WORKSPACE": str(hostile_tree), "GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.decode("utf-8")
    lines = out.splitlines()
    assert len(lines) == 3 and all(line.startswith("::error file=") for line in lines)
    assert not re.search("[\x00-\x1f\x7f-\x9f]", out.replace("\n", ""))
    assert any("::evil\\x1b[2J\\x1b[1;1H.py:5:9: ML105 " in line for line in lines)
    # the job summary is read by people too
    assert "\x1b" not in summary.read_text(encoding="utf-8")
    assert "| ` evil\\x1b[2J\\x1b[1;1H.py:5 ` |" in summary.read_text(encoding="utf-8")


def test_github_annotation_of_a_message_quoting_source():
    finding = Finding(
        code="ML105", name="n", message="`x\x1b[31m` is\nnot fine", severity=Severity.ERROR,
        path="net.py", line=1, column=1, end_line=1, end_column=2,
    )
    out = io.StringIO()
    GithubReporter(out, environ={}).report([finding], Summary())
    assert out.getvalue() == (
        "::error file=net.py,line=1,endLine=1,col=1,endColumn=2,title=modellint (ML105)"
        "::net.py:1:1: ML105 `x\\x1b[31m` is\\nnot fine\n"
    )


def test_json_and_sarif_keep_names_exact(hostile_tree):
    names = sorted([ESC_NAME, FORGING_NAME, os.fsdecode(b"bad\xff.py")])
    proc = run(hostile_tree, "--format", "json", env={"PYTHONIOENCODING": "utf-8:strict"})
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(proc.stdout.decode("utf-8"))
    assert sorted(f["path"] for f in findings) == names
    # the undecodable byte comes back as itself
    assert b"bad\xff.py" in [os.fsencode(f["path"]) for f in findings]

    proc = run(hostile_tree, "--format", "sarif", env={"PYTHONIOENCODING": "utf-8:strict"})
    assert proc.returncode == 1, proc.stderr
    document = json.loads(proc.stdout.decode("utf-8"))
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in document["runs"][0]["results"]]
    assert sorted(urllib.parse.unquote(u, errors="surrogateescape") for u in uris) == names


def test_printable():
    assert printable("a\x1b[2Jb\n\r\t\x00\x7f\x9b") == "a\\x1b[2Jb\\n\\r\\t\\x00\\x7f\\x9b"
    assert printable("\u2028\u202e\u2066") == "\\u2028\\u202e\\u2066"
    assert printable("bad\udcff.py") == "bad\\xff.py"
    # ordinary text, including non-ASCII letters and emoji sequences, is left alone
    assert printable("ünïcødé ✓ 中文 👩\u200d💻 `x` | 100%") == "ünïcødé ✓ 中文 👩\u200d💻 `x` | 100%"


def test_diff_headers_quote_an_unprintable_name(hostile_tree):
    proc = run(hostile_tree, "--diff")
    assert proc.returncode == 1
    out = proc.stdout.decode("utf-8")
    # a name with a line break would end the header early: quoted as git quotes it
    assert '--- "a/x\\nforged.py:1:1: ML999 fake finding\\nz.py"\n' in out
    assert '+++ "b/evil\\x1b[2J\\x1b[1;1H.py"\n' in out
    assert not any(line.startswith("forged.py") for line in out.splitlines())
