"""`LazyPattern`: a regular expression compiled where it is first used. modellint's modules
define many at import; a run on one file uses few of them, and compiling the rest was a tenth
of what importing the rules cost."""

from __future__ import annotations

import re
from typing import Any

# what a pattern is used for, bound on the instance once compiled (then looked up directly)
_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
            "pattern", "flags", "groups", "groupindex")


class LazyPattern:
    """`re.compile(pattern, flags)`, made on the first use of any of its methods."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name not in _METHODS:
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        return LazyPattern, self._source

    def __repr__(self) -> str:
        return f"LazyPattern({self._source[0]!r}, {self._source[1]!r})"
