"""`modellint run` on fixtures/training/ (issue 27, items 12, 13, 15): each finding at the line
that made the mistake with the other lines as related locations, ML301 decided from what the
script says (not from the loader's length alone), and what a user reads of the run: warnings
and tracebacks at the user's lines, epochs, paths, the models counted. Each a real `modellint
run` process, on a script with the mistake and on its clean twin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "training"
PACKAGE = Path(__file__).resolve().parent.parent / "linter"


def _run(*argv, cwd=FIXTURES, timeout=240):
    return subprocess.run([sys.executable, "-m", "modellint", "run", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


def _findings(script, *options, cwd=FIXTURES):
    out = _run("--format", "json", *options, "--", "python", str(script), cwd=cwd)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout), out


# -- item 13: ML301 ---------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "line"), [("ml301_small_bad.py", 19),
                                            ("ml301_cosine_bad.py", 16)])
def test_per_epoch_schedule_stepped_per_batch_on_small_data(name, line):
    found, _ = _findings(name)
    assert [(f["code"], f["line"]) for f in found] == [("ML301", line)]


def test_schedules_sized_in_iterations_are_not_ml301():
    found, out = _findings("ml301_cosine_good.py")
    assert found == [], out.stdout


# -- item 12: at the line that made the mistake, the other lines related ----------------------
LOCATED = {
    # script: (code, line of the mistake, [(related line, what it is)])
    "ml319_bad.py": ("ML319", 21, [(20, "`SGD` built")]),
    "ml320_bad.py": ("ML320", 16, [(23, "held by `AdamW` built")]),
    "ml320_unused_bad.py": ("ML320", 16, [(23, "held by `AdamW` built")]),
    "ml304_bad.py": ("ML304", 18, [(16, "its `backward()`")]),
    "ml304_meter_bad.py": ("ML304", 32, [(16, "the helper keeps the loss here"),
                                         (30, "its `backward()`")]),
    "ml321_bad.py": ("ML321", 14, [(15, "iterated here")]),
}


def _sarif_results(*argv, cwd=FIXTURES):
    """The results of a run's SARIF log, which must be valid SARIF 2.1.0."""
    jsonschema = pytest.importorskip("jsonschema")
    out = _run("--format", "sarif", *argv, cwd=cwd)
    assert out.returncode in (0, 1), out.stderr
    document = json.loads(out.stdout)
    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    assert not list(jsonschema.Draft4Validator(schema).iter_errors(document))
    return document["runs"][0]["results"]


def _located(result):
    """(code, line, file name, [(line, message, file name)] of its related locations)."""
    def name(location):
        return location["artifactLocation"]["uri"].rsplit("/", 1)[-1]

    where = result["locations"][0]["physicalLocation"]
    related = [(r["physicalLocation"]["region"]["startLine"], r["message"]["text"],
                name(r["physicalLocation"])) for r in result.get("relatedLocations", [])]
    return result["ruleId"], where["region"]["startLine"], name(where), related


@pytest.mark.parametrize(("name", "expected"), sorted(LOCATED.items()))
def test_run_finding_is_at_the_mistake_with_related_lines(name, expected):
    code, line, related = expected
    results = _sarif_results("--", "python", name)
    assert [_located(r) for r in results] == [
        (code, line, name, [(other, what, name) for other, what in related])]
    # the text report names the same lines, with the report's relative path
    text = _run("--format", "concise", "--", "python", name).stdout
    first = text.splitlines()[0]
    assert first.startswith(f"{name}:{line}:") and all(
        f"{what}: {name}:{other}" in first for other, what in related), text


@pytest.mark.parametrize("name", ["ml319_good.py", "ml320_good.py", "ml304_good.py",
                                  "ml304_meter_good.py", "ml321_good.py"])
def test_clean_twins_of_located_findings_give_none(name):
    assert _sarif_results("--", "python", name) == []


def test_ranks_that_diverge_are_reported_at_the_model_call():
    pytest.importorskip("torch.distributed")
    results = _sarif_results("--", "torchrun", "--nproc-per-node", "2", "ddp_diverge_bad.py")
    assert [_located(r) for r in results] == [
        ("ML323", 23, "ddp_diverge_bad.py", [(24, "optimizer step 1", "ddp_diverge_bad.py")])]


# -- item 15: what a user reads --------------------------------------------------------------
def test_torch_warning_and_script_traceback_name_only_the_users_lines():
    out = _run("--format", "concise", "--", "python", "crash_in_data.py")
    assert out.returncode == 1, out.stdout + out.stderr
    # torch warns with stacklevel=2 from `scheduler.step()`: at the line that called it
    assert "crash_in_data.py:21: UserWarning: Detected call of `lr_scheduler.step()`" \
        in out.stderr, out.stderr
    # the traceback: the script's frames and torch's, none of modellint or runpy
    assert "Traceback (most recent call last)" in out.stderr
    assert 'crash_in_data.py", line 13, in __getitem__' in out.stderr
    assert "KeyError: 'no sample 20'" in out.stderr
    frames = [line for line in out.stderr.splitlines() if line.startswith('  File "')]
    assert frames and not [f for f in frames if str(PACKAGE) in f or "runpy" in f
                           or "modellint" in f], out.stderr
    assert "crash_in_data.py:13:13: ML003" in out.stdout


def test_summary_counts_epoch_loops_and_whole_models():
    out = _run("--", "python", "summary_counts.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "modellint run: 12 optimizer step(s), 3 epoch(s), 1 optimizer(s), 1 model(s)" \
        in out.stdout, out.stdout


def test_paths_in_messages_are_the_reports_after_the_script_changes_folder(tmp_path):
    # a script that moves to its output folder: the other line the message names is given
    # with the path the report uses, not one made from the script's new folder
    text = (FIXTURES / "ml312_bad.py").read_text()
    first, rest = text.split("\n", 1)
    script = tmp_path / "train.py"
    script.write_text('import os; os.makedirs("out", exist_ok=True); os.chdir("out")\n' + rest)
    out = _run("--format", "concise", "--", "python", "train.py", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    line = next(line for line in out.stdout.splitlines() if "ML312" in line)
    assert line.startswith("train.py:18:") and line.endswith("trained in eval mode: train.py:16")
    assert str(tmp_path) not in line
