"""The tutorials' examples in fixtures/: the exact findings of each file, none on the twins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"

# (code, line) of every finding with the default rules
EXPECTED = {
    "parameters_net.py": [
        ("ML106", 12), ("ML103", 19), ("ML106", 22), ("ML106", 32), ("ML106", 42)
    ],
    "plain_list_mynet.py": [("ML101", 10), ("ML105", 12)],
    "modulelist_mynet.py": [("ML105", 12)],
    "init_weights.py": [],
    "children_init.py": [("ML601", 17)],
    "training_loop.py": [("ML302", 31)],
    "save_load.py": [("ML502", 16), ("ML501", 17)],
    "hooks_save_output.py": [("ML402", 15)],
}
# what rules that are off by default add, with --select ALL
EXPECTED_ALL_EXTRA = {
    "init_weights.py": [("ML602", 15)],
    "training_loop.py": [("ML310", 28)],
}


def lint(*args: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "modellint", "check", "--no-cache", "--format", "json", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def by_file(findings: list[dict]) -> dict[str, list[tuple[str, int]]]:
    result: dict[str, list[tuple[str, int]]] = {}
    for f in findings:
        result.setdefault(Path(f["path"]).name, []).append((f["code"], f["line"]))
    return result


def test_every_tutorial_fixture_is_listed():
    assert {p.name for p in FIXTURES.glob("*.py")} == set(EXPECTED)


@pytest.mark.parametrize("select", [(), ("--select", "ALL")], ids=["default", "all"])
def test_exact_findings_of_each_tutorial_fixture(select):
    found = by_file(lint(*select, *sorted(str(p.relative_to(ROOT)) for p in FIXTURES.glob("*.py"))))
    for name, expected in EXPECTED.items():
        if select:
            expected = sorted(expected + EXPECTED_ALL_EXTRA.get(name, []), key=lambda c: c[1])
        assert found.get(name, []) == expected, name


def test_clean_twins_have_no_findings_even_with_every_rule():
    assert lint("--select", "ALL", "fixtures/clean") == []
    assert {p.name for p in (FIXTURES / "clean").glob("*.py")} <= {
        "parameters_net.py", "mynet.py", "init_weights.py", "children_init.py",
        "training_loop.py", "save_load.py", "hooks_save_output.py",
    }
