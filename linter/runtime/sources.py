"""Which frames are the user's, and the source line that created a sub-module."""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Iterable

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # linter/ (modellint)


def _library_roots() -> tuple[str, ...]:
    roots = {_HERE, os.path.dirname(os.path.abspath(__import__("modellint.rules").rules.__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.add(os.path.realpath(sysconfig.get_paths()[key]))
            roots.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    for path in sys.path:
        if path.endswith(("site-packages", "dist-packages")):
            roots.add(path)
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots if r))


class UserCode:
    """Decides whether a file is the user's code: anything outside the standard library,
    site-packages and modellint, plus `allowed` roots (the installed package a configured
    target lives in, such as torchvision)."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.library = _library_roots()
        self.allowed = tuple(os.path.abspath(a).rstrip(os.sep) + os.sep for a in allowed)
        self._cache: dict[str, bool] = {}

    def __call__(self, filename: str) -> bool:
        known = self._cache.get(filename)
        if known is not None:
            return known
        if not filename or filename.startswith("<"):
            result = False
        else:
            path = os.path.abspath(filename)
            result = path.startswith(self.allowed) or not path.startswith(self.library)
        self._cache[filename] = result
        return result

    def innermost_frame(self, frame) -> tuple[str, int, str] | None:
        """(file, line, function) of the innermost user frame at or above `frame`."""
        while frame is not None:
            code = frame.f_code
            if self(code.co_filename):
                return code.co_filename, frame.f_lineno, code.co_name
            frame = frame.f_back
        return None

    def innermost_traceback(self, tb) -> tuple[str, int, str] | None:
        """(file, line, function) of the innermost user frame of a traceback."""
        found = None
        while tb is not None:
            code = tb.tb_frame.f_code
            if self(code.co_filename):
                found = (code.co_filename, tb.tb_lineno, code.co_name)
            tb = tb.tb_next
        return found


def source_line(path: str, line: int) -> str:
    return linecache.getline(path, line).rstrip("\n")


@functools.lru_cache(maxsize=512)
def _class_source(cls: type) -> tuple[str, int, list[str]] | None:
    try:
        lines, start = inspect.getsourcelines(cls)
        path = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    return path, start, lines


def class_location(cls: type) -> tuple[str, int] | None:
    found = _class_source(cls)
    return (found[0], found[1]) if found else None


def attribute_line(cls: type, attr: str) -> tuple[str, int] | None:
    """Where a class (or a base class) assigns `self.<attr>`: the line that built it."""
    pattern = re.compile(
        rf"\bself\.{re.escape(attr)}\s*(?:=[^=]|:[^=]*=|\+=|\.append\(|\.extend\(|\[)"
    )
    register = re.compile(
        rf"""(?:add_module|register_module|register_buffer|register_parameter|setattr)\(\s*(?:self\s*,\s*)?["']{re.escape(attr)}["']"""
    )
    for klass in getattr(cls, "__mro__", (cls,)):
        if klass.__module__.startswith("torch."):
            break
        found = _class_source(klass)
        if not found:
            continue
        path, start, lines = found
        for offset, text in enumerate(lines):
            if pattern.search(text) or register.search(text):
                return path, start + offset
    return None
