"""The plugin manager: built-in plugins, entry points, `-p MODULE` and `plugins = [...]`.

Trust: built-in and installed (entry-point) plugins are the user's own environment and always
load; `-p MODULE` is the user's own command line and imports MODULE from the Python path (as
`pytest -p` does; the current folder is never added to it). `plugins = [...]` in the linted
repository's config names code of the repository itself, so it loads only when whoever runs
modellint opts in (`--allow-config-plugins` or `MODELLINT_ALLOW_CONFIG_PLUGINS=1`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modellint.records import record

if TYPE_CHECKING:  # the rule API imports LibCST, which `--version` does not need
    import pluggy

    from modellint.rule import Rule

BUILTIN_PLUGINS = (
    "modellint.rules.core",
    "modellint.rules.registration",
    "modellint.rules.layers",
    "modellint.rules.forward",
    "modellint.rules.training",
    "modellint.rules.hooks",
    "modellint.rules.serialization",
    "modellint.rules.init",
    "modellint.rules.deprecated",
    "modellint.rules.torch_api",
    "modellint.rules.numerics",
    "modellint.rules.training_script",
    "modellint.rules.training_schedule",
    "modellint.rules.timing",
    "modellint.rules.runtime.checks",
    "modellint.rules.run",
    "modellint.rules.run_numerics",
    "modellint.rules.run_baseline",
    "modellint.report.builtin",
)
ENTRY_POINT_GROUP = "modellint"
ALLOW_CONFIG_PLUGINS_FLAG = "--allow-config-plugins"
ALLOW_CONFIG_PLUGINS_ENV = "MODELLINT_ALLOW_CONFIG_PLUGINS"
_CODE = re.compile(r"^[A-Z]{1,8}\d{1,4}$")


class PluginError(Exception):
    """A plugin could not be loaded or registered something invalid (exit 2)."""


@record
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
    # here, not at the top: a warm run reads the manifest instead and imports neither
    import importlib.metadata

    import pluggy

    from modellint import hookspecs

    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    hookspecs.apply_marks(hookspecs)
    manager.add_hookspecs(hookspecs)
    registry = Registry(manager)

    def register(plugin: object, name: str) -> None:
        try:
            hookspecs.apply_marks(plugin)
        except TypeError as exc:  # `@hookimpl(tryFirst=True)`: pluggy's marker refuses it
            raise PluginError(f"plugin {name!r} failed to load: {type(exc).__name__}: {exc}"
                              ) from None
        manager.register(plugin, name=name)

    for name in BUILTIN_PLUGINS:
        register(_import(name, name), name)
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
            register(plugin, ep.name)
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
        register(_import(name, name), name)
    _collect(registry)
    return registry


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    """The registry of the built-in and installed plugins, loaded once per process: what the
    Python API, `modellint.watching()`, the runtime pass's workers and the test helpers
    use (a `check` loads its own, with the `-p` and config plugins it names)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_registry()
    return _DEFAULT


def _is_run_check(rule) -> bool:
    from modellint.rule import RunCheck

    return isinstance(rule, type) and issubclass(rule, RunCheck)


def _is_runtime_check(rule) -> bool:
    """A RuntimeRule: `needs` (phases) and `check(run)`. A static rule has `needs` too (what it
    reads) and may have a `check(scope)`, beside its `report`."""
    return (hasattr(rule, "needs") and callable(getattr(rule, "check", None))
            and not hasattr(rule, "report"))


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
            if _is_runtime_check(rule):  # a RuntimeRule
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


# -- the manifest: what `check` needs of the plugins, without importing them -----------------
#
# A warm rerun (every file's findings in the cache) must not pay for importing the rules and
# LibCST. What it needs of the plugins before linting (each rule's code, default, passes and
# module for the cache key; where each reporter lives) is kept, after a run that imported them,
# in a manifest signed like cache entries (`modellint.static.cache.manifest_store`). Its key
# names the Python environment (modellint's version, the Python, sys.path and the distributions
# installed on it, each one's entry points file), and it lists every file of the plugins'
# packages with its size and mtime: installing, upgrading or editing a plugin (or modellint)
# makes it stale, and that run imports the plugins and writes a new one.

MANIFEST_FORMAT = 4
# the built-in formats that read nothing of the rules but their codes (SARIF describes them)
LIGHT_FORMATS = ("text", "concise", "json", "github")


@record(frozen=True)
class RuleInfo:
    """A rule as the manifest knows it: enough to select rules and key the cache."""

    code: str
    # kebab-case, a selector as good as the code (`--select module-in-plain-container`)
    name: str
    default_enabled: bool
    passes: tuple[str, ...]
    # it has a static check (`report`)
    static: bool
    module: str
    qualname: str
    # what its static check reads (`modellint.static.needs`): whether a run of it needs the
    # project index (None: unknown, everything)
    needs: frozenset[str] | None = None
    # words of which one must occur in a file for its static check to run there (`triggers`
    # of a StaticRule; empty: it runs on every file)
    triggers: tuple[str, ...] = ()


def is_static(rule) -> bool:
    """Whether a rule class (or RuleInfo) has a static check."""
    if isinstance(rule, RuleInfo):
        return rule.static
    return "static" in rule.passes and hasattr(rule, "report")


class _Reporters(Mapping):
    """Format -> reporter class, each imported when it is asked for."""

    def __init__(self, where: dict[str, tuple[str, str]]) -> None:
        self._where = where
        self._loaded: dict[str, type] = {}

    def __getitem__(self, fmt: str) -> type:
        if fmt not in self._loaded:
            module, qualname = self._where[fmt]
            found: Any = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
            self._loaded[fmt] = found
        return self._loaded[fmt]

    def __iter__(self):
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


@record
class LightRegistry:
    """The plugins as a manifest knows them: `rules` are RuleInfos (`load` gives the real
    Registry), `sources` the rule modules' (file, sha256) for the cache key."""

    rules: dict[str, RuleInfo]
    reporters: Mapping[str, type]
    origins: dict[str, str]
    sources: dict[str, tuple[str, str | None]]
    manager: None = None


def _environment_key() -> str:
    """What decides which plugins load and what they are: modellint's version, this Python,
    sys.path, and on it each distribution's metadata folder and entry points file."""
    import hashlib

    from modellint import __version__

    digest = hashlib.sha256(
        f"manifest={MANIFEST_FORMAT};modellint={__version__};{sys.version};"
        f"{sys.executable}".encode())
    for entry in sys.path:
        digest.update(b"\0" + entry.encode("utf-8", "surrogateescape"))
        if not os.path.isdir(entry or "."):
            try:  # a zip file on the path
                info = os.stat(entry)
                digest.update(f":{info.st_mtime_ns}:{info.st_size}".encode())
            except OSError:
                pass
            continue
        try:
            names = sorted(name for name in os.listdir(entry or ".")
                           if name.endswith((".dist-info", ".egg-info", ".egg-link", ".pth")))
        except OSError:
            continue
        for name in names:
            digest.update(b"\0" + name.encode("utf-8", "surrogateescape"))
            try:
                points = os.stat(os.path.join(entry or ".", name, "entry_points.txt"))
                digest.update(f":{points.st_mtime_ns}:{points.st_size}".encode())
            except OSError:
                pass
    return digest.hexdigest()


def _stamp(file: str) -> list[int] | None:
    try:
        info = os.stat(file)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def light_registry(store) -> LightRegistry | None:
    """The plugins from the manifest in `store` (a `manifest_store`), or None when there is
    none for this environment or any file of the plugins changed since it was written."""
    try:
        manifest = store.get_manifest(_environment_key())
        if manifest is None or manifest.get("format") != MANIFEST_FORMAT:
            return None
        for file, stamp in manifest["files"].items():
            if _stamp(file) != stamp:
                return None
        rules = {code: RuleInfo(code, name, bool(default), tuple(passes), bool(static), module,
                                qualname, frozenset(needs), tuple(triggers))
                 for code, (name, default, passes, static, module, qualname, needs, triggers)
                 in manifest["rules"].items()}
        if not all(isinstance(word, str) for rule in rules.values() for word in rule.triggers):
            return None
        reporters = {fmt: (module, qualname)
                     for fmt, (module, qualname) in manifest["reporters"].items()}
        sources = {module: (file, hashed) for module, (file, hashed)
                   in manifest["sources"].items()}
        origins = dict(manifest["origins"])
        if not all(isinstance(v, str) for v in origins.values()):
            return None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return LightRegistry(rules, _Reporters(reporters), origins, sources)


def builtin_rule_classes(rules: Iterable[RuleInfo], texts: Iterable[str] | None = None
                         ) -> list[type[Rule]] | None:
    """The classes of `rules` when all are modellint's own, imported from their modules
    without loading the plugins (no entry point scan: a third of loading them); else None.
    A built-in plugin's hook only returns its module's classes, so they are the same.

    With the `texts` of the files a run lints, a module none of whose rules can run on any of
    them (its `triggers` occur in none) is not imported, and its rules are left out: the
    engine would not run them."""
    rules = list(rules)
    if any(rule.module.rsplit(".", 1)[0] not in _BUILTIN_PACKAGES for rule in rules):
        return None
    if texts is not None:
        wanted = _modules_wanted(rules, texts)
        rules = [rule for rule in rules if rule.module in wanted]
    found = []
    for rule in rules:
        loaded: Any = importlib.import_module(rule.module)
        for part in rule.qualname.split("."):
            loaded = getattr(loaded, part)
        found.append(loaded)
    return found


_BUILTIN_PACKAGES = frozenset({"modellint.rules", "modellint.rules.runtime"})


def _modules_wanted(rules: list[RuleInfo], texts: Iterable[str]) -> set[str]:
    """The modules of `rules` with a rule that runs on one of `texts` (read until every
    module has one)."""
    words: dict[str, set[str]] = {}
    wanted = set()
    for rule in rules:
        if not rule.triggers:
            wanted.add(rule.module)
        else:
            words.setdefault(rule.module, set()).update(rule.triggers)
    from modellint.static.source import mentioned_in

    waiting = {module: found for module, found in words.items() if module not in wanted}
    for text in texts:
        if not waiting:
            break
        mentions = mentioned_in(text)
        for module in [module for module, found in waiting.items()
                       if any(map(mentions, found))]:
            wanted.add(module)
            del waiting[module]
    return wanted


def save_manifest(store, registry: Registry) -> None:
    """Write the manifest of `registry` (built-in and installed plugins only: not `-p` or
    the config's). Nothing is written when a plugin configures the run (its hook must run)
    or a rule or reporter cannot be found again by its module and name."""
    from modellint.static.cache import source_digest
    from modellint.static.needs import needs_of

    if registry.manager.hook.modellint_configure.get_hookimpls():
        return
    rules = {}
    sources: dict[str, list] = {}
    for code, rule in registry.rules.items():
        module, qualname = rule.__module__, rule.__qualname__
        if "<" in qualname:
            return
        static = is_static(rule)
        rules[code] = [rule.name, bool(rule.default_enabled), list(rule.passes), static,
                       module, qualname, sorted(needs_of(rule)) if static else [],
                       list(getattr(rule, "triggers", ())) if static else []]
        loaded = sys.modules.get(module)
        file = getattr(loaded, "__file__", None)
        if file and module not in sources:
            sources[module] = [file, source_digest(file)]
    reporters = {}
    for fmt, reporter in registry.reporters.items():
        qualname = getattr(reporter, "__qualname__", "")
        if not qualname or "<" in qualname:
            return
        reporters[fmt] = [reporter.__module__, qualname]
    # every loaded module of the plugins' packages (and modellint's): a change to any of them
    # may change a rule or its default
    tops = {"modellint"}
    for _, plugin in registry.manager.list_name_plugin():
        name = getattr(plugin, "__name__", None) if isinstance(
            plugin, type(sys)) else getattr(plugin, "__module__", None)
        if isinstance(name, str):
            tops.add(name.split(".")[0])
    files = {}
    for module_name, loaded in list(sys.modules.items()):
        file = getattr(loaded, "__file__", None)
        if file and module_name.split(".")[0] in tops:
            stamp = _stamp(file)
            if stamp is not None:
                files[file] = stamp
    store.put_manifest(_environment_key(), {
        "format": MANIFEST_FORMAT, "rules": rules, "reporters": reporters,
        "origins": dict(registry.origins), "sources": sources, "files": files})
