"""One findings pipeline for both passes: runtime findings meet the suppressions static ones
do (file-level noqa, per-file-ignores), and what a user meets with --runtime."""

from __future__ import annotations

import pytest
from conftest import write

pytest.importorskip("torch")

UNUSED = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.aux = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)
"""
# ML703 (unused parameters) is found only by the runtime pass, at `self.aux = ...`
RUNTIME_ONLY = ("--runtime", "--select", "ML703", "--format", "json")


def test_runtime_finding_is_reported_without_suppression(modellint, tmp_path):
    write(tmp_path, "net.py", UNUSED)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.codes() == [("ML703", 8)], result


def test_per_file_ignores_hide_runtime_findings(modellint, tmp_path):
    write(tmp_path, "net.py", UNUSED)
    write(tmp_path, "pyproject.toml", """\
        [tool.modellint.per-file-ignores]
        "net.py" = ["ML703"]
        """)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.rc == 0 and result.json() == [], result


def test_file_level_noqa_for_a_code_hides_runtime_findings(modellint, tmp_path):
    write(tmp_path, "net.py", "# modellint: noqa: ML703\n" + UNUSED)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.rc == 0 and result.json() == [], result


def test_file_level_noqa_hides_runtime_findings_of_a_configured_model(modellint, tmp_path):
    # a configured target is checked even in an exempt file: its findings are still hidden
    write(tmp_path, "net.py", "# modellint: noqa\n" + UNUSED)
    write(tmp_path, "pyproject.toml", """\
        [[tool.modellint.runtime.models]]
        target = "net.py:Net"
        inputs = [[2, 8]]
        """)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.rc == 0 and result.json() == [], result
    # the same target without the noqa is reported
    write(tmp_path, "net.py", UNUSED)
    assert modellint("check", "net.py", *RUNTIME_ONLY).codes() == [("ML703", 8)]
