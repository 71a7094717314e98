"""The whole plugin contract of modellint.

A plugin is a Python module (or object) with functions marked `@modellint.hookimpl` whose names
match the specifications below. Built-in rules and reporters are plugins registered exactly
like third-party ones: see `modellint.plugins.BUILTIN_PLUGINS`.

Third-party plugins are found through the entry-point group ``modellint``::

    [project.entry-points.modellint]
    my_rules = "my_package.rules"

and local modules through ``-p MODULE`` or ``plugins = ["module"]`` in ``[tool.modellint]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PROJECT_NAME = "modellint"


class _Marker:
    """pluggy's `HookspecMarker` or `HookimplMarker` of modellint, with the same arguments
    (`@hookimpl`, `@hookimpl(tryfirst=True)`), that marks a function for pluggy when its plugin
    is registered (`apply_marks`) rather than where it is defined: a run on the plugin manifest
    imports the rules' modules without registering them, and importing pluggy there was a
    sixtieth of one edited file's lint."""

    def __init__(self, kind: str) -> None:
        self._options = f"_{PROJECT_NAME}_{kind}_options"

    def __call__(self, function: Callable | None = None, **options: Any) -> Any:
        if function is None:
            return lambda chosen: self(chosen, **options)
        setattr(function, self._options, options)
        return function


hookspec = _Marker("spec")
hookimpl = _Marker("impl")


def apply_marks(plugin: object) -> None:
    """Mark the functions of `plugin` (a module, a class or an object) that `hookspec` or
    `hookimpl` marked, as pluggy's own markers do: before the plugin is registered."""
    import pluggy

    markers = ((hookspec, pluggy.HookspecMarker(PROJECT_NAME)),
               (hookimpl, pluggy.HookimplMarker(PROJECT_NAME)))
    for name in dir(plugin):
        try:
            found = getattr(plugin, name)
        except Exception:  # noqa: BLE001, S112 - an attribute pluggy would not find either
            continue
        function = getattr(found, "__func__", found)  # a method's function
        for ours, theirs in markers:
            options = getattr(function, ours._options, None)
            if isinstance(options, dict):
                theirs(function, **options)


@hookspec
def modellint_add_rules():
    """Return an iterable of rule classes (subclasses of `modellint.rule.StaticRule` or
    `modellint.rule.RuntimeRule`).

    Called once, when the plugin manager is set up, before the configuration is read. Each rule's
    `code` must be unique across all plugins; a duplicate is a load error naming the plugin.
    """


@hookspec
def modellint_add_reporters():
    """Return a mapping of format name (as given to ``--format``) to reporter class (a subclass
    of `modellint.report.Reporter`).

    Called once, when the plugin manager is set up. A name registered twice is a load error.
    """


@hookspec
def modellint_configure(config):
    """Inspect or adjust the resolved `modellint.config.Config` before any file is linted.

    Called once per run, after the configuration files and command-line options are merged and
    validated. Return value ignored.
    """
