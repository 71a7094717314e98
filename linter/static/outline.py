"""What the engine needs of CPython's parse of a file, small enough to keep without the tree.

CPython's parse decides whether a file is Python, how deeply LibCST would nest it, where its
statements start and which of its classes the runtime pass builds. The project index parses
every file of a run with `ast` anyway; it keeps this outline of the files to be linted, so that
their lint does not parse them with CPython a second time.
"""

from __future__ import annotations

import ast
import collections
import itertools
import warnings
from collections.abc import Iterator

from modellint.records import record
from modellint.static.noqa import python_lines

# LibCST's native parser recurses on the C stack once per level of nesting and kills the process
# (no exception) past about 6,000 levels on a main thread's 8 MiB stack. CPython's own parser
# bounds most nesting to about 3,000 levels; a file nested deeper than MAIN_STACK_NESTING is
# parsed in a thread with a larger stack (`modellint.static.parse.DEEP_STACK_SIZE`).
MAIN_STACK_NESTING = 3_000

StatementLines = list[tuple[int, list[int] | None]]


@record(frozen=True)
class Outline:
    # how deeply LibCST will nest the tree: exact when deeper than MAIN_STACK_NESTING
    nesting: int
    lines: StatementLines
    # the module classes the runtime pass would build (name, line)
    classes: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, tree: ast.Module, text: str) -> Outline:
        classes = model_classes(tree) if "Module" in text or "nn." in text else ()
        return cls(nesting(tree, text), statement_lines(tree), classes)


def ast_children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` as a list, in the same order, at a third less cost (the
    index walks every function of every file)."""
    return _children(node, node._fields)


# fields that hold only leaves no analysis reads: `Load`/`Store`, operators
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_CODE_FIELDS: dict[type, tuple[str, ...]] = {}


def ast_code_children(node: ast.AST) -> list[ast.AST]:
    """`ast_children` without the `Load`/`Store` contexts and the operators: leaves, so the
    other nodes keep their order, and a third fewer nodes to walk."""
    cls = node.__class__
    fields = _CODE_FIELDS.get(cls)
    if fields is None:
        fields = _CODE_FIELDS[cls] = tuple(f for f in cls._fields if f not in _LEAF_FIELDS)
    return _children(node, fields)


def _children(node: ast.AST, fields: tuple[str, ...]) -> list[ast.AST]:
    found: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            found.append(value)
        elif value.__class__ is list:
            for item in value:
                if isinstance(item, ast.AST):
                    found.append(item)
    return found


def ast_walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)` without contexts and operators (`ast_code_children`): the other nodes
    in the same (breadth-first) order, cheaper."""
    queue = collections.deque([node])
    while queue:
        node = queue.popleft()
        queue.extend(ast_code_children(node))
        yield node


def parse(text: str) -> ast.Module | None:
    """CPython's parse of `text`, or None when this Python cannot parse it (the file's lint
    says why)."""
    try:
        with warnings.catch_warnings():
            # CPython warns about odd but valid code (`1if x else 2`); not ours to print
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def statement_lines(tree: ast.Module) -> StatementLines:
    """The first line of each top-level statement CPython parsed, with those of a class's
    members: where LibCST's positions of the same statements start."""
    return [(s.lineno, [m.lineno for m in s.body] if isinstance(s, ast.ClassDef) else None)
            for s in tree.body]


# nodes that hold statements: their depth is followed exactly, one statement at a time
_BLOCKS = (ast.stmt, ast.ExceptHandler, ast.match_case)


def nesting(tree: ast.Module, text: str, shallow: int = MAIN_STACK_NESTING) -> int:
    """How deeply LibCST will nest the tree CPython parsed from `text`: exactly when it is
    deeper than `shallow`, otherwise a number no larger than `shallow`.

    Below a statement, each level of an expression takes at least one character of source
    (a chain that CPython keeps flat but LibCST nests one level per link, `a and b`, the dots
    of `import a.b.c`, too), so an expression within fewer lines than `shallow` characters
    cannot be deep and is not walked: most files are never walked below their statements."""
    # where each line ends, counting two characters for each line break
    ends = list(itertools.accumulate(len(line) + 2 for line in python_lines(text)))
    deepest = 1
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in ast_children(node):
            end = getattr(child, "end_lineno", None)
            if end is None or (isinstance(child, _BLOCKS) and _holds_statements(child)):
                # a block, or a node without a position (a function's `arguments`, a `with`
                # item, `Load`): its children are looked at one by one
                stack.append((child, depth + 1))
                continue
            if end <= len(ends):
                start = child.lineno  # type: ignore[attr-defined]
                chars = ends[end - 1] - (ends[start - 2] if start > 1 else 0)
                # two levels per character and a few wrappers of the same span: generous
                if depth + 1 + 2 * chars + 8 <= shallow:
                    continue
            deepest = max(deepest, exact_nesting(child, depth + 1))
    return deepest


def _holds_statements(node: ast.AST) -> bool:
    return isinstance(getattr(node, "body", None), list)


def exact_nesting(tree: ast.AST, start: int = 1) -> int:
    """The depth of `tree` as LibCST nests it, `tree` itself being at depth `start`: its
    depth, where chains that CPython keeps flat but LibCST nests one level per link (`a and b
    and ...`, the dots of `import a.b.c`) count each link."""
    deepest = 0
    stack = [(tree, start)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.BoolOp):
            depth += len(node.values)
        elif isinstance(node, ast.alias):
            depth += node.name.count(".")
        elif isinstance(node, ast.ImportFrom) and node.module:
            depth += node.module.count(".")
        if depth > deepest:
            deepest = depth
        stack.extend((child, depth + 1) for child in ast_children(node))
    return deepest


# --- the module classes of a file, for the runtime pass ------------------------------------

def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        parts = []
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name):
            parts.append(base.id)
            names.append(".".join(reversed(parts)))
    return names


def model_classes(tree: ast.Module) -> tuple[tuple[str, int], ...]:
    """(name, line) of the top-level classes of a file worth building as models: subclasses of
    something (checked for `nn.Module` after import), not used as a sub-module or base by
    another class of the file (those are checked as part of the model that uses them).

    The static pass computes this from the tree it parsed anyway; the runtime pass takes its
    candidates from it (and never parses the file again)."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef) and n.bases}
    if not classes:
        return ()
    used: set[str] = set()
    for name, node in classes.items():
        for base in _base_names(node):
            used.add(base.rsplit(".", 1)[-1])
        for sub in ast_walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                if sub.func.id in classes and sub.func.id != name:
                    used.add(sub.func.id)
    # the line of `class` (after any decorators)
    return tuple((name, node.lineno) for name, node in classes.items() if name not in used)
