"""The plugin manager: built-in plugins, entry points, `-p MODULE` and `plugins = [...]`."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    "modellint.report.builtin",
)
ENTRY_POINT_GROUP = "modellint"
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
    # plugin name -> distribution version (for cache keys)
    versions: dict[str, str] = field(default_factory=dict)


def _import(module_name: str, label: str):
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any failure of plugin code is the plugin's
        raise PluginError(
            f"plugin {label!r} failed to load: {type(exc).__name__}: {exc}"
        ) from None


def load_registry(extra_plugins: Iterable[str] = (), *, entry_points: bool = True) -> Registry:
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
    if extra_plugins and "" not in sys.path and "." not in sys.path:
        # `-p local_module` works from the project directory, as with pytest
        sys.path.insert(0, "")
    for name in extra_plugins:
        if manager.has_plugin(name):
            continue
        manager.register(_import(name, name), name=name)
    _collect(registry)
    return registry


def _collect(registry: Registry) -> None:
    for impl in registry.manager.hook.modellint_add_rules.get_hookimpls():
        try:
            rules = list(impl.function() or ())
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
            if code in registry.rules:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} registered rule {code}, which plugin "
                    f"{registry.origins[code]!r} already registered"
                )
            registry.rules[code] = rule
            registry.origins[code] = impl.plugin_name
    for impl in registry.manager.hook.modellint_add_reporters.get_hookimpls():
        for fmt, reporter in dict(impl.function() or {}).items():
            if fmt in registry.reporters:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} registered reporter {fmt!r} twice"
                )
            registry.reporters[fmt] = reporter
