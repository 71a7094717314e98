"""`--format sarif`: valid SARIF 2.1.0 that GitHub code scanning can read."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import jsonschema
import pytest

from modellint.finding import Finding, Severity
from modellint.plugins import load_registry
from modellint.report import Summary
from modellint.report.sarif import SarifReporter, findings_from_sarif

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
BAD = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(x):\n        return x\n"
HOSTILE = "%0A::error file=x::evil, a#b?.py"


def validate(document):
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    errors = sorted(jsonschema.Draft4Validator(SCHEMA).iter_errors(document), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def lint_tree(tmp_path, cwd=None, env=None):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text(BAD)
    (tmp_path / "models" / HOSTILE).write_text(BAD)
    (tmp_path / "broken.py").write_text("x = 1\ndef f(:\n")
    (tmp_path / "clean.py").write_text("import torch\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    proc = subprocess.run(
        [sys.executable, "-m", "modellint", "check", ".", "--format", "sarif",
         "--select", "ML105,ML000", "--no-cache"],
        cwd=cwd or tmp_path, env={**environ, **(env or {})}, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    return json.loads(proc.stdout)


def test_cli_output_validates_and_describes_what_fired(tmp_path):
    document = lint_tree(tmp_path, env={"GITHUB_WORKSPACE": str(tmp_path)})
    validate(document)
    assert document["version"] == "2.1.0"
    [run] = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "modellint" and driver["version"]
    assert driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == ["ML000", "ML105"]  # only rules that fired
    ml105 = driver["rules"][1]
    assert ml105["name"] == "method-missing-self"
    assert ml105["shortDescription"]["text"] == "A method of a module class is defined without `self`."
    assert ml105["fullDescription"]["text"].startswith("Finds instance methods")
    assert "## Why is this bad?" in ml105["help"]["text"]
    assert "```python\nclass Net(nn.Module):\n    def forward(self, x):" in ml105["help"]["markdown"]
    assert ml105["defaultConfiguration"]["level"] == "error"
    assert "registration" in ml105["properties"]["tags"]

    results = run["results"]
    assert len(results) == 3
    for result in results:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == "error" and result["message"]["text"]
        [location] = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%"
        assert urllib.parse.quote(urllib.parse.unquote(artifact["uri"])) == artifact["uri"]
        # ML105's fix is safe; ML000 has none
        fix = {"ML105": {"fix": "safe"}, "ML000": {}}[result["ruleId"]]
        assert result["properties"] == {"pass": "static", "fixable": bool(fix), **fix}
    uris = sorted(
        urllib.parse.unquote(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        for r in results
    )
    assert uris == sorted(["broken.py", "models/net.py", f"models/{HOSTILE}"])
    region = next(r for r in results if r["ruleId"] == "ML105")["locations"][0][
        "physicalLocation"]["region"]
    assert region == {"startLine": 5, "startColumn": 9, "endLine": 5, "endColumn": 16}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"


def test_uris_are_relative_to_the_git_root_without_workspace(tmp_path):
    (tmp_path / ".git").mkdir()  # a work tree's marker is all the root lookup needs
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text(BAD)
    proc = subprocess.run(
        [sys.executable, "-m", "modellint", "check", "net.py", "--format", "sarif", "--no-cache"],
        cwd=tmp_path / "models", capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "GITHUB_WORKSPACE"},
    )
    document = json.loads(proc.stdout)
    validate(document)
    [result] = document["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "models/net.py"


def test_clean_run_is_valid_and_empty(tmp_path):
    out = io.StringIO()
    SarifReporter(out).report([], Summary(files_checked=2))
    document = json.loads(out.getvalue())
    validate(document)
    assert document["runs"][0]["results"] == []
    assert document["runs"][0]["tool"]["driver"]["rules"] == []
    # the schema does reject what GitHub would reject
    document["runs"][0]["results"] = [{"message": {"text": "x"}, "level": "fatal"}]
    with pytest.raises(AssertionError):
        validate(document)


def test_unknown_rule_and_other_levels_still_valid(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    findings = [
        Finding("XYZ1", "from-a-plugin", "plugin says", Severity.WARNING,
                str(tmp_path / "a.py"), 2, 1, 4, 3),
        Finding("ML105", "method-missing-self", "m", Severity.INFO, "/outside/b.py", 1, 1, 1, 1),
    ]
    out = io.StringIO()
    rules = load_registry(entry_points=False).rules
    SarifReporter(out).report(findings, Summary(rules=rules, files_checked=2))
    document = json.loads(out.getvalue())
    validate(document)
    first, second = document["runs"][0]["results"]
    assert first["level"] == "warning" and second["level"] == "note"
    assert document["runs"][0]["tool"]["driver"]["rules"][0]["name"] == "from-a-plugin"
    outside = second["locations"][0]["physicalLocation"]["artifactLocation"]
    assert outside == {"uri": "file:///outside/b.py"}
    # the action reads the log back to annotate: nothing is lost on the way
    back = findings_from_sarif(document)
    assert [(f.code, f.name, f.severity, f.line, f.end_line, f.end_column) for f in back] == [
        (f.code, f.name, f.severity, f.line, f.end_line, f.end_column) for f in findings]
    assert back[0].path == str(tmp_path / "a.py") and back[1].path == "/outside/b.py"


@pytest.mark.parametrize("name", ["github", "sarif"])
def test_registered_through_the_plugin_hook(name):
    registry = load_registry(entry_points=False)
    assert registry.origins  # rules came through plugins too
    assert name in registry.reporters
    impls = registry.manager.hook.modellint_add_reporters.get_hookimpls()
    assert any(name in (impl.function() or {}) for impl in impls
               if impl.plugin_name == "modellint.report.builtin")
