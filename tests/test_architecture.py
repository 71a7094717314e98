"""The layers of modellint, checked on its source: no import cycle through a package.

An import made inside a function (on first use) counts: it closes a cycle as surely as one at
the top of the file, only later. An import under `if TYPE_CHECKING:` does not (it never runs),
nor does a package's `__init__` that Python imports before a module of it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "linter"
TOP = "modellint"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((TOP, *parts))


def _runs(statements: list[ast.stmt]) -> list[ast.AST]:
    """Every node of `statements`, leaving out the bodies of `if TYPE_CHECKING:`."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            stack.extend(node.orelse)
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _imported(module: str, is_package: bool, tree: ast.Module, known: set[str]) -> set[str]:
    """The modules of `known` that `module` imports."""
    names: set[str] = set()
    for node in _runs(tree.body):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(here[: len(here) - node.level + 1] + (
                    [node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            # `from modellint.static import notebook` imports a module, not a name
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in names if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    """Each module of modellint -> the modules of modellint it imports."""
    paths = {_module_name(path): path for path in SOURCE.rglob("*.py")
             if "__pycache__" not in path.parts}
    known = set(paths)
    return {module: _imported(module, path.name == "__init__.py", ast.parse(
        path.read_text(encoding="utf-8")), known) for module, path in paths.items()}


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: each set of modules that import one another, directly or
    not (sorted)."""
    reached = {module: _reached(graph, module) for module in graph}
    found = {frozenset(other for other in reached[module] if module in reached[other])
             for module in graph if module in reached[module]}
    return sorted(sorted(cycle) for cycle in found)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_made_on_first_use_count_and_type_checking_ones_do_not():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from modellint.static import notebook\n"
        "if TYPE_CHECKING:\n    from modellint.static.linter import Linter\n"
        "def lint():\n    from modellint.static.engine import lint_source\n")
    known = {"modellint.static", "modellint.static.notebook", "modellint.static.linter",
             "modellint.static.engine", "modellint.fix"}
    assert _imported("modellint.fix", False, tree, known) == {
        "modellint.static", "modellint.static.notebook", "modellint.static.engine"}


@pytest.mark.parametrize("package", ["modellint.static"])
def test_no_import_cycle_through_the_package(package):
    """No cycle of imports runs through a module of `package` (the static pass: rule ->
    context -> semantic -> index -> notebook -> engine -> rule was one)."""
    through = [cycle for cycle in cycles(import_graph())
               if any(_in(module, package) for module in cycle)]
    assert through == []
