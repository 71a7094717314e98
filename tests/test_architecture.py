"""The layers of modellint: no import cycle among the modules of the packages checked here.

Every import counts, at the top of a module or inside a function (a lazy import only delays
the cycle), except those under `if TYPE_CHECKING:` (never run) and the lazy re-exports of the
package's own `__getattr__` (the public facade, `modellint.check_model`). A new package joins
by being added to `PACKAGES`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# where each package's sources are (setuptools' package-dir)
SOURCES = {"modellint": ROOT / "linter", "modellint.rules": ROOT / "rules"}
# the packages whose modules must not import each other in a cycle: modellint's own modules
# (linter/*.py) and these subpackages
PACKAGES = ("modellint", "modellint.static", "modellint.runtime", "modellint.watching",
            "modellint.report")


def _folder(package: str) -> Path:
    if package in SOURCES:
        return SOURCES[package]
    parent, _, leaf = package.rpartition(".")
    return _folder(parent) / leaf


def modules(packages) -> dict[str, Path]:
    """Module name -> its file, for the modules of `packages` (not their subpackages)."""
    found = {}
    for package in packages:
        for path in sorted(_folder(package).glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found[name] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that the module `name` imports."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    out: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:  # `a.b.c` where only `a.b` is checked
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, ast.FunctionDef) and child.name == "__getattr__":
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join([*package.split(".")[:len(package.split(".")) - child.level
                                                        + 1], *([base] if base else [])])
                for alias in child.names:
                    # `from modellint import cli` imports a module; `import __version__` not
                    add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
            walk(child)

    walk(ast.parse(path.read_text(encoding="utf-8")))
    return out


def import_graph(packages) -> dict[str, set[str]]:
    found = modules(packages)
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("packages", [PACKAGES])
def test_no_import_cycle(packages):
    graph = import_graph(packages)
    assert len(graph) > 10, "the modules of the packages were not found"
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_imports_made_on_first_use_count_and_type_checking_ones_do_not(tmp_path):
    path = tmp_path / "fix.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "from modellint.static import notebook\n"
        "if TYPE_CHECKING:\n    from modellint.static.linter import Linter\n"
        "def lint():\n    from modellint.static.engine import lint_source\n",
        encoding="utf-8")
    known = {"modellint.static", "modellint.static.notebook", "modellint.static.linter",
             "modellint.static.engine", "modellint.fix"}
    assert imported("modellint.fix", path, known) == {
        "modellint.static.notebook", "modellint.static.engine"}


def test_the_command_line_is_imported_by_its_entry_points_only():
    graph = import_graph(PACKAGES)
    importers = sorted(name for name, targets in graph.items() if "modellint.cli" in targets)
    assert importers == ["modellint.__main__"]


# what a rule module may import of modellint: the public rule API, the plugin hooks
# (`from modellint import hookimpl`), and the rules' own shared helpers (which obey the same rule)
RULE_API = ("modellint.rule", "modellint.hookspecs", "modellint")
RULE_PACKAGES = ("modellint.rules", "modellint.rules.runtime")


def _outside_rule_api(target: str) -> bool:
    return target not in RULE_API and not target.startswith("modellint.rules")


def _modellint_modules() -> set[str]:
    """Every module of modellint and of its rules: what an import is resolved against."""
    subpackages = [f"modellint.{path.parent.name}"
                   for path in sorted(SOURCES["modellint"].glob("*/__init__.py"))]
    return set(modules(["modellint", *subpackages, *RULE_PACKAGES]))


def test_rules_import_only_the_public_rule_api():
    rule_modules = modules(RULE_PACKAGES)
    assert len(rule_modules) > 15, "the rule modules were not found"
    known = _modellint_modules()
    assert {"modellint.static.kinds", "modellint.watching.loops"} <= known
    internal = {name: sorted(t for t in imported(name, path, known) if _outside_rule_api(t))
                for name, path in rule_modules.items()}
    assert {name: targets for name, targets in internal.items() if targets} == {}


def test_the_rule_api_check_finds_an_internal_import_even_a_lazy_one(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "from modellint import hookimpl\n"
        "from modellint.rule import StaticRule\n"
        "from modellint.rules._loops import scope_of\n"
        "from . import _loops\n"
        "if TYPE_CHECKING:\n    from modellint.static.context import FileContext\n"
        "def check():\n    from modellint.static.kinds import SCHEDULERS\n"
        "    import modellint.watching.loops\n",
        encoding="utf-8")
    found = imported("modellint.rules.mine", path, _modellint_modules())
    assert sorted(target for target in found if _outside_rule_api(target)) == [
        "modellint.static.kinds", "modellint.watching.loops"]


def test_the_rule_api_exports_every_table_of_torch_knowledge():
    from modellint import rule
    from modellint.static import kinds

    # its tables and kinds (upper case), `Kind` and its functions: what it defines itself
    public = {name for name, value in vars(kinds).items() if not name.startswith("_") and (
        name.isupper() or getattr(value, "__module__", None) == kinds.__name__)}
    assert {"SCHEDULERS", "RETURNS_SELF", "Kind", "combine_modes"} <= public
    assert sorted(public - set(rule.__all__)) == []
