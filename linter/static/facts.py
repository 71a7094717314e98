"""The facts of one file of the project, read with CPython's `ast` (never imported): its
imports, and for each top-level class and function a summary of what it assigns and returns,
what it puts in eval or training mode, whose gradients it clears, what it steps and calls
(`extract`). A *summary* is a tree of `modellint.static.summary`'s dataclasses; facts are
cached per file as JSON, where a summary is a tagged list (`summary.convert_facts`,
`FACTS_VERSION`).

LibCST's summaries of the same expressions are made by `modellint.static.semantic.summarize`;
`modellint.static.evaluate` tells what they are (`Kind`).
"""

from __future__ import annotations

import ast
import collections
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from modellint.static import kinds as K
from modellint.static.facts_version import FACTS_VERSION
from modellint.static.outline import ast_code_children, ast_walk, parse
from modellint.static.summary import (
    JSON_DEFAULT,
    NONE,
    OP,
    STR,
    THIS,
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
    Num,
    Ref,
    SelfAttr,
    Seq,
    Slice,
    Sub,
    Summary,
    UnaryOp,
)

_MODE_TEXT = re.compile(r"\btraining\b|dropout|\.train\(|\.eval\(")
# a class that registers submodules other than by assigning `self.x` (its children are not
# all in its `attrs`)
_REGISTERS_TEXT = re.compile(r"add_module|register_module|setattr|_modules\b")
# a class that may hold parameters or buffers other than through its submodules
_STATE_TEXT = re.compile(r"register_buffer|register_parameter|Parameter|_parameters\b|"
                         r"_buffers\b|__dict__|load_state_dict|state_dict")
# the builtins a call may name (never a project function)
BUILTINS = frozenset({"super", "len", "range", "int", "float", "str", "list", "dict", "tuple",
                       "set", "isinstance", "getattr", "hasattr", "print", "zip", "enumerate",
                       "min", "max", "sum", "abs", "round", "sorted", "type", "bool"})


def name_summary(parts: list[str], self_name: str | None) -> Summary:
    """The summary of a dotted name (`a.b.c` as its parts): the method's own object (`this`),
    an attribute of it (`self`, then `attr`s), or a reference to a name."""
    if self_name is not None and parts[0] == self_name:
        if len(parts) == 1:
            return THIS
        summary: Summary = SelfAttr(parts[1])
        for attr in parts[2:]:
            summary = Attr(summary, attr)
        return summary
    return Ref(".".join(parts))


def summarize(node: ast.AST | None, self_name: str | None = None, depth: int = 0) -> Summary:
    """The summary of an ast expression."""
    if node is None or depth > 12:
        return UNKNOWN
    if isinstance(node, (ast.Name, ast.Attribute)):
        parts = []
        inner: ast.expr = node
        while isinstance(inner, ast.Attribute):
            parts.append(inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name):
            parts.append(inner.id)
            parts.reverse()
            return name_summary(parts, self_name)
        if isinstance(node, ast.Attribute):  # always: a plain Name returned above
            return Attr(summarize(node.value, self_name, depth + 1), node.attr)
    if isinstance(node, ast.Call):
        args = tuple(UNKNOWN if isinstance(a, ast.Starred) else summarize(a, self_name, depth + 1)
                     for a in node.args)
        keywords: dict[str, Summary] = {k.arg: summarize(k.value, self_name, depth + 1)
                    for k in node.keywords if k.arg is not None}
        if any(k.arg is None for k in node.keywords):
            keywords["**"] = UNKNOWN
        return Call(summarize(node.func, self_name, depth + 1), args, keywords)
    if isinstance(node, ast.Subscript):
        key = node.slice
        if key.__class__ is ast.Slice:
            return Slice(summarize(node.value, self_name, depth + 1))
        position = _position(key)
        if position is not None:
            return Item(summarize(node.value, self_name, depth + 1), position)
        literal = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        return Sub(summarize(node.value, self_name, depth + 1), literal)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or node.value is None:
            return Const(str(node.value))
        if isinstance(node.value, (int, float)):
            return Num(float(node.value))
        return STR
    if isinstance(node, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return UNKNOWN  # `[*a, b]`: its elements are not those written
        return Seq(tuple(summarize(e, self_name, depth + 1) for e in node.elts))
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return UNKNOWN  # `{**a, ...}`
        return DictDisplay(tuple((k.value if isinstance(k, ast.Constant) and isinstance(
            k.value, str) else None, summarize(v, self_name, depth + 1))
            for k, v in zip(node.keys, node.values, strict=True)))
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        bound: list[tuple[str, Summary]] = []
        for generator in node.generators:
            iterated = summarize(generator.iter, self_name, depth + 1)
            if isinstance(generator.target, ast.Name):
                bound.append((generator.target.id, Iter(iterated)))
            else:
                flat = _flat_names(generator.target)
                bound.extend((n.id, Item(Iter(iterated), flat[n.id]) if n.id in flat
                              else UNKNOWN) for n in ast.walk(generator.target)
                             if isinstance(n, ast.Name))
        element = node.value if isinstance(node, ast.DictComp) else node.elt
        return Comp(summarize(element, self_name, depth + 1), tuple(bound),
                    isinstance(node, ast.DictComp))
    if isinstance(node, ast.BinOp) and node.op.__class__ in _OPERATORS:
        return BinOp(_OPERATORS[node.op.__class__], summarize(node.left, self_name, depth + 1),
                     summarize(node.right, self_name, depth + 1))
    if isinstance(node, ast.UnaryOp) and node.op.__class__ in _OPERATORS:
        return UnaryOp(_OPERATORS[node.op.__class__],
                       summarize(node.operand, self_name, depth + 1))
    if isinstance(node, ast.IfExp):
        return Join((summarize(node.body, self_name, depth + 1),
                     summarize(node.orelse, self_name, depth + 1)))
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.JoinedStr)):
        # arithmetic, a comparison, an f-string: a number, a bool, a string, a tensor, or
        # (`seq_a + seq_b`) a container: never a layer such as a Conv2d
        return OP
    return UNKNOWN


def _flat_names(target: ast.AST) -> dict[str, int]:
    """The names of a flat tuple target (`i, m`) before any starred one -> their positions,
    when each is bound once."""
    if not isinstance(target, (ast.Tuple, ast.List)):
        return {}
    found: dict[str, int] = {}
    for position, element in enumerate(target.elts):
        if isinstance(element, ast.Starred):
            break
        if isinstance(element, ast.Name):
            found[element.id] = position if element.id not in found else -1
    return {name: position for name, position in found.items() if position >= 0}


# the operators of `BinOp` and `UnaryOp` summaries
_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
              ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
              ast.BitXor: "^", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}


def _position(key: ast.AST) -> int | None:
    """The integer of a subscript `x[1]`, `x[-1]`."""
    if key.__class__ is ast.Constant and type(key.value) is int:
        return key.value
    if (key.__class__ is ast.UnaryOp and key.op.__class__ is ast.USub
            and key.operand.__class__ is ast.Constant
            and type(key.operand.value) is int):
        return -key.operand.value
    return None


def _defaults(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Summary]:
    """Parameter -> the summary of its default value."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    found = {a.arg: summarize(d) for a, d in zip(
        positional[len(positional) - len(args.defaults):], args.defaults, strict=True)}
    found.update({a.arg: summarize(d) for a, d in zip(args.kwonlyargs, args.kw_defaults,
                                                      strict=True) if d is not None})
    return found


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = func.args
    return [a.arg for a in (*args.posonlyargs, *args.args)]


# the node classes `_function_facts` reads (ast's classes are final: `isinstance` is `is`)
_FUNCTION_FACT_NODES = frozenset({ast.Call, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                                  ast.AsyncFor, ast.Return, ast.Attribute, ast.Name})
# decorators that leave a function to be called by its name only
_PLAIN_DECORATORS = re.compile(r"(?:^|\.)(?:staticmethod|classmethod|no_grad|inference_mode|"
                               r"wraps|lru_cache|cache)$|(?:^|_)(?:no_grad|inference_mode)$")


class _Usage:
    """How a file uses names, for the call sites of its functions (`ProjectIndex.call_sites`):
    how often each plain name is read, and how often as the function of a call the facts keep
    (an `invokes`); the methods it calls on values other than `self`; per class, how often each
    `self.x` is read, and called as a method."""

    def __init__(self, modules: frozenset[str]) -> None:
        # the names of the file's imports (a call `alias.f(...)` may call a project function)
        self.modules = modules
        self.loads: collections.Counter[str] = collections.Counter()
        self.callees: collections.Counter[str] = collections.Counter()
        self.attr_calls: set[str] = set()
        self.self_loads: collections.Counter[str] = collections.Counter()
        self.self_callees: collections.Counter[str] = collections.Counter()
        # (id of a call, self name) -> [its summary, the JSON of it or None]: a method's calls
        # are summarized for its own facts and for its class's
        self.summaries: dict[tuple[int, str | None], list] = {}

    def summary(self, node: ast.Call, self_name: str | None) -> Summary:
        """`summarize(node, self_name)`, once per call."""
        return self._summarized(node, self_name)[0]

    def summary_key(self, node: ast.Call, self_name: str | None) -> str:
        """The JSON text of `summary(node, self_name)` (what tells two calls' apart)."""
        found = self._summarized(node, self_name)
        if found[1] is None:
            found[1] = json.dumps(found[0], default=JSON_DEFAULT)
        return found[1]

    def _summarized(self, node: ast.Call, self_name: str | None) -> list:
        key = (id(node), self_name)
        found = self.summaries.get(key)
        if found is None:
            found = self.summaries[key] = [summarize(node, self_name), None]
        return found

    def count(self, nodes: Iterable[ast.AST], self_name: str | None = None) -> None:
        """Count the names (and `self.x`) read in `nodes` and everything inside them."""
        for top in nodes:
            for node in ast_walk(top):
                if node.__class__ is ast.Name and node.ctx.__class__ is ast.Load:
                    self.loads[node.id] += 1
                elif (self_name is not None and node.__class__ is ast.Attribute
                      and node.value.__class__ is ast.Name and node.value.id == self_name):
                    self.self_loads[node.attr] += 1

    def escapes(self, names: Iterable[str]) -> list[str]:
        """Those of `names` read other than as the function of a call the facts keep."""
        return sorted(n for n in set(names) if self.loads[n] > self.callees[n])

    def self_escapes(self) -> list[str]:
        return sorted(n for n, c in self.self_loads.items() if c > self.self_callees[n])


def _signature_nodes(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list:
    """The expressions of a definition that run where it is defined: decorators, defaults,
    bases, keywords."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords]
    args = node.args
    return [*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d)]


def _function_facts(func, self_name: str | None, attrs: dict | None = None,
                    usage: _Usage | None = None, classes: list | None = None) -> dict:
    """params, assigns (name -> summary, when assigned once), iters (name -> iterable),
    returns (summaries), reads_training, steps (what `x.step(...)` steps: the summary of `x`,
    or of the optimizer a `scaler.step(optimizer)` is given), decorated (by a decorator
    that may call it other than by its name). The names it reads are counted in `usage`
    (a method's are counted by its class)."""
    assigns: dict[str, Any] = {}
    iters: dict[str, Any] = {}
    returns: list = []
    steps: list = []
    reads_training = False
    own_usage = usage if usage is not None else _Usage(frozenset())
    modes = _Modes(self_name, own_usage)
    nested: list[ast.AST] = []
    count = attrs is None  # a method's names are counted by its class, nested code included
    loads = own_usage.loads
    # name -> every value of a name assigned more than once (`joins` of the facts)
    joins: dict[str, list] = {}
    mutates: set[str] = set()
    returned = _returned_assignments(func.body, self_name)
    for node in _own_nodes(func.body, nested):
        if node.__class__ not in _FUNCTION_FACT_NODES:
            continue  # most nodes: constants, operators
        if node.__class__ is ast.Name:
            if count and node.ctx.__class__ is ast.Load:
                loads[node.id] += 1
            continue
        if isinstance(node, ast.Call):
            modes.add(node)
        _mutation(node, self_name, mutates)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _assign(target, node.value, self_name, assigns, attrs, func.name, joins)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            _assign(node.target, node.value, self_name, assigns, attrs, func.name, joins)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            operator = _OPERATORS.get(node.op.__class__)
            name = node.target.id
            if name not in assigns:
                # its value before: not this function's (or not known); never itself
                assigns[name] = UNKNOWN
                joins.setdefault(name, [])
            _bind(assigns, joins, name, UNKNOWN if operator is None else BinOp(
                operator, Ref(name), summarize(node.value, self_name)))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            if isinstance(node.target, ast.Name):
                name = node.target.id
                iters[name] = summarize(node.iter, self_name) if name not in iters else UNKNOWN
                _bind(assigns, joins, name, Iter(summarize(node.iter, self_name)))
            else:
                flat = _flat_names(node.target)
                for bound in ast.walk(node.target):
                    if isinstance(bound, ast.Name):
                        # `for i, m in enumerate(models)`: m is the element 1 of each
                        _bind(assigns, joins, bound.id, UNKNOWN if bound.id not in flat else Item(
                            Iter(summarize(node.iter, self_name)), flat[bound.id]))
        elif isinstance(node, ast.Return):
            returns.append(returned[id(node)] if id(node) in returned else summarize(
                node.value, self_name) if node.value is not None else NONE)
        elif isinstance(node, ast.Attribute) and node.attr == "training":
            reads_training = True
        elif isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(
                node.ctx, ast.Store):
            modes.zeroes.add("?")  # `p.grad = None`: which optimizer's gradients, not known
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "step"):
            stepped = node.func.value
            if "scaler" in (_dotted(stepped) or "").rsplit(".", 1)[-1].lower() and node.args:
                stepped = node.args[0]
            summary = summarize(stepped, self_name)
            if summary not in steps:
                steps.append(summary)
    if count:
        own_usage.count(nested)
        own_usage.count(_signature_nodes(func))
    if classes is not None:
        classes.extend(node for node in nested if node.__class__ is ast.ClassDef)
    decorated = any(not _PLAIN_DECORATORS.search(_dotted(
        d.func if isinstance(d, ast.Call) else d) or "?") for d in func.decorator_list)
    return {"params": _params(func), "defaults": _defaults(func), "assigns": assigns,
            "returns": returns, "steps": steps, "decorated": decorated,
            "training": reads_training, "no_grad": _runs_without_grad(func), **modes.facts(),
            **({"joins": joins} if joins else {}),
            **({"mutates": sorted(mutates)} if mutates else {})}


# `torch.no_grad`, `torch.inference_mode`, and a project's own wrapper of them (YOLOv5's
# `smart_inference_mode`)
_NO_GRAD_NAME = re.compile(r"(?:^|[._])(?:no_grad|inference_mode)$")


def _without_grad(node: ast.AST) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()` (not `inference_mode(False)`), as a
    decorator or a `with` item."""
    call = node if isinstance(node, ast.Call) else None
    if call is not None and call.args and isinstance(call.args[0], ast.Constant) and (
            call.args[0].value is False):
        return False
    return bool(_NO_GRAD_NAME.search(_dotted(call.func if call is not None else node) or ""))


def _runs_without_grad(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The whole body of the function runs under no_grad: it is decorated so, or its body
    (after a docstring) is one `with torch.no_grad():` block."""
    if any(_without_grad(d) for d in func.decorator_list):
        return True
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return len(body) == 1 and isinstance(body[0], (ast.With, ast.AsyncWith)) and any(
        _without_grad(item.context_expr) for item in body[0].items)



def _mutation(node: ast.AST, self_name: str | None, mutates: set[str]) -> None:
    """Add to `mutates` the dotted name whose container `node` changes: `xs.append(x)`,
    `heads[k] = m`, `xs += [m]` (`self.x` as `self.x` whatever the method's self name)."""
    changed: list[ast.AST] = []
    if node.__class__ is ast.Call and node.func.__class__ is ast.Attribute and (
            node.func.attr in K.MUTATORS):
        changed.append(node.func.value)
    elif node.__class__ is ast.Assign:
        changed.extend(t.value for t in node.targets if t.__class__ is ast.Subscript)
    elif node.__class__ is ast.AugAssign:
        target = node.target
        changed.append(target.value if target.__class__ is ast.Subscript else target)
    for value in changed:
        dotted = _dotted(value)
        if dotted is None:
            continue
        head, _, rest = dotted.partition(".")
        mutates.add(f"self.{rest}" if rest and head == self_name else dotted)


def _bind(assigns: dict, joins: dict | None, name: str, summary: Summary) -> None:
    """`name` takes the value `summary`: its one value, or UNKNOWN in `assigns` when it has
    several, all kept in `joins`."""
    if name not in assigns:
        assigns[name] = summary
        return
    if joins is not None:
        joins.setdefault(name, [assigns[name]]).append(summary)
    assigns[name] = UNKNOWN


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


class _Modes:
    """Which names the code puts in eval mode (`x.eval()`, `x.train(False)`, `x.train(mode)`
    with a computed mode) or training mode (`x.train()`), whose gradients it clears
    (`x.zero_grad()`; "?" for a clearing of gradients not known to be one name's), the calls
    that pass plain names to a function named by a dotted name: [callee, [name or None per
    positional argument]], and the calls of what may be a project function (a plain name, a
    method of `self`, a name of an imported module): their summaries (`invokes`)."""

    def __init__(self, self_name: str | None, usage: _Usage) -> None:
        self.self_name = self_name
        self.usage = usage
        self.evals: set[str] = set()
        self.trains: set[str] = set()
        self.zeroes: set[str] = set()
        self.calls: set[tuple] = set()
        self.invokes: dict[str, Summary] = {}

    def add(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("eval", "train", "zero_grad"):
            receiver = func.value
            while (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
                   and receiver.func.attr in K.RETURNS_SELF):
                receiver = receiver.func.value
            name = _dotted(receiver)
            if func.attr == "zero_grad":
                self.zeroes.add(name if name is not None else "?")
            elif name is not None:
                arguments = [*node.args, *(k.value for k in node.keywords)]
                if func.attr == "eval" or (arguments and not (
                        isinstance(arguments[0], ast.Constant) and arguments[0].value is True)):
                    self.evals.add(name)
                else:
                    self.trains.add(name)
        elif isinstance(func, ast.Attribute) and func.attr == "zero_" and isinstance(
                func.value, ast.Attribute) and func.value.attr == "grad":
            self.zeroes.add("?")
        callee = _dotted(func)
        if callee is not None and any(isinstance(a, ast.Name) for a in node.args):
            self.calls.add((callee, tuple(a.id if isinstance(a, ast.Name) else None
                                          for a in node.args)))
        if callee is None or callee in BUILTINS:
            if isinstance(func, ast.Attribute):
                self.usage.attr_calls.add(func.attr)
            return
        head, _, rest = callee.partition(".")
        if not rest or "." not in rest and (head == self.self_name or head in (
                self.usage.modules)):
            self.invokes.setdefault(self.usage.summary_key(node, self.self_name),
                                    self.usage.summary(node, self.self_name))
            if head == self.self_name:
                self.usage.self_callees[rest] += 1
            else:
                self.usage.callees[head] += 1
        elif isinstance(func, ast.Attribute):
            self.usage.attr_calls.add(func.attr)

    def facts(self) -> dict:
        return {"evals": sorted(self.evals), "trains": sorted(self.trains),
                "zeroes": sorted(self.zeroes),
                "calls": sorted(([callee, list(args)] for callee, args in self.calls),
                                key=json.dumps),
                "invokes": [self.invokes[key] for key in sorted(self.invokes)]}


_NESTED_CODE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _own_nodes(body: list[ast.stmt], nested: list[ast.AST] | None = None) -> Iterator[ast.AST]:
    """Every node of `body` that runs with it: nested functions, classes and lambdas left out
    (put in `nested`, when given)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED_CODE):
            if nested is not None:
                nested.append(node)
            continue
        yield node
        stack.extend(ast_code_children(node))


def _mode_facts(body: list[ast.stmt], usage: _Usage, defined: set[int]) -> dict:
    """The `_Modes` facts of a module's top-level code; `defined`: the ids of the classes and
    functions whose facts are kept (their names are counted with them)."""
    modes = _Modes(None, usage)
    nested: list[ast.AST] = []
    loads = usage.loads
    mutates: set[str] = set()
    for node in _own_nodes(body, nested):
        if node.__class__ is ast.Call:
            modes.add(node)
        elif node.__class__ is ast.Name and node.ctx.__class__ is ast.Load:
            loads[node.id] += 1
        _mutation(node, None, mutates)
    usage.count(node for node in nested if id(node) not in defined)
    return {**modes.facts(), **({"mutates": sorted(mutates)} if mutates else {})}


def _returned_assignments(body: list[ast.stmt], self_name: str | None) -> dict[int, Summary]:
    """For each `return x` of the body itself: the summary of the value last assigned to `x`
    before it, when that is a plain `x = value` statement of the body (`x = self.fc(x)`,
    `x = F.softmax(x, dim=1)`, `return x`), so no branch or loop between them assigns `x`.
    Keyed by the return's id; a name assigned more than once is otherwise not known."""
    found: dict[int, Summary] = {}
    for index, statement in enumerate(body):
        if not (isinstance(statement, ast.Return) and isinstance(statement.value, ast.Name)):
            continue
        name = statement.value.id
        last = next((s for s in reversed(body[:index]) if any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
            for n in _own_nodes([s]))), None)
        if (isinstance(last, ast.Assign) and len(last.targets) == 1
                and isinstance(last.targets[0], ast.Name)):
            found[id(statement)] = summarize(last.value, self_name)
    return found


def _assign(target, value, self_name, assigns: dict, attrs: dict | None, method: str,
            joins: dict | None = None) -> None:
    if isinstance(target, (ast.Tuple, ast.List)):
        values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(
            value.elts) == len(target.elts) else None
        whole = summarize(value, self_name) if values is None and value is not None else None
        for index, element in enumerate(target.elts):
            if values:
                _assign(element, values[index], self_name, assigns, attrs, method, joins)
                continue
            if whole is None or whole == UNKNOWN or any(
                    isinstance(e, ast.Starred) for e in target.elts[:index + 1]):
                _assign(element, None, self_name, assigns, attrs, method, joins)
                continue
            # `a, b = f(x)`: b is the element 1 of what f returns
            _assign_summary(element, Item(whole, index), self_name, assigns, attrs, method,
                            joins)
        return
    _assign_summary(target, summarize(value, self_name), self_name, assigns, attrs, method,
                    joins)


def _assign_summary(target, summary: Summary, self_name, assigns: dict, attrs: dict | None,
                    method: str, joins: dict | None = None) -> None:
    if isinstance(target, ast.Name):
        _bind(assigns, joins, target.id, summary)
    elif (attrs is not None and isinstance(target, ast.Attribute)
          and isinstance(target.value, ast.Name) and target.value.id == self_name):
        attrs.setdefault(target.attr, []).append([method, summary])


def _class_facts(node: ast.ClassDef, lines: list[str], usage: _Usage | None = None) -> dict:
    attrs: dict[str, list] = {}
    methods: dict[str, dict] = {}
    calls: dict[str, Summary] = {}
    super_init = False
    file_usage = usage if usage is not None else _Usage(frozenset())
    # the `self.x` of this class's methods, counted apart from other classes'
    own = _Usage(file_usage.modules)
    own.loads, own.callees, own.attr_calls, own.summaries = (
        file_usage.loads, file_usage.callees, file_usage.attr_calls, file_usage.summaries)
    loads, self_loads = own.loads, own.self_loads
    own.count(_signature_nodes(node))
    for statement in node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = _params(statement)
            static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                         for d in statement.decorator_list)
            self_name = params[0] if params and not static else None
            methods.setdefault(statement.name, _function_facts(statement, self_name, attrs, own))
            for sub in ast_walk(statement):
                if sub.__class__ is ast.Name and sub.ctx.__class__ is ast.Load:
                    loads[sub.id] += 1
                elif (sub.__class__ is ast.Attribute and self_name is not None
                      and sub.value.__class__ is ast.Name
                      and sub.value.id == self_name):
                    self_loads[sub.attr] += 1
                if isinstance(sub, ast.Call):
                    func = sub.func
                    if (statement.name == "__init__" and isinstance(func, ast.Attribute)
                            and func.attr == "__init__" and isinstance(func.value, ast.Call)
                            and isinstance(func.value.func, ast.Name)
                            and func.value.func.id == "super"):
                        super_init = True
                    if isinstance(func, (ast.Name, ast.Attribute)):
                        summary = own.summary(sub, self_name)
                        if isinstance(summary, Call) and isinstance(summary.func, Ref):
                            calls.setdefault(own.summary_key(sub, self_name), summary)
        else:
            own.count([statement])
    start, end = node.lineno - 1, getattr(node, "end_lineno", node.lineno) or node.lineno
    text = "\n".join(lines[start:end])
    return {
        "bases": [summarize(b) for b in node.bases],
        "attrs": attrs,
        "methods": methods,
        "calls": list(calls.values()),
        "super_init": super_init,
        "mode_text": bool(_MODE_TEXT.search(text)),
        "registers": bool(_REGISTERS_TEXT.search(text)),
        "state_text": bool(_STATE_TEXT.search(text)),
        # methods read as `self.m` other than to call them (a callback): called from elsewhere
        "self_escapes": own.self_escapes(),
    }


_STATEMENT_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def _imports(tree: ast.Module) -> dict[str, str]:
    aliases: dict[str, str] = {}
    # ast.walk's breadth-first order (a later import of a name wins), over statements only:
    # an import is never inside an expression, and expressions are most of the nodes
    queue: collections.deque[ast.AST] = collections.deque([tree])
    while queue:
        node = queue.popleft()
        queue.extend(child for child in ast_code_children(node)
                     if isinstance(child, _STATEMENT_HOLDERS))
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    aliases[head] = head
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    # no name of its own: kept under a key no name can be (the file depends
                    # on the module, and the call sites of its functions here are not known)
                    aliases[f"*{module}"] = module
                    continue
                local = alias.asname or alias.name
                aliases[local] = f"{module}.{alias.name}" if module.strip(".") else (
                    module + alias.name)
    return aliases


def _top_level(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements at module level, also inside if/try blocks."""
    for statement in body:
        if isinstance(statement, ast.If):
            yield from _top_level(statement.body)
            yield from _top_level(statement.orelse)
        elif isinstance(statement, ast.Try):
            yield from _top_level(statement.body)
            for handler in statement.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(statement.orelse)
        else:
            yield statement


def extract(text: str, tree: ast.Module | None = None) -> dict:
    """The facts of one file's text; of a text that does not parse, the facts of its
    statements that do (`modellint.static.recover`)."""
    facts: dict[str, Any] = {"v": FACTS_VERSION, "imports": {}, "classes": {}, "functions": {},
                             "globals": {}}
    if tree is None:
        tree = parse(text)
        if tree is None and text:
            from modellint.static.recover import recover  # costly to load; few files need it

            recovery = recover(text)
            text, tree = recovery.text, recovery.tree
        if tree is None:
            return facts
    try:
        facts["imports"] = _imports(tree)
        lines = text.splitlines()
        globals_: dict[str, Any] = {}
        global_joins: dict[str, list] = {}
        # classes defined in the body of a top-level function
        nested_classes: list[ast.ClassDef] = []
        usage = _Usage(frozenset(facts["imports"]))
        defined: set[int] = set()
        for statement in _top_level(tree.body):
            if isinstance(statement, ast.ClassDef):
                facts["classes"][statement.name] = _class_facts(statement, lines, usage)
                defined.add(id(statement))
            elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                facts["functions"][statement.name] = _function_facts(statement, None, None, usage,
                                                                     nested_classes)
                defined.add(id(statement))
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    _assign(target, statement.value, None, globals_, None, "", global_joins)
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                _assign(statement.target, statement.value, None, globals_, None, "",
                        global_joins)
        # a class defined in a function is known by its name, when no other class of the
        # file has it (its names were counted with the function's)
        names = collections.Counter(node.name for node in nested_classes)
        for node in nested_classes:
            if names[node.name] == 1 and node.name not in facts["classes"]:
                facts["classes"][node.name] = _class_facts(
                    node, lines, _Usage(frozenset(facts["imports"])))
        facts["globals"] = globals_
        facts["script"] = _mode_facts(tree.body, usage, defined)
        if global_joins:
            facts["global_joins"] = global_joins
        # module-level names whose containers some code of the file changes
        changed = {m.split(".", 1)[0] for body in (
            facts["script"], *facts["functions"].values(),
            *(m for c in facts["classes"].values() for m in c["methods"].values()))
            for m in body.get("mutates", ())}
        if changed & globals_.keys():
            facts["mutated_globals"] = sorted(changed & globals_.keys())
        # the project's names this file reads other than to call them (a callback, a table
        # of functions, `isinstance(x, Net)`): their call sites here are not all known
        facts["escapes"] = usage.escapes(
            [*facts["classes"], *facts["functions"], *facts["imports"]])
        facts["attr_calls"] = sorted(usage.attr_calls)
    except Exception:  # noqa: BLE001 - a file the extraction cannot read has no facts
        # (RecursionError on deep nesting; anything else is a bug that must not stop the run,
        # which builds the index before linting: the file's rules then know nothing of it)
        return {"v": FACTS_VERSION, "imports": {}, "classes": {}, "functions": {}, "globals": {}}
    return facts


