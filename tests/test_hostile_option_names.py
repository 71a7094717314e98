"""File names that are options (issue 23 item 1), on the `modellint` command itself: a switch
that runs the repository's code is taken only before the paths, and without `--` an option
spelled like a file that exists is refused. The pre-commit hook and the Action, which put
`--` before the file names, are tested in test_precommit.py and test_action.py."""

from __future__ import annotations

import json

import pytest
from test_trust import BAD, evil, modellint


@pytest.fixture
def repo(tmp_path):
    """A repository whose config names its own `evil` module as a plugin."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "bad.py").write_text(BAD)
    (root / "evil.py").write_text(evil(tmp_path / "MARKER"))
    (root / "pyproject.toml").write_text('[tool.modellint]\nplugins = ["evil"]\n')
    return root


@pytest.mark.parametrize("switch", [["--allow-config-plugins"], ["--allow"], ["--runtime"],
                                    ["-p", "evil"], ["-pevil"]])
def test_a_switch_that_runs_code_is_not_taken_after_a_path(repo, tmp_path, switch):
    proc = modellint("check", "bad.py", *switch, cwd=repo, home=tmp_path / "home",
                     PYTHONPATH=".")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "after the path bad.py" in proc.stderr and "give it first" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "MARKER").exists()
    # before the paths, it is the user's own choice
    chosen = modellint("check", *switch, "bad.py", cwd=repo, home=tmp_path / "home",
                       PYTHONPATH=".")
    assert "after the path" not in chosen.stderr


def test_without_the_separator_an_option_named_like_a_file_here_is_refused(repo, tmp_path):
    home = tmp_path / "home"
    for name in ("--exit-zero", "--allow-config-plugins"):
        (repo / name).write_text(BAD)
    proc = modellint("check", "--allow-config-plugins", "--exit-zero", "bad.py", cwd=repo,
                     home=home)
    assert proc.returncode == 2
    assert ("modellint: error: --allow-config-plugins is an option and the name of a file "
            "here") in proc.stderr
    assert "put `--` before the file names" in proc.stderr
    assert not (tmp_path / "MARKER").exists()
    # after `--` they are files to check
    files = modellint("check", "--format", "json", "--", "--allow-config-plugins",
                      "--exit-zero", "bad.py", cwd=repo, home=home)
    assert files.returncode == 1, files.stderr
    assert sorted(f["path"] for f in json.loads(files.stdout)) == [
        "--allow-config-plugins", "--exit-zero", "bad.py"]
    assert not (tmp_path / "MARKER").exists()
    # and an option before `--` is the user's, whatever the folder holds
    own = modellint("check", "--exit-zero", "--", "bad.py", cwd=repo, home=home)
    assert own.returncode == 0, own.stderr
