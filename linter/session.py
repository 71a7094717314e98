"""The application layer: one `Session` per request of a front door (`modellint check`, the
language server, `modellint run`, the Python API, the pytest plugin).

A session resolves the settings once: the configuration file as loaded (never changed after),
the caller's `Overrides` (command-line options, the server's, the API's arguments) merged in,
the registry of the plugins, the codes selected. What it resolves is frozen (`Settings`); its
use cases (`check`, `run_findings`, `rule_docs`) return results and print nothing: the front
door that called shows them. Messages meant for the user on the way (a folder that cannot be
searched, a config plugin not loaded) go to the session's `tell`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

import modellint
from modellint.config import (
    Config,
    ConfigError,
    did_you_mean,
    find_pyproject,
    is_excluded,
    load_config,
    select_codes,
    validate_codes,
)
from modellint.finding import RawFinding
from modellint.plugins import (
    LIGHT_FORMATS,
    LightRegistry,
    Registry,
    config_plugins_allowed,
    config_plugins_refused,
    default_registry,
    is_static,
    light_registry,
    load_registry,
    save_manifest,
)
from modellint.records import record
from modellint.suppress import hidden_codes, shown_codes

SUBCOMMANDS = ("check", "rules", "rule", "trace", "server", "run")


class UsageError(Exception):
    """A request that cannot be served as given (exit 2); the message says why."""


def _tell_stderr(message: str) -> None:
    from modellint.report import printable

    print(f"modellint: {printable(message)}", file=sys.stderr)


@record(frozen=True)
class Overrides:
    """What the caller sets over the configuration: selectors (codes, prefixes or rule
    names), plugins, a configuration file of its choice, and settings of the passes."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    allow_config_plugins: bool = False
    # `--config FILE`: this file for every linted file, instead of each one's nearest
    config_file: str | None = None
    max_code_bytes: int | None = None
    # the runtime pass (`check --runtime`)
    device: str | None = None
    timeout: float | None = None
    fail_on_unchecked: bool = False


@record(frozen=True)
class RuntimeSettings:
    """How `check --runtime` runs the models: the overrides over `[tool.modellint.runtime]`."""

    device: str
    timeout: float
    fail_on_unchecked: bool
    # a progress line on the terminal
    progress: bool = False


@record(frozen=True)
class Settings:
    """One configuration resolved with the caller's overrides, and what it selects.

    `config` is a resolved copy: the file's selectors with the overrides' merged in (rule
    names turned into codes), after the plugins' `modellint_configure` hooks saw it. The
    configuration as loaded is never changed."""

    config: Config
    registry: Registry | LightRegistry
    enabled: frozenset[str]
    # the enabled rules with a static check, in code order
    static_rules: tuple = ()
    # the plugins' sources when `registry` came from the manifest (the rules are imported
    # for the first file that misses the cache), else None
    sources: Any = None

    @classmethod
    def resolve(cls, config: Config, registry: Registry | LightRegistry,
                overrides: Overrides = Overrides(), sources: Any = None) -> Settings:
        """`config` with `overrides` merged in; ConfigError for an unknown code, blamed on
        the file or the command line it came from."""
        # validated before merging; rule names become codes in these copies
        selectors = {"select": list(overrides.select or []),
                     "extend-select": list(overrides.extend_select),
                     "ignore": list(overrides.ignore)}
        config = dataclasses.replace(
            config, select=None if config.select is None else list(config.select),
            extend_select=list(config.extend_select), ignore=list(config.ignore),
            per_file_ignores={glob: list(codes)
                              for glob, codes in config.per_file_ignores.items()})
        validate_codes(config, registry.rules, selectors)
        config = dataclasses.replace(
            config,
            select=selectors["select"] if overrides.select is not None else config.select,
            extend_select=[*config.extend_select, *selectors["extend-select"]],
            ignore=[*config.ignore, *selectors["ignore"]],
            max_code_bytes=(overrides.max_code_bytes if overrides.max_code_bytes is not None
                            else config.max_code_bytes))
        if registry.manager is not None:  # a manifest's registry has no configure hooks
            registry.manager.hook.modellint_configure(config=config)
        enabled = frozenset(select_codes(registry.rules, config.select, config.extend_select,
                                         config.ignore))
        static_rules = tuple(registry.rules[code] for code in sorted(enabled)
                             if is_static(registry.rules[code]))
        return cls(config, registry, enabled, static_rules, sources)

    @property
    def shown(self) -> frozenset[str]:
        """The codes this run reports: the enabled ones, and the engine's own unless
        ignored."""
        return shown_codes(self.config, self.enabled)

    def disabled_for(self, path: Path) -> frozenset[str]:
        """The codes (of every rule) hidden in the whole of `path`: not shown in this run, or
        turned off by per-file-ignores."""
        shown = self.shown
        return frozenset(set(self.registry.rules) - shown) | hidden_codes(self.config, shown,
                                                                          path)

    def rule_options(self) -> dict[str, Any]:
        return self.config.rule_options()

    def runtime(self, overrides: Overrides, progress: bool = False) -> RuntimeSettings:
        from modellint.runtime.specs import DEFAULT_TIMEOUT

        runtime = self.config.runtime or {}
        return RuntimeSettings(
            device=overrides.device or runtime.get("device") or "cpu",
            timeout=float(overrides.timeout or runtime.get("timeout") or DEFAULT_TIMEOUT),
            fail_on_unchecked=overrides.fail_on_unchecked or bool(
                runtime.get("fail-on-unchecked")),
            progress=progress)

    def run_codes(self) -> frozenset[str]:
        """The enabled codes `modellint run` checks."""
        return frozenset(code for code in self.enabled
                         if "run" in self.registry.rules[code].passes)


def config_for(overrides: Overrides, start: str | None) -> Config:
    """The configuration a request starts from: `--config`, else the nearest one above
    `start` (a path; None: the current folder)."""
    if overrides.config_file:
        path = Path(overrides.config_file)
        if not path.is_file():
            raise ConfigError(f"config file {overrides.config_file} does not exist")
        return load_config(path)
    return load_config(find_pyproject(Path(start or ".")))


def project_registry(config: Config, plugins: Iterable[str], allow_config_plugins: bool,
                     warn: Callable[[str], None] = _tell_stderr) -> Registry:
    """The plugins for `config`: the config's own `plugins = [...]` only when opted in
    (otherwise `warn` is told why they were not loaded)."""
    config_plugins = config.plugins
    if config_plugins and not config_plugins_allowed(allow_config_plugins):
        warn(config_plugins_refused(config_plugins, config.where()))
        config_plugins = []
    return load_registry(list(plugins), config_plugins=config_plugins, config_root=config.root)


def cache_for(config: Config, rules, sources=None, warn: Callable[[str], None] = _tell_stderr):
    """The results cache of a run with `rules` (None: no cache folder, or it cannot be
    used; `warn` says why)."""
    from modellint.static.cache import Cache, default_dir, settings_key

    directory = default_dir(config.root)
    if directory is None:
        return None
    cache = Cache(directory, settings_key(modellint.__version__, rules, config.rule_options(),
                                          sources), tree=(Path.cwd(), config.root))
    if cache.prepare():
        return cache
    if cache.problem:
        warn(f"{cache.problem}; the run goes on without it")
    return None


def linted_tree(config: Config, explicit_config: bool, paths: Sequence[str]) -> tuple[Path, ...]:
    """The folders a run lints, beyond which a link in them is not the run's to write through:
    each folder named (a named file's own folder) and the project whose config file was found
    for them. Never the current folder as such: run from a parent folder, it holds more than
    what was named (a --config kept elsewhere says nothing of where the project is either)."""
    named = tuple(Path(p) if os.path.isdir(p) else Path(p).parent for p in paths)
    return named if config.source is None or explicit_config else (config.root, *named)


def rule_classes(rules, load: Callable[[], Registry], texts=None
                 ) -> tuple[list, frozenset[str]]:
    """(the rule classes of a run whose registry came from the manifest (`rules`:
    RuleInfos), the trigger words of the rules left out): the built-in ones imported where
    the manifest says they are (with the `texts` it lints, those that can run on them:
    `builtin_rule_classes`); with a rule of an installed plugin, every plugin is loaded as
    usual (`load`: its hooks run)."""
    from modellint.plugins import builtin_rule_classes

    found = builtin_rule_classes(rules, texts)
    if found is not None:
        kept = {rule.code for rule in found}
        return found, frozenset(word for rule in rules if rule.code not in kept
                                for word in rule.triggers)
    registry = load()
    return [registry.rules[rule.code] for rule in rules], frozenset()


@record(frozen=True)
class CheckOptions:
    """What a `check` does beside selecting: fixes, the process pool, the cache, the runtime
    pass."""

    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    jobs: int = 1
    cache: bool = True
    runtime: bool = False
    # a progress line for the runtime pass
    progress: bool = False
    # the report's format: a run served from the cache reads the plugins' manifest only for
    # the formats that need nothing more of the rules
    format: str = "text"


class FileSettings:
    """The settings of each file of a run: those of the nearest `pyproject.toml` with a
    `[tool.modellint]` at or above its folder (ruff's rule, and what a run on that file alone,
    `--stdin-filename` and the language server give it), or the `--config` given, for all.
    A nested `aaa/pyproject.toml` thus governs the files under `aaa/` in a full run as in a
    pre-commit run, and no other file whichever file comes first."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.first = session.settings
        self.by_source: dict[Path | None, Settings] = {self.first.config.source: self.first}
        self.by_folder: dict[str, Settings] = {}
        # a folder as named -> its real path: most files of a run share their folder
        self._real_folders: dict[str, str] = {}
        # a path as named -> its settings: a run asks once to discover it, once to lint it
        self._by_path: dict[str, Settings] = {}

    def of(self, path: Path, is_dir: bool | None = None) -> Settings:
        """The settings of the file or folder `path`; `is_dir`: whether it is a folder, when
        the caller knows (a folder walk does: a stat of each file is a fifth of the walk)."""
        if self.session.overrides.config_file:
            return self.first
        named = str(path)
        found = self._by_path.get(named)
        if found is None:
            found = self._by_path[named] = self._of(named, is_dir)
        return found

    def _of(self, path: str, is_dir: bool | None) -> Settings:
        if is_dir is None:
            is_dir = os.path.isdir(path)
        named = path if is_dir else os.path.dirname(path) or "."
        folder = self._real_folders.get(named)
        if folder is None:
            folder = self._real_folders[named] = os.path.realpath(named)
        found = self.by_folder.get(folder)
        if found is None:
            # the folders up to one already looked up, or to one with a pyproject.toml, share
            # its answer: each pyproject.toml of the tree is read once, not once per folder
            chain: list[str] = []
            for candidate in (folder, *map(str, Path(folder).parents)):
                found = self.by_folder.get(candidate)
                if found is not None:
                    break
                chain.append(candidate)
                if os.path.isfile(os.path.join(candidate, "pyproject.toml")):
                    found = self._for(find_pyproject(Path(candidate)))
                    break
            else:
                found = self._for(None)
            for candidate in chain:
                self.by_folder[candidate] = found
        return found

    def _for(self, source: Path | None) -> Settings:
        found = self.by_source.get(source)
        if found is None:
            found = self.by_source[source] = self._load(source)
        return found

    def _load(self, source: Path | None) -> Settings:
        config = load_config(source)
        first = self.first
        if config.plugins or first.config.plugins:
            # its own plugins (or none where the first configuration loaded some)
            return Settings.resolve(config, self.session.load_registry(config),
                                    self.session.overrides)
        return Settings.resolve(config, first.registry, self.session.overrides, first.sources)

    def excluded(self, path: Path, is_dir: bool | None = None) -> bool:
        return is_excluded(self.of(path, is_dir).config, path)

    def groups(self) -> list[Settings]:
        return list(self.by_source.values())

    def rules(self) -> dict:
        return {code: rule for settings in self.groups()
                for code, rule in settings.registry.rules.items()}


@record
class Plan:
    """The files a check lints: (display, path, codes disabled in it) each, grouped by the
    settings that govern them."""

    tasks: list[tuple[str, Path, frozenset[str]]]
    # id of a file's settings -> the numbers of its tasks
    groups: dict[int, list[int]]
    files: FileSettings
    # what .gitignore files kept out of the walk (a named file is always linted, as in ruff)
    ignored: list[str]
    # the paths named (standard input's name, when it is linted)
    paths: list[str]
    stdin_name: str | None = None


@record
class CheckResult:
    """What a check found: every file's outcome (its findings, fixes, messages), the findings
    of the run in order, and what the runtime pass tried."""

    plan: Plan
    outcomes: list
    findings: list
    models: int = 0
    unchecked: int = 0
    fail_on_unchecked: bool = False
    # what was read from standard input (None: files were linted)
    stdin_source: bytes | None = None
    messages: list[str] = field(default_factory=list)


class Session:
    """The settings of one request, resolved once, and the use cases on them."""

    def __init__(self, settings: Settings, overrides: Overrides = Overrides(),
                 tell: Callable[[str], None] = _tell_stderr) -> None:
        self.settings = settings
        self.overrides = overrides
        self.tell = tell

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, overrides: Overrides = Overrides(), start: str | None = None, *,
             tell: Callable[[str], None] = _tell_stderr, manifest_store=None,
             select: bool = True) -> Session:
        """The session of a request on files at or under `start`: the configuration found
        for it (or `--config`), its plugins, the overrides merged in. With `manifest_store`
        (a run that may be served from the cache) the plugins' manifest stands for the
        plugins when it is up to date."""
        config = config_for(overrides, start)
        return cls.for_config(config, overrides, tell=tell, manifest_store=manifest_store,
                              select=select)

    @classmethod
    def for_config(cls, config: Config, overrides: Overrides = Overrides(), *,
                   tell: Callable[[str], None] = _tell_stderr, manifest_store=None,
                   select: bool = True) -> Session:
        """The session of `config`; `select=False`: a request that lists the rules (their
        selection is neither resolved nor validated)."""
        store = manifest_store(config) if manifest_store is not None else None
        manifest = light_registry(store) if store is not None else None
        registry: Registry | LightRegistry
        if manifest is None:
            registry = loaded = project_registry(
                config, overrides.plugins, overrides.allow_config_plugins, warn=tell)
            if store is not None:
                save_manifest(store, loaded)
        else:
            registry = manifest
        if not select:
            return cls(Settings(config, registry, frozenset()), overrides, tell)
        settings = Settings.resolve(config, registry, overrides,
                                    manifest.sources if manifest is not None else None)
        return cls(settings, overrides, tell)

    @classmethod
    def default(cls, select=None, ignore=None) -> Session:
        """The session of the Python API and the pytest plugin: no configuration file, the
        built-in and installed plugins, the caller's `select` and `ignore` (not validated:
        the API has always taken any prefix)."""
        registry = default_registry()
        config = Config(select=list(select) if select else None,
                        ignore=list(ignore) if ignore else [])
        enabled = frozenset(select_codes(registry.rules, config.select, (), config.ignore))
        return cls(Settings(config, registry, enabled), Overrides(
            select=tuple(select) if select else None, ignore=tuple(ignore or ())))

    def load_registry(self, config: Config) -> Registry:
        return project_registry(config, self.overrides.plugins,
                                self.overrides.allow_config_plugins, warn=self.tell)

    # -- check -----------------------------------------------------------------------------

    def tree(self, paths: Sequence[str]) -> tuple[Path, ...]:
        return linted_tree(self.settings.config, bool(self.overrides.config_file), paths)

    def static_options(self, settings: Settings, options: CheckOptions, project: list,
                       paths: list[str]):
        from modellint.static.needs import project_codes
        from modellint.static.runner import StaticOptions

        light = settings.sources is not None
        return StaticOptions(
            project=project,
            rules=[] if light else list(settings.static_rules),
            load_rules=(lambda texts: rule_classes(settings.static_rules,
                                                   lambda: self.load_registry(settings.config),
                                                   texts))
            if light else None,
            options=settings.rule_options(),
            fix=options.fix,
            unsafe_fixes=options.unsafe_fixes,
            diff=options.diff,
            jobs=options.jobs,
            cache=None if not options.cache or options.fix or options.diff else cache_for(
                settings.config, settings.static_rules, settings.sources, self.tell),
            project_codes=project_codes(settings.static_rules),
            # what links lead to beyond them is not the linted tree's to change
            tree=self.tree(paths),
        )

    def plan(self, paths: list[str], stdin_name: str | None = None) -> Plan:
        """The files to lint under `paths` (or standard input, named `stdin_name`), each with
        its settings."""
        from modellint.static.discover import NOTEBOOK_SUFFIXES, SUFFIXES, discover

        files = FileSettings(self)
        walked = (*SUFFIXES, *NOTEBOOK_SUFFIXES)
        tasks: list[tuple[str, Path, frozenset[str]]] = []
        ignored: list[str] = []
        found = ([(stdin_name, Path(stdin_name))] if stdin_name is not None
                 else discover(paths, files.excluded, self._warn, walked, ignored))
        groups: dict[int, list[int]] = {}
        for display, path in found:
            group = files.of(path)
            if (display.endswith(NOTEBOOK_SUFFIXES) and not group.config.notebooks
                    and display not in paths):
                continue  # `notebooks = false`: a walk takes no notebook, a named one is linted
            groups.setdefault(id(group), []).append(len(tasks))
            tasks.append((display, path, group.disabled_for(path)))
        return Plan(tasks, groups, files, ignored, paths, stdin_name)

    def _warn(self, message: str) -> None:  # a folder the walk cannot search, a .gitignore
        self.tell(f"warning: {message}")

    def check(self, paths: list[str], options: CheckOptions = CheckOptions()) -> CheckResult:
        """Lint the files under `paths`, as `modellint check PATH...` does."""
        for path in paths:
            check_named_file(path)
        return self.lint(self.plan(paths), options)

    def lint(self, plan: Plan, options: CheckOptions,
             read_stdin: Callable[[], bytes] | None = None) -> CheckResult:
        """The static pass (and, with `options.runtime`, the runtime pass) over the files of
        `plan`; `read_stdin` gives the text of standard input when the plan lints it."""
        from modellint.static.discover import NOTEBOOK_SUFFIXES, SUFFIXES
        from modellint.static.runner import index_with_source, lint_file, run

        tasks, groups, files = plan.tasks, plan.groups, plan.files
        config, paths = self.settings.config, plan.paths
        project: list = []
        if _reads_project(files, groups, tasks):
            # a run on a few files (pre-commit), or on an editor's buffer, still sees the whole
            # project's definitions
            from modellint.static.discover import project_files, project_root

            # a --config kept elsewhere (a home folder) says nothing of where the project is
            root = project_root(None if self.overrides.config_file else config.source, paths)
            if root is not None:
                walked = (*SUFFIXES, *NOTEBOOK_SUFFIXES)
                project = project_files(root, paths, files.excluded,
                                        walked if config.notebooks else SUFFIXES, self._warn)
        if options.runtime:
            from modellint.runtime.pass_ import torch_missing

            if torch_missing():
                raise UsageError(torch_missing())
        outcomes: list = [None] * len(tasks)
        index = None
        findings = []
        stdin_source = None
        # the runtime pass: models tried and not checked, over every settings group
        models = unchecked = 0
        fail_on_unchecked = self.overrides.fail_on_unchecked
        for group in files.groups():
            numbers = groups.get(id(group), [])
            if not numbers:
                continue
            opts = self.static_options(group, options, project,
                                       [] if plan.stdin_name is not None else paths)
            if plan.stdin_name is not None:
                assert read_stdin is not None
                stdin_source = read_stdin()
                if group.static_rules and opts.needs_index(tasks[:1]):
                    opts.index = index_with_source(tasks[0][0], stdin_source, opts)
                outcomes = [lint_file(*tasks[0], opts, stdin=stdin_source)]
                numbers = [0]
            else:
                if (len(groups) > 1 and group.static_rules
                        and opts.needs_index([tasks[n] for n in numbers])):
                    # one index for the whole run, whichever settings each file has
                    from modellint.static.index import index_files

                    if index is None:
                        index = index_files([(d, p) for d, p, _ in tasks] + list(project),
                                            opts.cache, options.jobs,
                                            linted=[display for display, _, _ in tasks])
                    opts.index = index
                for number, outcome in zip(numbers, run([tasks[n] for n in numbers], opts),
                                           strict=True):
                    outcomes[number] = outcome
            if opts.cache is not None:
                opts.cache.prune()
            found_here = [f for number in numbers for f in outcomes[number].findings]
            if options.runtime:
                from modellint.runtime.pass_ import LintedFile, run_runtime_pass

                # the files discovered once, with the model classes the static pass indexed
                linted = [LintedFile(tasks[n][0], os.path.realpath(tasks[n][1]),
                                     outcomes[n].classes) for n in numbers]
                runtime = group.runtime(self.overrides, options.progress)
                checked = run_runtime_pass(found_here, linted, group.config, group.registry,
                                           group.shown, runtime, self.tell)
                found_here = checked.findings
                models += checked.models
                unchecked += checked.unchecked
                fail_on_unchecked = fail_on_unchecked or runtime.fail_on_unchecked
            findings.extend(found_here)
        findings.sort(key=lambda f: f.sort_key())
        return CheckResult(plan, outcomes, findings, models, unchecked, fail_on_unchecked,
                           stdin_source)

    # -- rules -----------------------------------------------------------------------------

    def rule_docs(self, code: str | None = None) -> list:
        """Every rule in code order, or the one of `code` (UsageError for an unknown one)."""
        rules = self.settings.registry.rules
        if code is None:
            return [rules[known] for known in sorted(rules)]
        rule = rules.get(code.upper())
        if rule is None:
            raise UsageError(f"unknown rule code `{code}`"
                             f"{did_you_mean(code.upper(), rules)} (see `modellint rules`)")
        return [rule]

    # -- run -------------------------------------------------------------------------------

    def run_findings(self, raws: list[RawFinding], label: str, enabled=None) -> list:
        """The findings of a watched run's raw findings, through the one suppression step
        (`enabled`: the codes shown; by default the run codes selected)."""
        from modellint.codes import INTERNAL_ERROR
        from modellint.suppress import Suppressions
        from modellint.watching.findings import to_findings

        enabled = self.settings.run_codes() if enabled is None else enabled
        config = self.settings.config
        return to_findings(raws, self.settings.registry, enabled | {INTERNAL_ERROR},
                           Suppressions(config, shown_codes(config, enabled)), label=label)


def _reads_project(files: FileSettings, groups: dict[int, list[int]],
                   tasks: list[tuple[str, Path, frozenset[str]]]) -> bool:
    """Some file of the run runs a rule that reads the project's other files (after selection
    and per-file-ignores): only then is the project walked for its index."""
    from modellint.static.needs import project_codes, reads_project

    return any(reads_project(project_codes(group.static_rules),
                             (tasks[n][2] for n in groups.get(id(group), [])))
               for group in files.groups() if group.static_rules)


def manifest_store_for(options: CheckOptions, overrides: Overrides, stdin: bool):
    """Where the plugins' manifest is kept, for a run that may be served from the cache and
    loads only built-in and installed plugins; else None (the plugins are imported)."""

    def store(config: Config):
        from modellint.static.cache import default_dir, manifest_store

        if (not options.cache or options.fix or options.diff or options.runtime
                or overrides.plugins or config.plugins or options.format not in LIGHT_FORMATS
                or stdin or default_dir(config.root) is None):
            return None
        return manifest_store()

    return store


def check_named_file(path: str) -> None:
    """A file named on the command line is linted by its content: Python, or a Jupyter
    notebook. Anything else is refused with a message, rather than read as Python (a named
    notebook once got "All checks passed")."""
    from modellint.static.discover import NOTEBOOK_SUFFIXES, SUFFIXES, read_file_bytes
    from modellint.static.notebook import looks_like_notebook

    if os.path.isdir(path) or path.endswith((*SUFFIXES, ".pyw", *NOTEBOOK_SUFFIXES)):
        return
    try:
        data = read_file_bytes(path)
    except OSError:
        return  # reported as "cannot read file" where it is linted
    if looks_like_notebook(data):
        return
    first = data.split(b"\n", 1)[0]
    if first.startswith(b"#!") and b"python" in first:
        return
    if not os.path.splitext(path)[1]:
        # a script without a suffix (`bin/train`): Python when it parses as Python
        import ast
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(data)
            return
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            pass
    raise UsageError(
        f"{path}: neither Python source nor a Jupyter notebook; name .py, .pyi or .ipynb "
        "files, or folders (nothing was linted)")
