"""The GitHub Action: action.yml, and its script run with the environment GitHub sets."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modellint.action import check_command, requirement

ROOT = Path(__file__).resolve().parents[1]
BAD = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(x):\n        return x\n"
CLEAN = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n"
HOSTILE = "%0A::error file=x::evil.py"
REGISTRY_DOWN = ("No matching distribution", "Could not find a version",
                 "Failed to establish a new connection", "Temporary failure in name resolution")


@pytest.fixture
def workspace(tmp_path):
    space = tmp_path / "workspace"
    (space / "models").mkdir(parents=True)
    (space / "models" / "net.py").write_text(BAD)
    (space / "models" / HOSTILE).write_text(BAD)
    (space / "models" / "clean.py").write_text(CLEAN)
    return space


def github_env(workspace: Path, **inputs: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    env.update(
        GITHUB_ACTIONS="true",
        GITHUB_ACTION_PATH=str(ROOT),
        GITHUB_WORKSPACE=str(workspace),
        GITHUB_STEP_SUMMARY=str(workspace.parent / "step_summary.md"),
        GITHUB_OUTPUT=str(workspace.parent / "output.txt"),
        GITHUB_REPOSITORY="octo/models",
        GITHUB_SHA="0123abc",
        RUNNER_TEMP=str(workspace.parent / "runner_temp"),
        INPUT_ARGS="check --select ML105,ML000 --no-cache",
        INPUT_SRC=".",
        INPUT_VERSION="",
        INPUT_RUNTIME="false",
        INPUT_SARIF_FILE="",
        INPUT_SUMMARY="true",
    )
    env.update({f"INPUT_{key.upper()}": value for key, value in inputs.items()})
    return env


def run_action(workspace: Path, python: str = sys.executable, **inputs: str):
    return subprocess.run(
        [python, "-m", "modellint.action", "run"], cwd=workspace,
        env=github_env(workspace, **inputs), capture_output=True, text=True, timeout=300,
    )


def annotations(stdout: str) -> list[tuple[str, str]]:
    """(kind, file) of each workflow command, `file` unescaped as the runner does."""
    found = []
    for line in stdout.splitlines():
        match = re.match(r"::(\w+) (.*?)::", line)
        assert match, f"not a workflow command: {line!r}"
        props = dict(pair.split("=", 1) for pair in match.group(2).split(","))
        file = props.get("file", "")
        for escaped, char in (("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
            file = file.replace(escaped, char)
        found.append((match.group(1), file))
    return found


def test_action_yml_declares_the_inputs_and_runs_the_script():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = action["inputs"]
    assert {name: inputs[name].get("default") for name in inputs} == {
        "args": "check", "src": ".", "version": "", "runtime": "false", "sarif-file": "",
        "summary": "true",
    }
    assert all(spec.get("description") for spec in inputs.values())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert all(step["shell"] == "bash" for step in steps)
    install, run = steps
    assert '"$GITHUB_ACTION_PATH/linter/action.py" install' in install["run"]
    assert install["id"] == "install"
    assert run["run"].strip() == '"$MODELLINT_PYTHON" -I -m modellint.action run'
    assert run["env"]["MODELLINT_PYTHON"] == "${{ steps.install.outputs.python }}"
    # composite actions get no INPUT_* variables of their own: each input is passed on
    passed = {value for step in steps for value in step.get("env", {}).values()}
    for name in inputs:
        assert "${{ inputs." + name + " }}" in passed, name
    assert (ROOT / "linter" / "action.py").is_file()


def test_annotations_summary_and_exit_code(workspace):
    proc = run_action(workspace, src="models")
    assert proc.returncode == 1, proc.stderr
    assert sorted(annotations(proc.stdout)) == [("error", f"models/{HOSTILE}"),
                                                ("error", "models/net.py")]
    summary = (workspace.parent / "step_summary.md").read_text()
    assert "Found 2 findings in 2 files (2 errors)." in summary
    assert "| `ML105` | method-missing-self | 2 |" in summary
    assert "https://github.com/octo/models/blob/0123abc/models/net.py#L5" in summary


def test_sarif_file_and_the_same_annotations(workspace):
    plain = run_action(workspace, src="models")
    proc = run_action(workspace, src="models", sarif_file="results.sarif")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == plain.stdout
    document = json.loads((workspace / "results.sarif").read_text())
    results = document["runs"][0]["results"]
    assert sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                  for r in results) == ["models/%250A%3A%3Aerror%20file%3Dx%3A%3Aevil.py",
                                        "models/net.py"]


def test_clean_source_passes(workspace):
    proc = run_action(workspace, src="models/clean.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "All checks passed (1 file)." in (workspace.parent / "step_summary.md").read_text()


def test_summary_false_writes_no_summary(workspace):
    proc = run_action(workspace, src="models", summary="false")
    assert proc.returncode == 1
    assert not (workspace.parent / "step_summary.md").exists()


def test_a_usage_error_is_exit_2(workspace):
    proc = run_action(workspace, args="check --select NOPE1")
    assert proc.returncode == 2
    assert "modellint: error:" in proc.stderr


def test_inputs_map_to_the_command_line(tmp_path):
    env = {"INPUT_ARGS": "check --select 'ML1,ML2'", "INPUT_SRC": "src tests",
           "INPUT_RUNTIME": "true", "GITHUB_ACTION_PATH": str(tmp_path)}
    assert check_command(env, "py") == [
        "py", "-m", "modellint", "check", "--select", "ML1,ML2", "--runtime", "src", "tests"]
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "modellint").write_text("#!/bin/sh\n")
    assert check_command(env, str(bin_dir / "python"))[:2] == [str(bin_dir / "modellint"), "check"]
    assert requirement(env) == f"{tmp_path.resolve()}[runtime]"
    assert requirement({"INPUT_VERSION": "0.1.0"}) == "modellint==0.1.0"
    assert requirement({"INPUT_VERSION": ">=0.1", "INPUT_RUNTIME": "false"}) == "modellint>=0.1"
    with pytest.raises(SystemExit):
        requirement({"INPUT_RUNTIME": "maybe", "GITHUB_ACTION_PATH": "."})


@pytest.mark.slow
def test_install_then_run_as_the_action_does(workspace, tmp_path):
    """Both steps of action.yml, for real: install the action's checkout into a fresh virtual
    environment, then run that environment's modellint on the workspace."""
    action_path = tmp_path / "action"
    shutil.copytree(ROOT, action_path, ignore=shutil.ignore_patterns(
        ".git", "*.egg-info", "__pycache__", ".modellint_cache", "build", "dist"))
    env = github_env(workspace, src="models")
    env["GITHUB_ACTION_PATH"] = str(action_path)
    install = subprocess.run(
        [sys.executable, "-I", str(action_path / "linter" / "action.py"), "install"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    if install.returncode and any(s in install.stdout + install.stderr for s in REGISTRY_DOWN):
        pytest.skip("pip cannot reach the package registry for modellint's dependencies")
    assert install.returncode == 0, install.stdout + install.stderr
    output = Path(env["GITHUB_OUTPUT"]).read_text()
    python = re.search(r"^python=(.+)$", output, re.M).group(1)
    assert Path(python).is_relative_to(env["RUNNER_TEMP"])
    proc = run_action(workspace, python=python, src="models")
    assert proc.returncode == 1, proc.stderr
    assert sorted(annotations(proc.stdout)) == [("error", f"models/{HOSTILE}"),
                                                ("error", "models/net.py")]
