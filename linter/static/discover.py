"""Find the Python files under the paths given on the command line."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterator
from pathlib import Path

SKIPPED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "build", "dist",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".modellint_cache",
        "node_modules", ".ipynb_checkpoints", "__pypackages__",
    }
)
SUFFIXES = (".py", ".pyi")


class GitIgnore:
    """The patterns of one .gitignore file, matched relative to its folder."""

    def __init__(self, base: Path, lines: list[str]) -> None:
        self.base = base
        self.rules: list[tuple[str, bool, bool, bool]] = []  # pattern, negated, dir_only, anchored
        for raw in lines:
            line = raw.rstrip("\n").rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            self.rules.append((line.lstrip("/"), negated, dir_only, anchored))

    @classmethod
    def read(cls, directory: Path) -> GitIgnore | None:
        path = directory / ".gitignore"
        try:
            return cls(directory, path.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            return None

    def ignored(self, path: Path, is_dir: bool) -> bool | None:
        """True/False when a pattern decides, None when none matches."""
        try:
            relative = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        decision = None
        for pattern, negated, dir_only, anchored in self.rules:
            if dir_only and not is_dir:
                continue
            target = relative if anchored else path.name
            if fnmatch.fnmatchcase(target, pattern) or (
                "**" in pattern and fnmatch.fnmatchcase(relative, pattern.replace("**/", ""))
            ):
                decision = not negated
        return decision


def _is_virtualenv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file()


def discover(
    paths: list[str], excluded: Callable[[Path], bool]
) -> Iterator[tuple[str, Path]]:
    """(display path, path) for every file to lint, in a stable order. A file named explicitly
    is always linted; folders are walked for *.py and *.pyi."""
    for given in paths:
        root = Path(given)
        if not root.is_dir():
            yield given, root
            continue
        yield from _walk(given, root, excluded)


def _walk(display_root: str, root: Path, excluded: Callable[[Path], bool]):
    ignores: list[GitIgnore] = []
    for parent in reversed([root.resolve(), *root.resolve().parents]):
        found = GitIgnore.read(parent)
        if found is not None:
            ignores.append(found)
        if (parent / ".git").exists():
            # patterns above the repository root do not apply
            ignores = [found] if found is not None else []
    seen: set[tuple[int, int]] = set()
    yield from _walk_dir(display_root, root, root.resolve(), ignores, excluded, seen)


def _ignored(ignores: list[GitIgnore], path: Path, is_dir: bool) -> bool:
    decision = False
    for gitignore in ignores:
        verdict = gitignore.ignored(path, is_dir)
        if verdict is not None:
            decision = verdict
    return decision


def _walk_dir(display, directory, resolved, ignores, excluded, seen):
    try:
        stat = resolved.stat()
    except OSError:
        return
    key = (stat.st_dev, stat.st_ino)
    if key in seen:  # a symlink loop
        return
    seen.add(key)
    local = GitIgnore.read(resolved)
    if local is not None:
        ignores = [*ignores, local]
    try:
        entries = sorted(os.scandir(resolved), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        # `modellint .` and a bare `modellint` show `pkg/model.py`, not `./pkg/model.py`
        child_display = entry.name if display in (".", "./") else os.path.join(display, entry.name)
        child = resolved / entry.name
        try:
            is_dir = entry.is_dir()
        except OSError:
            # a symlink loop: a *.py one is reported as unreadable rather than skipped silently
            is_dir = False
        if is_dir:
            if entry.name in SKIPPED_DIRS or entry.name.endswith(".egg-info"):
                continue
            if _is_virtualenv(child) or _ignored(ignores, child, True) or excluded(child):
                continue
            yield from _walk_dir(child_display, directory / entry.name, child, ignores,
                                 excluded, seen)
        elif entry.name.endswith(SUFFIXES):
            if _ignored(ignores, child, False) or excluded(child):
                continue
            yield child_display, child
