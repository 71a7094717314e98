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
