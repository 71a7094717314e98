"""The loops of the user's code around the line a watched run is at, read from the source:
which loop is the epoch loop, and how many epochs its `range(...)` asks for.

A run check needs the loop a mistake belongs to (`set_epoch` goes at the top of the epoch
loop) and the number of epochs the script plans (a period that fits in it counts epochs),
neither of which the run itself shows: a smoke run stops after a few steps. The range is read
from the frame's values without running anything of the script: numbers, names and
attributes read statically (`inspect.getattr_static`), and + - * // between them.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import operator
from types import FrameType
from typing import Any

from modellint.records import record

Site = tuple[str, int, str]

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv}
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@record(frozen=True)
class Loop:
    site: Site  # the loop's first line
    header: bool  # the line being run is in the loop's header (`for x in loader:` itself)
    count: int | None  # the turns of `for ... in range(...)` (also under tqdm/enumerate)


@functools.lru_cache(maxsize=32)
def _tree(filename: str) -> ast.Module | None:
    text = "".join(linecache.getlines(filename))
    if not text:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def source_tree(filename: str) -> ast.Module | None:
    """The parsed source of a file the run executes (cached), None when it cannot be read."""
    return _tree(filename)


def _holds(node: ast.AST, line: int) -> bool:
    if isinstance(node, ast.match_case):  # no position of its own: its pattern to its body
        start, end = node.pattern.lineno, node.body[-1].end_lineno
    elif isinstance(node, (ast.stmt, ast.ExceptHandler)):
        start, end = node.lineno, node.end_lineno
    else:
        return False
    return start <= line <= (end or start)


def _path_to(node: ast.AST, line: int) -> list[ast.AST]:
    """The nodes from `node` down to the innermost statement holding `line`."""
    path = [node]
    while True:
        inner = next((child for child in ast.iter_child_nodes(path[-1])
                      if _holds(child, line)), None)
        if inner is None:
            return path
        path.append(inner)


def loops_at(filename: str, line: int) -> list[tuple[ast.For | ast.AsyncFor | ast.While, bool]]:
    """The loops around `line` in its own function (or module code), innermost first, each
    with whether `line` is in its header."""
    tree = _tree(filename)
    if tree is None:
        return []
    path = _path_to(tree, line)
    scopes = [i for i, node in enumerate(path) if isinstance(node, _SCOPES)]
    start = scopes[-1] + 1 if scopes else 0
    out: list[tuple[ast.For | ast.AsyncFor | ast.While, bool]] = []
    for node in reversed(path[start:]):
        if isinstance(node, _LOOPS) and node.body:
            out.append((node, line < node.body[0].lineno))
    return out


def _value(expr: ast.AST, frame: FrameType) -> Any:
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        for space in (frame.f_locals, frame.f_globals):
            if expr.id in space:
                return space[expr.id]
        raise LookupError(expr.id)
    if isinstance(expr, ast.Attribute):
        return inspect.getattr_static(_value(expr.value, frame), expr.attr)
    if isinstance(expr, ast.BinOp) and type(expr.op) in _OPERATORS:
        return _OPERATORS[type(expr.op)](_int(expr.left, frame), _int(expr.right, frame))
    raise LookupError(type(expr).__name__)


def _int(expr: ast.AST, frame: FrameType) -> int:
    value = _value(expr, frame)
    if isinstance(value, bool) or not isinstance(value, int):
        raise LookupError("not a number")
    return value


def _range_call(expr: ast.AST) -> ast.Call | None:
    """`range(...)` itself, or inside `tqdm(...)`, `enumerate(...)`; `trange(...)`."""
    while isinstance(expr, ast.Call):
        name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(
            expr.func, "id", "")
        if name in ("range", "trange"):
            return expr
        if not expr.args:
            return None
        expr = expr.args[0]
    return None


def range_count(loop: ast.AST, frame: FrameType) -> int | None:
    call = _range_call(loop.iter) if isinstance(loop, (ast.For, ast.AsyncFor)) else None
    if call is None or not 1 <= len(call.args) <= 3 or call.keywords:
        return None
    try:
        bounds = [_int(arg, frame) for arg in call.args]
    except Exception:  # noqa: BLE001 - anything not read statically: not known
        return None
    start, stop, step = ([0, *bounds, 1] if len(bounds) == 1 else
                         [*bounds, 1] if len(bounds) == 2 else bounds)
    if step <= 0:
        return None
    return max(0, -(-(stop - start) // step))


def enclosing_loops(frame: FrameType | None, user) -> list[Loop]:
    """The loops around the lines the user's frames are at, innermost first: those of the
    innermost user frame, then those around the call in its caller, and so on."""
    out: list[Loop] = []
    while frame is not None:
        code = frame.f_code
        if user(code.co_filename):
            for node, header in loops_at(code.co_filename, frame.f_lineno):
                out.append(Loop((code.co_filename, node.lineno, code.co_name), header,
                                range_count(node, frame)))
        frame = frame.f_back
    return out


def epoch_loop(loops: list[Loop]) -> Loop | None:
    """The loop that runs one epoch per turn, seen from the batch loop (`loops` are those
    around a line of the batch loop's header or body): the next loop out."""
    return loops[1] if len(loops) > 1 else None


def planned_epochs(loops: list[Loop]) -> int | None:
    """The turns of the epoch loop, seen from a line in the batch loop's body: the first
    loop of known range out of the innermost one (the batch loop)."""
    return next((loop.count for loop in loops[1:] if loop.count is not None), None)
