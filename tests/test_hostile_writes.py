"""What modellint writes on a user's behalf (`--output-file`, the Action's `sarif-file`,
`modellint run --output-file` and `--plots`) never goes through a link the repository holds:
a file is written beside its name and renamed over it; a link, a linked folder on the way, or
a name that is not a regular file is refused with a usage error (issue 23 item 2)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_action import BAD, run_action

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and FIFOs")

PRECIOUS = "a file outside the checkout\n"
TRAINING = Path(__file__).resolve().parent.parent / "fixtures" / "training"


def _checkout(tmp_path: Path) -> tuple[Path, Path]:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (repo / "bad.py").write_text(BAD)
    (outside / "target").write_text(PRECIOUS)
    return repo, outside


def _refused(result, *words: str) -> None:
    assert result.rc == 2, result
    assert "Traceback" not in result.err and "internal error" not in result.err, result
    assert "modellint: error: --output-file:" in result.err
    for word in words:
        assert word in result.err, result


def test_an_output_file_committed_as_a_link_is_refused(modellint, tmp_path):
    repo, outside = _checkout(tmp_path)
    (repo / "modellint.sarif").symlink_to("../outside/target")
    result = modellint(".", "--format", "sarif", "--output-file", "modellint.sarif", cwd=repo)
    _refused(result, "modellint.sarif is a link")
    assert (outside / "target").read_text() == PRECIOUS
    assert (repo / "modellint.sarif").is_symlink()
    assert sorted(p.name for p in repo.iterdir() if p.name != ".modellint_cache") == [
        "bad.py", "modellint.sarif"]  # no temporary file left behind


def test_an_output_file_in_a_linked_folder_is_refused(modellint, tmp_path):
    repo, outside = _checkout(tmp_path)
    (repo / "reports").symlink_to("../outside")
    result = modellint(".", "--format", "sarif", "-o", "reports/modellint.sarif", cwd=repo)
    _refused(result, "reports is a link")
    assert sorted(p.name for p in outside.iterdir()) == ["target"]


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_an_output_file_that_is_not_a_regular_file_is_refused(modellint, tmp_path, kind):
    repo, _ = _checkout(tmp_path)
    target = repo / "report.txt"
    if kind == "folder":
        target.mkdir()
    else:
        os.mkfifo(target)  # opened for writing, it would wait for a reader for ever
    result = modellint(".", "--output-file", "report.txt", cwd=repo)
    _refused(result, "report.txt exists and is not a regular file")
    assert stat.S_ISDIR(target.lstat().st_mode) if kind == "folder" else stat.S_ISFIFO(
        target.lstat().st_mode)


def test_dev_null_outside_the_tree_is_written_in_place(modellint, tmp_path):
    repo, _ = _checkout(tmp_path)
    result = modellint(".", "--output-file", os.devnull, cwd=repo)
    assert result.rc == 1 and result.out == "" and "Traceback" not in result.err, result
    assert stat.S_ISCHR(os.lstat(os.devnull).st_mode)


def test_an_output_file_replaces_a_hard_link_and_keeps_its_mode(modellint, tmp_path):
    repo, outside = _checkout(tmp_path)
    os.link(outside / "target", repo / "report.txt")
    os.chmod(repo / "report.txt", 0o640)
    result = modellint(".", "--format", "concise", "--output-file", "report.txt", cwd=repo)
    assert result.rc == 1, result
    assert "bad.py:5:9: ML105" in (repo / "report.txt").read_text()
    assert (outside / "target").read_text() == PRECIOUS
    assert stat.S_IMODE((repo / "report.txt").stat().st_mode) == 0o640
    assert (repo / "report.txt").stat().st_nlink == 1


def test_a_new_output_file_gets_the_usual_mode(modellint, tmp_path):
    repo, _ = _checkout(tmp_path)
    result = modellint(".", "--format", "json", "--output-file", "out.json", cwd=repo)
    assert result.rc == 1, result
    assert '"ML105"' in (repo / "out.json").read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((repo / "out.json").stat().st_mode) == 0o666 & ~umask


def test_the_actions_sarif_file_committed_as_a_link_is_not_written_through(tmp_path):
    workspace, outside = _checkout(tmp_path)
    (workspace / "modellint.sarif").symlink_to("../outside/target")
    proc = run_action(workspace, sarif_file="modellint.sarif")
    # the Action removes what the pull request committed there, then writes its own report
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (outside / "target").read_text() == PRECIOUS
    sarif = workspace / "modellint.sarif"
    assert not sarif.is_symlink() and '"version": "2.1.0"' in sarif.read_text()


# -- modellint run: the script runs for real, so only where torch is ----------------------------

def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modellint", "run", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "NO_COLOR": "1"})


def _script(repo: Path, marker: Path) -> None:
    (repo / "train.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")


def test_run_refuses_a_linked_output_file_before_running_the_script(tmp_path):
    pytest.importorskip("torch")
    repo, outside = _checkout(tmp_path)
    _script(repo, tmp_path / "MARKER")
    (repo / "report.txt").symlink_to("../outside/target")
    proc = _run("--output-file", "report.txt", "--", "python", "train.py", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "--output-file: report.txt is a link" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "MARKER").exists()
    assert (outside / "target").read_text() == PRECIOUS


def test_run_refuses_a_linked_plots_folder_before_running_the_script(tmp_path):
    pytest.importorskip("torch")
    repo, outside = _checkout(tmp_path)
    _script(repo, tmp_path / "MARKER")
    (repo / "plots").symlink_to("../outside")
    proc = _run("--plots", "plots", "--", "python", "train.py", cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "--plots: plots is a link" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "MARKER").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["target"]


def test_run_does_not_write_a_plot_through_a_committed_link(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    repo, outside = _checkout(tmp_path)
    shutil.copy(TRAINING / "clean.py", repo / "clean.py")
    (repo / "plots").mkdir()
    (repo / "plots" / "loss.png").symlink_to("../../outside/target")
    proc = _run("--steps", "2", "--plots", "plots", "--", "python", "clean.py", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "2 plot(s) written to plots; not written: plots/loss.png is a link" in proc.stderr
    assert (outside / "target").read_text() == PRECIOUS
    assert (repo / "plots" / "loss.png").is_symlink()
    assert (repo / "plots" / "lr.png").read_bytes().startswith(b"\x89PNG")
