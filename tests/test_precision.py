"""bench/precision.py on a tiny synthetic corpus: fetching a pinned commit from a bare repository
(Python files only), the per-rule table against a triage file, and the safe-fix check (every
fixed file parses, a second `--fix` changes nothing) on the repository's own fixtures."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("precision", ROOT / "bench" / "precision.py")
precision = importlib.util.module_from_spec(spec)
sys.modules["precision"] = precision
spec.loader.exec_module(precision)

# two findings: ML202 (a module's forward called directly, safe fix) and ML906 (`pretrained=`)
SCRIPT = """\
import torch.nn as nn
import torchvision


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc.forward(x)


backbone = torchvision.models.resnet18(pretrained=True)
"""

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
         *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path):
    """A bare repository `mirror/someone+trainer` with two commits; returns (mirror, first)."""
    work = tmp_path / "work"
    (work / "scripts").mkdir(parents=True)
    _git(work, "init", "-q")
    (work / "scripts" / "train.py").write_text(SCRIPT)
    (work / "scripts" / "notes.txt").write_text("not Python\n")
    (work / "README.md").write_text("# trainer\n")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "one")
    first = _git(work, "rev-parse", "HEAD")
    (work / "scripts" / "train.py").write_text("x = 1\n")
    _git(work, "commit", "-qam", "two")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(mirror / "someone+trainer"))
    return mirror, first


def _corpus(tmp_path: Path, commit: str) -> Path:
    corpus = tmp_path / "corpus.toml"
    corpus.write_text(f'[[repo]]\nname = "someone/trainer"\ncommit = "{commit}"\n'
                      'paths = ["scripts"]\n')
    return corpus


def _triage(tmp_path: Path, commit: str, rows: list[tuple[int, str, str]]) -> Path:
    folder = tmp_path / "triage"
    folder.mkdir()
    lines = ["repo\tcommit\tpath\tline\tcode\tverdict\treason"]
    lines += [f"someone/trainer\t{commit}\tscripts/train.py\t{line}\t{code}\t{verdict}\tbecause"
              for line, code, verdict in rows]
    (folder / "someone+trainer.tsv").write_text("\n".join(lines) + "\n")
    return folder


@needs_git
def test_fetch_takes_the_pinned_commit_and_only_python_files(tmp_path, mirror, monkeypatch):
    mirror_dir, first = mirror
    cache = tmp_path / "cache"
    monkeypatch.setenv("MODELLINT_CORPUS_DIR", str(cache))
    corpus = _corpus(tmp_path, first)
    assert precision.main(["fetch", "--mirror", str(mirror_dir), "--corpus", str(corpus)]) == 0
    tree = cache / f"someone+trainer@{first}"
    files = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
    assert files == ["scripts/train.py"]  # the pinned text, not the later commit's
    assert (tree / "scripts" / "train.py").read_text() == SCRIPT


@needs_git
def test_the_table_counts_verdicts_and_fails_on_untriaged_or_imprecise_rules(
        tmp_path, mirror, monkeypatch, capsys):
    mirror_dir, first = mirror
    monkeypatch.setenv("MODELLINT_CORPUS_DIR", str(tmp_path / "cache"))
    corpus = _corpus(tmp_path, first)
    precision.main(["fetch", "--mirror", str(mirror_dir), "--corpus", str(corpus)])
    capsys.readouterr()

    # ML906 is not triaged: listed, and the run fails
    folder = _triage(tmp_path, first, [(11, "ML202", "tp")])
    assert precision.main(["--corpus", str(corpus), "--triage", str(folder), "-j", "1"]) == 1
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("ML")}
    assert rows["ML202"][3:9] == ["1", "1", "0", "0", "1.00", "0"]
    assert rows["ML906"][3:9] == ["1", "0", "0", "0", "–", "1"]
    assert "ML906 someone/trainer scripts/train.py:14:" in out
    assert "FAIL ML906: 1 untriaged finding(s) of a default-on rule" in out

    # every finding triaged, one false positive, and a row for a finding no longer reported
    shutil.rmtree(folder)
    folder = _triage(tmp_path, first, [(11, "ML202", "tp"), (14, "ML906", "fp"),
                                       (3, "ML306", "fp")])
    assert precision.main(["--corpus", str(corpus), "--triage", str(folder), "-j", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAIL ML906: precision 0.00 < 0.95 (default on)" in out
    assert "ML306 fp        someone/trainer scripts/train.py:3: because" in out

    shutil.rmtree(folder)
    folder = _triage(tmp_path, first, [(11, "ML202", "tp"), (14, "ML906", "tp")])
    assert precision.main(["--corpus", str(corpus), "--triage", str(folder), "-j", "1"]) == 0
    assert "OK: every default-on rule triaged and at or above 0.95" in capsys.readouterr().out


def test_malformed_triage_rows_are_reported(tmp_path):
    folder = tmp_path / "triage"
    folder.mkdir()
    (folder / "x.tsv").write_text(
        "repo\tcommit\tpath\tline\tcode\tverdict\treason\n"
        "a/b\tc\tp.py\t3\tML202\tmaybe\twhy\n"  # not a verdict
        "a/b\tc\tp.py\t4\tML202\ttp\n"  # no reason column
        "a/b\tc\tp.py\t5\tML202\ttp\tok\n"
        "a/b\tc\tp.py\t5\tML202\tfp\trepeated\n")
    rows, problems = precision.load_triage(folder)
    assert list(rows) == [("a/b", "c", "p.py", 5, "ML202")]
    assert [p.split(":")[1] for p in problems] == ["2", "3", "5"]


def test_missing_trees_say_how_to_fetch_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MODELLINT_CORPUS_DIR", str(tmp_path / "empty"))
    assert precision.main(["--corpus", str(_corpus(tmp_path, "0" * 40))]) == 2
    assert "python bench/precision.py fetch" in capsys.readouterr().err


def test_every_safe_fix_keeps_the_fixtures_parsable_and_a_second_fix_changes_nothing(
        tmp_path, capsys):
    # the same check `python bench/precision.py fixes` runs on the corpus, on the fixtures
    repo = precision.Repo("modellint/fixtures", "0" * 40, (".",))
    shutil.copytree(ROOT / "fixtures", tmp_path / repo.folder)
    (tmp_path / repo.folder / "train.py").write_text(SCRIPT)
    assert precision.check_fixes([repo], tmp_path, jobs=1) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    fixed = int(out.split("safe fixes applied to ")[1].split()[0])
    assert fixed >= 2  # train.py (ML202) and at least one fixture
    assert "OK: every fixed file parses and a second --fix changes nothing" in out
