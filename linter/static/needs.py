"""What a static rule reads beyond its file's syntax tree and imports (`StaticRule.needs`), and
what a run must therefore build: the project index only when an enabled rule reads the
project's other files. No LibCST here: a warm run, served from the cache, decides with it
whether to read the project index."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# "scope": the scope analysis of a function (`modellint.static.scope.scope_of`); "project": what
# the project's other files define (which classes are module classes: `is_module_class`,
# `module_classes`, `builds_module`, `current_method`...; `context.index`); "semantic": the
# semantic model (`FileContext.semantic`), which reads both
NEEDS = frozenset({"scope", "semantic", "project"})
_IMPLIED = {"semantic": frozenset({"scope", "project"})}


class UndeclaredNeed(Exception):
    """A rule read what its `needs` do not declare: it fails (ML001) rather than give findings
    that depend on which other rules run beside it."""


def needs_of(rule: Any) -> frozenset[str]:
    """What a static rule class (or a plugin manifest's RuleInfo) reads, with what its
    declaration implies ("semantic" reads the scopes and the project); all of it when it
    declares nothing."""
    declared = getattr(rule, "needs", None)
    if declared is None:
        return NEEDS
    return frozenset(declared).union(*(_IMPLIED.get(need, ()) for need in declared))


def project_codes(rules: Iterable[Any]) -> frozenset[str]:
    """The codes of the static `rules` that read the project's other files."""
    return frozenset(rule.code for rule in rules if "project" in needs_of(rule))


def reads_project(codes: frozenset[str], disabled: Iterable[frozenset[str]]) -> bool:
    """Some file, whose codes hidden in the whole file are each of `disabled`, runs one of the
    rules of `codes` (`project_codes`): the run needs the project index."""
    return any(codes - hidden for hidden in disabled)


def needs_project(rules: Iterable[Any]) -> bool:
    """Some of the static `rules` read the project's other files."""
    return bool(project_codes(rules))
