"""Helpers for testing rules: lint a string with chosen rules, apply their fixes."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

from modellint.config import DEFAULT_TORCH_VERSION
from modellint.finding import Finding
from modellint.fix import apply_fixes
from modellint.plugins import Registry, load_registry
from modellint.rule import StaticRule
from modellint.static.engine import lint_source

_REGISTRY: Registry | None = None


def registry() -> Registry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = load_registry()
    return _REGISTRY


def _options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    merged: dict[str, Any] = {"target_torch_version": DEFAULT_TORCH_VERSION,
                              "target_gpu_memory": None}
    for key, value in (options or {}).items():
        key = key.replace("-", "_")
        if key == "target_torch_version" and isinstance(value, str):
            value = tuple(int(p) for p in value.split("."))
        merged[key] = value
    return merged


def lint_text(
    source: str,
    rules: Iterable[type[StaticRule]],
    options: Mapping[str, Any] | None = None,
    path: str = "example.py",
) -> list[Finding]:
    """Findings of `rules` on `source` (dedented), sorted by position."""
    text = textwrap.dedent(source)
    result = lint_source(path, text.encode(), list(rules), _options(options))
    return sorted(result.findings, key=lambda f: f.sort_key())


def lint_project(
    files: Mapping[str, str],
    rules: Iterable[type[StaticRule]],
    options: Mapping[str, Any] | None = None,
) -> dict[str, list[Finding]]:
    """Findings of `rules` on a project of several files ({path: source}, dedented), linted
    as one run: each file sees the project index of all of them. Path -> findings."""
    from modellint.static.index import build

    texts = {path: textwrap.dedent(source) for path, source in files.items()}
    index = build(texts.items())
    rules = list(rules)
    found = {}
    for path, text in texts.items():
        result = lint_source(path, text.encode(), rules, _options(options), index=index)
        found[path] = sorted(result.findings, key=lambda f: f.sort_key())
    return found


def fix_text(
    source: str,
    rules: Iterable[type[StaticRule]],
    options: Mapping[str, Any] | None = None,
    unsafe: bool = True,
) -> str:
    """`source` after applying the fixes of `rules` until nothing more changes."""
    text = textwrap.dedent(source)
    rules = list(rules)
    for _ in range(10):
        result = lint_source("example.py", text.encode(), rules, _options(options))
        if result.module is None:
            return text
        new_text, fixed = apply_fixes(result.module, result.findings, unsafe)
        if not fixed or new_text == text:
            return text
        text = new_text
    return text
