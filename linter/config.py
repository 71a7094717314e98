"""`[tool.modellint]` in the nearest pyproject.toml, merged with command-line options."""

from __future__ import annotations

import fnmatch
import math
import os
import re
import reprlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from modellint.records import record

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KNOWN_KEYS = frozenset(
    {
        "select", "extend-select", "ignore", "exclude", "per-file-ignores", "plugins",
        "target-torch-version", "target-gpu-memory", "runtime", "notebooks", "max-code-bytes",
        "baseline-accept",
    }
)
RUNTIME_KEYS = frozenset({"device", "timeout", "models", "fail-on-unchecked"})
MODEL_KEYS = frozenset({"target", "kwargs", "inputs"})
DEFAULT_TORCH_VERSION = (2, 6)
# seconds per model: a day is more than any model needs, and far below the values that overflow
# the workers' timers (1e10 s raises OverflowError in faulthandler)
MAX_TIMEOUT = 24 * 60 * 60
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")
# bytes of code in one file (a .py file, or a notebook's code cells together) that are linted:
# LibCST's tree takes 0.4-2.5 GB per MiB of code (bench/memory_bench.py), so a file of this
# size takes 0.2-0.4 GB (real model code) to 1.5 GB (the densest code), within a CI runner's
# 7 GiB for everything; a larger one is one ML001 and is not parsed
DEFAULT_MAX_CODE_BYTES = 512 * 1024
# no file holds more code than this: a notebook past it is never read (notebook.MAX_BYTES)
MAX_CODE_BYTES = 100 * 1024 * 1024


# letters typed for the digits they look like (`ML1O3` is ML103, not ML113)
_LOOKALIKE = str.maketrans("OoIl", "0011")


def closest(word: str, choices) -> str | None:
    """The choice closest to `word`, or None when none is close."""
    import difflib

    seen = word.translate(_LOOKALIKE)

    def closeness(choice: str) -> tuple[float, int]:
        # ties (`ML1O5`: ML105 or ML315?) go to the choice with more characters in place
        shape = choice.translate(_LOOKALIKE)
        in_place = sum(a == b for a, b in zip(seen, shape, strict=False))
        return difflib.SequenceMatcher(None, seen, shape).ratio(), in_place

    scored = [(closeness(choice), choice) for choice in sorted(choices)]
    best = max(scored, default=None)
    return best[1] if best and best[0][0] >= 0.6 else None


def did_you_mean(word: str, choices) -> str:
    """` (did you mean `x`?)` for the closest of `choices`, or "" when none is close."""
    best = closest(word, choices)
    return f" (did you mean `{best}`?)" if best is not None else ""


class ConfigError(Exception):
    """A configuration problem (exit 2); the message names the key and the file."""


@record
class Config:
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    plugins: list[str] = field(default_factory=list)
    target_torch_version: tuple[int, ...] = DEFAULT_TORCH_VERSION
    target_gpu_memory: str | None = None
    runtime: dict[str, Any] = field(default_factory=dict)
    # walk folders for *.ipynb too (a notebook named on the command line is always linted)
    notebooks: bool = True
    max_code_bytes: int = DEFAULT_MAX_CODE_BYTES
    # `modellint run --compare`: the changes from the baseline that are expected (ML33x, or
    # ML33x:GLOB of the change's subject)
    baseline_accept: list[str] = field(default_factory=list)
    # directory of the pyproject.toml the settings came from (patterns are relative to it)
    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None
    # the keys `source` set (the rest are defaults), for --show-settings
    keys: frozenset[str] = frozenset()

    def rule_options(self) -> dict[str, Any]:
        return {
            "target_torch_version": self.target_torch_version,
            "target_gpu_memory": self.target_gpu_memory,
            # read by the engine (and part of the cache's settings key, as the rules' options)
            "max_code_bytes": self.max_code_bytes,
        }

    def where(self) -> str:
        return str(self.source) if self.source else "the command line"


def _shown(value: Any) -> str:
    """A configuration value in an error message: a value the repository made huge or deeply
    nested is shortened, not printed whole."""
    return _SHORT_REPR.repr(value)


_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 60


def _resolve(path: Path) -> Path:
    # Path.resolve() raises RuntimeError on a symlink loop; realpath stops at the loop
    return Path(os.path.realpath(path))


def _warn_stderr(message: str) -> None:
    from modellint.report import printable

    print(f"modellint: warning: {printable(message)}", file=sys.stderr)


def find_pyproject(start: Path, warn: Callable[[str], None] = _warn_stderr) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has a [tool.modellint] table.

    One that cannot be read as TOML is an error, not skipped: it may hold the settings (an
    `ignore` silently dropped would change the results). One that is a link to a file outside
    its own folder is neither read nor used (`warn` says so): the repository may have planted
    it to have modellint read, and quote, a file elsewhere."""
    from modellint.static.discover import inside_folder

    start = _resolve(start)
    directory = start if os.path.isdir(start) else start.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if os.path.islink(path) and not inside_folder(str(_resolve(path)), str(candidate)):
            warn(f"not reading {path}: it is a link to a file outside its folder (name it "
                 "with --config to use it)")
            continue
        if os.path.isfile(path) and "modellint" in _tool_table(_read_toml(path), path):
            return path
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    from modellint.static.discover import read_file_bytes

    try:
        return tomllib.loads(read_file_bytes(path).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path} is not valid TOML: a value is nested too deeply") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None


def _tool_table(data: dict[str, Any], path: Path) -> dict[str, Any]:
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table, got {_shown(tool)}")
    return tool


def load_config(path: Path | None) -> Config:
    if path is None:
        return Config()
    data = _read_toml(path)
    table = _tool_table(data, path).get("modellint")
    if table is None:
        if path.name == "pyproject.toml":
            table = {}
        else:
            # a standalone modellint.toml may hold the settings at top level
            table = data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.modellint` must be a table, got {_shown(table)}")
    return parse_table(table, path)


def _string_list(value: Any, key: str, path: Path | None) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: `{key}` must be a list of strings, got {_shown(value)}")
    return list(value)


def _code_list(value: Any, key: str, path: Path | None) -> list[str]:
    codes = _string_list(value, key, path)
    # "" is a prefix of every code: `ignore = [""]` would silence every rule
    if any(not code.strip() for code in codes):
        raise ConfigError(f"{path}: `{key}` has an empty rule code")
    return codes


def check_timeout(value: Any, where: str) -> float:
    """A per-model timeout in seconds: a number in (0, MAX_TIMEOUT]; not a bool, inf or nan."""
    if (
        isinstance(value, bool) or not isinstance(value, (int, float))
        or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT
    ):
        raise ConfigError(
            f"{where} must be a number of seconds above 0 and at most {MAX_TIMEOUT}, got {_shown(value)}"
        )
    return float(value)


def check_max_code_bytes(value: Any, where: str) -> int:
    """A number of bytes of code: an integer from 1 to MAX_CODE_BYTES; not a bool."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_CODE_BYTES:
        raise ConfigError(
            f"{where} must be a whole number of bytes from 1 to {MAX_CODE_BYTES}, got {_shown(value)}")
    return value


def parse_table(table: dict[str, Any], path: Path | None) -> Config:
    config = Config(root=path.parent.resolve() if path else Path.cwd(), source=path,
                    keys=frozenset(table))
    for key in table:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"{path}: unknown key `{key}` in [tool.modellint]"
                              f"{did_you_mean(key, KNOWN_KEYS)}")
    if "select" in table:
        config.select = _code_list(table["select"], "select", path)
    config.extend_select = _code_list(table.get("extend-select", []), "extend-select", path)
    config.ignore = _code_list(table.get("ignore", []), "ignore", path)
    config.exclude = _string_list(table.get("exclude", []), "exclude", path)
    config.plugins = _string_list(table.get("plugins", []), "plugins", path)
    config.notebooks = table.get("notebooks", True)
    if not isinstance(config.notebooks, bool):
        raise ConfigError(f"{path}: `notebooks` must be true or false, got {_shown(config.notebooks)}")
    if "max-code-bytes" in table:
        config.max_code_bytes = check_max_code_bytes(table["max-code-bytes"],
                                                     f"{path}: `max-code-bytes`")
    if "baseline-accept" in table:
        config.baseline_accept = _baseline_accept(table["baseline-accept"], path)
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{path}: `per-file-ignores` must be a table of glob = [codes]")
    config.per_file_ignores = {
        glob: _code_list(codes, f"per-file-ignores.{glob}", path) for glob, codes in pfi.items()
    }
    if "target-torch-version" in table:
        value = table["target-torch-version"]
        if not isinstance(value, str) or not _VERSION.match(value):
            raise ConfigError(
                f"{path}: `target-torch-version` must be a version string such as \"2.4\", "
                f"got {_shown(value)}"
            )
        config.target_torch_version = tuple(int(p) for p in value.split("."))
    if "target-gpu-memory" in table:
        value = table["target-gpu-memory"]
        if not isinstance(value, str) or not re.match(r"^\d+(\.\d+)?\s*[KMGT]i?B$", value):
            raise ConfigError(
                f"{path}: `target-gpu-memory` must be a size such as \"80GB\", got {_shown(value)}"
            )
        config.target_gpu_memory = value
    runtime = table.get("runtime", {})
    if not isinstance(runtime, dict):
        raise ConfigError(f"{path}: `runtime` must be a table")
    for key in runtime:
        if key not in RUNTIME_KEYS:
            raise ConfigError(f"{path}: unknown key `runtime.{key}` in [tool.modellint.runtime]"
                              f"{did_you_mean(key, RUNTIME_KEYS)}")
    if "timeout" in runtime:
        check_timeout(runtime["timeout"], f"{path}: `runtime.timeout`")
    if not isinstance(runtime.get("fail-on-unchecked", False), bool):
        raise ConfigError(f"{path}: `runtime.fail-on-unchecked` must be true or false, "
                          f"got {_shown(runtime['fail-on-unchecked'])}")
    if "device" in runtime and not isinstance(runtime["device"], str):
        raise ConfigError(f"{path}: `runtime.device` must be a string such as \"cpu\"")
    models = runtime.get("models", [])
    if not isinstance(models, list):
        raise ConfigError(f"{path}: `runtime.models` must be an array of tables ([[...]])")
    for index, model in enumerate(models):
        if not isinstance(model, dict) or not isinstance(model.get("target"), str):
            raise ConfigError(f"{path}: `runtime.models[{index}]` needs a `target` string")
        for key in model:
            if key not in MODEL_KEYS:
                raise ConfigError(f"{path}: unknown key `runtime.models[{index}].{key}`"
                                  f"{did_you_mean(key, MODEL_KEYS)}")
    config.runtime = runtime
    return config


def _baseline_accept(entries: Any, path: Path | None) -> list[str]:
    """`baseline-accept = ["ML331", "ML330:Net.head.*"]`: baseline codes, each optionally with
    a glob of the changes' subjects (a parameter, layer, model or optimizer)."""
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConfigError(f"{path}: `baseline-accept` must be a list of strings such as "
                          f"\"ML331\" or \"ML330:Net.head.*\", got {_shown(entries)}")
    for entry in entries:
        if not re.fullmatch(r"ML33\d(:.+)?", entry):
            raise ConfigError(f"{path}: `baseline-accept` entry {_shown(entry)} is not a "
                              f"baseline code ML330-ML339, alone or with `:GLOB` "
                              f"(\"ML330:Net.head.*\")")
    return list(entries)


def matches(code: str, selectors: list[str]) -> bool:
    return any(sel == "ALL" or code.startswith(sel) for sel in selectors)


def validate_codes(config: Config, rules: Mapping[str, Any], cli: dict[str, list[str]]) -> None:
    """Every selector must be ALL, a prefix of at least one code of `rules`, or a rule's name
    (`module-in-plain-container`, as ruff takes names); a name is replaced by its code where
    it stands, in `config` and in `cli`'s lists alike."""
    codes_by_name = {rule.name.upper(): code for code, rule in rules.items()}
    known = set(rules)
    sources = {
        "select": (config.select or [], config.where()),
        "extend-select": (config.extend_select, config.where()),
        "ignore": (config.ignore, config.where()),
    }
    for glob, codes in config.per_file_ignores.items():
        sources[f"per-file-ignores.{glob}"] = (codes, config.where())
    for key, values in cli.items():
        sources[f"--{key}"] = (values, "the command line")
    for key, (values, where) in sources.items():
        for position, selector in enumerate(values):
            if not selector.strip():  # a prefix of every code
                raise ConfigError(f"{where}: empty rule code in `{key}`")
            if selector.upper() in codes_by_name:
                values[position] = codes_by_name[selector.upper()]
            elif selector != "ALL" and not any(code.startswith(selector) for code in known):
                hint = (did_you_mean(selector.lower(), [name.lower() for name in codes_by_name])
                        if "-" in selector else did_you_mean(selector, known))
                raise ConfigError(f"{where}: unknown rule code `{selector}` in `{key}`{hint}")


def select_codes(rules: Mapping[str, Any], select, extend_select=(), ignore=()) -> set[str]:
    """The codes of `rules` a selection enables: the default-on rules, or those `select`
    matches (None: not given); plus those `extend_select` matches; minus those `ignore`
    matches. The one selection of every front door."""
    if select is None:
        base = {code for code, rule in rules.items() if rule.default_enabled}
    else:
        base = {code for code in rules if matches(code, list(select))}
    base |= {code for code in rules if matches(code, list(extend_select))}
    return {code for code in base if not matches(code, list(ignore))}


def enabled_codes(config: Config, rules: dict[str, Any]) -> set[str]:
    """Default-on rules, or `select`; plus `extend-select`; minus `ignore`."""
    return select_codes(rules, config.select, config.extend_select, config.ignore)


def file_ignores(config: Config, path: Path) -> frozenset[str]:
    """Codes ignored for `path` by per-file-ignores (globs relative to the config's folder)."""
    if not config.per_file_ignores:
        return frozenset()
    try:
        relative = _resolve(path).relative_to(config.root).as_posix()
    except ValueError:
        relative = path.as_posix()
    codes: set[str] = set()
    for glob, selectors in config.per_file_ignores.items():
        if fnmatch.fnmatch(relative, glob) or fnmatch.fnmatch(path.name, glob):
            codes.update(selectors)
    return frozenset(codes)


def is_excluded(config: Config, path: Path) -> bool:
    if not config.exclude:
        return False
    try:
        relative = _resolve(path).relative_to(config.root).as_posix()
    except ValueError:
        relative = path.as_posix()
    parts = relative.split("/")
    for glob in config.exclude:
        pattern = glob.rstrip("/")
        if fnmatch.fnmatch(relative, pattern) or any(fnmatch.fnmatch(p, pattern) for p in parts):
            return True
        if relative.startswith(pattern + "/"):
            return True
    return False
