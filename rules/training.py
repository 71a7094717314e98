"""Built-in rules: training (see DESIGN.md's catalog)."""

from __future__ import annotations

from modellint.hookspecs import hookimpl


@hookimpl
def modellint_add_rules():
    return []
