"""Shared helpers: run the real `modellint` command in a subprocess, write source files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PLUGIN_EXAMPLE = TESTS / "plugin_example"

# One module class with three findings: ML101 (line 8, unsafe fix), ML103 (line 9),
# ML105 (line 11, safe fix).
NET = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(2, 2), nn.ReLU()]
        self.tens = torch.ones(3, 4)

    def forward(x):
        return x
"""

CLEAN = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
        self.register_buffer("tens", torch.ones(3, 4))

    def forward(self, x):
        return x
"""

# the tutorial's `net`: forward reads `self.linear`, the class defines `self.conv` (ML106)
UNDEFINED_ATTR = """\
import torch.nn as nn


class net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Linear(10, 5)

    def forward(self, x):
        return self.linear(x)
"""


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.pop("PYTHONPATH", None)
    env.update(extra or {})
    return env


class Result:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self) -> list[dict]:
        return json.loads(self.out)

    def codes(self) -> list[tuple[str, int]]:
        """(code, line) of each finding of a `--format json` run."""
        return [(f["code"], f["line"]) for f in self.json()]

    def __repr__(self) -> str:
        return f"<rc={self.rc}\nstdout:\n{self.out}\nstderr:\n{self.err}>"


@pytest.fixture
def modellint(tmp_path):
    """`modellint(*args, cwd=tmp_path, env=None, stdin=None)`: run `python -m modellint` for
    real."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            stdin: str | None = None) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "modellint", *map(str, args)],
            cwd=cwd or tmp_path,
            env=_env(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Result(proc)

    return run


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """`cli(*args, cwd=tmp_path)`: `modellint.cli.main` in this process, for tests about what
    the command decides and prints rather than about the process boundary (`modellint` runs
    it for real)."""
    from modellint.cli import main

    for name in ("NO_COLOR", "FORCE_COLOR", "MODELLINT_ALLOW_CONFIG_PLUGINS"):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
        monkeypatch.chdir(cwd or tmp_path)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        rc = main(list(map(str, args)))
        captured = capsys.readouterr()
        return Result(subprocess.CompletedProcess(args, rc, captured.out, captured.err))

    return run


@pytest.fixture(scope="session")
def example_plugin(tmp_path_factory) -> Path:
    """A folder holding the installed example plugin (put it on PYTHONPATH): installed like a
    user would, with pip, but into a scratch folder so that the venv stays untouched."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    # build from a copy: setuptools writes build/ and *.egg-info beside the sources
    source = build / "plugin_example"
    shutil.copytree(PLUGIN_EXAMPLE, source, ignore=shutil.ignore_patterns(
        "__pycache__", "build", "*.egg-info"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--target", str(target), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(target.glob("modellint_example-*.dist-info")), "no entry-point metadata installed"
    return target
