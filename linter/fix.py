"""Applying fixes: combine every applicable fix of a file, re-parse, write atomically."""

from __future__ import annotations

import ast
import difflib
import os
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path

import libcst as cst

from modellint.finding import Finding


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, cst.CSTNode]) -> None:
        super().__init__()
        self.replacements = replacements
        self.applied: set[int] = set()

    def on_leave(self, original_node, updated_node):
        replacement = self.replacements.get(id(original_node))
        if replacement is None:
            return updated_node
        self.applied.add(id(original_node))
        return replacement


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.safe or unsafe)


def apply_fixes(
    module: cst.Module, findings: Iterable[Finding], unsafe: bool
) -> tuple[str, int]:
    """(new source, number of findings fixed). Fixes whose nodes overlap an earlier fix are
    left for the next round."""
    replacements: dict[int, cst.CSTNode] = {}
    owners: list[tuple[Finding, list[int]]] = []
    for finding in findings:
        if not applicable(finding, unsafe):
            continue
        keys = [id(old) for old, _ in finding.fix.replacements]
        if any(key in replacements for key in keys):
            continue
        for old, new in finding.fix.replacements:
            replacements[id(old)] = new
        owners.append((finding, keys))
    if not replacements:
        return module.code, 0
    transformer = _Replace(replacements)
    new_module = module.visit(transformer)
    fixed = sum(1 for _, keys in owners if all(k in transformer.applied for k in keys))
    return new_module.code, fixed


def check_parses(source: str) -> str | None:
    """None when `source` is valid Python, else the reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CPython's SyntaxWarnings are not ours to print
            ast.parse(source)
        cst.parse_module(source)
    except (SyntaxError, cst.ParserSyntaxError, ValueError, RecursionError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def unified_diff(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True),
            fromfile=f"a/{path}", tofile=f"b/{path}",
        )
    )


class WriteError(Exception):
    pass


def write_atomically(path: Path, data: bytes, expected_old: bytes) -> None:
    """Replace `path` with `data` unless it changed since it was read as `expected_old`;
    keeps the file's mode; the target is never left half-written."""
    try:
        current = path.read_bytes()
    except OSError as exc:
        raise WriteError(f"cannot re-read {path}: {exc.strerror}") from None
    if current != expected_old:
        raise WriteError(f"{path} changed while it was being linted; not fixed")
    mode = path.stat().st_mode
    # the mode bits count too: root may write anything, but a read-only file stays read-only
    if not os.access(path, os.W_OK) or not mode & 0o222:
        raise WriteError(f"{path} is not writable; not fixed")
    directory = path.resolve().parent
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".modellint", dir=directory)
    except OSError as exc:
        raise WriteError(f"cannot write beside {path}: {exc.strerror}; not fixed") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode & 0o7777)
        os.replace(temp, path.resolve())
    except OSError as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise WriteError(f"cannot write {path}: {exc.strerror}; not fixed") from None
