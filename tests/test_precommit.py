"""The pre-commit hook, run for real with `pre-commit try-repo` on a copy of this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BAD = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(x):\n        return x\n"
CLEAN = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n"
REGISTRY_DOWN = ("No matching distribution", "Could not find a version",
                 "Failed to establish a new connection", "Temporary failure in name resolution")
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def test_hook_definition():
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "modellint"
    assert hook["entry"] == "modellint check"
    # pre-commit appends the file names: `--` keeps them file names
    assert hook["args"] == ["--"]
    assert hook["language"] == "python"
    assert hook["types_or"] == ["python", "pyi", "jupyter"]
    assert hook["require_serial"] is True
    assert "--runtime" not in hook["entry"] and not hook.get("additional_dependencies")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV})


@pytest.fixture(scope="module")
def try_repo(tmp_path_factory):
    base = tmp_path_factory.mktemp("precommit")
    hooks = _hook_repository(base)
    project = base / "project"
    project.mkdir()
    (project / "bad.py").write_text(BAD)
    (project / "clean.py").write_text(CLEAN)
    (project / "README.md").write_text("not python: the hook skips it\n")
    (project / "bad.ipynb").write_text(_notebook(BAD))
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(base / "cache"), "NO_COLOR": "1"}

    def run(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "modellint",
             "--files", *files],
            cwd=project, env=env, capture_output=True, text=True, timeout=600,
        )

    first = run("clean.py")
    output = first.stdout + first.stderr
    if first.returncode != 0 and "An unexpected error has occurred" in output and any(
        s in output + _log(base) for s in REGISTRY_DOWN
    ):
        pytest.skip("pre-commit cannot install modellint: the package registry is unreachable")
    return run, first


def _hook_repository(base: Path) -> Path:
    """pre-commit clones a hook repository at a commit, so the checkout (with uncommitted
    work) is copied into a repository of its own and committed there."""
    if shutil.which("pre-commit") is None and not _has_module("pre_commit"):
        pytest.skip("pre-commit is not installed (it is in the test extra)")
    hooks = base / "modellint"
    shutil.copytree(ROOT, hooks, ignore=shutil.ignore_patterns(
        ".git", "*.egg-info", "__pycache__", ".modellint_cache", "build", "dist", ".venv"))
    _git(hooks, "init", "-q")
    _git(hooks, "add", "-A")
    _git(hooks, "commit", "-q", "-m", "checkout under test")
    return hooks


def _notebook(source: str) -> str:
    import json

    cell = {"cell_type": "code", "execution_count": None, "id": "a1", "metadata": {},
            "outputs": [], "source": source.splitlines(keepends=True)}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1) + "\n"


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _log(base: Path) -> str:
    log = base / "cache" / "pre-commit.log"
    return log.read_text(errors="replace") if log.exists() else ""


@pytest.mark.slow
def test_passes_on_a_clean_file(try_repo):
    _, first = try_repo
    assert first.returncode == 0, first.stdout + first.stderr
    assert "modellint" in first.stdout and "Passed" in first.stdout


@pytest.mark.slow
def test_fails_and_shows_the_findings(try_repo):
    run, _ = try_repo
    proc = run("bad.py", "clean.py", "README.md")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failed" in proc.stdout
    assert "bad.py:5:9: ML105" in proc.stdout
    assert "clean.py:" not in proc.stdout and "Found 1 finding in 1 file" in proc.stdout


@pytest.mark.slow
def test_checks_notebooks(try_repo):
    run, _ = try_repo
    proc = run("bad.ipynb", "clean.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bad.ipynb:cell 1:5:9: ML105" in proc.stdout
    assert "Found 1 finding in 1 notebook" in proc.stdout


# file names that are options (issue 23 item 1): a committed, executable `--allow-config-plugins`
# (pre-commit tags it Python by its shebang) would load the repository's `evil` plugin, and
# `--exit-zero` would pass the hook over its findings

SHEBANG_BAD = "#!/usr/bin/env python3\n" + BAD


@pytest.fixture(scope="module")
def option_named_files(tmp_path_factory):
    """`pre-commit run --all-files` with a given `args` on a repository holding both files."""
    base = tmp_path_factory.mktemp("option-names")
    hooks = _hook_repository(base)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hooks, check=True,
                         capture_output=True, text=True).stdout.strip()
    project = base / "project"
    project.mkdir()
    marker = base / "MARKER"
    (project / "evil.py").write_text(
        f"import pathlib\n\npathlib.Path({str(marker)!r}).write_text('evil.py ran')\n")
    (project / "pyproject.toml").write_text('[tool.modellint]\nplugins = ["evil"]\n')
    (project / "bad.py").write_text(BAD)
    for name in ("--allow-config-plugins", "--exit-zero"):
        (project / name).write_text(SHEBANG_BAD)
        (project / name).chmod(0o755)
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    env = {k: v for k, v in os.environ.items() if k != "MODELLINT_ALLOW_CONFIG_PLUGINS"}
    env.update(GIT_ENV, PRE_COMMIT_HOME=str(base / "cache"), NO_COLOR="1")

    def run(args: list[str] | None) -> subprocess.CompletedProcess:
        hook: dict = {"id": "modellint"}
        if args is not None:
            hook["args"] = args
        config = {"repos": [{"repo": str(hooks), "rev": rev, "hooks": [hook]}]}
        (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
        proc = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"],
                              cwd=project, env=env, capture_output=True, text=True, timeout=600)
        output = proc.stdout + proc.stderr
        if proc.returncode != 0 and "An unexpected error has occurred" in output and any(
            s in output + _log(base) for s in REGISTRY_DOWN
        ):
            pytest.skip("pre-commit cannot install modellint: the package registry is unreachable")
        return proc

    return run, marker


@pytest.mark.slow
def test_file_names_that_are_options_stay_file_names(option_named_files):
    run, marker = option_named_files
    proc = run(None)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert not marker.exists()
    assert "not loading plugin 'evil'" in proc.stdout
    for name in ("--allow-config-plugins", "--exit-zero", "bad.py"):
        assert f"{name}:{6 if name.startswith('-') else 5}:9: ML105" in proc.stdout
    # one's own args, ended with `--` as the README says
    own = run(["--select", "ML105", "--"])
    assert own.returncode == 1 and "Found 3 findings in 3 files" in own.stdout, own.stdout
    assert not marker.exists()


@pytest.mark.slow
def test_args_without_the_separator_fail_rather_than_obey_a_file_name(option_named_files):
    run, marker = option_named_files
    proc = run(["--select", "ML105"])
    assert proc.returncode == 1 and "Failed" in proc.stdout, proc.stdout + proc.stderr
    assert "--allow-config-plugins is an option and the name of a file here" in proc.stdout
    assert "end `args` with `--`" in proc.stdout
    assert "Traceback" not in proc.stdout
    assert not marker.exists()
