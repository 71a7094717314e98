"""bench/bugs.py, the scorer of the real-bug benchmark, on two tiny cases of tests/data/bugs:
one modellint finds (ML303, with a fixed twin it must not flag), one no rule sees (a miss);
modellint only, the peers are not needed. Also a bad case.toml is named and left out, and the
cache may not lie inside the repository."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "data" / "bugs" / "cases"
spec = importlib.util.spec_from_file_location("bugs_bench", ROOT / "bench" / "bugs.py")
bugs = importlib.util.module_from_spec(spec)
sys.modules["bugs_bench"] = bugs
spec.loader.exec_module(bugs)


def test_scorer_hit_miss_and_fixed_twin(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MODELLINT_BUGS_DIR", str(tmp_path / "cache"))
    doc, verdicts = tmp_path / "benchmark.md", tmp_path / "verdicts.json"
    assert bugs.main(["--cases", str(CASES), "--tools", "modellint", "--jobs", "1",
                      "--output", str(doc), "--json", str(verdicts)]) == 0
    result = json.loads(verdicts.read_text())
    assert result["tiny-missing-zero-grad"]["modellint"] == {"buggy": "hit", "fixed": "miss"}
    assert result["tiny-cuda-timing"]["modellint"] == {"buggy": "miss"}
    assert result["tiny-cuda-timing"]["modellint (all rules)"] == {"buggy": "miss"}
    printed = capsys.readouterr().out
    assert "recall on 2 buggy cases: modellint 1/2 (0.50)" in printed
    assert "false alarms on fixed twins, modellint: 0/1 (0.00)" in printed
    text = doc.read_text()
    assert "| missing-zero-grad | ML303 | 1 | 1/1 | 1/1 |" in text
    assert "`cuda-timing-without-synchronize` (1 case(s))" in text  # among the classes no tool covers
    # the cases were copied outside the repository, and linted there
    assert (tmp_path / "cache" / "tiny-missing-zero-grad" / "fixed" / "train.py").is_file()


def test_fixed_twin_that_keeps_the_mistake_is_a_false_alarm(tmp_path, monkeypatch, capsys):
    cases = tmp_path / "cases"
    source = CASES / "tiny-missing-zero-grad"
    (cases / source.name / "fixed").mkdir(parents=True)
    (cases / source.name / "buggy").mkdir()
    (cases / source.name / "case.toml").write_text((source / "case.toml").read_text())
    buggy = (source / "buggy" / "train.py").read_text()
    (cases / source.name / "buggy" / "train.py").write_text(buggy)
    (cases / source.name / "fixed" / "train.py").write_text(buggy)  # a "fix" that fixes nothing
    (cases / "broken").mkdir()
    (cases / "broken" / "case.toml").write_text('id = "broken"\nclass = "no-such-class"\n')
    monkeypatch.setenv("MODELLINT_BUGS_DIR", str(tmp_path / "cache"))
    assert bugs.main(["--cases", str(cases), "--tools", "modellint", "--jobs", "1",
                      "--no-doc"]) == 0
    captured = capsys.readouterr()
    assert "false alarms on fixed twins, modellint: 1/1 (1.00)" in captured.out
    assert "case left out: broken: class 'no-such-class' is not in classes.toml" in captured.err


def test_peers_not_installed_are_named_not_scored(tmp_path):
    peers = bugs.find_peers(tmp_path)  # an empty "venv": no peer in it
    assert [(p.name, p.executable) for p in peers] == [
        ("torch-preflight", None), ("TorchFix", None), ("mldoctor", None), ("torch-audit", None)]
    columns = [c for c in bugs.score([], tmp_path, peers, 1, 1, 1, {"none"})[0]]
    assert {c.name: c.status for c in columns}["TorchFix"] == "not installed"
    assert not any(c.available for c in columns)


def test_cache_inside_the_repository_is_refused(monkeypatch):
    cases, _ = bugs.load_cases(CASES, bugs.load_classes())
    with pytest.raises(SystemExit, match="inside the repository"):
        bugs.stage(cases, ROOT / "build" / "bugs-cache")
