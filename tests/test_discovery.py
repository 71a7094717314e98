"""Which files a directory walk lints, and that an explicit path is always linted."""

from __future__ import annotations

from conftest import NET, write

FORWARD = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(x):\n        return x\n"


def _paths(result) -> list[str]:
    return [f["path"] for f in result.json()]


def test_walk_skips_tool_folders_venvs_and_gitignored_paths(modellint, tmp_path):
    for folder in (
        ".git", "build", "dist", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".tox", "node_modules", "pkg.egg-info", "myenv", "ignored_dir", "src/generated",
    ):
        write(tmp_path, f"{folder}/model.py", FORWARD)
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    write(tmp_path, ".gitignore", "ignored_dir/\n*_gen.py\n/src/generated\n!keep_gen.py\n")
    write(tmp_path, "src/model_gen.py", FORWARD)
    write(tmp_path, "src/keep_gen.py", FORWARD)
    write(tmp_path, "src/model.py", FORWARD)
    write(tmp_path, "src/types.pyi", FORWARD)
    write(tmp_path, "src/notes.txt", FORWARD)
    write(tmp_path, "src/sub/.gitignore", "local.py\n")
    write(tmp_path, "src/sub/local.py", FORWARD)
    write(tmp_path, "src/sub/kept.py", FORWARD)
    write(tmp_path, "top.py", FORWARD)
    expected = ["src/keep_gen.py", "src/model.py", "src/sub/kept.py", "src/types.pyi", "top.py"]

    assert _paths(modellint(".", "--format", "json")) == expected
    # no path: the working directory, same files
    assert _paths(modellint("--format", "json")) == expected
    # a folder given by name is walked with its paths shown as given
    assert _paths(modellint("src/sub", "--format", "json")) == ["src/sub/kept.py"]


def test_explicit_paths_are_always_linted(modellint, tmp_path):
    write(tmp_path, ".gitignore", "ignored.py\nbuild/\n")
    write(tmp_path, "build/model.py", FORWARD)
    write(tmp_path, "ignored.py", FORWARD)
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "pyvenv.cfg").write_text("")
    write(tmp_path, "venv/lib/model.py", FORWARD)
    write(tmp_path, "script", FORWARD)  # no .py suffix, named explicitly
    result = modellint(
        "build/model.py", "ignored.py", "venv/lib/model.py", "script", "build", "--format", "json"
    )
    assert result.rc == 1
    assert sorted(_paths(result)) == [
        "build/model.py", "build/model.py", "ignored.py", "script", "venv/lib/model.py",
    ]


def test_gitignore_above_the_repository_root_does_not_apply(modellint, tmp_path):
    write(tmp_path, ".gitignore", "*.py\n")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    write(tmp_path, "repo/model.py", FORWARD)
    result = modellint("repo", "--format", "json")
    assert _paths(result) == ["repo/model.py"]


def test_an_empty_folder_is_exit_0(modellint, tmp_path):
    (tmp_path / "empty").mkdir()
    result = modellint("empty")
    assert result.rc == 0, result
    assert "0 files" in result.out


def test_unreadable_bytes_are_one_finding_not_a_crash(modellint, tmp_path):
    (tmp_path / "latin.py").write_bytes(b"x = '\xff\xfe'\n")
    write(tmp_path, "net.py", NET)
    result = modellint(".", "--format", "json")
    assert result.rc == 1
    latin = [f for f in result.json() if f["path"] == "latin.py"]
    assert [(f["code"], f["line"]) for f in latin] == [("ML000", 1)]
    assert "Traceback" not in result.err


def test_a_tracked_file_that_gitignore_ignores_is_counted_listed_and_linted_when_named(
        modellint, tmp_path):
    """As in ruff: a walk skips what .gitignore ignores, even a file git tracks and even with
    a pinned --config, and a file named on the command line is linted; but the summary says
    how many files were left out, and --show-files names them (issue 23, item 15)."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    write(tmp_path, "model.py", NET)
    write(tmp_path, "gen/net.py", NET)
    write(tmp_path, ".gitignore", "model.py\ngen/\n")
    write(tmp_path, "lint.toml", "[tool.modellint]\n")
    subprocess.run(["git", "add", "-f", "model.py", "gen/net.py"], cwd=tmp_path, check=True)
    walked = modellint(".", "--config", "lint.toml", "--no-cache")
    assert walked.rc == 0, walked
    assert walked.out.splitlines() == [
        "All checks passed (0 files).",
        "1 file ignored by .gitignore (not linted; name a file to lint it, --show-files lists "
        "them)."]
    shown = modellint("--show-files", "--config", "lint.toml")
    assert shown.out == ""
    assert shown.err.splitlines() == ["modellint: ignored by .gitignore: gen/",
                                      "modellint: ignored by .gitignore: model.py"]
    # named on the command line (as pre-commit names the files it passes): linted
    named = modellint("model.py", "--config", "lint.toml", "--format", "json", "--no-cache")
    assert named.rc == 1 and _paths(named) == ["model.py"] * len(named.json()), named
    assert modellint("--show-files", "model.py").out == "model.py\n"
