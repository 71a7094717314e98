"""`modellint run` on the mistakes outside the catalogue it sees at once (ML324-ML327, issue
27 item 14): each buggy script in fixtures/training/ is reported at its line by a real
`modellint run` process, its clean twin gives nothing, the rules are off until selected, and
the wrappers they need leave torch's warnings where torch puts them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "training"
CODES = "ML324,ML325,ML326,ML327"
BAD = {
    "ml324_bad.py": ("ML324", 16),
    "ml325_bad.py": ("ML325", 31),
    "ml326_bad.py": ("ML326", 27),
    "ml327_bad.py": ("ML327", 17),
}


def _run(*argv, cwd=FIXTURES, timeout=240):
    return subprocess.run([sys.executable, "-m", "modellint", "run", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


def _findings(out) -> list[tuple[str, str, int]]:
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return sorted((Path(f["path"]).name, f["code"], f["line"])
                  for f in json.loads(out.stdout))


@pytest.mark.parametrize(("name", "expected"), sorted(BAD.items()))
def test_buggy_script_is_reported_at_its_line(name, expected):
    out = _run("--steps", "10", "--extend-select", CODES, "--format", "json", "--",
               "python", name)
    assert _findings(out) == [(name, *expected)]
    assert out.returncode == 1
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("name", sorted(name.replace("_bad", "_good") for name in BAD))
def test_clean_twin_gives_no_finding(name):
    out = _run("--steps", "10", "--extend-select", CODES, "--format", "json", "--",
               "python", name)
    assert _findings(out) == []
    assert out.returncode == 0


def test_the_rules_are_off_until_selected():
    # bench/run_corpus.py exercises only ML324 and ML326: off until measured on more code
    out = _run("--steps", "6", "--format", "json", "--", "python", "ml327_bad.py")
    assert _findings(out) == []
    listed = subprocess.run([sys.executable, "-m", "modellint", "rules", "--format", "json"],
                            capture_output=True, text=True, check=True).stdout
    defaults = {rule["code"]: rule["default"] for rule in json.loads(listed)}
    assert [defaults[code] for code in CODES.split(",")] == ["off"] * 4


def test_the_broadcast_warning_names_the_line_torch_names(tmp_path):
    # the wrapper of mse_loss gives torch's warning itself: the direct caller's line, once
    script = tmp_path / "direct.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(4, 1)\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                      "for i in range(8):\n    opt.zero_grad()\n"
                      "    loss = torch.nn.functional.mse_loss(model(torch.randn(6, 4)), "
                      "torch.randn(6))\n    loss.backward()\n    opt.step()\n")
    out = _run("--extend-select", CODES, "--format", "json", "--", "python", str(script),
               cwd=tmp_path)
    assert _findings(out) == [("direct.py", "ML327", 6)]
    assert out.stderr.count("UserWarning: Using a target size") == 1, out.stderr
    assert "direct.py:6: UserWarning" in out.stderr
    assert "watching" not in out.stderr
    # through nn.MSELoss torch names its own module's line, as it does without modellint
    out = _run("--steps", "4", "--extend-select", CODES, "--", "python", "ml327_bad.py")
    assert "torch/nn/modules/loss.py" in out.stderr and "watching" not in out.stderr
