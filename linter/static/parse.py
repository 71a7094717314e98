"""Parsing Python text with LibCST, apart from linting it: what `modellint.fix` needs to
re-parse and transform a file without importing the engine and the rules."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import libcst as cst

from modellint import codes

# what the engine reports of code that does not parse (and `--fix` counts, round after round)
SYNTAX_ERROR = (codes.SYNTAX_ERROR, "syntax-error")
# LibCST walks trees recursively (metadata, code generation, fixes): a deeply nested expression
# is retried in a thread with a larger stack and recursion limit (nested deeper than
# `MAIN_STACK_NESTING`), and one deeper than DEEP_RECURSION_LIMIT is not linted
DEEP_RECURSION_LIMIT = 50_000
DEEP_STACK_SIZE = 512 * 1024 * 1024
T = TypeVar("T")

# A last line holding only a line continuation: CPython accepts it before `\r\n` at the end of
# a file, LibCST's tokenizer never does. It holds no code, so the rest is parsed without it
# (positions do not move, and `--fix` keeps it: see `linter.fix._lost_tail`).
_TRAILING_CONTINUATION = re.compile(r"(?<=[\r\n])[ \t\f]*\\(?:\r\n|\r|\n)?\Z")


def parse_with_libcst(text: str) -> cst.Module:
    try:
        return _parse_unchecked(text)
    except cst.ParserSyntaxError:
        tail = _TRAILING_CONTINUATION.search(text)
        if tail is None:
            raise
        return _parse_unchecked(text[:tail.start()])


def _no_check(node: cst.CSTNode) -> None:
    return None


# LibCST's own, put back after each parse (also when two threads parse at once)
_CHECK = cst.CSTNode.__dict__["__post_init__"]


def _parse_unchecked(text: str) -> cst.Module:
    """`cst.parse_module(text)` without LibCST checking each node as its parser builds it
    (`CSTNode.__post_init__` calls `_validate`): a tenth of the parse, spent proving of a
    tree made from source that parses what the parser guarantees (LibCST's own comment there
    says so). Nodes built elsewhere while it runs are not checked either; the fixes a rule
    builds are re-parsed after they are applied."""
    base = cst.CSTNode
    base.__post_init__ = _no_check  # type: ignore[method-assign, assignment]
    try:
        return cst.parse_module(text)
    finally:
        base.__post_init__ = _CHECK  # type: ignore[method-assign]


def call_deeply(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a thread with a large stack and recursion limit, for trees nested
    too deeply for the defaults."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            outcome.append((False, exc))

    try:
        stack = threading.stack_size(DEEP_STACK_SIZE)
    except (ValueError, RuntimeError):  # the platform cannot: run as usual
        return function(*args)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEEP_RECURSION_LIMIT))
    try:
        thread = threading.Thread(target=target, name="modellint-deep")
        thread.start()
        thread.join()
    finally:
        threading.stack_size(stack)
        sys.setrecursionlimit(limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def traceback_text(exc: BaseException) -> str:
    """`exc`'s traceback as Python prints it (kept for `--show-tracebacks`); `traceback` is
    imported only when something failed."""
    import traceback

    return "".join(traceback.format_exception(exc))
