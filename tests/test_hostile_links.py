"""Links in a hostile repository: the folder walk and the project index stay inside the tree
(issue 23, items 3 and 4)."""

from __future__ import annotations

import time

from conftest import NET, write
from test_cache import SOFTMAX_MODEL, TRAIN

SECRET = "export TOKEN=ghp_0123456789abcdefSECRET\n"


def _paths(result) -> list[str]:
    return sorted({f["path"] for f in result.json()})


def _repo_with_links_out(tmp_path):
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    write(outside, "lib/model.py", NET)
    write(outside, "credentials", SECRET)
    write(repo, "net.py", NET)
    (repo / "lib").symlink_to("../outside/lib")
    (repo / "leak.py").symlink_to("../outside/credentials")
    (repo / "vendor.py").symlink_to(outside / "lib" / "model.py")
    return repo


def test_the_walk_follows_no_link_out_of_the_tree(modellint, tmp_path):
    repo = _repo_with_links_out(tmp_path)
    result = modellint(".", "--format", "json", "--no-cache", cwd=repo)
    assert result.rc == 1, result
    assert _paths(result) == ["net.py"]
    assert "SECRET" not in result.out + result.err
    for name in ("lib", "leak.py", "vendor.py"):
        assert f"modellint: warning: {name}: a link out of the folder being linted; " \
            "not followed" in result.err, result
    shown = modellint("--show-files", cwd=repo)
    assert shown.out.split() == ["net.py"]
    # a file named on the command line is the user's choice: still read
    named = modellint("leak.py", "vendor.py", "--format", "json", "--no-cache", cwd=repo)
    assert _paths(named) == ["leak.py", "vendor.py"]


def test_a_gitignore_linked_from_outside_the_tree_is_not_used(modellint, tmp_path):
    repo = tmp_path / "repo"
    write(tmp_path, "outside/patterns", "*.py\n")
    write(repo, "net.py", NET)
    (repo / ".gitignore").symlink_to("../outside/patterns")
    result = modellint(".", "--format", "json", "--no-cache", cwd=repo)
    assert _paths(result) == ["net.py"], result
    assert ".gitignore: a link out of the folder being linted" in result.err


def test_a_link_inside_the_tree_is_walked_once(modellint, tmp_path):
    write(tmp_path, "pkg/net.py", NET)
    write(tmp_path, "build/vendor/model.py", NET)
    (tmp_path / "alias.py").symlink_to("pkg/net.py")  # the file itself is walked
    (tmp_path / "again").symlink_to("pkg")
    (tmp_path / "pkg" / "up").symlink_to("..")  # a loop
    (tmp_path / "vendor").symlink_to("build/vendor")  # build/ is skipped: walked through this
    result = modellint(".", "--format", "json", "--no-cache")
    assert result.rc == 1, result
    assert _paths(result) == ["pkg/net.py", "vendor/model.py"]
    assert "warning" not in result.err


# --- the project index of a run on a few files ----------------------------------------------


def _project_with_models_outside(tmp_path):
    repo = tmp_path / "repo"
    write(tmp_path, "outside/models.py", SOFTMAX_MODEL)
    write(repo, "pyproject.toml", "[tool.modellint]\n")
    write(repo, "train.py", TRAIN)
    (repo / "models.py").symlink_to("../outside/models.py")
    return repo


def test_the_index_of_a_one_file_run_reads_no_file_through_a_link_out(cli, tmp_path):
    """train.py's ML308 comes from models.py's facts: a `models.py` linked from outside the
    tree must not supply them (it would change the findings), in a one-file run as in a full
    one."""
    repo = _project_with_models_outside(tmp_path)
    full = cli(".", "--format", "json", "--no-cache", cwd=repo)
    one = cli("train.py", "--format", "json", "--no-cache", cwd=repo)
    assert "ML308" not in {code for code, _ in full.codes()}, full
    assert one.codes() == full.codes(), one
    # the same models.py inside the tree gives the finding: the test can fail
    (repo / "models.py").unlink()
    write(repo, "models.py", SOFTMAX_MODEL)
    assert ("ML308", 7) in cli("train.py", "--format", "json", "--no-cache", cwd=repo).codes()


def test_the_index_of_standard_input_reads_no_file_through_a_link_out(modellint, tmp_path):
    repo = _project_with_models_outside(tmp_path)
    result = modellint("--stdin-filename", "train.py", "--format", "json", "--no-cache",
                       cwd=repo, stdin=TRAIN)
    assert result.rc in (0, 1), result
    assert "ML308" not in {code for code, _ in result.codes()}


def test_a_link_to_the_root_folder_does_not_make_a_one_file_run_walk_the_disk(modellint,
                                                                             tmp_path):
    repo = tmp_path / "repo"
    write(repo, "pyproject.toml", "[tool.modellint]\n")
    write(repo, "net.py", NET)
    (repo / "root").symlink_to("/")
    start = time.monotonic()
    result = modellint("net.py", "--format", "json", "--no-cache", cwd=repo)
    assert time.monotonic() - start < 60
    assert result.rc == 1 and _paths(result) == ["net.py"], result


def test_the_index_of_a_one_file_run_stops_at_its_bound_with_a_message(cli, tmp_path,
                                                                       monkeypatch):
    from modellint.static import discover

    write(tmp_path, "pyproject.toml", "[tool.modellint]\n")
    for number in range(6):
        write(tmp_path, f"pkg/m{number}.py", "import torch\n")
    write(tmp_path, "net.py", NET)
    monkeypatch.setattr(discover, "MAX_PROJECT_FILES", 3)
    result = cli("net.py", "--format", "json", "--no-cache")
    assert result.rc == 1 and _paths(result) == ["net.py"], result
    assert "the project index of . stops at 3 files" in result.err
    assert "(3 files, 256 MiB)" in result.err
    monkeypatch.setattr(discover, "MAX_PROJECT_FILES", 100)
    monkeypatch.setattr(discover, "MAX_PROJECT_BYTES", 20)
    bytes_bound = cli("net.py", "--format", "json", "--no-cache")
    assert "the project index of . stops at 1 files" in bytes_bound.err
    # a full run lints them all, with no such bound
    assert "stops at" not in cli(".", "--format", "json", "--no-cache").err
