"""The README's rule table, generated from `modellint rule --all --format json`.

    python scripts/rules_table.py           # print the table
    python scripts/rules_table.py --write   # replace the table in README.md
    python scripts/rules_table.py --check   # exit 1 when README.md's table is stale (CI)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
HEADER = "| code | name | pass | default | fix | what it finds |\n|---|---|---|---|---|---|\n"


def builtin_rules() -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "modellint", "rule", "--all", "--format", "json"],
        capture_output=True, text=True, check=True, cwd=README.parent,
    ).stdout
    return [rule for rule in json.loads(out) if rule["plugin"].startswith("modellint.")]


def _fix(rule: dict) -> str:
    """`safe`, `unsafe (sometimes)`, ... as `modellint rules` shows it."""
    if not rule["fix"]:
        return ""
    return rule["fix"] + (" (sometimes)" if rule.get("fix_availability") == "sometimes" else "")


def table(rules: list[dict]) -> str:
    rows = "".join(
        f"| {r['code']} | {r['name']} | {r['pass']} | {r['default']} | {_fix(r)} | "
        f"{r['summary'].replace('|', '/')} |\n"
        for r in rules
    )
    return HEADER + rows


def replace_table(readme: str, new_table: str) -> str:
    start = readme.index(HEADER)
    end = start + len(HEADER)
    while readme.startswith("| ", end):
        end = readme.index("\n", end) + 1
    return readme[:start] + new_table + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    generated = table(builtin_rules())
    if not (args.write or args.check):
        print(generated, end="")
        return 0
    readme = README.read_text(encoding="utf-8")
    updated = replace_table(readme, generated)
    if args.check:
        if updated != readme:
            print("README.md's rule table is stale: run `python scripts/rules_table.py --write`",
                  file=sys.stderr)
            return 1
        return 0
    README.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
