"""The results cache: findings per file, keyed by content and by everything that decides them.

Layout: `<cache dir>/<settings key>/<file key>.json`. The settings key hashes modellint's
version, the enabled rules, their options and the source of every module that defines a rule
(so editing or upgrading a plugin re-lints); the file key hashes the file's path and bytes and
the codes disabled for it. Entries are JSON (never pickle), validated on read, and written to a
temporary file then renamed, so two concurrent runs never see half an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from modellint.finding import Finding, Fix, Severity

CACHE_DIR_NAME = ".modellint_cache"
ENV_VAR = "MODELLINT_CACHE_DIR"
FORMAT = 1
MAX_AGE_SECONDS = 7 * 24 * 3600
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


def default_dir(root: Path) -> Path:
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else root / CACHE_DIR_NAME


def settings_key(version: str, rules: Iterable[type], options: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(f"format={FORMAT};modellint={version};python={sys.version_info[:2]}".encode())
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    sources: set[str] = set()
    for rule in sorted(rules, key=lambda r: r.code):
        digest.update(f";{rule.code}={rule.__module__}.{rule.__qualname__}".encode())
        module = sys.modules.get(rule.__module__)
        if module is not None and getattr(module, "__file__", None):
            sources.add(module.__file__)
    for source in sorted(sources):
        try:
            digest.update(hashlib.sha256(Path(source).read_bytes()).digest())
        except OSError:
            digest.update(source.encode())
    return digest.hexdigest()[:32]


class Cache:
    def __init__(self, directory: Path, settings: str) -> None:
        self.root = directory
        self.directory = directory / settings

    def prepare(self) -> bool:
        """Create the folders; False (cache off for this run) when that is not possible."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tag = self.root / "CACHEDIR.TAG"
            if not tag.exists():
                _write_atomically(tag, _CACHEDIR_TAG.encode())
            ignore = self.root / ".gitignore"
            if not ignore.exists():
                _write_atomically(ignore, b"# created by modellint\n*\n")
            os.utime(self.directory)
        except OSError:
            return False
        return True

    @staticmethod
    def file_key(display: str, data: bytes, disabled: frozenset[str]) -> str:
        digest = hashlib.sha256(data)
        digest.update(b"\0" + display.encode("utf-8", "surrogateescape"))
        digest.update(b"\0" + ",".join(sorted(disabled)).encode())
        return digest.hexdigest()

    def get(self, key: str) -> list[Finding] | None:
        try:
            raw = (self.directory / f"{key}.json").read_bytes()
            return [_finding(item) for item in _entries(json.loads(raw))]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or corrupt: lint again, never trust it

    def put(self, key: str, findings: list[Finding]) -> None:
        entries = []
        for f in findings:
            item = f.to_json()
            item["source_line"] = f.source_line
            item["statement_line"] = f.statement_line
            item["fix"] = (
                None if f.fix is None else {"description": f.fix.description, "safe": f.fix.safe}
            )
            entries.append(item)
        try:
            _write_atomically(
                self.directory / f"{key}.json",
                json.dumps({"format": FORMAT, "findings": entries}).encode(),
            )
        except OSError:
            pass  # a read-only or full disk only costs speed

    def prune(self) -> None:
        """Remove the results of settings unused for a week."""
        now = time.time()
        try:
            siblings = list(self.root.iterdir())
        except OSError:
            return
        for entry in siblings:
            if entry == self.directory or not entry.is_dir():
                continue
            try:
                if now - entry.stat().st_mtime > MAX_AGE_SECONDS:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                continue


def _entries(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("unknown cache format")
    findings = data["findings"]
    if not isinstance(findings, list):
        raise ValueError("bad cache entry")
    for item in findings:
        if not isinstance(item, dict):
            raise ValueError("bad cache entry")
        for key, kind in _FINDING_KEYS.items():
            if not isinstance(item.get(key), kind):
                raise ValueError(f"bad cache field {key}")
        Severity(item["severity"])
        fix = item.get("fix")
        if fix is not None and not (
            isinstance(fix, dict) and isinstance(fix.get("safe"), bool)
            and isinstance(fix.get("description"), str)
        ):
            raise ValueError("bad cache fix")
    return findings


def _finding(item: dict[str, Any]) -> Finding:
    finding = Finding.from_json(item)
    finding.source_line = item["source_line"]
    finding.statement_line = item["statement_line"]
    fix = item.get("fix")
    if fix is not None:
        finding.fix = Fix((), fix["description"], fix["safe"])
    return finding


def _write_atomically(path: Path, data: bytes) -> None:
    fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
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
