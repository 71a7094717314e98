"""The plugin manager: built-in plugins, entry points, `-p MODULE` and `plugins = [...]`.

Trust: built-in and installed (entry-point) plugins are the user's own environment and always
load; `-p MODULE` is the user's own command line and imports MODULE from the Python path (as
`pytest -p` does; the current folder is never added to it). `plugins = [...]` in the linted
repository's config names code of the repository itself, so it loads only when whoever runs
modellint opts in (`--allow-config-plugins` or `MODELLINT_ALLOW_CONFIG_PLUGINS=1`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from modellint import hookspecs

if TYPE_CHECKING:  # the rule API imports LibCST, which `--version` does not need
    from modellint.rule import Rule

BUILTIN_PLUGINS = (
    "modellint.rules.core",
    "modellint.rules.registration",
    "modellint.rules.forward",
    "modellint.rules.training",
    "modellint.rules.hooks",
    "modellint.rules.serialization",
    "modellint.rules.init",
    "modellint.rules.deprecated",
    "modellint.rules.torch_api",
    "modellint.rules.numerics",
    "modellint.rules.training_script",
    "modellint.rules.runtime.checks",
    "modellint.rules.run",
    "modellint.report.builtin",
)
ENTRY_POINT_GROUP = "modellint"
ALLOW_CONFIG_PLUGINS_FLAG = "--allow-config-plugins"
ALLOW_CONFIG_PLUGINS_ENV = "MODELLINT_ALLOW_CONFIG_PLUGINS"
_CODE = re.compile(r"^[A-Z]{1,8}\d{1,4}$")


class PluginError(Exception):
    """A plugin could not be loaded or registered something invalid (exit 2)."""


@dataclass
class Registry:
    manager: pluggy.PluginManager
    rules: dict[str, type[Rule]] = field(default_factory=dict)
    reporters: dict[str, type] = field(default_factory=dict)
    # rule code -> name of the plugin that registered it
    origins: dict[str, str] = field(default_factory=dict)
    # rule code -> its runtime check (a `RuntimeRule`, or the runtime half of a static rule)
    runtime_checks: dict[str, type] = field(default_factory=dict)
    # code -> the check `modellint run` runs on a watched training run
    run_checks: dict[str, type] = field(default_factory=dict)
    # plugin name -> distribution version (for cache keys)
    versions: dict[str, str] = field(default_factory=dict)


def config_plugins_allowed(flag: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the person running modellint opted in to the config's `plugins = [...]`."""
    return flag or environ.get(ALLOW_CONFIG_PLUGINS_ENV, "").strip().lower() in (
        "1", "true", "yes", "on")


def config_plugins_refused(names: Iterable[str], source: object) -> str:
    """The warning for config plugins that were not loaded because nobody opted in."""
    names = list(names)
    listed = ", ".join(repr(name) for name in names)
    return (
        f"warning: not loading {'plugin' if len(names) == 1 else 'plugins'} {listed} named in "
        f"{source} (that would run its code); if you trust it, pass "
        f"{ALLOW_CONFIG_PLUGINS_FLAG} or set {ALLOW_CONFIG_PLUGINS_ENV}=1"
    )


def _import(module_name: str, label: str):
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any failure of plugin code is the plugin's
        hint = ""
        if (isinstance(exc, ModuleNotFoundError) and exc.name == module_name
                and Path(f"{module_name}.py").is_file()):
            hint = (" (plugins are imported from the Python path, which does not include the "
                    f"current folder: PYTHONPATH=. modellint -p {module_name} ... loads it)")
        raise PluginError(
            f"plugin {label!r} failed to load: {type(exc).__name__}: {exc}{hint}"
        ) from None


def load_registry(
    extra_plugins: Iterable[str] = (),
    *,
    config_plugins: Iterable[str] = (),
    config_root: Path | None = None,
    entry_points: bool = True,
) -> Registry:
    """Built-in, installed (entry points), the config's opted-in `config_plugins` (importable
    from `config_root`, the folder of the config that names them) and `-p` plugins."""
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    registry = Registry(manager)
    for name in BUILTIN_PLUGINS:
        manager.register(_import(name, name), name=name)
    if entry_points:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if manager.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001
                raise PluginError(
                    f"plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}"
                ) from None
            manager.register(plugin, name=ep.name)
            if ep.dist is not None:
                registry.versions[ep.name] = f"{ep.dist.name}=={ep.dist.version}"
    config_plugins = list(config_plugins)
    if config_plugins and config_root is not None and str(config_root) not in sys.path:
        # opted in: the project's own plugin modules live beside its config; last, so that
        # they never shadow what modellint itself imports
        sys.path.append(str(config_root))
    for name in [*config_plugins, *extra_plugins]:
        if manager.has_plugin(name):
            continue
        manager.register(_import(name, name), name=name)
    _collect(registry)
    return registry


def _is_run_check(rule) -> bool:
    from modellint.rule import RunCheck

    return isinstance(rule, type) and issubclass(rule, RunCheck)


def _collect(registry: Registry) -> None:
    halves = []  # runtime halves of rules documented by a static rule: checked once all are in
    for impl in registry.manager.hook.modellint_add_rules.get_hookimpls():
        try:
            added: Any = impl.function()  # what a plugin returns: each rule is checked below
            rules = list(added or ())
        except Exception as exc:  # noqa: BLE001
            raise PluginError(
                f"plugin {impl.plugin_name!r} failed in modellint_add_rules: {exc}"
            ) from None
        for rule in rules:
            code = getattr(rule, "code", None)
            if not isinstance(code, str) or not _CODE.match(code):
                raise PluginError(
                    f"plugin {impl.plugin_name!r} registered a rule with an invalid code "
                    f"{code!r} (expected letters then digits, such as XYZ101)"
                )
            if not hasattr(rule, "documentation"):  # a Runtime/RunCheck that is not a Rule
                halves.append((impl.plugin_name, rule))
                continue
            if code in registry.rules:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} registered rule {code}, which plugin "
                    f"{registry.origins[code]!r} already registered"
                )
            registry.rules[code] = rule
            registry.origins[code] = impl.plugin_name
            if hasattr(rule, "needs") and callable(getattr(rule, "check", None)):  # a RuntimeRule
                registry.runtime_checks[code] = rule
            elif _is_run_check(rule):  # a RunRule
                registry.run_checks[code] = rule
    for plugin, check in halves:
        if _is_run_check(check):
            rule = registry.rules.get(check.code)
            if rule is None or "run" not in rule.passes:
                raise PluginError(
                    f"plugin {plugin!r} registered a run check for {check.code}, which no rule "
                    f"with \"run\" in its passes documents"
                )
            if check.code in registry.run_checks:
                raise PluginError(f"plugin {plugin!r} registered a run check for {check.code}, "
                                  f"which already has one")
            registry.run_checks[check.code] = check
            continue
        rule = registry.rules.get(check.code)
        if rule is None or "runtime" not in rule.passes:
            raise PluginError(
                f"plugin {plugin!r} registered a runtime check for {check.code}, which no rule "
                f"with \"runtime\" in its passes documents"
            )
        if check.code in registry.runtime_checks:
            raise PluginError(
                f"plugin {plugin!r} registered a runtime check for {check.code}, which "
                f"already has one"
            )
        registry.runtime_checks[check.code] = check
    for impl in registry.manager.hook.modellint_add_reporters.get_hookimpls():
        formats: Any = impl.function()  # a plugin's {format name: reporter}
        for fmt, reporter in dict(formats or {}).items():
            if fmt in registry.reporters:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} registered reporter {fmt!r} twice"
                )
            registry.reporters[fmt] = reporter
