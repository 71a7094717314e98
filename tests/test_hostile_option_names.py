"""File names that are options (issue 23 item 1), on the `modellint` command itself: without
`--`, an option spelled like a file that exists is refused wherever it stands, so no file
name can turn on a switch that runs the repository's code or pass the run. The pre-commit
hook and the Action, which put `--` before the file names, are tested in test_precommit.py
and test_action.py."""

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


# what a file list could spell: the switches that run the repository's code, abbreviated too
CODE_RUNNING = ["--allow-config-plugins", "--allow", "--runtime", "--run", "-pevil"]


@pytest.mark.parametrize("name", CODE_RUNNING)
def test_a_file_named_like_a_switch_that_runs_code_does_not_turn_it_on(repo, tmp_path, name):
    (repo / name).write_text(BAD)
    for argv in (["check", name, "bad.py"], ["check", "bad.py", name],
                 ["check", "--select", "ML105", name, "bad.py"]):
        proc = modellint(*argv, cwd=repo, home=tmp_path / "home", PYTHONPATH=".")
        assert proc.returncode == 2, (argv, proc.stdout + proc.stderr)
        assert f"{name} is an option and the name of a file here" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "MARKER").exists(), argv


def test_the_same_switch_is_the_users_own_where_no_file_is_named_so(repo, tmp_path):
    home = tmp_path / "home"
    proc = modellint("check", "bad.py", "--allow-config-plugins", cwd=repo, home=home)
    assert "is an option and the name of a file" not in proc.stderr
    assert (tmp_path / "MARKER").read_text() == "evil.py ran"


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
    # an option before the user's `--` is the user's, whatever the folder holds
    own = modellint("check", "--exit-zero", "--", "bad.py", cwd=repo, home=home)
    assert own.returncode == 0, own.stderr
    # unless a file named `--` is here too: that `--` may be a file name of the list
    (repo / "--").write_text(BAD)
    listed = modellint("check", "--exit-zero", "--", "bad.py", cwd=repo, home=home)
    assert listed.returncode == 2 and "--exit-zero is an option and the name" in listed.stderr
