"""The semantic model of one file, as rules query it: what a LibCST expression holds (a `Kind`),
where it is known.

    kind = self.context.semantic.kind(expr, scope, before=site.order)

Names follow the assignments of the enclosing function (`scope`, before `before`), then the
module's names, imports and definitions, through the project index (`linter/static/index.py`),
which also knows `self.x` (set anywhere in the class or its project bases), the classes and
functions of the project's other files, and what torch's own classes are. What cannot be known
is None: a rule that needs a fact it does not have stays silent.
"""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

import libcst as cst

from modellint.records import record
from modellint.static import kinds as K
from modellint.static.evaluate import Where, _locals
from modellint.static.facts import extract, name_summary
from modellint.static.facts_cache import text_hash
from modellint.static.imports import dotted_name
from modellint.static.index import ProjectIndex
from modellint.static.kinds import Kind
from modellint.static.nodes import NESTED_SCOPES
from modellint.static.summary import (
    UNKNOWN,
    Attr,
    BinOp,
    Call,
    Comp,
    Const,
    DictDisplay,
    Item,
    Iter,
    Join,
    Local,
    Mutated,
    Num,
    Op,
    Param,
    Ref,
    SelfAttr,
    Seq,
    Slice,
    Str,
    Sub,
    Summary,
    UnaryOp,
)
from modellint.static.walk import code_nodes

if TYPE_CHECKING:
    from modellint.static.context import FileContext
    from modellint.static.scope import Scope


def summarize(node: cst.CSTNode | None, self_name: str | None = None, depth: int = 0
              ) -> Summary:
    """The summary of a LibCST expression (`modellint.static.summary`), as
    `modellint.static.facts.summarize` makes it of CPython's tree."""
    if node is None or depth > 12:
        return UNKNOWN
    if isinstance(node, (cst.Name, cst.Attribute)):
        name = dotted_name(node)
        if name is None:
            assert isinstance(node, cst.Attribute)
            return Attr(summarize(node.value, self_name, depth + 1), node.attr.value)
        return name_summary(name.split("."), self_name)
    if isinstance(node, cst.Call):
        args: list[Summary] = []
        keywords: dict[str, Summary] = {}
        for arg in node.args:
            if arg.star == "**":
                keywords["**"] = UNKNOWN
            elif arg.star:
                args.append(UNKNOWN)
            elif arg.keyword is not None:
                keywords[arg.keyword.value] = summarize(arg.value, self_name, depth + 1)
            else:
                args.append(summarize(arg.value, self_name, depth + 1))
        return Call(summarize(node.func, self_name, depth + 1), tuple(args), keywords)
    if isinstance(node, cst.Subscript):
        key = None
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
            return Slice(summarize(node.value, self_name, depth + 1))
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            value = node.slice[0].slice.value
            position = _position(value)
            if position is not None:
                return Item(summarize(node.value, self_name, depth + 1), position)
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                key = value.evaluated_value
        return Sub(summarize(node.value, self_name, depth + 1), key)
    if isinstance(node, (cst.Integer, cst.Float)):
        try:
            return Num(float(node.evaluated_value))
        except (ValueError, OverflowError):
            return UNKNOWN
    if isinstance(node, cst.Name):
        return Ref(node.value)
    if isinstance(node, (cst.List, cst.Tuple)):
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            return UNKNOWN  # `[*a, b]`: its elements are not those written
        return Seq(tuple(summarize(e.value, self_name, depth + 1) for e in node.elements))
    if isinstance(node, cst.Dict):
        pairs: list[tuple[str | None, Summary]] = []
        for entry in node.elements:
            if not isinstance(entry, cst.DictElement):
                return UNKNOWN  # `{**a, ...}`
            written = entry.key
            pairs.append((written.evaluated_value if isinstance(written, cst.SimpleString) and (
                isinstance(written.evaluated_value, str)) else None,
                summarize(entry.value, self_name, depth + 1)))
        return DictDisplay(tuple(pairs))
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
        bound: list[tuple[str, Summary]] = []
        comp_for: cst.CompFor | None = node.for_in
        while comp_for is not None:
            iterated = summarize(comp_for.iter, self_name, depth + 1)
            if isinstance(comp_for.target, cst.Name):
                bound.append((comp_for.target.value, Iter(iterated)))
            else:
                flat = _flat_names(comp_for.target)
                bound.extend((name, Item(Iter(iterated), flat[name]) if name in flat
                              else UNKNOWN) for name in _bound_names(comp_for.target))
            comp_for = comp_for.inner_for_in
        produced = node.value if isinstance(node, cst.DictComp) else node.elt
        return Comp(summarize(produced, self_name, depth + 1), tuple(bound),
                    isinstance(node, cst.DictComp))
    if isinstance(node, cst.BinaryOperation) and type(node.operator) in _OPERATORS:
        return BinOp(_OPERATORS[type(node.operator)], summarize(node.left, self_name, depth + 1),
                     summarize(node.right, self_name, depth + 1))
    if isinstance(node, cst.UnaryOperation) and type(node.operator) in _OPERATORS:
        return UnaryOp(_OPERATORS[type(node.operator)],
                       summarize(node.expression, self_name, depth + 1))
    if isinstance(node, cst.IfExp):
        return Join((summarize(node.body, self_name, depth + 1),
                     summarize(node.orelse, self_name, depth + 1)))
    return UNKNOWN


# the operators of `BinOp` and `UnaryOp` summaries (as `facts.summarize` writes them)
_OPERATORS: dict[type, str] = {
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//",
    cst.Modulo: "%", cst.Power: "**", cst.MatrixMultiply: "@", cst.BitAnd: "&", cst.BitOr: "|",
    cst.BitXor: "^", cst.Minus: "-", cst.Plus: "+", cst.BitInvert: "~",
}


def _flat_names(target: cst.BaseExpression) -> dict[str, int]:
    """The names of a flat tuple target (`i, m`) before any starred one -> their positions,
    when each is bound once."""
    if not isinstance(target, (cst.Tuple, cst.List)):
        return {}
    found: dict[str, int] = {}
    for position, element in enumerate(target.elements):
        if isinstance(element, cst.StarredElement):
            break
        if isinstance(element.value, cst.Name):
            name = element.value.value
            found[name] = position if name not in found else -1
    return {name: position for name, position in found.items() if position >= 0}


def _bound_names(target: cst.BaseExpression) -> list[str]:
    """The plain names a `for` target binds (`i, (a, b)`)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _bound_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return []


def _position(value: cst.BaseExpression) -> int | None:
    """The integer of a subscript `x[1]`, `x[-1]`."""
    negative = isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus)
    if negative:
        assert isinstance(value, cst.UnaryOperation)
        value = value.expression
    if not isinstance(value, cst.Integer):
        return None
    try:
        number = int(value.value, 0)
    except ValueError:
        return None
    return -number if negative else number


def _top_level_nodes(context: FileContext) -> list[cst.CSTNode]:
    """The classes and functions at the top level of the file (also inside if/try blocks),
    those the index has facts of."""
    module = context.module_node
    if module is None:
        return []
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            found.append(node)
        elif isinstance(node, cst.If):
            stack.extend(node.body.body)
            if node.orelse is not None:
                stack.append(node.orelse)
        elif isinstance(node, cst.Else):
            stack.extend(node.body.body)
        elif isinstance(node, cst.Try):
            stack.extend(node.body.body)
            for handler in node.handlers:
                stack.extend(handler.body.body)
            if node.orelse is not None:
                stack.append(node.orelse)
    return found


def _param_names(func: cst.FunctionDef) -> list[str]:
    params = func.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)] + [
        p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)
    ]


class SemanticModel:
    """Per file; made on first use by `FileContext.semantic`."""

    def __init__(self, context: FileContext, index: ProjectIndex | None) -> None:
        self.context = context
        path = context.path
        digest = text_hash(context.source)
        if index is None or index.hashes.get(path) != digest:
            # alone (a test, a file not in the run's index), or its text changed since the
            # index read it (--fix): this file's facts from its text now
            own = index.copy() if index is not None else ProjectIndex()
            try:
                tree = ast.parse(context.source)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            own.add(path, extract(context.source, tree) if tree is not None else extract(""),
                    digest)
            index = own
        self.index = index
        self.path = path
        # id of a method -> (the method, its self name and class): asked for each expression
        # a rule looks up in it
        self._methods: dict[int, tuple[cst.FunctionDef, tuple[str | None, str | None]]] = {}
        self._param_sets: dict[int, tuple[cst.FunctionDef, frozenset[str]]] = {}
        # what the evaluation finds of the names of this file's functions (`Where.kinds`)
        self._local_kinds: dict[tuple, tuple] = {}
        self._tops: list[cst.CSTNode] | None = None
        self._identities: dict[int, tuple[cst.FunctionDef, tuple[str | None, str] | None]] = {}
        # id of a scope -> (the scope, its comprehensions (names bound -> iterable, ids of
        # the nodes inside), order -> site)
        self._comprehensions: dict[int, tuple[Scope, list, dict]] = {}
        # id of a scope -> (the scope, the names it changes the containers of)
        self._mutations: dict[int, tuple[Scope, frozenset[str]]] = {}


    def release(self) -> None:
        """Let go of the file's nodes and of what was found of them (`FileContext.release`):
        the places of its questions (`Where`) refer to this model, and it to them."""
        self.__dict__.clear()
    def kind(self, expr: cst.BaseExpression, scope: Scope | None = None,
             before: int | None = None) -> Kind | None:
        """What `expr` holds, or None when that is not known. `scope` is the function (or
        module) the expression is in, `before` the order of its site there: names take the
        value last assigned to them before it."""
        self_name, cls = self._method_of(scope)
        return self.index.kind(summarize(expr, self_name), self._where(scope, before, cls, self_name))

    def kind_here(self, expr: cst.BaseExpression, node: cst.CSTNode | None = None) -> Kind | None:
        """What `expr` holds, for a rule that visits nodes during the walk: names as they are
        in the function being walked (or the module) at `node` (a call, assignment, augmented
        assignment or loop that holds `expr`; without it, their last values there)."""
        from modellint.static.scope import scope_of

        root = self.context.current_function or self.context.module_node
        if root is None:
            return None
        scope = scope_of(self.context, root)
        site = scope.site(node) if node is not None else None
        return self.kind(expr, scope, site.order if site is not None else None)

    def kind_of_name(self, name: str, scope: Scope | None = None,
                     before: int | None = None) -> Kind | None:
        """What the dotted `name` (`model`, `self.net`) holds."""
        self_name, cls = self._method_of(scope)
        parts = name.split(".")
        if self_name is not None and parts[0] == self_name and len(parts) > 1:
            summary: Summary = SelfAttr(parts[1])
            for attr in parts[2:]:
                summary = Attr(summary, attr)
        else:
            summary = Ref(name)
        return self.index.kind(summary, self._where(scope, before, cls, self_name))

    def children(self, expr: cst.BaseExpression, scope: Scope | None = None,
                 before: int | None = None) -> list[Submodule] | None:
        """What `expr.children()` yields, when `expr` holds an instance of a module class of
        the project and every value its attributes (and those of its project bases) may hold
        is known: a layer, a project module, or no module at all (a number, a default that
        is one, a tensor, a plain list, None). None when anything is unknown: a base class
        from outside the project other than `nn.Module`, `add_module`/`setattr`, an
        attribute set from a parameter without a plain default or from a value not known."""
        kind = self.kind(expr, scope, before)
        if kind is None or kind.kind != K.MODULE or not kind.cls or ":" not in kind.cls:
            return None
        path, cls = kind.cls.split(":", 1)
        if isinstance(expr, cst.Name) and self._method_of(scope)[0] == expr.value and (
                subclassed(self.index, path, cls)):
            return None  # `self` in a method of a class that others extend: any of them
        return class_children(self.index, path, cls)

    def is_instance(self, sub: Submodule, layer: str) -> bool | None:
        """Whether the submodule is an instance of the `torch.nn` layer class `layer`
        (`Conv2d`): True, False, or None when that is not known."""
        return _is_instance(self.index, sub.cls, layer)

    def contains(self, sub: Submodule, layer: str) -> bool:
        """The submodule is known to hold, somewhere inside it, an instance of the `torch.nn`
        layer class `layer` (built in the project's code: a container's listed layers, a
        project class's attributes, and theirs)."""
        return _contains(self.index, sub, layer, 0, set())

    def holds_state(self, expr: cst.BaseExpression, scope: Scope | None = None,
                    before: int | None = None) -> bool | None:
        """Whether the module `expr` holds (or builds) parameters, buffers or a layer that
        behaves differently in train and eval mode: False when it is known to hold none (an
        activation, an upsampling or pooling layer, a project class whose every attribute is
        known and stateless), True when it is known to hold some, None when not known."""
        kind = self.kind(expr, scope, before)
        if kind is None or kind.kind != K.MODULE or not kind.cls:
            return None
        return _holds_state(self.index, kind.cls, 0)

    def instance_of(self, cls: str) -> Kind | None:
        """The kind of an instance of this file's class `cls`."""
        return self.index.instance(self.path, cls)

    def call_effects(self, call: cst.Call, scope: Scope | None = None) -> list[Effect]:
        """What a call of a project function or method does where it is called: the
        `eval()`, `train()`, `zero_grad()` and `step()` that it (or a project function it
        calls, a few calls deep) makes, and `no_grad` when its whole body runs under no_grad
        (its target None), each with the dotted name it is made on in the caller's terms
        (`set_eval(model)` -> `model`; `self.reset_grad()` -> `self.d_opt`), or None when that
        is not a name of the caller (a value the helper builds or finds elsewhere). Empty for
        a call of anything else."""
        callee = dotted_name(call.func)
        if callee is None:
            return []
        self_name, cls = self._method_of(scope)
        parts = callee.split(".")
        found = None
        if self_name is not None and cls is not None and len(parts) == 2 and (
                parts[0] == self_name):
            found = self.index.function_facts(self.path, cls, parts[1])
            called, offset = parts[1], 1
        elif len(parts) == 1 and not (scope is not None and scope.assigned(callee)):
            resolved = self.index.resolve(self.path, callee)
            if resolved is not None and resolved[0] == "function" and "." not in resolved[2]:
                found = self.index.function_facts(resolved[1], None, resolved[2])
                called, offset = resolved[2], 0
        if found is None:
            return []
        path, owner, facts = found
        effects = []
        for effect, on, name in sorted(self.index.effects(path, owner, called)):
            target: str | None = None
            if on == "param":
                value = _argument(call, facts["params"], offset, name)
                if value is _DEFAULT:
                    continue
                target = dotted_name(value) if isinstance(value, cst.BaseExpression) else None
            elif on == "self" and offset == 1:
                target = f"{self_name}.{name}"
            elif on == "name" and path == self.path and not (
                    scope is not None and not isinstance(scope.root, cst.Module)
                    and scope.assigned(name.split(".")[0])):
                target = name
            effects.append(Effect(effect, target))
        return effects

    # -- the project's functions, as the rules ask of them ---------------------------------

    def function_named(self, dotted: str) -> ProjectFunction | None:
        """The top-level project function (of any file) that the dotted name `dotted` of
        this file resolves to, through its imports; None for anything else."""
        found = self.index.resolve(self.path, dotted)
        if found is None or found[0] != "function" or "." in found[2]:
            return None
        if self.index.files[found[1]]["functions"].get(found[2]) is None:
            return None
        return ProjectFunction(found[1], None, found[2])

    def inherited_methods(self, cls: str) -> list[ProjectFunction]:
        """The methods of the project base classes (of any file) of this file's class `cls`,
        nearest base first (the class's own left out; a name a nearer base defines may come
        again from a farther one)."""
        return [ProjectFunction(path, name, method)
                for path, name, facts in class_lineage(self.index, self.path, cls)[1:]
                for method in facts["methods"]]

    def steps_in(self, function: ProjectFunction) -> list[Stepped]:
        """What the project function calls `.step()` on, in its own body: for each, what the
        model knows it holds and its name (`scaler.step(optimizer)` steps `optimizer`)."""
        facts = self._facts_of(function)
        if facts is None:
            return []
        where = Where(function.path, function.cls, _locals(facts))
        found = []
        for stepped in facts.get("steps", ()):
            name = stepped.name if isinstance(stepped, (Ref, Attr)) else (
                stepped.attr if isinstance(stepped, SelfAttr) else "")
            found.append(Stepped(self.index.kind(stepped, where), name))
        return found

    def arguments_passed(self, function: str, position: int) -> list[PassedArgument]:
        """What each call of this file's top-level function `function` in the project (from
        this file and the files that import it) passes at `position`, for the calls that
        pass plain names there or elsewhere."""
        index = self.index
        found = []
        for caller_path, body, args in index.callers(self.path, function):
            arg = args[position] if position < len(args) else None
            if arg is None:
                found.append(PassedArgument(caller_path, None, None, False, False, None))
                continue
            local = _locals(body) if "params" in body else None
            kind = index.kind(Ref(arg), Where(caller_path, None, local))
            found.append(PassedArgument(caller_path, arg, kind, arg in body["evals"],
                                        arg in body["trains"], self._put_in_eval(
                                            caller_path, body, arg)))
        return found

    def _put_in_eval(self, path: str, body: dict, arg: str) -> bool | None:
        """A call in `body` passes `arg` to a project function that puts it in eval mode:
        True; to a function not known (one that may): None; else False."""
        index = self.index
        for callee, passed in body["calls"]:
            if arg not in passed:
                continue
            found = index.resolve(path, callee)
            if found is None and callee in _MODELESS_BUILTINS:
                continue
            if found is not None and found[0] == "torch" and found[1].startswith("torch."):
                continue  # torch.save(model, ...) does not set the mode
            if found is None or found[0] != "function" or "." in found[2]:
                return None  # a function not known here may call eval()
            other = index.files[found[1]]["functions"][found[2]]
            at = passed.index(arg)
            if at < len(other["params"]) and ("eval", "param", other["params"][at]) in (
                    index.effects(found[1], None, found[2])):
                return True  # e.g. a validate(model) that calls model.eval(), or a helper
        return False

    def _facts_of(self, function: ProjectFunction) -> dict | None:
        facts = self.index.files.get(function.path)
        if facts is None:
            return None
        if function.cls is None:
            return facts["functions"].get(function.name)
        return facts["classes"].get(function.cls, {}).get("methods", {}).get(function.name)

    def _comprehension_binding(self, scope: Scope, name: str, order: int,
                               self_name: str | None) -> Summary | None:
        """What the name holds at the site of `order` when a comprehension around the site
        binds it (`[m(x) for m in models]`): `Iter(iterable)` (its position in it for a
        flat tuple target, `for i, m in enumerate(models)`), UNKNOWN for a name of another
        target; None when no comprehension binds it there."""
        facts = self.index.files.get(self.path)
        if name in _BUILTIN_NAMES or facts is not None and (
                name in facts["imports"] or name in facts["classes"]
                or name in facts["functions"] or name in facts["globals"]):
            return None  # a module-level name (a comprehension of it would shadow it: rare)
        known = self._comprehensions.get(id(scope))
        if known is None or known[0] is not scope:
            known = self._comprehensions[id(scope)] = (scope, *_comprehensions(scope))
        _, comprehensions, orders = known
        site = orders.get(order)
        if site is None:
            return None
        innermost: tuple[int, Summary] | None = None
        for bindings, inside in comprehensions:
            if name in bindings and id(site.node) in inside and (
                    innermost is None or len(inside) < innermost[0]):
                binding = bindings[name]
                found: Summary = UNKNOWN if binding is None else Iter(
                    summarize(binding[0], self_name))
                if binding is not None and binding[1] is not None:
                    found = Item(found, binding[1])
                innermost = (len(inside), found)
        return innermost[1] if innermost is not None else None

    def _mutated(self, scope: Scope, identity: tuple[str | None, str] | None,
                 cls: str | None) -> frozenset[str]:
        """The dotted names whose containers the scope's code changes (`xs.append(m)`,
        `heads[k] = m`, `xs += [m]`): from the index's facts of a function or method it
        has, of the module's code; else from the function's own nodes."""
        known = self._mutations.get(id(scope))
        if known is not None and known[0] is scope:
            return known[1]
        facts = self.index.files.get(self.path)
        found: set[str] = set()
        if isinstance(scope.root, cst.Module) and facts is not None:
            found.update(facts.get("script", {}).get("mutates", ()))
            found.update(facts.get("mutated_globals", ()))
        elif identity is not None and facts is not None:
            owner, name = identity
            func = (facts["classes"].get(owner, {}).get("methods", {}) if owner is not None
                    else facts["functions"]).get(name)
            found.update(func.get("mutates", ()) if func is not None else ())
        else:
            for node in code_nodes(scope.root):
                changed: list[cst.BaseExpression] = []
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
                        node.func.attr.value in K.MUTATORS):
                    changed.append(node.func.value)
                elif isinstance(node, cst.Assign):
                    changed.extend(t.target.value for t in node.targets
                                   if isinstance(t.target, cst.Subscript))
                elif isinstance(node, cst.AugAssign):
                    target = node.target
                    changed.append(target.value if isinstance(target, cst.Subscript) else target)
                found.update(n for n in map(dotted_name, changed) if n is not None)
        result = frozenset(found)
        self._mutations[id(scope)] = (scope, result)
        return result

    def own_instance(self, function: cst.CSTNode | None) -> str | None:
        """The name that holds the method's own object in `function` (its first parameter,
        which `kind` reads as an instance of the function's class), None when `function` is
        not a method of a class of this file, or is a static method."""
        return self._method_of_node(function)[0]

    def _method_of(self, scope: Scope | None) -> tuple[str | None, str | None]:
        return self._method_of_node(scope.root if scope is not None else None)

    def _method_of_node(self, root: cst.CSTNode | None) -> tuple[str | None, str | None]:
        if not isinstance(root, cst.FunctionDef):
            return None, None
        known = self._methods.get(id(root))
        if known is not None and known[0] is root:
            return known[1]
        owner = self.context.method_owners.get(id(root))
        if owner is None:
            # not remembered: the walk may not have entered the function yet
            return None, None
        names = _param_names(root)
        found: tuple[str | None, str | None] = (None, None) if not names or any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
            for d in root.decorators
        ) else (names[0], owner.name.value)
        self._methods[id(root)] = (root, found)
        return found

    def _identity(self, root: cst.CSTNode, cls: str | None, self_name: str | None
                  ) -> tuple[str | None, str] | None:
        """(class or None, name) of a function of this file that the index has facts of: a
        top-level function, or a method of a top-level class; None for another (nested)."""
        if not isinstance(root, cst.FunctionDef):
            return None
        key = id(root)
        known = self._identities.get(key)
        if known is not None and known[0] is root:
            return known[1]
        found: tuple[str | None, str] | None = None
        name = root.name.value
        facts = self.index.files.get(self.path)
        owner = self.context.method_owners.get(id(root))
        if facts is not None and owner is not None:
            if self_name is not None and cls is not None and any(
                    statement is owner for statement in self._top_level()):
                found = (cls, name)
        elif facts is not None and any(statement is root for statement in self._top_level()):
            found = (None, name)
        self._identities[key] = (root, found)
        return found

    def _top_level(self) -> list[cst.CSTNode]:
        if self._tops is None:
            self._tops = _top_level_nodes(self.context)
        return self._tops

    def _params(self, root: cst.CSTNode) -> frozenset[str]:
        """The parameter names of a function (none for a module)."""
        if not isinstance(root, cst.FunctionDef):
            return frozenset()
        known = self._param_sets.get(id(root))
        if known is None or known[0] is not root:
            known = self._param_sets[id(root)] = (root, frozenset(_param_names(root)))
        return known[1]

    def _where(self, scope: Scope | None, before: int | None, cls: str | None,
               self_name: str | None) -> Where:
        if scope is None:
            return Where(self.path, cls)
        params = self._params(scope.root)
        module_scope = not isinstance(scope.root, cst.FunctionDef)
        cache: dict[str, Summary | None] = {}
        identity = self._identity(scope.root, cls, self_name)

        def local(name: str) -> Summary | None:
            if name in cache:
                return cache[name]
            found = [a for a in scope.assigned(name, before)]
            result: Summary | None
            if found:
                last = found[-1]
                if last.value is not None:
                    result = summarize(last.value, self_name)
                elif last.element is not None:
                    result = summarize(last.element, self_name)
                elif last.iterates is not None:
                    result = Iter(summarize(last.iterates, self_name))
                elif last.unpacks is not None and last.position is not None:
                    result = Item(summarize(last.unpacks, self_name), last.position)
                elif isinstance(last.site.node, cst.For) and name in (
                        flat := _flat_names(last.site.node.target)):
                    # `for i, m in enumerate(models)`: m is the element 1 of each
                    result = Item(Iter(summarize(last.site.node.iter, self_name)), flat[name])
                else:
                    result = UNKNOWN
                if result is not UNKNOWN:
                    # its names take the values they had there
                    result = Local(result, last.site.order)
                if name in self._mutated(scope, identity, cls):
                    result = Mutated(result)
            elif name in params:
                # what the project's call sites pass, for a function the index knows
                result = Param(self.path, identity[0], identity[1], name) if (
                    identity is not None and name != self_name) else UNKNOWN
            elif before is not None and (bound := self._comprehension_binding(
                    scope, name, before, self_name)) is not None:
                result = bound
            elif module_scope:
                # at module level, a name assigned only later (or never) is not known here
                result = UNKNOWN if scope.assigned(name) else None
            else:
                result = None
            cache[name] = result
            return result

        return Where(self.path, cls, local,
                     lambda order: self._where(scope, order, cls, self_name), self._local_kinds)


_BUILTIN_NAMES = frozenset(dir(builtins))
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def _comprehensions(scope: Scope) -> tuple[list, dict]:
    """The comprehensions of a scope's code: (the names each binds -> the expression it
    iterates, None for a name of a tuple target; the ids of the nodes inside it), and the
    scope's sites by order."""
    found = []
    root = scope.root.body if isinstance(scope.root, cst.FunctionDef) else scope.root
    for node in code_nodes(root, prune=NESTED_SCOPES):
        if not isinstance(node, _COMPREHENSIONS):
            continue
        bindings: dict[str, tuple[cst.BaseExpression, int | None] | None] = {}
        comp_for: cst.CompFor | None = node.for_in
        while comp_for is not None:
            if isinstance(comp_for.target, cst.Name):
                bindings[comp_for.target.value] = (comp_for.iter, None)
            else:
                flat = _flat_names(comp_for.target)
                bindings.update((n, (comp_for.iter, flat[n]) if n in flat else None)
                                for n in _bound_names(comp_for.target))
            comp_for = comp_for.inner_for_in
        found.append((bindings, {id(inner) for inner in code_nodes(node)}))
    orders = {}
    if found:
        orders = {site.order: site for site in scope.sites}
        orders.update((a.site.order, a.site) for a in scope.assignments)
    return found, orders


@record(frozen=True)
class Effect:
    """What a call does (`SemanticModel.call_effects`): `effect` is `eval`, `train`,
    `zero_grad`, `step` (of an optimizer or a scheduler: ask what the target holds) or
    `no_grad`; `target` the caller's dotted name it is done to, None when not known (and for
    `no_grad`)."""

    effect: str
    target: str | None


@record(frozen=True)
class ProjectFunction:
    """A function of the project (`cls` None) or a method of its class `cls`, in `path`."""

    path: str
    cls: str | None
    name: str


@record(frozen=True)
class Stepped:
    """What a project function calls `.step()` on (`SemanticModel.steps_in`): what the model
    knows it holds (None when not known) and its last name (`optimizer` of
    `self.optimizer`; empty when it is no name)."""

    kind: Kind | None
    name: str


@record(frozen=True)
class PassedArgument:
    """What one call of a project function passes for one of its parameters
    (`SemanticModel.arguments_passed`): the caller's file, the plain name passed (None when
    it passes no plain name there), what it holds, whether the caller puts it in eval or
    training mode itself, and whether a call there passes it to a project function that puts
    it in eval mode (None: to a function not known)."""

    path: str
    name: str | None
    kind: Kind | None
    evals: bool
    trains: bool
    put_in_eval: bool | None


# functions given a model that do not set its mode
_MODELESS_BUILTINS = frozenset({"print", "len", "isinstance", "type", "id", "repr", "str",
                                "hasattr", "getattr"})


_DEFAULT = object()


def _argument(call: cst.Call, params: list[str], offset: int, name: str):
    """The expression `call` passes for the parameter `name` of a function whose parameters
    are `params` (`offset` 1 for a method called on its object), None when not known (a
    starred argument), `_DEFAULT` when the call leaves it to its default."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    if name not in params:
        return None
    position = params.index(name) - offset
    if position < 0:
        return None
    positional = [arg for arg in call.args if arg.keyword is None]
    for arg in positional[:position + 1]:
        if arg.star:
            return None
    if position < len(positional):
        return positional[position].value
    return None if any(arg.star for arg in call.args) else _DEFAULT


# -- what `children()` yields ---------------------------------------------------------------


@record(frozen=True)
class Submodule:
    """A submodule of a module, as the project builds it: the attribute that holds it, its
    class (`torch.nn.Conv2d`, a project class `models.py:Block`, a builder such as
    `torchvision.models.resnet18`, or None for a value that is no layer but may be a
    container, such as `seq_a + seq_b`), and its value's summary where it is built."""

    attr: str
    cls: str | None
    summary: Summary
    where: Where


_NOT_KNOWN = object()
_PLAIN = (Num, Str, Const, Seq, DictDisplay, Comp)
_BOOLS = (Const("True"), Const("False"))


def subclassed(index: ProjectIndex, path: str, cls: str) -> bool:
    """A class of the project derives from the project class `cls` of `path`."""
    for other_path, facts in index.files.items():
        for name, other in facts["classes"].items():
            for base in other["bases"]:
                if not isinstance(base, Ref) or base.name.rsplit(".", 1)[-1] != cls:
                    continue
                found = index.resolve(other_path, base.name)
                if found is not None and found[:2] == ("class", path) and found[2] == cls and (
                        (other_path, name) != (path, cls)):
                    return True
    return False


def class_lineage(index: ProjectIndex, path: str, cls: str
                  ) -> list[tuple[str, str, dict]]:
    """The project class and its project base classes, nearest first: (path, name, facts)."""
    return _lineage(index, path, cls)[0]


def _lineage(index: ProjectIndex, path: str, cls: str) -> tuple[list[tuple[str, str, dict]], bool]:
    """The class and its project base classes (path, name, facts), and whether every base is
    known: `nn.Module`, `object` or a class of the project."""
    found: list[tuple[str, str, dict]] = []
    complete = True
    stack = [(path, cls)]
    while stack and len(found) < 20:
        path, cls = stack.pop()
        facts = index.files.get(path, {}).get("classes", {}).get(cls)
        if facts is None:
            complete = False
            continue
        if any(p == path and c == cls for p, c, _ in found):
            continue
        found.append((path, cls, facts))
        for base in facts["bases"]:
            if base == Ref("object"):
                continue
            resolved = index.resolve(path, base.name) if isinstance(base, Ref) else None
            if resolved is not None and resolved[0] == "torch" and resolved[1] == "torch.nn.Module":
                continue
            if resolved is not None and resolved[0] == "class" and "." not in resolved[2]:
                stack.append((resolved[1], resolved[2]))
                continue
            complete = False
    return found, complete and not stack


def _held(index: ProjectIndex, path: str, cls: str, facts: dict, attr: str, method: str,
          value: Summary):
    """What one value assigned to `self.attr` is: a Submodule, None (no module), or
    _NOT_KNOWN."""
    if isinstance(value, _PLAIN):
        return None
    if isinstance(value, (Op, BinOp, UnaryOp)):
        return Submodule(attr, None, value, Where(path, cls))
    func = facts["methods"].get(method)
    if isinstance(value, Ref) and func is not None and "." not in value.name:
        name = value.name
        defaults = func.get("defaults", {})
        if (name in func["params"] or name in defaults) and name not in func["assigns"]:
            default = defaults.get(name)
            if default is not None and (isinstance(default, (Num, Str)) or default in _BOOLS):
                return None  # a parameter whose default is a number, a string or a bool
            passed = index.passed(path, cls, method, name)
            if passed and all(isinstance(value, (Num, Str)) or value in _BOOLS
                              for value in passed):
                return None  # every call site passes a number, a string or a bool
            return _NOT_KNOWN
    where = Where(path, cls, _locals(func) if func is not None else None)
    kind = index.kind(value, where)
    if kind is None:
        return _NOT_KNOWN
    if kind.kind == K.MODULE:
        return Submodule(attr, kind.cls, value, where) if kind.cls else _NOT_KNOWN
    return None  # a tensor, an optimizer, a function, a class (not an instance)...


def class_children(index: ProjectIndex, path: str, cls: str) -> list[Submodule] | None:
    """The direct submodules of an instance of the project class `cls` of `path` (see
    `SemanticModel.children`), or None when they are not all known."""
    lineage, complete = _lineage(index, path, cls)
    if not complete:
        return None
    if any(facts.get("registers", True) for _, _, facts in lineage):
        return None
    found = []
    for held, _ in _attribute_values(index, lineage):
        if held is _NOT_KNOWN:
            return None
        if held is not None:
            found.append(held)
    return found


def _attribute_values(index: ProjectIndex, lineage: list[tuple[str, str, dict]]):
    """For each value assigned to an attribute of `self` in the classes of `lineage`: what
    `_held` makes of it, and its summary with where it is evaluated."""
    for path, cls, facts in lineage:
        for attr, values in facts["attrs"].items():
            for method, value in values:
                func = facts["methods"].get(method)
                where = Where(path, cls, _locals(func, path, cls, method) if func else None)
                yield _held(index, path, cls, facts, attr, method, value), (value, where)


def _holds_state(index: ProjectIndex, cls: str | None, depth: int) -> bool | None:
    """`SemanticModel.holds_state` of an instance of `cls`."""
    if cls is None or depth > 8:
        return None
    if cls.startswith("torch.nn.") and cls.count(".") == 2:
        layer = cls[len("torch.nn."):]
        if layer in K.CONTAINERS:
            return None  # what it holds is its elements'
        return layer in K.STATEFUL_LAYERS
    if ":" not in cls:
        return None
    path, name = cls.split(":", 1)
    lineage, complete = _lineage(index, path, name)
    if not complete:
        return None
    instance = index.instance(path, name)
    if instance is None or instance.kind != K.MODULE:
        return None
    if instance.mode:
        return True
    unknown = instance.mode is None
    if any(facts.get("registers", True) or facts.get("state_text", True)
           for _, _, facts in lineage):
        return None
    for held, (value, where) in _attribute_values(index, lineage):
        if held is _NOT_KNOWN:
            return None
        if isinstance(held, Submodule):
            inner = _holds_state(index, held.cls, depth + 1)
            if inner:
                return True
            unknown = unknown or inner is None
        elif held is None and not isinstance(value, _PLAIN):
            kind = index.kind(value, where)
            if kind is not None and kind.kind == K.TENSOR:
                return None  # a tensor attribute may be a buffer's twin; not known
    return None if unknown else False


def _is_instance(index: ProjectIndex, cls: str | None, layer: str, depth: int = 0) -> bool | None:
    if cls is None:
        return None if layer in K.CONTAINERS else False
    if cls.startswith("torch.nn.") and cls.count(".") == 2:
        name = cls[len("torch.nn."):]
        return name == layer or layer in K.NN_BASES.get(name, ())
    if cls.startswith("torchvision.models."):
        # a model builder: a model, not a torch.nn layer
        return None if layer in K.CONTAINERS else False
    if ":" not in cls or depth > 10:
        return None
    path, name = cls.split(":", 1)
    facts = index.files.get(path, {}).get("classes", {}).get(name)
    if facts is None:
        return None
    answers: list[bool | None] = []
    for base in facts["bases"]:
        resolved = index.resolve(path, base.name) if isinstance(base, Ref) else None
        if resolved is None:
            answers.append(None)
        elif resolved[0] == "torch":
            answers.append(False if resolved[1] == "torch.nn.Module" else
                           _is_instance(index, resolved[1], layer, depth + 1))
        elif resolved[0] == "class" and "." not in resolved[2]:
            answers.append(_is_instance(index, f"{resolved[1]}:{resolved[2]}", layer, depth + 1))
        else:
            answers.append(None)
    if True in answers:
        return True
    if None in answers or not answers:
        return None
    return False


def _construction(index: ProjectIndex, summary: Summary, where: Where, depth: int = 0
                  ) -> Call | None:
    """The call that builds a value: through local names and methods that return the module
    itself (`.to(device)`)."""
    if depth > 10:
        return None
    if isinstance(summary, Ref) and "." not in summary.name and where.local is not None:
        local = where.local(summary.name)
        if local is None or local == UNKNOWN:
            return None
        return _construction(index, local, where, depth + 1)
    if isinstance(summary, Call):
        func = summary.func
        if isinstance(func, Attr) and func.name in K.RETURNS_SELF:
            return _construction(index, func.base, where, depth + 1)
        return summary
    return None


def _inside(index: ProjectIndex, sub: Submodule) -> list[Submodule]:
    """Submodules known to be inside `sub` (not necessarily all of them)."""
    cls = sub.cls
    if cls in ("torch.nn.Sequential", "torch.nn.ModuleList"):
        call = _construction(index, sub.summary, sub.where)
        if call is None:
            return []
        args = call.args
        elements: tuple[Summary, ...]
        if cls == "torch.nn.ModuleList":
            first = args[0] if len(args) == 1 else None
            elements = first.items if isinstance(first, Seq) else ()
        else:
            elements = args
        found = []
        for element in elements:
            kind = index.kind(element, sub.where)
            if kind is not None and kind.kind == K.MODULE and kind.cls:
                found.append(Submodule(sub.attr, kind.cls, element, sub.where))
        return found
    if cls is not None and ":" in cls:
        found = []
        for path, name, facts in _lineage(index, *cls.split(":", 1))[0]:
            for attr, values in facts["attrs"].items():
                for method, value in values:
                    held = _held(index, path, name, facts, attr, method, value)
                    if isinstance(held, Submodule) and held.cls is not None:
                        found.append(held)
        return found
    return []


def _contains(index: ProjectIndex, sub: Submodule, layer: str, depth: int,
              seen: set[str]) -> bool:
    if depth > 8:
        return False
    if sub.cls is not None and ":" in sub.cls:
        if sub.cls in seen:
            return False  # each project class is looked into once
        seen.add(sub.cls)
    for inner in _inside(index, sub):
        if _is_instance(index, inner.cls, layer) is True or _contains(index, inner, layer,
                                                                     depth + 1, seen):
            return True
    return False
