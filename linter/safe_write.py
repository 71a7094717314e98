"""Writing where the linted repository has a say: the files and folders that modellint writes
on a user's behalf (`--output-file`, `modellint run --output-file` and `--plots`, the cache).

The checkout may hold links of its own making (`modellint.sarif -> ../target`, `.cache ->
../outside`), so a folder is entered one name at a time, as the system walks it, and a name
inside the tree (the current folder, the project) must be a real folder, never a link; a file
is written to a new temporary file beside it and renamed over it, so that what was at its name
(a link, a hard link) is replaced, never written through. Names outside the tree (`/tmp` a
link to `/private/tmp`) are the user's own and followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


class UnsafePath(Exception):
    """A place modellint does not write to; the message says which name and why."""


def new_temporary(folder: str | os.PathLike, prefix: str, suffix: str = "") -> tuple[int, str]:
    """(descriptor, path) of a new file of mode 0600 in `folder`, open for writing, made as
    `tempfile.mkstemp` makes one (a name that did not exist, no link followed), without
    importing `tempfile` and what it imports (a tenth of the imports of a one-file run)."""
    flags = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{os.urandom(8).hex()}{suffix}")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free name for a temporary file", str(folder))


def _below(path: str, folders: Sequence[str]) -> bool:
    return any(path != folder and os.path.commonpath([path, folder]) == folder
               for folder in folders)


def enter_folder(folder: str | Path, tree: Sequence[str | Path], create: bool) -> str | None:
    """The real path of `folder`, each name in it checked as the walk enters it: one inside a
    `tree` folder must be a folder and not a link (UnsafePath otherwise). A missing folder is
    made when `create` (OSError when it cannot be); otherwise the answer is None, as nothing
    below a missing name can be a link yet."""
    bases = [os.path.realpath(base) for base in tree]
    given = os.fspath(folder)
    if os.altsep:
        given = given.replace(os.altsep, os.sep)
    current = os.sep if os.path.isabs(given) else os.getcwd()  # getcwd has no links in it
    shown = ""
    for name in given.split(os.sep):
        shown = os.path.join(shown, name) if shown else name or os.sep
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)  # of a real path: where the system goes too
            continue
        candidate = os.path.join(current, name)
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(candidate)
            except FileExistsError:
                pass  # another run made it meanwhile: checked below like any other
            info = os.lstat(candidate)
        if stat.S_ISLNK(info.st_mode):
            if _below(candidate, bases):
                raise UnsafePath(f"{shown} is a link, which modellint does not follow inside "
                                 "the folders it works in")
            current = os.path.realpath(candidate)
            if not os.path.isdir(current):
                raise UnsafePath(f"{shown} is not a folder")
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafePath(f"{shown} is not a folder")
        current = candidate
    return current


def check_target(path: str | Path, tree: Sequence[str | Path]) -> str:
    """The real path that writing `path` would replace: its folder entered as `enter_folder`
    does (it must exist), and `path` itself not a link nor anything but a regular file when it
    exists (or a character device outside the tree: `-o /dev/null`). UnsafePath otherwise,
    naming `path`."""
    given = os.fspath(path)
    folder, name = os.path.split(given)
    if name in ("", ".", ".."):
        raise UnsafePath(f"{given} names a folder, not a file")
    try:
        real_folder = enter_folder(folder or ".", tree, create=False)
    except UnsafePath as exc:
        raise UnsafePath(f"{given}: {exc}") from None
    if real_folder is None:
        raise UnsafePath(f"{given}: the folder {folder} does not exist")
    target = os.path.join(real_folder, name)
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return target
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{given} is a link; modellint replaces the file it writes and never "
                         "writes through a link (remove the link, or name another file)")
    if stat.S_ISCHR(info.st_mode) and not _below(target, [os.path.realpath(base)
                                                          for base in tree]):
        return target  # `/dev/null`, a terminal: the user's own device, written in place
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePath(f"{given} exists and is not a regular file")
    return target


def _is_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.lstat(path).st_mode)
    except OSError:
        return False


def _new_file_mode(existing: str) -> int:
    try:
        return stat.S_IMODE(os.lstat(existing).st_mode)
    except FileNotFoundError:
        umask = os.umask(0o077)  # read, then put back at once: the only portable way
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def replacing(path: str | Path, tree: Sequence[str | Path], binary: bool = False
              ) -> Iterator[IO[Any]]:
    """A new file (text in UTF-8, or `binary`) that takes the place of `path` when the block
    ends without an error (and is removed when it does not): a temporary file in the same
    folder, renamed over `path`, with the mode `path` had (a new file's as `open` gives it).
    UnsafePath as `check_target` says; OSError when the folder cannot be written."""
    target = check_target(path, tree)
    if _is_device(target):  # outside the tree (check_target): nothing to rename over
        with open(target, "wb") if binary else open(target, "w", encoding="utf-8") as device:
            yield device
        return
    mode = _new_file_mode(target)
    fd, temp = new_temporary(os.path.dirname(target), f".{os.path.basename(target)}.",
                             ".modellint")
    try:
        os.fchmod(fd, mode)
        with (os.fdopen(fd, "wb") if binary
              else os.fdopen(fd, "w", encoding="utf-8")) as handle:
            yield handle
        # the name is replaced whatever it is now: a link planted meanwhile is not followed
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
