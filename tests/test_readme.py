"""The README is the front door: keep it true."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from modellint.testing import registry

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_rule_is_in_the_rule_table():
    rows = set(re.findall(r"^\| (ML\d{3}) \|", README, re.M))
    builtin = {code for code, rule in registry().rules.items() if code.startswith("ML")}
    assert builtin <= rows, f"missing from the README's rule table: {sorted(builtin - rows)}"
    for code in builtin:
        rule = registry().rules[code]
        row = re.search(rf"^\| {code} \| (\S+) \|[^|]*\| (on|off) \|", README, re.M)
        assert row and row.group(1) == rule.name, code
        assert row.group(2) == ("on" if rule.default_enabled else "off"), code


def test_the_rule_table_is_the_generated_one():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "rules_table.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_quick_start_and_ci_run_the_same_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q" in README
    assert "\npython -m pytest -q\n" in ci
    assert 'pip install -c constraints.txt -e ".[test]" && modellint fixtures/' in README


def test_readme_mentions_every_cli_option_of_check():
    from modellint.cli import build_parser

    parser = build_parser()
    check = parser._subparsers._group_actions[0].choices["check"]
    options = {o for action in check._actions for o in action.option_strings if o.startswith("--")}
    missing = {o for o in options - {"--help"} if o not in README}
    assert not missing, f"undocumented options: {sorted(missing)}"
