"""The results cache: findings per file, keyed by content and by everything that decides them.

Layout: `<cache dir>/<settings key>/<file key>.json`. The settings key hashes modellint's
version, the enabled rules, their options and the source of every module that defines a rule
(so editing or upgrading a plugin re-lints); the file key hashes the file's path and bytes and
the codes disabled for it. An entry is a header line (`modellint-cache <format> <signature>`)
and a JSON object (never pickle), validated on read, and written to a temporary file then
renamed, so two concurrent runs never see half an entry.

The linted repository may hold a cache folder of its own making, so nothing in one is trusted:
each entry carries an HMAC with a per-user key kept outside the repository (created 0600 in
`$XDG_CACHE_HOME/modellint` or `~/.cache/modellint`), so a planted entry is never believed; a
cache folder that is a link, one reached through a link inside the current folder or the
project (each name on the way is checked, each folder modellint makes too), or an existing
folder without modellint's CACHEDIR.TAG, is refused; pruning removes only files named like
modellint's entries, inside folders named like its settings keys, never through a link; and in
CI (`CI` or `GITHUB_ACTIONS` set) the cache inside the checkout is not used at all unless
MODELLINT_CACHE_DIR names one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import re
import stat
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from modellint.finding import Finding, Fix, Severity
from modellint.safe_write import UnsafePath, enter_folder, new_temporary

CACHE_DIR_NAME = ".modellint_cache"
ENV_VAR = "MODELLINT_CACHE_DIR"
FORMAT = 6  # 3: a notebook's findings carry `cell` and `notebook_line`; 4: the file's model classes beside its findings; 5: file keys hash the sha256 of the bytes; 6: an entry is a header line and its JSON as is
# an entry's first line: this and its signature (`Cache._mac`), then the JSON it signs
_HEADER = f"modellint-cache {FORMAT} ".encode()
MAX_AGE_SECONDS = 7 * 24 * 3600
KEY_FILE_NAME = "key"
FACTS_DIR_NAME = "facts"
# the outcomes of a run of several files as one entry (`put_run`), the latest KEPT_RUNS of them
RUNS_DIR_NAME = "runs"
KEPT_RUNS = 8
# beside this user's key: the plugin manifests (`modellint.plugins.light_registry`), which
# are about the Python environment, not about a project
MANIFEST_DIR_NAME = "registry"
KEY_BYTES = 32
MAX_ENTRY_BYTES = 64 * 1024 * 1024
# what modellint names its own: settings folders, entries and the temporary files of
# _write_atomically; pruning never removes anything else
_SETTINGS_NAME = re.compile(r"[0-9a-f]{32}")
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json|\.tmp-[A-Za-z0-9_]+")
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by modellint.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
_FINDING_KEYS = {
    "code": str, "name": str, "message": str, "severity": str, "path": str, "line": int,
    "column": int, "end_line": int, "end_column": int, "pass": str, "source_line": str,
    "statement_line": int,
}


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get("GITHUB_ACTIONS") == "true" or environ.get("CI", "").strip().lower() not in (
        "", "0", "false", "no", "off")


def default_dir(root: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """MODELLINT_CACHE_DIR, else `.modellint_cache` in the project; None (no cache) in CI, where
    the checkout is the untrusted input and a cache found in it must not decide results."""
    env = environ.get(ENV_VAR)
    if env:
        return Path(env)
    return None if in_ci(environ) else root / CACHE_DIR_NAME


def key_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where this user's cache key lives: outside any repository modellint reads."""
    base = environ.get("XDG_CACHE_HOME", "")
    # the XDG spec: a relative path is invalid and ignored
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "modellint"


def secret_key(directory: Path) -> bytes:
    """This user's key for cache entries, made on first use. OSError when it cannot be made or
    read, ValueError when the file is not one modellint can trust."""
    path = directory / KEY_FILE_NAME
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.path.lexists(path):
        fd, temp = new_temporary(directory, ".tmp-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(KEY_BYTES))  # what secrets.token_bytes does
            try:
                os.link(temp, path)  # never replaces a key that another run made meanwhile
            except FileExistsError:
                pass
            except OSError:
                os.replace(temp, path)  # no hard links here: losing a race costs a re-lint
        finally:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass
    data, info = _read_regular(path, KEY_BYTES + 1)
    if len(data) != KEY_BYTES:
        raise ValueError(f"{path} is not a modellint key ({len(data)} bytes)")
    if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o077):
        raise ValueError(f"{path} is not private to this user (owner or mode)")
    return data


def settings_key(version: str, rules: Iterable[Any], options: dict[str, Any],
                 sources: Mapping[str, tuple[str, str | None]] | None = None) -> str:
    """`rules`: rule classes, or `modellint.plugins.RuleInfo`s (a warm run's, from the plugin
    manifest, with `sources`: module -> (its file, the sha256 of its bytes, None when it could
    not be read)); the same rules give the same key either way."""
    digest = hashlib.sha256()
    digest.update(f"format={FORMAT};modellint={version};python={sys.version_info[:2]}".encode())
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    files: dict[str, str | None] = {}
    for rule in sorted(rules, key=lambda r: r.code):
        module, qualname = rule_identity(rule)
        digest.update(f";{rule.code}={module}.{qualname}".encode())
        if sources is not None:
            if module in sources:
                file, hashed = sources[module]
                files[file] = hashed
        else:
            loaded_file = getattr(sys.modules.get(module), "__file__", None)
            if loaded_file:
                files[loaded_file] = None
    for file in sorted(files):
        hashed = files[file] if sources is not None else source_digest(file)
        digest.update(bytes.fromhex(hashed) if hashed is not None else file.encode())
    return digest.hexdigest()[:32]


def rule_identity(rule: Any) -> tuple[str, str]:
    """(module, qualified name) of a rule class or of a `RuleInfo`."""
    if isinstance(rule, type):
        return rule.__module__, rule.__qualname__
    return rule.module, rule.qualname


def source_digest(file: str) -> str | None:
    """The sha256 of a rule module's source, None when it cannot be read."""
    try:
        return hashlib.sha256(Path(file).read_bytes()).hexdigest()
    except OSError:
        return None


def manifest_store(environ: Mapping[str, str] = os.environ) -> Cache | None:
    """Where the plugin manifests are kept, signed like cache entries: beside this user's key,
    outside any repository; None when that folder cannot be used."""
    directory = key_dir(environ)
    store = Cache(directory, MANIFEST_DIR_NAME, key_directory=directory)
    try:
        store.secret = secret_key(directory)
        os.makedirs(store.directory, mode=0o700, exist_ok=True)
        if not _is_real_dir(store.directory):
            return None
    except (OSError, ValueError, RuntimeError):
        return None
    return store


class Cache:
    def __init__(self, directory: Path, settings: str, key_directory: Path | None = None,
                 tree: tuple[Path, ...] = ()) -> None:
        self.root = directory
        # the folders (the current one, the project) in which no name on the way to the cache
        # may be a link: the repository holds them (`modellint.safe_write.enter_folder`)
        self.tree = tree
        self.settings = settings
        self.directory = directory / settings
        self.key_directory = key_directory
        # the project facts of files (`get_facts`), beside their findings
        self.facts_directory = self.directory / FACTS_DIR_NAME
        self.runs_directory = self.directory / RUNS_DIR_NAME
        self.secret = b""
        # why the cache is off, when the user should hear it (not for a read-only disk)
        self.problem: str | None = None

    def prepare(self) -> bool:
        """Check the folders are modellint's own, create them and load the key; False (cache
        off for this run) when that is not possible."""
        try:
            self.secret = secret_key(self.key_directory or key_dir())
        except ValueError as exc:
            self.problem = f"not using the cache: {exc}"
            return False
        except (OSError, RuntimeError):  # RuntimeError: no home folder to keep the key in
            return False
        try:
            self.problem = _claim(self.root, self.tree)
            if self.problem is None:
                self.directory.mkdir(exist_ok=True)
                if not _is_real_dir(self.directory):
                    self.problem = (f"not using the cache: {self.directory} is a link or not a "
                                    "folder")
                else:
                    os.utime(self.directory)
                    for folder in (self.facts_directory, self.runs_directory):
                        folder.mkdir(exist_ok=True)
                        if not _is_real_dir(folder):
                            self.problem = (f"not using the cache: {folder} is a link or not "
                                            "a folder")
        except OSError:
            return False
        return self.problem is None

    @staticmethod
    def file_key(display: str, data: bytes | None, disabled: frozenset[str], facts: str = "",
                 content: str | None = None) -> str:
        """`facts`: the digest of the project facts the file's findings depend on (the files
        it imports, `ProjectIndex.digest`), so that editing one of those re-lints it.
        `content`: the sha256 of `data`, when it is known (then `data` may be None)."""
        if content is None:
            assert data is not None
            content = hashlib.sha256(data).hexdigest()
        digest = hashlib.sha256(bytes.fromhex(content))
        digest.update(b"\0" + display.encode("utf-8", "surrogateescape"))
        digest.update(b"\0" + ",".join(sorted(disabled)).encode())
        digest.update(b"\0" + facts.encode())
        return digest.hexdigest()

    def get_facts(self, key: str, required: tuple[str, ...]) -> dict | None:
        """The JSON object stored under `key` among the project facts (`put_facts`), when it
        has the `required` keys."""
        found = self.get_facts_written(key, required)
        return found[0] if found is not None else None

    def get_facts_written(self, key: str, required: tuple[str, ...]
                          ) -> tuple[dict, os.stat_result] | None:
        """`get_facts`, with the stat of the entry (when it was written, by the clock of the
        file system that holds it)."""
        found = self._read_entry(self.facts_directory, key)
        if found is None or not set(required) <= found[0].keys():
            return None
        return found

    def put_facts(self, key: str, facts: dict) -> None:
        self._write_signed(self.facts_directory, key, facts)

    def put_facts_parts(self, key: str, parts: list[str]) -> None:
        """JSON objects the caller has encoded already, kept as one entry (one file to write,
        signed once) and read one at a time (`get_facts_part`)."""
        self._write_payload(self.facts_directory, key, "\n".join(parts).encode())

    def get_facts_part(self, key: str, part: int, required: tuple[str, ...]) -> dict | None:
        """The object number `part` of the entry `put_facts_parts` wrote under `key`, when it
        has the `required` keys; only that object is decoded."""
        found = self._read_payload(self.facts_directory, key)
        if found is None:
            return None
        # (JSON as `json.dumps` writes it has no line breaks: they separate the objects)
        parts = found[0].split(b"\n")
        try:
            stored = json.loads(parts[part])
        except (IndexError, ValueError):
            return None
        if not isinstance(stored, dict) or not set(required) <= stored.keys():
            return None
        return stored

    def get_manifest(self, key: str) -> dict | None:
        """A plugin manifest (`manifest_store`); reading it marks it used."""
        found = self._read_signed(self.directory, key)
        if found is not None:
            try:
                os.utime(self.directory / f"{key}.json")
            except OSError:
                pass
        return found

    def put_manifest(self, key: str, manifest: dict) -> None:
        """Store a manifest, and remove those of other environments unused for a week (one
        is written per Python environment and working folder on the path)."""
        self._write_signed(self.directory, key, manifest)
        now = time.time()
        try:
            with os.scandir(self.directory) as listing:
                for entry in listing:
                    if (entry.name != f"{key}.json" and _ENTRY_NAME.fullmatch(entry.name)
                            and entry.is_file(follow_symlinks=False)
                            and now - entry.stat(follow_symlinks=False).st_mtime
                            > MAX_AGE_SECONDS):
                        os.unlink(entry.path)
        except OSError:
            pass

    def _read_signed(self, folder: Path, key: str) -> dict | None:
        """The JSON object stored under `key` in `folder`, or None: missing, corrupt, of another
        format, or not signed with this user's key (forged) — never trusted."""
        found = self._read_entry(folder, key)
        return found[0] if found is not None else None

    def _read_entry(self, folder: Path, key: str) -> tuple[dict, os.stat_result] | None:
        """`_read_signed`, with the stat of the entry's file."""
        found = self._read_payload(folder, key)
        if found is None:
            return None
        try:
            stored = json.loads(found[0])
        except ValueError:
            return None
        return (stored, found[1]) if isinstance(stored, dict) else None

    def _read_payload(self, folder: Path, key: str) -> tuple[bytes, os.stat_result] | None:
        """The payload stored under `key` in `folder` and the stat of its file, or None:
        missing, of another format, or not signed with this user's key (forged)."""
        try:
            raw, info = _read_regular(folder / f"{key}.json", MAX_ENTRY_BYTES)
            header, _, payload = raw.partition(b"\n")
            if not header.startswith(_HEADER):
                return None
            mac = header[len(_HEADER):].decode("ascii")
            if not hmac.compare_digest(mac, self._mac(key, payload)):
                return None
            return payload, info
        except (OSError, ValueError, TypeError):
            return None

    def _write_signed(self, folder: Path, key: str, stored: dict) -> None:
        self._write_payload(folder, key, json.dumps(stored).encode())

    def _write_payload(self, folder: Path, key: str, payload: bytes) -> None:
        try:
            _write_atomically(folder / f"{key}.json",
                              _HEADER + self._mac(key, payload).encode() + b"\n" + payload)
        except OSError:
            pass  # a read-only or full disk only costs speed

    def _mac(self, key: str, payload: bytes) -> str:
        # the settings and file keys are signed too: an entry cannot be moved to another file
        # or to other settings
        message = f"{self.settings}/{key}\0".encode() + payload
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def get(self, key: str) -> Outcome | None:
        """(findings, model classes) stored for `key`, or None."""
        stored = self._read_signed(self.directory, key)
        if stored is None:
            return None  # missing, corrupt or forged: lint again, never trust it
        return _decode(stored)

    def put(self, key: str, findings: list[Finding],
            classes: tuple[tuple[str, int], ...] = ()) -> None:
        self._write_signed(self.directory, key, _encode(findings, classes))

    def get_run(self, key: str) -> RunOutcomes:
        """The outcomes kept as one entry (`put_run`); none when it cannot be read."""
        found = self._read_payload(self.runs_directory, key)
        return RunOutcomes(found[0] if found is not None else b"")

    def put_run(self, key: str, kept: Iterable[list],
                outcomes: dict[str, tuple[str, Outcome]]) -> None:
        """The outcomes of the files of a run of several as one entry, one line per file: the
        `kept` lines (items of `RunOutcomes.items`) and the `outcomes` (display path -> (the
        file's key, its outcome)). A rerun reads one entry instead of one per file, and a run
        writes one. Only the latest few are kept."""
        lines = [*kept, *([display, file_key, _encode(findings, classes)]
                          for display, (file_key, (findings, classes)) in outcomes.items())]
        self._write_payload(self.runs_directory, key,
                            "\n".join(map(json.dumps, lines)).encode())
        try:
            with os.scandir(self.runs_directory) as listing:
                runs = [entry for entry in listing if _ENTRY_NAME.fullmatch(entry.name)
                        and entry.is_file(follow_symlinks=False)]
            runs.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime_ns)
            for entry in runs[:-KEPT_RUNS]:
                os.unlink(entry.path)
        except OSError:
            pass

    def prune(self) -> None:
        """Remove the results of settings unused for a week: only modellint's own entries, in
        folders named like its settings keys, never through a link."""
        now = time.time()
        try:
            with os.scandir(self.root) as listing:
                siblings = list(listing)
        except OSError:
            return
        for entry in siblings:
            if entry.name == self.settings or not _SETTINGS_NAME.fullmatch(entry.name):
                continue
            try:
                if (entry.is_dir(follow_symlinks=False)
                        and now - entry.stat(follow_symlinks=False).st_mtime > MAX_AGE_SECONDS):
                    _remove_entries(Path(entry.path))
            except OSError:
                continue


Outcome = tuple[list[Finding], tuple[tuple[str, int], ...]]


class RunOutcomes:
    """The outcomes of a run of several files kept as one entry (`Cache.put_run`), one line
    `[display path, the file's key, its outcome]` per file: a run on one file of the project
    decodes its own line alone, a run of several decodes them all at once (`items`)."""

    def __init__(self, payload: bytes) -> None:
        self._payload = payload
        self._items: dict[str, list] | None = None

    def items(self) -> dict[str, list]:
        """Display path -> its line, decoded (the outcome not made into findings yet)."""
        if self._items is None:
            self._items = {}
            try:
                # (JSON as `json.dumps` writes it has no line breaks: they separate the files)
                lines = json.loads(b"[" + self._payload.replace(b"\n", b",") + b"]")
            except ValueError:
                lines = []
            for item in lines:
                if _is_run_line(item):
                    self._items[item[0]] = item
        return self._items

    def get(self, display: str) -> tuple[str, Outcome] | None:
        """(the file's key, its outcome) kept for `display`, or None."""
        if self._items is not None:
            item = self._items.get(display)
        else:
            payload = b"\n" + self._payload
            start = payload.find(b"\n[" + json.dumps(display).encode() + b", ")
            end = payload.find(b"\n", start + 1)
            try:
                item = None if start < 0 else json.loads(
                    payload[start + 1:end if end >= 0 else len(payload)])
            except ValueError:
                return None
        if not _is_run_line(item) or item[0] != display:
            return None
        outcome = _decode(item[2])
        return (item[1], outcome) if outcome is not None else None


def _is_run_line(item: Any) -> TypeGuard[list]:
    """`[display path, file key, outcome]`, as `Cache.put_run` writes a line."""
    return (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
            and isinstance(item[1], str) and isinstance(item[2], dict))


def _encode(findings: list[Finding], classes: tuple[tuple[str, int], ...]) -> dict:
    entries = []
    for f in findings:
        item = f.to_json()
        item["source_line"] = f.source_line
        item["statement_line"] = f.statement_line
        item["notebook_line"] = f.notebook_line
        item["fix"] = (
            None if f.fix is None else {"description": f.fix.description, "safe": f.fix.safe}
        )
        entries.append(item)
    return {"findings": entries, "classes": [list(c) for c in classes]}


def _decode(stored: dict) -> Outcome | None:
    try:
        findings = [_finding(item) for item in _entries(stored.get("findings"))]
        return findings, _classes(stored.get("classes"))
    except (ValueError, KeyError, TypeError):
        return None


def _claim(root: Path, tree: tuple[Path, ...]) -> str | None:
    """None when `root` is modellint's cache folder (made so if it is new or empty), else why
    it is not used: a link, reached through a link in `tree`, not a folder, or a folder of
    someone else's."""
    try:
        enter_folder(root.parent, tree, create=True)
    except UnsafePath as exc:
        return f"not using the cache folder {root}: {exc}"
    if not os.path.lexists(root):
        root.mkdir(exist_ok=True)
    if not _is_real_dir(root):
        return f"not using the cache folder {root}: it is a link or not a folder"
    tag = root / "CACHEDIR.TAG"
    try:
        ours = _read_regular(tag, len(_CACHEDIR_TAG) + 1)[0] == _CACHEDIR_TAG.encode()
    except OSError:
        ours = False
    if not ours:
        with os.scandir(root) as listing:
            if any(listing):
                return (f"not using the cache folder {root}: it is not empty and has no "
                        "CACHEDIR.TAG written by modellint (remove it, or point "
                        f"{ENV_VAR} to a folder of modellint's own)")
        _write_atomically(tag, _CACHEDIR_TAG.encode())
    ignore = root / ".gitignore"
    if not os.path.lexists(ignore):
        _write_atomically(ignore, b"# created by modellint\n*\n")
    return None


def _is_real_dir(path: Path) -> bool:
    return stat.S_ISDIR(os.lstat(path).st_mode)


def _remove_entries(folder: Path) -> None:
    """Delete modellint's entries in `folder` (regular files named like them), then the folder
    if nothing else is left in it."""
    with os.scandir(folder) as listing:
        for child in listing:
            if _ENTRY_NAME.fullmatch(child.name) and child.is_file(follow_symlinks=False):
                os.unlink(child.path)
            elif child.name in (FACTS_DIR_NAME, RUNS_DIR_NAME) and child.is_dir(
                    follow_symlinks=False):
                _remove_entries(Path(child.path))
    try:
        os.rmdir(folder)
    except OSError:
        pass  # something that is not modellint's is in it: leave it


def _read_regular(path: Path, limit: int) -> tuple[bytes, os.stat_result]:
    """Up to `limit` bytes of a regular file, never through a link (a planted FIFO or device
    must not hang the run); OSError otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit), info
    finally:
        os.close(fd)


def _entries(findings: Any) -> list[dict[str, Any]]:
    if not isinstance(findings, list):
        raise ValueError("bad cache entry")
    for item in findings:
        if not isinstance(item, dict):
            raise ValueError("bad cache entry")
        for key, kind in _FINDING_KEYS.items():
            if not isinstance(item.get(key), kind):
                raise ValueError(f"bad cache field {key}")
        Severity(item["severity"])
        cell = item.get("cell")
        if cell is not None and (not isinstance(cell, int) or isinstance(cell, bool)):
            raise ValueError("bad cache field cell")
        if not isinstance(item.get("notebook_line", 0), int):
            raise ValueError("bad cache field notebook_line")
        fix = item.get("fix")
        if fix is not None and not (
            isinstance(fix, dict) and isinstance(fix.get("safe"), bool)
            and isinstance(fix.get("description"), str)
        ):
            raise ValueError("bad cache fix")
    return findings


def _classes(classes: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(classes, list) or not all(
        isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and c[0].isidentifier()
        and isinstance(c[1], int) for c in classes
    ):
        raise ValueError("bad cache classes")
    return tuple((name, line) for name, line in classes)


def _finding(item: dict[str, Any]) -> Finding:
    fix = item.get("fix")
    return dataclasses.replace(
        Finding.from_json(item), source_line=item["source_line"],
        statement_line=item["statement_line"], notebook_line=item.get("notebook_line", 0),
        fix=None if fix is None else Fix((), fix["description"], fix["safe"]))


def _write_atomically(path: Path, data: bytes) -> None:
    fd, temp = new_temporary(path.parent, ".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
