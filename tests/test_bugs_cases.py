"""bench/bugs_cases.py on tiny cases of our own: a git repository made here (a bug, then its fix)
and a spreadsheet written here, materialized into a cache; unsafe names and unknown classes
refused with a message."""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bugs_cases", ROOT / "bench" / "bugs_cases.py")
bugs_cases = importlib.util.module_from_spec(spec)
sys.modules["bugs_cases"] = bugs_cases
spec.loader.exec_module(bugs_cases)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

CLASSES = {"missing-zero-grad": {"code": "ML303"}, "softmax-before-cross-entropy": {"code": "ML308"}}

BUGGY = """\
import torch


def train(model, loader, opt):
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        opt.step()
"""
FIXED = BUGGY.replace("        loss = model", "        opt.zero_grad()\n        loss = model")

SNIPPET = "class Net(nn.Module):\r\n    def forward(self, x):\r\n        return F.softmax(x, dim=1)"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           "-c", "commit.gpgsign=false", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def commit_file(repo: Path, name: str, data: bytes, message: str) -> str:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_bytes(data)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def xlsx(cells: dict[str, str]) -> bytes:
    """A one-sheet workbook whose cells are shared strings."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    strings = list(cells.values())
    esc = lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace("\r", "&#13;")  # noqa: E731
    rows = "".join(f'<row r="{ref[1:]}"><c r="{ref}" t="s"><v>{i}</v></c></row>'
                   for i, ref in enumerate(cells))
    parts = {
        "xl/workbook.xml": f'<workbook xmlns="{main}" xmlns:r="{rel}"><sheets>'
                           '<sheet name="Positive Sample" sheetId="1" r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels":
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Target="worksheets/sheet1.xml"/></Relationships>',
        "xl/sharedStrings.xml": f'<sst xmlns="{main}">'
                                + "".join(f"<si><t>{esc(t)}</t></si>" for t in strings) + "</sst>",
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{main}"><sheetData>{rows}</sheetData></worksheet>',
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as book:
        for name, text in parts.items():
            book.writestr(name, text)
    return out.getvalue()


def write_case(root: Path, case_id: str, body: str) -> None:
    (root / case_id).mkdir(parents=True)
    (root / case_id / "case.toml").write_text(f'id = "{case_id}"\n' + body)


def header(klass: str, expected: str, repo: str, commit: str = "", fix: str = "") -> str:
    return f'''title = "t"
class = "{klass}"
expected = "{expected}"
pass = "static"
kind = "bug"

[source]
kind = "fix-commit"
url = "https://example.invalid/{repo}"
repo = "{repo}"
commit = "{commit}"
fix_commit = "{fix}"
licence = "MIT"
found_by = "made by the test"
confirmed_by = "made by the test"
'''


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, str, str, str]:
    """Bare repositories under tmp/mirror/<owner>+<name>/repo: one with a bug and its fix, one
    with a spreadsheet; the commits (bug, fix, sheet)."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q")
    commit_file(work, "README.md", b"notes\n", "readme")
    bug = commit_file(work, "src/train.py", BUGGY.encode(), "train")
    fix = commit_file(work, "src/train.py", FIXED.encode(), "clear the gradients")
    sheet_work = tmp_path / "sheet"
    sheet_work.mkdir()
    git(sheet_work, "init", "-q")
    sheet = commit_file(sheet_work, "data/codes.xlsx", xlsx({"A1": "code", "C2": SNIPPET}), "data")
    mirror = tmp_path / "mirror"
    for source, slug in ((work, "o+trainer"), (sheet_work, "o+sheet")):
        subprocess.run(["git", "clone", "-q", "--bare", str(source), str(mirror / slug / "repo")],
                       check=True)
    return mirror, bug, fix, sheet


@needs_git
def test_repository_case_buggy_and_fixed(tmp_path: Path, mirror) -> None:
    mirror_dir, bug, fix, _ = mirror
    cases = tmp_path / "cases"
    write_case(cases, "t-trainer", header("missing-zero-grad", "ML303", "o/trainer", bug, fix)
               + '\n[code]\nfiles = ["src/train.py"]\nflat = true\n'
               + '\n[[mistake]]\nfile = "train.py"\nline = 7\n')
    write_case(cases, "t-trainer-excerpt",
               header("missing-zero-grad", "ML303", "o/trainer", bug, fix)
               + '\n[code]\nfiles = ["src/train.py"]\nexcerpt = {"src/train.py" = [4, 8]}\n'
               + '\n[[mistake]]\nfile = "src/train.py"\nline = 4\n')
    write_case(cases, "t-trainer-fixed-excerpt",
               header("missing-zero-grad", "ML303", "o/trainer", bug, fix)
               + '\n[code]\nfiles = ["src/train.py"]\nexcerpt = {"src/train.py" = [4, 8]}\n'
               + 'fixed_excerpt = {"src/train.py" = [[1, 1], [4, 9]]}\n'
               + '\n[[mistake]]\nfile = "src/train.py"\nline = 4\n')
    [whole, excerpt, explicit] = bugs_cases.load_cases(cases, classes=CLASSES)
    out = bugs_cases.materialize(explicit, tmp_path / "cache", mirror_dir)
    fixed_lines = FIXED.splitlines(keepends=True)
    assert (out / "fixed" / "src" / "train.py").read_text() == "".join(fixed_lines[:1] + fixed_lines[3:9])
    out = bugs_cases.materialize(whole, tmp_path / "cache", mirror_dir)
    assert out == tmp_path / "cache" / "cases" / "t-trainer"
    assert (out / "buggy" / "train.py").read_text() == BUGGY
    assert (out / "fixed" / "train.py").read_text() == FIXED
    assert (out / "case.toml").read_bytes() == (cases / "t-trainer" / "case.toml").read_bytes()

    out = bugs_cases.materialize(excerpt, tmp_path / "cache", mirror_dir)
    assert (out / "buggy" / "src" / "train.py").read_text() == "".join(
        BUGGY.splitlines(keepends=True)[3:8])
    # the fix inserted a line inside the span: the fixed excerpt grows by it
    assert (out / "fixed" / "src" / "train.py").read_text() == "".join(
        FIXED.splitlines(keepends=True)[3:9])


@needs_git
def test_snippet_case_from_a_spreadsheet(tmp_path: Path, mirror) -> None:
    mirror_dir, _, _, sheet = mirror
    cases = tmp_path / "cases"
    write_case(cases, "t-forum", header("softmax-before-cross-entropy", "ML308", "forum/t/1") + f'''
[code]
snippet = {{repo = "o/sheet", commit = "{sheet}", path = "data/codes.xlsx", sheet = "Positive Sample", row = 2, column = "C"}}
prelude = """
import torch.nn as nn
import torch.nn.functional as F
"""

[[code.edit]]
old = "(self, x)"
new = "(self, inputs)"

[[mistake]]
file = "train.py"
line = 6

[[fixed.edit]]
old = "return F.softmax(x, dim=1)"
new = "return x"
''')
    [case] = bugs_cases.load_cases(cases, classes=CLASSES)
    out = bugs_cases.materialize(case, tmp_path / "cache", mirror_dir)
    buggy = ("import torch.nn as nn\nimport torch.nn.functional as F\n\nclass Net(nn.Module):\n"
             "    def forward(self, inputs):\n        return F.softmax(x, dim=1)\n")
    assert (out / "buggy" / "train.py").read_text() == buggy
    assert (out / "fixed" / "train.py").read_text() == buggy.replace("F.softmax(x, dim=1)", "x")


@needs_git
def test_a_mistake_past_the_end_of_its_file_is_refused(tmp_path: Path, mirror) -> None:
    mirror_dir, bug, fix, _ = mirror
    cases = tmp_path / "cases"
    write_case(cases, "t-long", header("missing-zero-grad", "ML303", "o/trainer", bug, fix)
               + '\n[code]\nfiles = ["src/train.py"]\n\n[[mistake]]\nfile = "src/train.py"\nline = 99\n')
    [case] = bugs_cases.load_cases(cases, classes=CLASSES)
    with pytest.raises(bugs_cases.CaseError, match=r"line 99 is outside buggy/src/train.py \(8 lines\)"):
        bugs_cases.materialize(case, tmp_path / "cache", mirror_dir)
    assert not (tmp_path / "cache" / "cases" / "t-long").exists()


@pytest.mark.parametrize("name", ["../train.py", "src/../../x.py", "/etc/passwd", "a//b.py"])
def test_a_path_leaving_the_case_is_refused(tmp_path: Path, name: str) -> None:
    write_case(tmp_path, "t-escape", header("missing-zero-grad", "ML303", "o/trainer", "a" * 40)
               + f'\n[code]\nfiles = ["{name}"]\n\n[[mistake]]\nfile = "{name}"\nline = 1\n')
    with pytest.raises(bugs_cases.CaseError, match="not a plain relative path inside the case"):
        bugs_cases.load_cases(tmp_path, classes=CLASSES)


def test_an_unknown_class_is_refused_with_a_message(tmp_path: Path) -> None:
    write_case(tmp_path, "t-unknown", header("no-such-class", "", "o/trainer", "a" * 40)
               + '\n[code]\nfiles = ["train.py"]\n\n[[mistake]]\nfile = "train.py"\nline = 1\n')
    write_case(tmp_path, "t-wrong-code", header("missing-zero-grad", "ML999", "o/trainer", "a" * 40)
               + '\n[code]\nfiles = ["train.py"]\n\n[[mistake]]\nfile = "train.py"\nline = 1\n')
    problems: list[str] = []
    assert bugs_cases.load_cases(tmp_path, problems, classes=CLASSES) == []
    assert problems == [
        "t-unknown: class 'no-such-class' is not in bench/bugs/classes.toml",
        "t-wrong-code: expected 'ML999' but class 'missing-zero-grad' has code 'ML303'",
    ]


def test_the_committed_cases_are_valid() -> None:
    problems: list[str] = []
    cases = bugs_cases.load_cases(bugs_cases.CASES_DIR, problems)
    assert problems == []
    assert len(cases) >= 74
    assert not [p for p in bugs_cases.CASES_DIR.rglob("*") if p.is_file() and p.name != "case.toml"]


@needs_git
def test_from_commit_writes_a_reference_case(tmp_path: Path, mirror, monkeypatch) -> None:
    mirror_dir, bug, fix, _ = mirror
    spec = importlib.util.spec_from_file_location(
        "from_commit", ROOT / "bench" / "bugs" / "tools" / "from_commit.py")
    from_commit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(from_commit)
    monkeypatch.setenv("MODELLINT_BUGS_DIR", str(tmp_path / "cache"))
    cases = tmp_path / "cases"
    assert from_commit.main([
        "--mirror", str(mirror_dir), "--repo", "o/trainer", "--fix", fix, "--id", "t-made",
        "--class", "missing-zero-grad", "--title", "t", "--path", "src/train.py",
        "--excerpt", "src/train.py:4-8", "--found-by", "the test", "--cases", str(cases),
        "--context", "README.md"]) == 0
    assert [p.name for p in (cases / "t-made").iterdir()] == ["case.toml"]
    [case] = bugs_cases.load_cases(cases)
    assert case.source["commit"] == bug and case.source["fix_commit"] == fix
    assert case.code == {"files": ["src/train.py", "README.md"], "flat": True,
                         "excerpt": {"src/train.py": [4, 8]}}
    # the fix inserts zero_grad() before line 6 of the file: the line before it, 2 of the excerpt
    assert case.data["mistake"] == [{"file": "train.py", "line": 2}]
    out = tmp_path / "cache" / "cases" / "t-made"
    assert (out / "buggy" / "README.md").read_text() == "notes\n"
    fixed_lines = FIXED.splitlines(keepends=True)
    assert (out / "fixed" / "train.py").read_text() == "".join(fixed_lines[3:9])
    # auto: the leading import and the whole function around the mistake, so both files parse
    assert from_commit.main([
        "--mirror", str(mirror_dir), "--repo", "o/trainer", "--fix", fix, "--id", "t-auto",
        "--class", "missing-zero-grad", "--title", "t", "--path", "src/train.py",
        "--excerpt", "src/train.py:auto", "--found-by", "the test", "--cases", str(cases)]) == 0
    auto = next(case for case in bugs_cases.load_cases(cases) if case.id == "t-auto")
    assert auto.code["excerpt"] == {"src/train.py": [[1, 1], [4, 8]]}
    assert auto.data["mistake"] == [{"file": "train.py", "line": 3}]
    out = tmp_path / "cache" / "cases" / "t-auto"
    assert (out / "fixed" / "train.py").read_text() == "".join(fixed_lines[:1] + fixed_lines[3:9])


@needs_git
def test_fetch_then_check_from_the_command_line(tmp_path: Path, mirror, monkeypatch, capsys) -> None:
    mirror_dir, bug, fix, _ = mirror
    cases = tmp_path / "cases"
    write_case(cases, "t-trainer", header("missing-zero-grad", "ML303", "o/trainer", bug, fix)
               + '\n[code]\nfiles = ["src/train.py"]\n\n[[mistake]]\nfile = "src/train.py"\nline = 7\n')
    monkeypatch.setenv("MODELLINT_BUGS_DIR", str(tmp_path / "cache"))
    assert bugs_cases.main(["check", "--cases", str(cases)]) == 1
    assert "t-trainer: not in" in capsys.readouterr().out
    assert bugs_cases.main(["fetch", "--mirror", str(mirror_dir), "--cases", str(cases)]) == 0
    assert bugs_cases.main(["check", "--cases", str(cases)]) == 0
    out = capsys.readouterr().out
    assert "1 cases from 1 independent sources (1 bugs, 0 known-good, 1 with a fixed twin)" in out
    assert "1  missing-zero-grad (ML303)" in out
    toml = cases / "t-trainer" / "case.toml"
    toml.write_text(toml.read_text().replace("line = 7", "line = 8"))
    assert bugs_cases.main(["check", "--cases", str(cases)]) == 1
    assert "the cache holds an older case.toml" in capsys.readouterr().out
