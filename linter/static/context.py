"""Per-file state the engine shares with every rule: imports, the enclosing class and function,
and the questions rules ask about names ("is this call `torch.nn.X`?")."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from modellint.static.classes import ClassInfo, analyze_class
from modellint.static.imports import ImportMap, dotted_name
from modellint.static.kinds import NN_NON_MODULES, PARAMETER_NAMES, TENSOR_FACTORIES
from modellint.static.needs import UndeclaredNeed, needs_of

TORCHVISION_NON_BUILDERS = frozenset({"get_weight", "get_model_weights", "list_models"})
_NN_CLASS = re.compile(r"^torch\.nn\.([A-Z]\w*)$")


class FileContext:
    def __init__(self, path: str, source: str, options: dict[str, Any],
                 index: Any = None) -> None:
        self.path = path
        self.source = source
        self.options = options
        # the run's ProjectIndex (None: this file alone, or no enabled rule needs "project");
        # see `semantic`
        self._index = index
        self._semantic: Any = None
        # the rule whose visitor runs (None: the engine's own walk): what it may read is what
        # its `needs` declare
        self.running_rule: Any = None
        # the module being walked
        self.module_node: cst.Module | None = None
        self.imports = ImportMap()
        self._module_classes: dict[str, cst.ClassDef] = {}
        self.class_stack: list[cst.ClassDef] = []
        self.function_stack: list[cst.FunctionDef] = []
        self.statement_stack: list[cst.CSTNode] = []
        # name -> last value assigned to it: the module's scope, then one per class/function
        self.scopes: list[dict[str, cst.BaseExpression]] = [{}]
        # id of a function defined directly in a class body -> that class
        self.method_owners: dict[int, cst.ClassDef] = {}
        self.reports: list[Any] = []
        # (number of reports so far, the top-level statement entered then, or None on leaving
        # it): which top-level statement each report was made in
        self._top_level_marks: list[tuple[int, cst.CSTNode | None]] = []
        self._class_infos: dict[int, ClassInfo] = {}
        # id of a FunctionDef or Module -> its `modellint.static.scope.Scope` (`scope_of`)
        self.built_scopes: dict[int, Any] = {}
        self._module_class_ids: set[int] = set()

    def release(self) -> None:
        """Let go of what the file's lint kept (`run_rules`, once it is done): the rules, the
        semantic model and their caches refer to this context, and it to them and to the
        file's tree."""
        semantic = self._semantic
        self.__dict__.clear()
        if semantic is not None:
            semantic.release()

    def check_need(self, need: str, what: str) -> None:
        """UndeclaredNeed when the running rule reads `what` without declaring `need`."""
        rule = self.running_rule
        if rule is None or need in rule.needs:
            return
        if need not in needs_of(rule):
            raise UndeclaredNeed(
                f"{rule.code} reads {what} but does not declare it: add {need!r} to its "
                f"`needs` (it declares {sorted(rule.needs)})")

    @property
    def semantic(self):
        """The semantic model of this file (`modellint.static.semantic.SemanticModel`): what
        an expression holds, across the project's files. Made on first use."""
        self.check_need("semantic", "`context.semantic`")
        if self._semantic is None:
            from modellint.static.semantic import SemanticModel

            self._semantic = SemanticModel(self, self._index)
        return self._semantic

    @property
    def index(self) -> Any:
        """The run's project index (`modellint.static.index.ProjectIndex`), None for a file
        alone."""
        self.check_need("project", "`context.index`")
        return self._index

    @property
    def module_classes(self) -> dict[str, cst.ClassDef]:
        """Name -> the module classes of this file seen so far (their bases may be other
        files' module classes)."""
        self.check_need("project", "`context.module_classes`")
        return self._module_classes

    # -- names ---------------------------------------------------------------------------
    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        """`torch.nn.Linear` for `nn.Linear` under `import torch.nn as nn`, and so on."""
        return self.imports.resolve(node)

    def call_name(self, node: cst.CSTNode) -> str | None:
        """The qualified name of the function a call calls, if it was imported."""
        if not isinstance(node, cst.Call):
            return None
        return self.imports.resolve(node.func)

    def is_call_to(self, node: cst.CSTNode, *qualified: str) -> bool:
        return self.call_name(node) in qualified

    # -- what an expression builds ----------------------------------------------------------
    def is_module_class_name(self, qualified: str | None) -> bool:
        if qualified is None:
            return False
        match = _NN_CLASS.match(qualified)
        if match:
            return match.group(1) not in NN_NON_MODULES
        return False

    def builds_module(self, node: cst.CSTNode) -> bool:
        """A call that constructs an `nn.Module`: a `torch.nn` layer, a module class of this
        file, or a `torchvision.models` builder."""
        if not isinstance(node, cst.Call):
            return False
        self.check_need("project", "`context.builds_module`")
        if isinstance(node.func, cst.Name) and node.func.value in self._module_classes:
            return True
        qualified = self.imports.resolve(node.func)
        if qualified is None:
            return False
        if self.is_module_class_name(qualified):
            return True
        if qualified.startswith("torchvision.models."):
            last = qualified.rsplit(".", 1)[1]
            return last[:1].islower() and last not in TORCHVISION_NON_BUILDERS
        return False

    def builds_parameter(self, node: cst.CSTNode) -> bool:
        return self.call_name(node) in PARAMETER_NAMES

    def builds_tensor(self, node: cst.CSTNode) -> bool:
        """A call of a torch tensor factory (`torch.ones(3, 4)`, `torch.tensor([...])`)."""
        qualified = self.call_name(node)
        if qualified is None or not qualified.startswith("torch."):
            return False
        return qualified[len("torch.") :] in TENSOR_FACTORIES

    # -- classes --------------------------------------------------------------------------
    def is_module_class(self, node: cst.ClassDef) -> bool:
        """A base is `nn.Module`, a `torch.nn` class, or a module class of this file."""
        self.check_need("project", "`context.is_module_class`")
        return id(node) in self._module_class_ids

    def register_class(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            if base.keyword is not None:
                continue
            expr = base.value
            if isinstance(expr, cst.Name) and expr.value in self._module_classes:
                break
            qualified = self.imports.resolve(expr)
            if qualified == "torch.nn.Module" or self.is_module_class_name(qualified):
                break
            if qualified is not None and self._project_module_class(qualified):
                break
        else:
            return
        self._module_classes[node.name.value] = node
        self._module_class_ids.add(id(node))

    def _project_module_class(self, qualified: str) -> bool:
        """`qualified` (an imported name) is a module class of another file of the project:
        the project index knows it subclasses `nn.Module` (directly or through its own
        bases). A class of a package outside the project stays unknown."""
        if self._index is None:
            return False
        found = self._index.resolve_qualified(qualified)
        if found is None or found[0] != "class" or "." in found[2]:
            return False
        return self._index.subclasses_module(found[1], found[2])

    def class_info(self, node: cst.ClassDef) -> ClassInfo:
        info = self._class_infos.get(id(node))
        if info is None:
            info = self._class_infos[id(node)] = analyze_class(node)
        return info

    def base_class_infos(self, node: cst.ClassDef) -> list[ClassInfo] | None:
        """Infos of the class and its in-file bases; None when a base comes from outside the
        file and is not a known torch class (so its attributes are unknown)."""
        self.check_need("project", "`context.base_class_infos`")
        infos = [self.class_info(node)]
        for base in node.bases:
            if base.keyword is not None:
                continue
            expr = base.value
            if isinstance(expr, cst.Name) and expr.value in self._module_classes:
                parents = self.base_class_infos(self._module_classes[expr.value])
                if parents is None:
                    return None
                infos.extend(parents)
                continue
            if self.imports.resolve(expr) == "torch.nn.Module" or dotted_name(expr) == "object":
                continue
            return None
        return infos

    def lookup(self, name: str) -> cst.BaseExpression | None:
        """The value last assigned to a plain name in the current function, else at module
        level (assignments seen so far)."""
        value = self.scopes[-1].get(name)
        if value is None and len(self.scopes) > 1:
            value = self.scopes[0].get(name)
        return value

    # -- where we are ---------------------------------------------------------------------
    def mark_top_level(self, statement: cst.CSTNode | None) -> None:
        self._top_level_marks.append((len(self.reports), statement))

    def top_level_of_reports(self) -> list[cst.CSTNode | None]:
        """For each report, the top-level statement the walk was in when it was made."""
        tops: list[cst.CSTNode | None] = []
        marks = iter(self._top_level_marks)
        mark = next(marks, None)
        current = None
        for index in range(len(self.reports)):
            while mark is not None and mark[0] <= index:
                current = mark[1]
                mark = next(marks, None)
            tops.append(current)
        return tops

    @property
    def current_statement(self) -> cst.CSTNode | None:
        """The innermost statement the walk is in (None outside any, and after the walk)."""
        return self.statement_stack[-1] if self.statement_stack else None

    @property
    def current_class(self) -> cst.ClassDef | None:
        return self.class_stack[-1] if self.class_stack else None

    @property
    def current_function(self) -> cst.FunctionDef | None:
        return self.function_stack[-1] if self.function_stack else None

    @property
    def in_module_class(self) -> bool:
        """Inside the body of a module class (its methods included)."""
        self.check_need("project", "`context.in_module_class`")
        return any(id(c) in self._module_class_ids for c in self.class_stack)

    def current_method(self) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The module class and method whose body we are in, if any."""
        self.check_need("project", "`context.current_method`")
        for func in reversed(self.function_stack):
            cls = self.method_owners.get(id(func))
            if cls is not None and id(cls) in self._module_class_ids:
                return cls, func
        return None

    def in_method(self, *names: str) -> bool:
        found = self.current_method()
        return found is not None and found[1].name.value in names
