"""Rules ask the semantic model through its public queries (issue 24): no rule module reads
the project index or its fact dicts, and the training rules share helpers through
`rules/_loops.py` (the shared helper module), not each other's private names."""

from __future__ import annotations

import ast
from pathlib import Path

RULES = Path(__file__).resolve().parent.parent / "rules"


def _trees():
    for path in sorted(RULES.rglob("*.py")):
        yield path.relative_to(RULES).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_no_rule_reads_the_index_or_its_facts():
    found = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in (
                    "modellint.static.index", "modellint.static.facts",
                    "modellint.static.evaluate", "modellint.static.facts_cache",
                    "modellint.static.summary", "modellint.static.semantic"):
                found.append(f"{name}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Attribute) and node.attr == "index" and isinstance(
                    node.value, ast.Attribute) and node.value.attr == "semantic":
                found.append(f"{name}:{node.lineno} reads semantic.index")
    assert found == []


def test_training_rules_import_no_private_name_of_another_rule_module():
    found = []
    for name, tree in _trees():
        if not name.startswith("training"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "modellint.rules.") and node.module != "modellint.rules._loops":
                found += [f"{name}:{node.lineno} {alias.name}" for alias in node.names
                          if alias.name.startswith("_")]
    assert found == []
