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
        "summary": "true", "baseline": "", "baseline-mode": "compare",
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
    assert "| ` ML105 ` | ` method-missing-self ` | 2 |" in summary
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
        "py", "-m", "modellint", "check", "--select", "ML1,ML2", "--runtime", "--", "src",
        "tests"]
    assert check_command(env, "py", output=("--format", "github"))[-6:] == [
        "--runtime", "--format", "github", "--", "src", "tests"]
    with pytest.raises(SystemExit, match="without `--`"):
        check_command({**env, "INPUT_ARGS": "check --"}, "py")
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


# a pull request's own files as the action's inputs (issue 23 items 1 and 6)

EVIL_PLUGIN = "import pathlib\n\npathlib.Path({marker!r}).write_text('evil.py ran')\n"


def test_src_names_that_look_like_options_are_checked_as_files(workspace, tmp_path):
    """`src` may list the pull request's changed files: one named `--allow-config-plugins`
    must not load the repository's plugin, nor `--exit-zero` pass the check."""
    marker = tmp_path / "MARKER"
    (workspace / "evil.py").write_text(EVIL_PLUGIN.format(marker=str(marker)))
    (workspace / "pyproject.toml").write_text('[tool.modellint]\nplugins = ["evil"]\n')
    for name in ("--allow-config-plugins", "--exit-zero", "--runtime"):
        (workspace / name).write_text(BAD)
    for sarif in ("", "results.sarif"):
        proc = run_action(workspace, src="--allow-config-plugins --exit-zero --runtime "
                          "models/net.py", sarif_file=sarif)
        assert proc.returncode == 1, proc.stderr
        assert not marker.exists()
        assert sorted(annotations(proc.stdout)) == [
            ("error", "--allow-config-plugins"), ("error", "--exit-zero"), ("error", "--runtime"),
            ("error", "models/net.py")]
        assert "not loading plugin 'evil'" in proc.stderr


def forged_sarif(workspace: Path) -> str:
    """A SARIF file as a pull request would commit it: modellint's own format, made to say
    what the pull request likes (one finding, in a file that has none)."""
    made = run_action(workspace, src="models/net.py", sarif_file="made.sarif", summary="false")
    assert made.returncode == 1, made.stderr
    text = (workspace / "made.sarif").read_text().replace("models/net.py", "models/clean.py")
    (workspace / "made.sarif").unlink()
    return text.replace("has no `self`", "FORGED")


def test_a_committed_sarif_file_is_neither_annotated_nor_left_for_upload(workspace):
    (workspace / "results.sarif").write_text(forged_sarif(workspace))
    # modellint stops before writing its own (exit 2)
    proc = run_action(workspace, args="check --select NOPE1", src="models",
                      sarif_file="results.sarif")
    assert proc.returncode == 2
    assert "modellint: error:" in proc.stderr
    assert proc.stdout == ""
    assert not (workspace.parent / "step_summary.md").exists()
    assert not (workspace / "results.sarif").exists()
    # a run that writes its own replaces it
    (workspace / "results.sarif").write_text(forged_sarif(workspace))
    proc = run_action(workspace, src="models", sarif_file="results.sarif")
    assert proc.returncode == 1, proc.stderr
    assert "FORGED" not in proc.stdout + (workspace / "results.sarif").read_text()
    assert "models/clean.py" not in proc.stdout


def test_a_committed_link_at_the_sarif_path_writes_nothing_outside(workspace, tmp_path):
    outside = tmp_path / "outside.sarif"
    outside.write_text("not modellint's")
    (workspace / "results.sarif").symlink_to(outside)
    proc = run_action(workspace, src="models", sarif_file="results.sarif")
    assert proc.returncode == 1, proc.stderr
    assert outside.read_text() == "not modellint's"
    assert not (workspace / "results.sarif").is_symlink()
    assert json.loads((workspace / "results.sarif").read_text())["runs"][0]["results"]
    # a folder of the path that leads out of the workspace: refused, nothing checked
    (workspace / "reports").symlink_to(tmp_path)
    proc = run_action(workspace, src="models", sarif_file="reports/outside.sarif")
    assert proc.returncode == 2
    assert "leads out of the workspace" in proc.stderr and "Traceback" not in proc.stderr
    assert outside.read_text() == "not modellint's"


TRAIN = (ROOT / "fixtures" / "training" / "clean.py").read_text()


def test_baseline_recorded_on_the_default_branch_and_compared_on_a_pull_request(workspace):
    pytest.importorskip("torch")
    (workspace / "train.py").write_text(TRAIN)
    # `python` after `--` would be the runner's: the interpreter that has modellint here
    common = {"args": "run --steps 12", "src": f"{sys.executable} train.py",
              "baseline": "ci/baseline.json"}
    (workspace / "ci").mkdir()
    proc = run_action(workspace, baseline_mode="record", **common)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((workspace / "ci" / "baseline.json").read_text())["steps"] == 12
    (workspace / "train.py").write_text(TRAIN.replace("    model.train()\n",
                                                      "    model.eval()\n"))
    proc = run_action(workspace, **common)
    assert proc.returncode == 1, proc.stderr
    assert [kind for kind, file in annotations(proc.stdout) if file == "train.py"] == ["error"]
    assert "ML332" in proc.stdout and "baseline train mode only" in proc.stdout
    summary = (workspace.parent / "step_summary.md").read_text()
    assert "mode-changed-in-phase" in summary


def test_baseline_inputs_map_to_options(tmp_path):
    env = {"INPUT_ARGS": "run --steps 5", "INPUT_SRC": "python train.py",
           "INPUT_BASELINE": "-odd.json"}
    assert check_command(env, "py")[3:6] == ["run", "--steps", "5"]
    assert "--compare=-odd.json" in check_command(env, "py")
    update = check_command({**env, "INPUT_BASELINE_MODE": "update"}, "py")
    assert "--compare=-odd.json" in update and "--update" in update
    with pytest.raises(SystemExit, match="baseline-mode"):
        check_command({**env, "INPUT_BASELINE_MODE": "write"}, "py")
    with pytest.raises(SystemExit, match="needs `args: run"):
        check_command({**env, "INPUT_ARGS": "check"}, "py")
