"""One findings pipeline: a `Finding` is made in one place and never changed after; every
suppression form hides the findings of every pass (static, runtime, `modellint run`, the
Python API) alike."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import pytest
from conftest import NET, write

from modellint.finding import Finding, Severity, make_finding

ROOT = Path(__file__).resolve().parents[1]


def test_one_place_makes_findings():
    makers = []
    for folder in ("linter", "rules"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"(?<![\w.])Finding\(", line) and not line.lstrip().startswith(
                        ("class ", "#")):
                    makers.append(f"{path.relative_to(ROOT)}:{number}")
    assert len(makers) == 1 and makers[0].startswith("linter/finding.py:"), makers


def test_no_pass_makes_a_finding_itself():
    # the passes report raw findings; `modellint.pipeline` makes the Findings of them. A
    # SARIF file read back (`report/sarif.py`) is findings already made, not a pass's report
    makers = []
    for folder in ("linter", "rules"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line in path.read_text(encoding="utf-8").splitlines():
                if re.search(r"(?<![\w.])(make_finding|line_finding)\(", line) and not \
                        line.lstrip().startswith(("def ", "#")):
                    makers.append(str(path.relative_to(ROOT)))
    assert sorted(set(makers)) == ["linter/finding.py", "linter/pipeline.py",
                                   "linter/report/sarif.py"], makers


def test_a_finding_is_frozen():
    finding = make_finding(None, "ML101", "m", "a.py", 3)
    assert (finding.name, finding.severity, finding.end_line) == ("ml101", Severity.ERROR, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.line = 4  # type: ignore[misc]
    assert isinstance(finding, Finding) and hash(finding) == hash(dataclasses.replace(finding))


# -- every suppression form, every pass ---------------------------------------------------------

FORMS = ("line noqa", "file noqa", "per-file-ignores", "ignore")


def hidden(form: str, source: str, line: int, code: str, file: str) -> tuple[str, str, list]:
    """(the source, the pyproject.toml, the extra options) that hide `code` at `line` of
    `file` by `form`."""
    config = "[tool.modellint]\n"
    if form == "line noqa":
        lines = source.split("\n")
        lines[line - 1] += f"  # noqa: {code}"
        source = "\n".join(lines)
    elif form == "file noqa":
        source = f"# modellint: noqa: {code}\n{source}"
    elif form == "per-file-ignores":
        config += f'[tool.modellint.per-file-ignores]\n"{file}" = ["{code}"]\n'
    return source, config, (["--ignore", code] if form == "ignore" else [])


@pytest.mark.parametrize("form", FORMS)
def test_static_findings(modellint, tmp_path, form):
    write(tmp_path, "net.py", NET)
    shown = modellint("check", "--select", "ML101", "--format", "json", "net.py")
    assert shown.codes() == [("ML101", 8)], shown
    source, config, extra = hidden(form, NET, 8, "ML101", "net.py")
    write(tmp_path, "net.py", source)
    write(tmp_path, "pyproject.toml", config)
    result = modellint("check", "--select", "ML101", "--format", "json", *extra, "net.py")
    assert result.json() == [], result


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


@pytest.mark.parametrize("form", FORMS)
def test_runtime_findings(modellint, tmp_path, form):
    pytest.importorskip("torch")
    args = ("check", "--runtime", "--select", "ML703", "--format", "json")
    write(tmp_path, "net.py", UNUSED)
    shown = modellint(*args, "net.py")
    assert shown.codes() == [("ML703", 8)], shown
    source, config, extra = hidden(form, UNUSED, 8, "ML703", "net.py")
    write(tmp_path, "net.py", source)
    write(tmp_path, "pyproject.toml", config)
    result = modellint(*args, *extra, "net.py")
    assert result.json() == [], result


STALE = """\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model[1] = nn.Linear(4, 1)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.randn(2, 8)).sum().backward()
    optimizer.step()
"""


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
def test_run_findings(modellint, tmp_path, form):
    pytest.importorskip("torch")
    args = ("run", "--select", "ML319", "--format", "json")
    write(tmp_path, "train.py", STALE)
    shown = modellint(*args, "--", sys.executable, "train.py")
    assert shown.codes() == [("ML319", 6)], shown
    source, config, extra = hidden(form, STALE, 6, "ML319", "train.py")
    write(tmp_path, "train.py", source)
    write(tmp_path, "pyproject.toml", config)
    result = modellint(*args, *extra, "--", sys.executable, "train.py")
    assert result.json() == [], result


def _api_codes(tmp_path, source: str, name: str, **options) -> list[tuple[str, int]]:
    import torch

    from modellint.runtime.api import check_model

    path = write(tmp_path, f"{name}.py", source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = check_model(module.Net, torch.randn(2, 8), **options)
    return [(f.code, f.line) for f in report.findings if f.code == "ML703"]


@pytest.mark.parametrize("form", [form for form in FORMS if form != "per-file-ignores"])
def test_api_findings(tmp_path, form):
    # the Python API reads no configuration: per-file-ignores do not apply to it
    pytest.importorskip("torch")
    assert _api_codes(tmp_path, UNUSED, "shown_net") == [("ML703", 8)]
    source, _, extra = hidden(form, UNUSED, 8, "ML703", "net.py")
    options = {"ignore": ["ML703"]} if extra else {}
    assert _api_codes(tmp_path, source, f"hidden_net_{form.replace(' ', '_')}",
                      **options) == []


def test_check_optimizer_is_the_run_half_of_ml305(tmp_path):
    pytest.importorskip("torch")
    import torch

    from modellint.runtime.api import check_optimizer

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    optimizer = torch.optim.SGD(model[0].parameters(), lr=0.1)
    report = check_optimizer(model, optimizer)
    assert [f.code for f in report.findings] == ["ML305"]
    assert "2 trainable parameter(s) are in no optimizer group" in report.findings[0].message
    assert report.findings[0].name == "param-group-overlap"


# -- one de-duplication key, in the pipeline ----------------------------------------------------


def test_the_static_pass_shows_a_finding_reported_twice_once():
    import libcst as cst

    from modellint.rule import StaticRule
    from modellint.testing import lint_text

    class NoGlobal(StaticRule):
        code = "LOC001"
        name = "no-global"

        def visit_Global(self, node: cst.Global) -> None:
            self.report(node, "`global` statement")
            self.report(node, "`global` statement")  # again, as a second visit would
            self.report(node, "`global` statement, again")

    found = lint_text("def f():\n    global x\n", [NoGlobal])
    assert [(f.code, f.line, f.column, f.message) for f in found] == [
        ("LOC001", 2, 5, "`global` statement"), ("LOC001", 2, 5, "`global` statement, again")]


def test_the_runtime_pass_shows_a_finding_reported_twice_once(tmp_path):
    # what a model's checks report (`ModelRun.report`, the Python API's `report`) is kept as
    # reported; the pipeline leaves out a finding equal to one before it
    from modellint.finding import RawFinding
    from modellint.pipeline import Origin, findings_of

    path = str(write(tmp_path, "net.py", UNUSED))
    raws = [RawFinding("ML703", "`aux` is never called", path, 8),
            RawFinding("ML703", "`aux` is never called", path, 8),
            RawFinding("ML703", "`aux2` is never called", path, 8)]
    found = findings_of(raws, Origin("runtime", {}))
    assert [(f.line, f.column, f.message) for f in found] == [
        (8, 9, "`aux` is never called"), (8, 9, "`aux2` is never called")]


def test_a_run_shows_a_finding_reported_twice_once(tmp_path):
    pytest.importorskip("torch")
    from modellint.plugins import default_registry
    from modellint.watching.findings import to_findings
    from modellint.watching.record import Recorder

    path = str(write(tmp_path, "train.py", STALE))
    recorder = Recorder()
    recorder.report("ML319", "`optimizer` holds stale parameters", (path, 6))
    recorder.report("ML319", "`optimizer` holds stale parameters", (path, 6))
    recorder.report("ML319", "`optimizer2` holds stale parameters", (path, 6))
    found = to_findings(recorder.findings, default_registry(), {"ML319"})
    assert [(f.line, f.message) for f in found] == [
        (6, "`optimizer2` holds stale parameters"), (6, "`optimizer` holds stale parameters")]
