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

import pluggy

PROJECT_NAME = "modellint"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


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
