"""Bad input never crashes the static pass, a failing rule is one ML001, and --fix is safe.

Each bad input is linted in one real `modellint` run together with a good file whose finding
must still be reported; none may print a traceback or exit 2.
"""

from __future__ import annotations

import ast
import ctypes
import filecmp
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from modellint.config import Config
from modellint.static import linter, runner
from modellint.static.discover import discover
from modellint.static.runner import StaticOptions
from modellint.testing import registry

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# ML105 at line 5, column 9 (a safe fix: add `self`)
GOOD = """\
import torch.nn as nn


class Net(nn.Module):
    def forward(x):
        return x
"""


def run_cli(*args, cwd: Path, preexec_fn=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.pop("PYTHONPATH", None)
    env["PYTHONPATH"] = str(cwd)  # for `-p` plugin modules written beside the files
    return subprocess.run(
        [sys.executable, "-m", "modellint", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn,
    )


def by_path(findings: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for finding in findings:
        grouped.setdefault(finding["path"], []).append(finding)
    return grouped


def static_rules():
    return [rule for rule in registry().rules.values()
            if "static" in rule.passes and hasattr(rule, "report")]


# -- making a file unreadable, also for root --------------------------------------------------

_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH, _PR_CAPBSET_DROP = 1, 2, 24


def _drop_file_capabilities() -> None:
    """preexec_fn: root without the capabilities that let it read any file (after exec)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def unreadable(path: Path):
    """chmod 000 `path`; (preexec_fn for the run, None) when the run cannot read it, else
    (None, reason). Root reads any file, so for root the run drops CAP_DAC_OVERRIDE."""
    path.chmod(0)
    probe = [sys.executable, "-c", f"open({str(path)!r}, 'rb')"]
    candidates = [None]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        candidates.append(_drop_file_capabilities)
    for preexec in candidates:
        try:
            proc = subprocess.run(probe, capture_output=True, text=True, preexec_fn=preexec)
        except (OSError, subprocess.SubprocessError):
            continue
        if "PermissionError" in proc.stderr:
            return preexec, None
    return None, "running as root and cannot drop CAP_DAC_OVERRIDE, so chmod 000 does not " \
                 "stop reading; the unreadable-file case was not checked"


def _big_file() -> tuple[str, int]:
    lines = ["import torch", "import torch.nn as nn", ""]
    for i in range(3000):
        lines += [f"class Block{i}(nn.Module):", "    def forward(self, x):",
                  f"        return x + {i}", "", ""]
    lines += ["class Last(nn.Module):", "    def forward(x):", "        return x", ""]
    return "\n".join(lines), len(lines) - 2


# as deep as CPython parses (it allows 200 nested brackets); chains that CPython keeps flat but
# LibCST nests (`and`, dotted names) deeper than LibCST's parser survives on the main thread
DEEP_EXPRESSIONS = [
    "(" * 190 + "1" + ")" * 190,
    "a" + ".b" * 400,
    "a" + "[0]" * 400,
    "-" * 400 + "1",
    "not " * 400 + "x",
    " + ".join(["x"] * 400),
    "**".join(["2"] * 400),
    "lambda: " * 400 + "1",
    "torch.relu(" * 190 + "x" + ")" * 190,
    " and ".join(["x"] * 10_000),
]


def _deep_file() -> tuple[str, int]:
    body = "".join(f"x{i} = {expr}\n" for i, expr in enumerate(DEEP_EXPRESSIONS))
    text = "import torch\nimport torch" + ".nn" * 10_000 + "\n" + body + "\n\n" + GOOD
    return text, text.count("\n") - 1


def test_bad_inputs_in_one_run(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    broken = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x)\n"
    (tmp_path / "syntax.py").write_text(broken)
    with pytest.raises(SyntaxError) as cpython:
        ast.parse(broken)
    (tmp_path / "nul.py").write_bytes(b"import torch\nx = 1\x00\n")
    (tmp_path / "binary.py").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "image.py").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(1, 256)) * 4)
    (tmp_path / "latin1_cookie.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + GOOD.encode("latin-1"))
    (tmp_path / "latin1_plain.py").write_bytes(b"import torch\nname = 'caf\xe9'\n")
    (tmp_path / "empty.py").write_bytes(b"")
    deep, deep_line = _deep_file()
    (tmp_path / "deep.py").write_text(deep)
    big, big_line = _big_file()
    (tmp_path / "big.py").write_text(big)
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "inner.py").write_text(GOOD)
    (loop / "self").symlink_to(".")
    (loop / "parent").symlink_to("..")
    (loop / "circle").symlink_to("circle")  # links to themselves
    (loop / "circle.py").symlink_to("circle.py")
    (tmp_path / "secret.py").write_text(GOOD)
    preexec, skipped = unreadable(tmp_path / "secret.py")
    if skipped:
        (tmp_path / "secret.py").unlink()

    proc = run_cli("check", ".", "--select", "ALL", "--format", "json", "--no-cache", "-j", "2",
                   cwd=tmp_path, preexec_fn=preexec)

    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    import json

    found = by_path(json.loads(proc.stdout))
    assert not [f for fs in found.values() for f in fs if f["code"] == "ML001"], found

    def codes(name):
        return [(f["code"], f["line"], f["column"]) for f in found.get(name, [])]

    assert ("ML105", 5, 9) in codes("good.py")
    assert codes("syntax.py") == [("ML000", cpython.value.lineno, cpython.value.offset)]
    assert codes("nul.py") == [("ML000", 2, 6)]
    assert "NUL" in found["nul.py"][0]["message"]
    assert [c for c, _, _ in codes("binary.py")] == ["ML000"]
    assert codes("image.py") == [("ML000", 1, 1)]
    assert "cannot decode line 1 as utf-8 (byte 0x89)" in found["image.py"][0]["message"]
    # the cookie is honoured: linted normally, positions in characters
    assert ("ML105", 7, 9) in codes("latin1_cookie.py")
    assert "ML000" not in [c for c, _, _ in codes("latin1_cookie.py")]
    # without a cookie: one clear finding at the bad byte, saying what to do
    assert codes("latin1_plain.py") == [("ML000", 2, 12)]
    message = found["latin1_plain.py"][0]["message"]
    assert "byte 0xe9" in message and "coding declaration" in message and "UTF-8" in message
    assert codes("empty.py") == []
    assert ("ML105", deep_line, 9) in codes("deep.py")
    assert ("ML105", big_line, 9) in codes("big.py")
    assert not [c for c, _, _ in codes("big.py") if c.startswith("ML00")]
    # the loop is walked once; nothing is reached through the links
    assert codes("loop/inner.py") == [("ML105", 5, 9)]
    assert not [p for p in found if p.startswith(("loop/self", "loop/parent", "loop/circle/"))]
    assert codes("loop/circle.py") == [("ML000", 1, 1)]
    assert found["loop/circle.py"][0]["message"] == (
        "cannot read file: Too many levels of symbolic links")
    if skipped:
        pytest.skip(skipped)
    assert codes("secret.py") == [("ML000", 1, 1)]
    assert found["secret.py"][0]["message"] == "cannot read file: Permission denied"


def test_nonexistent_path_is_exit_2_with_a_message(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    proc = run_cli("check", "good.py", "no/such/file.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "modellint: error: path does not exist: no/such/file.py"
    assert proc.stdout == ""


@pytest.mark.parametrize("jobs", [1, 2])
def test_file_deleted_between_discovery_and_reading(tmp_path, jobs):
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (tmp_path / name).write_text(GOOD)
    tasks = [(display, path, frozenset())
             for display, path in discover([str(tmp_path)], lambda *_: False)]
    assert len(tasks) == 4
    (tmp_path / "b.py").unlink()
    opts = StaticOptions(rules=static_rules(), options=Config().rule_options(), jobs=jobs)
    outcomes = runner.run(tasks, opts)
    result = {Path(o.path).name: [(f.code, f.line, f.message) for f in o.findings]
              for o in outcomes}
    assert result["b.py"] == [("ML000", 1, "cannot read file: No such file or directory")]
    for name in ("a.py", "c.py", "d.py"):
        assert ("ML105", 5) in [(code, line) for code, line, _ in result[name]]


BAD_RULES = '''\
import libcst as cst

from modellint import hookimpl
from modellint.finding import Fix
from modellint.rule import Severity, StaticRule


class Explodes(StaticRule):
    """Raises on every class."""

    code = "XRB001"
    name = "explodes"
    severity = Severity.WARNING

    def visit_ClassDef(self, node):
        raise RuntimeError(f"kaboom in {node.name.value}")


class BrokenInit(StaticRule):
    """Raises when created."""

    code = "XRB002"
    name = "broken-init"
    severity = Severity.WARNING

    def __init__(self, context):
        raise ValueError("no context for me")


class ForeignNode(StaticRule):
    """Reports a node it built itself."""

    code = "XRB003"
    name = "foreign-node"
    severity = Severity.WARNING

    def visit_ClassDef(self, node):
        self.report(cst.Name("elsewhere"), "not in this file")


class UnbuildableFix(StaticRule):
    """A fix LibCST refuses to apply."""

    code = "XRB004"
    name = "unbuildable-fix"
    severity = Severity.WARNING
    fix = "safe"

    def visit_ClassDef(self, node):
        new = node.name.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.report(node.name, "rename", fix=Fix(((node.name, new),), "rename", safe=True))


class InvalidFix(StaticRule):
    """A fix whose code does not parse: `return x` becomes `f() = 1`."""

    code = "XRB005"
    name = "invalid-fix"
    severity = Severity.WARNING
    fix = "safe"

    def visit_Return(self, node):
        new = cst.Assign([cst.AssignTarget(cst.Call(cst.Name("f")))], cst.Integer("1"))
        self.report(node, "assign", fix=Fix(((node, new),), "assign", safe=True))


@hookimpl
def modellint_add_rules():
    return [Explodes, BrokenInit, ForeignNode, UnbuildableFix, InvalidFix]
'''


def test_a_failing_rule_is_ml001_naming_rule_and_file_and_the_rest_is_reported(tmp_path):
    (tmp_path / "badrules.py").write_text(BAD_RULES)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "good.py").write_text(GOOD)
    (tmp_path / "src" / "other.py").write_text(GOOD.replace("Net", "Other"))
    args = ("check", "src", "-p", "badrules", "--select", "ML105,XRB", "--format", "json",
            "--no-cache", "-j", "1")
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    import json

    found = by_path(json.loads(proc.stdout))
    for path, cls in (("src/good.py", "Net"), ("src/other.py", "Other")):
        messages = {f["code"]: f["message"] for f in found[path] if f["code"] != "XRB004"}
        internal = [f["message"] for f in found[path] if f["code"] == "ML001"]
        assert ("ML105", 5) in [(f["code"], f["line"]) for f in found[path]]
        assert sorted(internal) == sorted([
            f"rule XRB001 (explodes) failed: RuntimeError: kaboom in {cls}",
            "rule XRB002 (broken-init) failed: ValueError: no context for me",
            "rule XRB003 (foreign-node) failed: ValueError: reported a Name node that is not "
            "in this file",
        ]), messages
    debug = run_cli(*args, "--debug", cwd=tmp_path)
    assert debug.returncode == 1
    assert debug.stderr.count("Traceback (most recent call last)") == 4, debug.stderr
    assert "kaboom in Net" in debug.stderr and "no context for me" in debug.stderr

    # --fix: a fix that cannot be built or does not parse is refused; the file stays as it was
    before = (tmp_path / "src" / "good.py").read_text()
    for code, message, line in (
        ("XRB004", "src/good.py: applying the fixes failed (CSTValidationError: ", 4),
        ("XRB005", "src/good.py: a fix produced invalid code (", 6),
    ):
        fixed = run_cli("check", "src/good.py", "-p", "badrules", "--select", code, "--fix",
                        "--format", "concise", cwd=tmp_path)
        assert fixed.returncode == 1, fixed.stderr
        assert fixed.stderr.startswith(f"modellint: {message}"), fixed.stderr
        assert fixed.stderr.rstrip().endswith("file left unchanged"), fixed.stderr
        assert "Traceback" not in fixed.stderr
        assert fixed.stdout.startswith(f"src/good.py:{line}:"), fixed.stdout  # still reported
        assert (tmp_path / "src" / "good.py").read_text() == before


# -- --fix safety -------------------------------------------------------------------------------


def test_fix_keeps_mode_bits_writes_through_links_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "net.py"
    target.write_text(GOOD)
    target.chmod(0o751)
    (tmp_path / "link.py").symlink_to("net.py")
    proc = run_cli("check", "link.py", "--fix", "--select", "ML105", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert "def forward(self, x):" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert (tmp_path / "link.py").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.py", "net.py"]


def test_fix_skips_a_file_changed_after_it_was_read(tmp_path, monkeypatch):
    path = tmp_path / "net.py"
    path.write_text(GOOD)
    edited = GOOD + "# edited meanwhile by the user\n"
    real = linter.lint_source
    calls = []

    def lint_then_edit(*args, **kwargs):
        calls.append(1)
        result = real(*args, **kwargs)
        if len(calls) == 1:  # after the first read, before any write
            path.write_text(edited)
        return result

    monkeypatch.setattr(linter, "lint_source", lint_then_edit)
    opts = StaticOptions(rules=[registry().rules["ML105"]], options=Config().rule_options(),
                         fix=True)
    outcome = runner.lint_file("net.py", path, frozenset(), opts)
    assert outcome.fixed == 0
    assert outcome.messages == [f"{path} changed while it was being linted; not fixed"]
    assert path.read_text() == edited
    assert [(f.code, f.line) for f in outcome.findings] == [("ML105", 5)]


def _copy_fixtures(target: Path) -> Path:
    shutil.copytree(FIXTURES, target, ignore=shutil.ignore_patterns("runtime", "__pycache__"))
    return target


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*.py"))}


def test_two_fix_passes_give_the_same_result_as_one(tmp_path):
    work = _copy_fixtures(tmp_path / "work")
    args = ("check", ".", "--select", "ALL", "--fix", "--unsafe-fixes", "--no-cache",
            "--exit-zero", "-q")
    first = run_cli(*args, cwd=work)
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    once = _tree(work)
    assert once != _tree(_copy_fixtures(tmp_path / "orig"))  # the first pass fixed something
    second = run_cli(*args, cwd=work)
    assert second.returncode == 0, second.stderr
    assert _tree(work) == once
    assert "Fixed" not in second.stdout, second.stdout


def test_output_and_fixes_do_not_depend_on_jobs(tmp_path):
    one = _copy_fixtures(tmp_path / "one")
    two = _copy_fixtures(tmp_path / "two")
    for fmt in ("json", "concise"):
        a = run_cli("check", ".", "--select", "ALL", "--format", fmt, "--no-cache", "-j", "1",
                    cwd=one)
        b = run_cli("check", ".", "--select", "ALL", "--format", fmt, "--no-cache", "-j", "2",
                    cwd=two)
        assert a.returncode == b.returncode == 1, (a.stderr, b.stderr)
        assert a.stdout == b.stdout
    diff_a = run_cli("check", ".", "--select", "ALL", "--diff", "--unsafe-fixes", "-j", "1",
                     cwd=one)
    diff_b = run_cli("check", ".", "--select", "ALL", "--diff", "--unsafe-fixes", "-j", "2",
                     cwd=two)
    assert diff_a.stdout and diff_a.stdout == diff_b.stdout
    fix_a = run_cli("check", ".", "--select", "ALL", "--fix", "--unsafe-fixes", "-j", "1",
                    cwd=one)
    fix_b = run_cli("check", ".", "--select", "ALL", "--fix", "--unsafe-fixes", "-j", "2",
                    cwd=two)
    assert (fix_a.returncode, fix_a.stdout, fix_a.stderr) == (
        fix_b.returncode, fix_b.stdout, fix_b.stderr)
    assert _tree(one) == _tree(two)
    assert not filecmp.dircmp(one, two).diff_files
