"""What a class body defines and reads, computed once per class and shared by all rules."""

from __future__ import annotations

from dataclasses import field

import libcst as cst

from modellint.records import record
from modellint.static.imports import dotted_name
from modellint.static.walk import LEAF_TYPES, child_nodes, visit

REGISTERING_METHODS = frozenset(
    {"register_buffer", "register_parameter", "add_module", "register_module"}
)


@record
class MethodInfo:
    node: cst.FunctionDef
    self_name: str | None
    # (attribute node, attribute name) for every read of self.<name>
    reads: list[tuple[cst.Attribute, str]] = field(default_factory=list)
    calls_on_self: set[str] = field(default_factory=set)


@record
class ClassInfo:
    node: cst.ClassDef
    methods: dict[str, MethodInfo] = field(default_factory=dict)
    static_or_class_methods: set[str] = field(default_factory=set)
    class_attributes: set[str] = field(default_factory=set)
    # every name assigned as self.<name> anywhere in the class, or registered by literal name
    instance_attributes: set[str] = field(default_factory=set)
    # self.<name> = value: name -> [(method, value)] in source order
    assignments: dict[str, list[tuple[cst.FunctionDef, cst.BaseExpression]]] = field(
        default_factory=dict
    )
    # names given to register_buffer / register_parameter / add_module / register_module
    registered: dict[str, str] = field(default_factory=dict)
    # the class cannot be reasoned about statically (setattr, __getattr__, __dict__ ...)
    dynamic: bool = False

    @property
    def defined_names(self) -> set[str]:
        return self.instance_attributes | self.class_attributes | set(self.methods)


def _decorator_names(func: cst.FunctionDef) -> set[str]:
    names = set()
    for dec in func.decorators:
        expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        name = dotted_name(expr)
        if name:
            names.add(name.rsplit(".", 1)[-1])
    return names


def first_param_name(func: cst.FunctionDef) -> str | None:
    params = func.params
    if params.posonly_params:
        return params.posonly_params[0].name.value
    if params.params:
        return params.params[0].name.value
    return None


def _target_names(target: cst.BaseExpression, self_name: str) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        names: list[str] = []
        for element in target.elements:
            names.extend(_target_names(element.value, self_name))
        return names
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value, self_name)
    if (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == self_name
    ):
        return [target.attr.value]
    return []


class _MethodCollector:
    def __init__(self, info: ClassInfo, method: MethodInfo) -> None:
        self.info = info
        self.method = method
        self.self_name = method.self_name
        self.store_targets: set[int] = set()

    def _stores(self, targets: list[cst.BaseExpression]) -> None:
        if self.self_name is None:
            return
        for target in targets:
            self.info.instance_attributes.update(_target_names(target, self.self_name))
            self._mark_store(target)

    def _mark_store(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._mark_store(element.value)
        elif isinstance(target, cst.StarredElement):
            self._mark_store(target.value)
        else:
            self.store_targets.add(id(target))

    def _record_values(self, targets: list[cst.BaseExpression], value) -> None:
        if self.self_name is None or value is None:
            return
        for target in targets:
            name = _target_names(target, self.self_name) if isinstance(target, cst.Attribute) else []
            for attr in name:
                self.info.assignments.setdefault(attr, []).append((self.method.node, value))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._stores([t.target for t in node.targets])
        self._record_values([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._stores([node.target])
        self._record_values([node.target], node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._stores([node.target])

    def visit_For(self, node: cst.For) -> None:
        self._stores([node.target])

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._stores([node.asname.name])

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._stores([node.target])

    def visit_Del(self, node: cst.Del) -> None:
        self._mark_store(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = dotted_name(func)
        if name in ("setattr", "delattr", "vars") or (name or "").endswith(".__dict__.update"):
            self.info.dynamic = True
            return
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method in REGISTERING_METHODS:
            first = node.args[0].value if node.args else None
            if isinstance(first, cst.SimpleString) and isinstance(first.evaluated_value, str):
                self.info.instance_attributes.add(first.evaluated_value)
                self.info.registered[first.evaluated_value] = method
            else:
                self.info.dynamic = True
        if isinstance(func.value, cst.Name) and func.value.value == self.self_name:
            self.method.calls_on_self.add(method)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if (
            self.self_name is not None
            and isinstance(node.value, cst.Name)
            and node.value.value == self.self_name
        ):
            if node.attr.value == "__dict__":
                self.info.dynamic = True
            elif id(node) not in self.store_targets:
                self.method.reads.append((node, node.attr.value))


# node class -> the collector's method for it (`walk.visit`'s dispatch, built once)
_COLLECTED = {
    getattr(cst, name[len("visit_"):]): method for name, method in vars(_MethodCollector).items()
    if name.startswith("visit_")
}


def _collect(method: cst.FunctionDef, collector: _MethodCollector) -> None:
    """`visit(method, collector)`: every code node of the method (decorators, parameters and
    nested functions included) in source order, for the collector's `visit_` methods."""
    stack: list[cst.CSTNode] = [method]
    pop, push = stack.pop, stack.append
    collected, leaves = _COLLECTED, LEAF_TYPES
    while stack:
        node = pop()
        handler = collected.get(type(node))
        if handler is not None:
            handler(collector, node)
        for child in reversed(child_nodes(node)):
            # the collector does not look at leaves
            if type(child) not in leaves:
                push(child)


def analyze_class(node: cst.ClassDef) -> ClassInfo:
    info = ClassInfo(node=node)
    for statement in node.body.body:
        if isinstance(statement, cst.FunctionDef):
            decorators = _decorator_names(statement)
            name = statement.name.value
            if decorators & {"staticmethod", "classmethod"}:
                info.static_or_class_methods.add(name)
                info.class_attributes.add(name)
                continue
            method = MethodInfo(node=statement, self_name=first_param_name(statement))
            # a property setter repeats the name; keep the first definition's reads too
            if name in info.methods:
                info.methods[f"{name}#{len(info.methods)}"] = method
            else:
                info.methods[name] = method
            if name in ("__getattr__", "__getattribute__", "__setattr__"):
                info.dynamic = True
            _collect(statement, _MethodCollector(info, method))
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        attribute = dotted_name(target.target)
                        if attribute:
                            info.class_attributes.add(attribute)
                        elif isinstance(target.target, cst.Tuple):
                            for element in target.target.elements:
                                if isinstance(element.value, cst.Name):
                                    info.class_attributes.add(element.value.value)
                elif isinstance(small, cst.AnnAssign):
                    attribute = dotted_name(small.target)
                    if attribute:
                        info.class_attributes.add(attribute)
        elif isinstance(statement, cst.ClassDef):
            info.class_attributes.add(statement.name.value)
        else:
            # attributes defined under if/try at class level: collect their assigned names
            for sub in _nested_class_level_names(statement):
                info.class_attributes.add(sub)
    return info


def _nested_class_level_names(statement: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class Collector(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name):
                names.add(node.target.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            names.add(node.name.value)
            return False

    visit(statement, Collector())
    return names
