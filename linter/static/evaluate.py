"""What a value is (`Kind`), across the project's files: the evaluation of the summaries of
their facts (`modellint.static.facts`), the parameters of project functions from their call
sites, the effects of calls, the instances of project classes, the elements of containers,
and what torch's callables give. `Evaluation` is the half of `ProjectIndex`
(`modellint.static.index`) that evaluates; the index holds the facts and resolves names.
What it cannot know is None.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field, fields
from typing import TYPE_CHECKING, Any

from modellint.records import record
from modellint.static import kinds as K
from modellint.static.facts import BUILTINS
from modellint.static.kinds import Kind
from modellint.static.summary import (
    NONE,
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
    Known,
    Local,
    Mutated,
    Num,
    Param,
    Ref,
    SelfAttr,
    Seq,
    Slice,
    Sub,
    Summary,
    This,
    UnaryOp,
)

_MAX_DEPTH = 40
# how many calls deep the effects of a project function are followed (`ProjectIndex.effects`)
EFFECT_DEPTH = 4
# how many calls up a parameter's kind is followed to its call sites (`ProjectIndex.param_kind`)
PARAM_DEPTH = 3


@record
class Where:
    """Where a summary is evaluated: the file, the class (for `self.x`), and the names local
    to the function (`local(name)` gives the summary of its value, UNKNOWN for a parameter,
    None when the function does not bind it)."""

    file: str
    cls: str | None = None
    local: Callable[[str], Summary | None] | None = None
    # the same function, at another point of it (for `Local` summaries)
    at: Callable[[int], Where] | None = None
    # where `Evaluation._local` keeps the kinds it finds of `local`'s names, when not in the
    # index: those of a function of the file being linted (its LibCST scope) die with its lint
    kinds: dict | None = field(default=None, compare=False, hash=False, repr=False)


class Evaluation:
    """The evaluating half of `ProjectIndex`: what it finds is remembered until the index's
    facts change (`ProjectIndex.add` clears `_memo`)."""

    if TYPE_CHECKING:  # what the evaluation asks of the index (`ProjectIndex`)
        @property
        def files(self) -> Mapping[str, dict]: ...

        def resolve(self, path: str, dotted: str, depth: int = 0
                    ) -> tuple[str, str, str] | None: ...

        def importers(self, path: str) -> list[str]: ...

        def module_file(self, name: str) -> str | None: ...

        def _absolute(self, path: str, qualified: str) -> str: ...

        def _import_target(self, path: str, qualified: str) -> str | None: ...

    def __init__(self) -> None:
        self._memo: dict[Any, Any] = {}
        # the kinds of names assigned several times in a function (`_local`)
        self._locals: dict[tuple, tuple] = {}
        self._busy: set[Any] = set()
        # call sites followed up from a parameter now (`param_kind`)
        self._param_hops = 0

    def kind(self, summary: Summary, where: Where, depth: int = 0) -> Kind | None:
        try:
            return self._kind(summary, where, depth)
        except RecursionError:
            return None

    def _kind(self, s: Summary | None, where: Where, depth: int) -> Kind | None:
        if depth > _MAX_DEPTH or s is None:
            return None
        if isinstance(s, Ref):
            return self._ref(s.name, where, depth)
        if isinstance(s, SelfAttr):
            return self._self_attr(where, s.attr, depth)
        if isinstance(s, This):
            return self.instance(where.file, where.cls, depth + 1) if where.cls else None
        if isinstance(s, Attr):
            return self._attribute(self._kind(s.base, where, depth + 1), s.name, where, depth)
        if isinstance(s, Call):
            return self._call(s, where, depth)
        if isinstance(s, Local):
            return self._kind(s.value, where.at(s.order) if where.at is not None else where,
                              depth + 1)
        if isinstance(s, Param):
            return self.param_kind(s.path, s.cls, s.function, s.name, depth + 1)
        if isinstance(s, Iter):
            return _element(self._kind(s.iterable, where, depth + 1))
        if isinstance(s, Seq):
            items = tuple(self._kind(e, where, depth + 1) for e in s.items)
            return Kind(K.TUPLE, items=items, element=join_all(items))
        if isinstance(s, Item):
            base = self._kind(s.base, where, depth + 1)
            if base is None:
                return None
            if base.items is None or not (base.kind == K.TUPLE or base.kind == K.MODULE and (
                    base.cls in _SEQUENCES)):
                return _member(base)
            position = s.position
            return base.items[position] if -len(base.items) <= position < len(
                base.items) else None
        if isinstance(s, Sub):
            base = self._kind(s.base, where, depth + 1)
            if base is not None and base.kind == K.PARAM_GROUP and s.key == "params":
                return Kind(K.PARAMETERS)
            if base is not None and base.kind in (K.DICT, K.MODULE) and s.key is not None and (
                    base.keys is not None and base.items is not None):
                if None in base.keys:
                    return None  # a key not written as a string may be this one
                found = [n for n, key in enumerate(base.keys) if key == s.key]
                return base.items[found[-1]] if found else None
            return _member(base)
        if isinstance(s, Slice):
            return _sliced(self._kind(s.base, where, depth + 1))
        if isinstance(s, DictDisplay):
            items = tuple(self._kind(v, where, depth + 1) for _, v in s.entries)
            return Kind(K.DICT, items=items, keys=tuple(k for k, _ in s.entries),
                        element=join_all(items))
        if isinstance(s, Comp):
            element = self._kind(s.element, _binding(where, s.bound), depth + 1)
            return Kind(K.DICT if s.is_dict else K.TUPLE, element=element)
        if isinstance(s, BinOp):
            return _arithmetic(s.op, self._kind(s.left, where, depth + 1),
                               self._kind(s.right, where, depth + 1))
        if isinstance(s, UnaryOp):
            operand = self._kind(s.operand, where, depth + 1)
            return Kind(K.TENSOR) if operand is not None and operand.kind == K.TENSOR else None
        if isinstance(s, Join):
            return self._join(s.values, s.name, where, depth)
        if isinstance(s, Mutated):
            return _mutated(self._kind(s.value, where, depth + 1))
        if isinstance(s, Known):
            return s.kind  # a kind already found (`_join`), never in facts
        return None

    def _join(self, values: Sequence[Summary], name: str | None, where: Where, depth: int
              ) -> Kind | None:
        """What a value that is one of `values` is (`join`; a `None` among them is left out:
        the code would fail on it). For a name assigned several times, a value that reads
        the name itself (`model = model.to(device)`, `x = x * 2`) reads it as the others
        make it."""
        plain = [v for v in values if v != NONE and v != Ref("None")]
        direct = [v for v in plain if name is None or not _mentions(v, name)]
        if not direct:
            return None
        kinds = [self._kind(v, where, depth + 1) for v in direct]
        known = [k for k in kinds if k is not None]
        if len(known) < len(kinds):
            return None
        first = join(known)
        if first is None or len(direct) == len(plain):
            return first
        outer = where.local

        def local(local_name: str) -> Summary | None:
            if local_name == name:
                return Known(first)
            return outer(local_name) if outer is not None else None

        inner = Where(where.file, where.cls, local, where.at, where.kinds)
        for value in plain:
            if value in direct:
                continue
            kind = self._kind(value, inner, depth + 1)
            if kind is None:
                return None
            known.append(kind)
        return join(known)

    def _ref(self, dotted: str, where: Where, depth: int) -> Kind | None:
        head, _, rest = dotted.partition(".")
        if where.local is not None:
            local = where.local(head)
            if local is not None:
                kind = self._local(head, local, where, depth)
                for attr in rest.split(".") if rest else ():
                    kind = self._attribute(kind, attr, where, depth)
                return kind
        found = self.resolve(where.file, dotted)
        if found is None:
            return None
        what, path, name = found
        if what == "torch":
            return _torch_reference(path)
        head, _, rest = name.partition(".")
        if what == "global":
            facts = self.files[path]
            value = facts["globals"].get(head, UNKNOWN)
            if value == UNKNOWN and head in facts.get("global_joins", ()):
                value = Join(tuple(facts["global_joins"][head]), head)
            if head in facts.get("mutated_globals", ()):
                value = Mutated(value)
            kind = self._kind(value, Where(path), depth + 1)
            for attr in rest.split(".") if rest else ():
                kind = self._attribute(kind, attr, where, depth)
            return kind
        if rest:
            return None
        if what == "class":
            return Kind("class", cls=f"{path}:{name}")
        return self._function_reference(path, name, depth)

    def _local(self, name: str, value: Summary, where: Where, depth: int) -> Kind | None:
        """The kind of the local `name` of `where`'s function, whose summary is `value`,
        found once for that function: a name assigned several times (a `Join`) reads the
        others, and those read it (`x = self.conv(x)`, `y = x + 1`, `x = y`): evaluated
        afresh at every read, their joins cost exponential time. A name being evaluated is
        unknown where it reads itself through the others."""
        if not isinstance(value, (Join, Mutated)):
            return self._kind(value, where, depth + 1)
        key = (id(where.local), id(where.at), where.file, where.cls, name)
        kinds = self._locals if where.kinds is None else where.kinds
        found = kinds.get(key)
        if found is not None:
            return found[1]
        if key in self._busy:
            return None
        self._busy.add(key)
        try:
            kind = self._kind(value, where, depth + 1)
        finally:
            self._busy.discard(key)
        # the function is kept with its kind, so that its id is not reused for another
        kinds[key] = ((where.local, where.at), kind)
        return kind

    def _function_reference(self, path: str, name: str, depth: int) -> Kind | None:
        """A project function used as a value: a loss when it returns a torch loss of its
        first parameter."""
        func = self.files[path]["functions"].get(name)
        if func is None:
            return None
        loss = self._wrapped_loss(func, Where(path, None, _locals(func, path, None, name)),
                                  first=0, depth=depth)
        return Kind(K.FUNCTION, cls=f"{path}:{name}", loss=loss) if loss else None

    def _wrapped_loss(self, func: dict, where: Where, first: int, depth: int) -> str | None:
        params = func["params"]
        if len(params) <= first or not func["returns"]:
            return None
        losses = set()
        for value in func["returns"]:
            if not isinstance(value, Call) or not value.args or value.args[0] != Ref(
                    params[first]):
                return None
            callee = self._kind(value.func, where, depth + 1)
            if callee is None or callee.loss is None:
                return None
            losses.add(callee.loss)
        return losses.pop() if len(losses) == 1 else None

    def _self_attr(self, where: Where, attr: str, depth: int) -> Kind | None:
        if where.cls is None:
            return None
        return self._class_attr(where.file, where.cls, attr, depth)

    def _once(self, key: tuple, compute: Callable[[], Kind | None],
              seen: tuple = ()) -> Kind | None:
        """`compute()` remembered under `key`; None for a key already being computed (a cycle:
        `self.a = self.b`, `self.b = self.a`)."""
        if key in self._memo:
            return self._memo[key]
        if key in self._busy or key in seen:
            return None
        self._busy.add(key)
        try:
            result = compute()
        finally:
            self._busy.discard(key)
        self._memo[key] = result
        return result

    def _class_attr(self, path: str, cls: str, attr: str, depth: int, seen=()) -> Kind | None:
        key = ("attr", path, cls, attr)
        return self._once(
            key, lambda: self._class_attr_uncached(path, cls, attr, depth, (*seen, key)), seen)

    def _class_attr_uncached(self, path, cls, attr, depth, seen) -> Kind | None:
        facts = self.files[path]["classes"].get(cls)
        if facts is None:
            return None
        values = facts["attrs"].get(attr)
        if not values:
            for base in facts["bases"]:
                found = self._class_of(base, path) if isinstance(base, Ref) else None
                if found is not None:
                    kind = self._class_attr(found[0], found[1], attr, depth, seen)
                    if kind is not None:
                        return kind
            return None
        kinds = []
        changed = any(f"self.{attr}" in m.get("mutates", ()) for m in facts["methods"].values())
        for method, value in values:
            if value == NONE:
                continue
            func = facts["methods"].get(method)
            local = _locals(func, path, cls, method) if func is not None else None
            kind = self._kind(value, Where(path, cls, local), depth + 1)
            kinds.append(_mutated(kind) if changed else kind)
        known = [k for k in kinds if k is not None]
        if not known or len(known) < len(kinds):
            return None
        first = known[0]
        if all(k == first for k in known):
            return first
        if all(k.kind == first.kind for k in known):
            return Kind(first.kind, mode=K.combine_modes(k.mode for k in known))
        return None

    def _class_of(self, base: Ref, path: str) -> tuple[str, str] | None:
        found = self.resolve(path, base.name)
        if found is None or found[0] != "class" or "." in found[2]:
            return None
        return found[1], found[2]

    def _attribute(self, kind: Kind | None, attr: str, where: Where, depth: int) -> Kind | None:
        if kind is None:
            return None
        if kind.kind == K.OPTIMIZER and attr == "param_groups":
            return Kind(K.PARAM_GROUPS)
        if kind.kind == K.TENSOR and attr in K.TENSOR_ATTRIBUTES:
            return Kind(K.TENSOR, outputs=kind.outputs if attr == "data" else None)
        if kind.kind == K.MODULE and kind.cls and ":" in kind.cls:
            path, cls = kind.cls.split(":", 1)
            return self._class_attr(path, cls, attr, depth + 1)
        return None

    def _call(self, s: Call, where: Where, depth: int) -> Kind | None:
        func, args, keywords = s.func, s.args, s.keywords
        if isinstance(func, Ref):
            dotted = func.name
            head, _, rest = dotted.partition(".")
            local = where.local(head) if where.local is not None else None
            if local is None:
                found = self.resolve(where.file, dotted)
                if found is not None:
                    what, path, name = found
                    if what == "torch":
                        return _torch_call(path, args, keywords, self, where, depth)
                    if what == "class" and "." not in name:
                        return self.instance(path, name, depth + 1)
                    if what == "function" and "." not in name:
                        return self._returns(path, name, depth + 1)
                    if what == "global" and "." not in name:
                        return _called(self._ref(dotted, where, depth + 1))
                    if "." in name:
                        base, _, method = dotted.rpartition(".")
                        return _method(self._ref(base, where, depth + 1), method, args)
                    return None
                if head in BUILTINS or rest:
                    if rest:
                        base, _, method = dotted.rpartition(".")
                        return _method(self._ref(base, where, depth + 1), method, args)
                    return self._builtin(head, args, where, depth)
                return None
            if rest:
                base, _, method = dotted.rpartition(".")
                return _method(self._ref(base, where, depth + 1), method, args)
            return _called(self._kind(local, where, depth + 1))
        if isinstance(func, SelfAttr):
            # self.method(...) or self.layer(...)
            if where.cls is not None:
                facts = self.files[where.file]["classes"].get(where.cls)
                if facts is not None and func.attr in facts["methods"] and func.attr not in facts[
                        "attrs"]:
                    return self._method_returns(where.file, where.cls, func.attr, depth + 1)
            return _called(self._self_attr(where, func.attr, depth + 1))
        if isinstance(func, Attr):
            return _method(self._kind(func.base, where, depth + 1), func.name, args)
        return _called(self._kind(func, where, depth + 1))

    def _builtin(self, name: str, args: Sequence[Summary], where: Where, depth: int
                 ) -> Kind | None:
        """What a builtin that iterates its arguments gives: `list(xs)`, `sorted(xs)` a list
        of their elements; `enumerate(xs)` and `zip(xs, ys)` tuples of them."""
        if not args or UNKNOWN in args:
            return None
        elements = [_element(self._kind(a, where, depth + 1)) for a in args]
        if name in ("list", "tuple", "sorted", "reversed") and len(args) == 1:
            return Kind(K.TUPLE, element=elements[0]) if elements[0] is not None else None
        if name == "enumerate" and elements[0] is not None:
            return Kind(K.TUPLE, element=Kind(K.TUPLE, items=(None, elements[0])))
        if name == "zip":
            return Kind(K.TUPLE, element=Kind(K.TUPLE, items=tuple(elements)))
        return None

    # -- parameters from call sites ----------------------------------------------------------
    def param_kind(self, path: str, cls: str | None, name: str, param: str,
                   depth: int = 0) -> Kind | None:
        """What the parameter `param` of the project function `name` of `path` (a method of
        `cls`) holds: what every call site of it in the project passes (or its default, where
        a site passes nothing), when all of them are known and agree (`join`); None when a
        site passes something not known, when the call sites are not all known
        (`call_sites`), or when finding out takes more than `PARAM_DEPTH` calls up."""
        return self._once(("param", path, cls, name, param),
                          lambda: self._param_kind(path, cls, name, param, depth))

    def _param_kind(self, path: str, cls: str | None, name: str, param: str,
                    depth: int) -> Kind | None:
        if self._param_hops >= PARAM_DEPTH or depth > _MAX_DEPTH:
            return None
        sites = self.call_sites(path, cls, name)
        if not sites:
            return None
        func = self.function_facts(path, cls, name)
        if func is None:
            return None
        params = func[2]["params"]
        self._param_hops += 1
        try:
            kinds = []
            for where, call, offset in sites:
                value = argument(params, offset, call, param)
                if value is None:
                    default = func[2]["defaults"].get(param)
                    if default is None:
                        return None
                    kind = self._kind(default, Where(path), depth + 1)
                else:
                    kind = self._kind(value, where, depth + 1)
                if kind is None:
                    return None
                kinds.append(kind)
        finally:
            self._param_hops -= 1
        return join(kinds)

    def passed(self, path: str, cls: str | None, name: str, param: str
               ) -> list[Summary] | None:
        """The summaries of what every call site of the project function `name` of `path`
        (a method of `cls`) passes for `param` (its default where a site passes nothing);
        None when the call sites are not all known."""
        sites = self.call_sites(path, cls, name)
        func = self.function_facts(path, cls, name)
        if not sites or func is None:
            return None
        found = []
        for _, call, offset in sites:
            value = argument(func[2]["params"], offset, call, param)
            if value is None:
                value = func[2]["defaults"].get(param)
                if value is None:
                    return None
            found.append(value)
        return found

    def call_sites(self, path: str, cls: str | None, name: str) -> list[tuple[Where, Call, int]]:
        """Every call of the project function `name` of `path` (a method of the project class
        `cls`; `__init__`: its instantiations) in the project: (where the call is, its
        summary, 1 when the call passes the object itself first (a method), else 0). Empty
        when they are not all known: the function is read other than by a call (a callback,
        a table, a nested function calls it), decorated, imported by `*` or re-exported by a
        package; a method may be called on a value other than `self`, or is overridden."""
        key = ("sites", path, cls, name)
        if key in self._memo:
            return self._memo[key]
        try:
            found = self._call_sites(path, cls, name)
        except (KeyError, IndexError, TypeError, AttributeError):
            found = None
        result = found or []
        self._memo[key] = result
        return result

    def _call_sites(self, path: str, cls: str | None, name: str
                    ) -> list[tuple[Where, Call, int]] | None:
        facts = self.files.get(path)
        if facts is None:
            return None
        if cls is None:
            func = facts["functions"].get(name)
            target: tuple = ("function", path, name)
        else:
            owner = facts["classes"].get(cls)
            func = owner["methods"].get(name) if owner is not None else None
            target = ("class", path, cls)
            if owner is None or self._subclassed(path, cls):
                return None
            if name != "__init__" and (name in owner["self_escapes"] or name.startswith("__")
                                       or not self._called_by_project_only(path, cls, name)):
                return None
        if func is None or func.get("decorated", True) or not func["params"] and cls:
            return None
        files = [path, *self.importers(path)]
        method = cls is not None and name != "__init__"
        sites: list[tuple[Where, Call, int]] = []
        for other in files:
            other_facts = self.files[other]
            imports = other_facts["imports"]
            if method:
                if name in other_facts.get("attr_calls", ()):
                    return None  # maybe called on an instance
                if other != path:
                    continue
                for method_name, body in owner["methods"].items():
                    where = Where(path, cls, _locals(body, path, cls, method_name))
                    for call in body.get("invokes", ()):
                        if call.func == SelfAttr(name):
                            sites.append((where, call, 1))
                continue
            if other != path and any(key.startswith("*") and self._import_target(
                    other, value) == path for key, value in imports.items()):
                return None  # `from module import *`: calls by a name not followed
            for escaped in other_facts.get("escapes", ()):
                if self._names(other, escaped, target):
                    return None
            if other != path and other.replace("\\", "/").endswith("__init__.py") and any(
                    self._names(other, alias, target) for alias in imports):
                return None  # re-exported by a package: its importers' calls are not followed
            calls = self._calls_by_callee(other)
            found = calls.get(target, [])
            by_module = calls.get(("module", target[1]))
            if by_module:
                # a call may stand for `target` both ways: each once, in the file's order
                found = sorted({number: (number, body, call) for number, body, call in (
                    *found, *by_module)}.values(), key=operator.itemgetter(0))
            offset = 1 if cls is not None else 0
            # each ask has its own `Where`s: what the evaluation remembers of a function's
            # locals while it follows one function's call sites is its own
            wheres: dict[int, Where] = {}
            for _, body, call in found:
                if body not in wheres:
                    wheres[body] = self._where_of(other, *self._bodies(other)[body])
                sites.append((wheres[body], call, offset))
        return sites

    def _calls_by_callee(self, path: str) -> dict[tuple, list[tuple[int, int, Call]]]:
        """The calls of the code of `path` by a module-level name, by what that name stands
        for (`_callee_keys`): (their number in the file, the number of the body that makes
        them (`_bodies`), their summary). Made once per file: every project function asks for
        its call sites in the files that import its own."""
        key = ("calls by callee", path)
        found = self._memo.get(key)
        if found is None:
            found = {}
            number = 0
            for body, (cls, name, facts) in enumerate(self._bodies(path)):
                local = self._where_of(path, cls, name, facts).local
                for call in facts.get("invokes", ()):
                    callee = call.func
                    if not isinstance(callee, Ref) or local is not None and local(
                            callee.name.split(".")[0]) is not None:
                        continue  # a local name of the caller
                    for callee_key in self._callee_keys(path, callee.name):
                        found.setdefault(callee_key, []).append((number, body, call))
                    number += 1
            self._memo[key] = found  # whole: a failure above leaves nothing half made
        return found

    def _callee_keys(self, path: str, dotted: str) -> list[tuple]:
        """What the dotted name of `path` stands for: `resolve`'s answer, and ("module",
        file) when it is a bare name imported from the project module `file`."""
        keys: list[tuple] = []
        found = self.resolve(path, dotted)
        if found is not None:
            keys.append(found)
        if "." not in dotted:
            qualified = self.files[path]["imports"].get(dotted)
            if qualified is not None:
                module = self.module_file(self._absolute(path, qualified))
                if module is not None:
                    keys.append(("module", module))
        return keys

    def _called_by_project_only(self, path: str, cls: str, name: str) -> bool:
        """The method `name` of the project class is not one that a base class from outside
        the project calls (`forward` of an `nn.Module`, a framework's hooks): every base is
        the project's or `object`, or `nn.Module` for a method it does not call itself."""
        lineage = [(path, cls)]
        seen: set[tuple[str, str]] = set()
        while lineage:
            path, cls = lineage.pop()
            if (path, cls) in seen or len(seen) > 20:
                return False
            seen.add((path, cls))
            facts = self.files.get(path, {}).get("classes", {}).get(cls)
            if facts is None:
                return False
            for base in facts["bases"]:
                if base == Ref("object"):
                    continue
                found = self._class_of(base, path) if isinstance(base, Ref) else None
                if found is not None:
                    lineage.append(found)
                    continue
                resolved = self.resolve(path, base.name) if isinstance(base, Ref) else None
                if resolved is None or resolved[:2] != ("torch", "torch.nn.Module") or (
                        name in K.MODULE_CALLS):
                    return False
        return True

    def _names(self, path: str, dotted: str, target: tuple) -> bool:
        """The dotted name of `path` stands for `target` (("function"|"class", file, name)),
        or for the module that defines it."""
        keys = self._callee_keys(path, dotted)
        return target in keys or ("module", target[1]) in keys

    def _bodies(self, path: str) -> list[tuple[str | None, str | None, dict]]:
        """The code of a file whose calls the facts keep: (class, function, its facts); the
        module's own code first, with neither."""
        key = ("bodies", path)
        found = self._memo.get(key)
        if found is None:
            facts = self.files[path]
            found = [(None, None, facts["script"])] if facts.get("script") else []
            found += [(None, name, func) for name, func in facts["functions"].items()]
            found += [(cls, name, func) for cls, owner in facts["classes"].items()
                      for name, func in owner["methods"].items()]
            self._memo[key] = found
        return found

    @staticmethod
    def _where_of(path: str, cls: str | None, name: str | None, facts: dict) -> Where:
        """Where a body of `_bodies` runs: its names, and its class's `self`."""
        if name is None:
            return Where(path)
        return Where(path, cls, _locals(facts, path, cls, name))

    def _subclassed(self, path: str, cls: str) -> bool:
        """A class of the project derives from the project class `cls` of `path`."""
        for other in [path, *self.importers(path)]:
            for name, other_cls in self.files[other]["classes"].items():
                if (other, name) == (path, cls):
                    continue
                for base in other_cls["bases"]:
                    if isinstance(base, Ref) and self._class_of(base, other) == (path, cls):
                        return True
        return False

    # -- effects of calls -----------------------------------------------------------------
    def function_facts(self, path: str, cls: str | None, name: str
                       ) -> tuple[str, str | None, dict] | None:
        """(file, class, facts) of the project function `name` of `path`, or of the method
        `name` of the project class `cls` there, found in the class or its nearest project
        base that defines it."""
        facts = self.files.get(path)
        if facts is None:
            return None
        if cls is None:
            func = facts["functions"].get(name)
            return (path, None, func) if func is not None else None
        seen: set[tuple[str, str]] = set()
        stack = [(path, cls)]
        while stack and len(seen) < 20:
            path, cls = stack.pop(0)
            if (path, cls) in seen:
                continue
            seen.add((path, cls))
            facts = self.files.get(path, {}).get("classes", {}).get(cls)
            if facts is None:
                continue
            method = facts["methods"].get(name)
            if method is not None:
                return path, cls, method
            for base in facts["bases"]:
                found = self._class_of(base, path) if isinstance(base, Ref) else None
                if found is not None:
                    stack.append(found)
        return None

    def effects(self, path: str, cls: str | None, name: str, depth: int = 0) -> frozenset:
        """What calling the project function (or method of `cls`) `name` of `path` does to
        the values it is given or can reach: (effect, on, target) triples, the effect one of
        `eval`, `train`, `zero_grad`, `step` (`x.step()`, `scaler.step(x)`: an optimizer's
        or a scheduler's), or `no_grad` (its whole body runs under no_grad, on `?`: not
        followed to its callers, whose other code does not); `on` says what it is done to: `param` (the parameter
        named `target`), `self` (the attribute `target` of the method's object), `name` (the
        module-level name `target` of `path`) or `?` (something else, or not known). Through
        the project functions it calls, to a depth of `EFFECT_DEPTH` calls."""
        found = self.function_facts(path, cls, name)
        if found is None:
            return frozenset()
        path, cls, func = found
        key = ("effects", path, cls, name)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy or depth > EFFECT_DEPTH:
            return frozenset()  # a recursion, or too deep: what it does further is not known
        self._busy.add(key)
        try:
            result = frozenset(self._effects(path, cls, func, depth))
        finally:
            self._busy.discard(key)
        self._memo[key] = result
        return result

    def _effects(self, path: str, cls: str | None, func: dict, depth: int) -> set:
        params = func["params"]
        self_name = params[0] if cls is not None and params else None
        own = set(params[1:] if self_name is not None else params)
        found: set[tuple[str, str, str]] = set()

        def target(dotted: str) -> tuple[str, str]:
            parts = dotted.split(".")
            if dotted == "?":
                return ("?", "")
            if self_name is not None and parts[0] == self_name:
                return ("self", parts[1]) if len(parts) == 2 else ("?", "")
            if parts[0] in own:
                return ("param", parts[0]) if len(parts) == 1 else ("?", "")
            if parts[0] in func["assigns"] or parts[0] in func.get("iters", ()):
                return ("?", "")
            return ("name", dotted)

        for effect, names in (("eval", func.get("evals", ())), ("train", func.get("trains", ())),
                              ("zero_grad", func.get("zeroes", ()))):
            for dotted in names:
                found.add((effect, *target(dotted)))
        for stepped in func.get("steps", ()):
            dotted = _summary_name(stepped, self_name)
            found.add(("step", *target(dotted)) if dotted is not None else ("step", "?", ""))
        if func.get("no_grad"):
            found.add(("no_grad", "?", ""))
        for invoke in func.get("invokes", ()):
            callee = invoke.func
            if isinstance(callee, SelfAttr) and cls is not None:
                other, called, offset = self.function_facts(path, cls, callee.attr), callee.attr, 1
            elif isinstance(callee, Ref) and "." not in callee.name:
                resolved = self.resolve(path, callee.name)
                if resolved is None or resolved[0] != "function" or "." in resolved[2]:
                    continue
                other = self.function_facts(resolved[1], None, resolved[2])
                called, offset = resolved[2], 0
            else:
                continue
            if other is None:
                continue
            other_path, other_cls, other_func = other
            for effect, on, name in self.effects(other_path, other_cls, called,
                                                depth + 1):
                if effect == "no_grad":
                    continue  # the callee's body runs under no_grad, not the caller's
                if on == "param":
                    value = argument(other_func["params"], offset, invoke, name)
                    if value is None:
                        continue  # a default: nothing of the caller's
                    if isinstance(value, Ref):
                        found.add((effect, *target(value.name)))
                    elif isinstance(value, SelfAttr) and self_name is not None:
                        found.add((effect, "self", value.attr))
                    else:
                        found.add((effect, "?", ""))
                elif on == "self" and isinstance(callee, SelfAttr):
                    found.add((effect, "self", name))
                elif on == "name" and other_path == path:
                    found.add((effect, *target(name)))
                else:
                    found.add((effect, "?", ""))
        return found

    def _returns(self, path: str, name: str, depth: int) -> Kind | None:
        func = self.files[path]["functions"][name]
        return self._once(("returns", path, name), lambda: self._same(
            func["returns"], Where(path, None, _locals(func, path, None, name)), depth))

    def _method_returns(self, path: str, cls: str, name: str, depth: int) -> Kind | None:
        func = self.files[path]["classes"][cls]["methods"][name]
        return self._once(("method", path, cls, name), lambda: self._same(
            func["returns"], Where(path, cls, _locals(func, path, cls, name)), depth))

    def _same(self, values: Sequence[Summary], where: Where, depth: int) -> Kind | None:
        """The kind of every one of `values` when they agree; else None."""
        kinds = [self._kind(v, where, depth + 1) for v in values]
        if not kinds or any(k is None for k in kinds) or any(k != kinds[0] for k in kinds):
            return None
        return kinds[0]

    # -- classes ------------------------------------------------------------------------
    def subclasses_module(self, path: str, cls: str, depth: int = 0) -> bool:
        """The project class derives from `torch.nn.Module` (or a `torch.nn` class) through
        bases that are all known: torch's or the project's own."""
        facts = self.files.get(path, {}).get("classes", {}).get(cls)
        if facts is None or depth > 20:
            return False
        for base in facts["bases"]:
            if not isinstance(base, Ref):
                continue
            found = self.resolve(path, base.name)
            if found is None:
                continue
            if found[0] == "torch" and (found[1] == "torch.nn.Module"
                                        or _nn_layer(found[1]) is not None):
                return True
            if found[0] == "class" and "." not in found[2] and (found[1], found[2]) != (
                    path, cls) and self.subclasses_module(found[1], found[2], depth + 1):
                return True
        return False

    def instance(self, path: str, cls: str, depth: int = 0) -> Kind | None:
        """What an instance of the project class `cls` of `path` is: a module (its mode,
        its outputs, the loss it computes) or None (not known to be a module)."""
        key = ("instance", path, cls)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy or depth > _MAX_DEPTH:
            return None
        self._busy.add(key)
        try:
            result = self._instance(path, cls, depth)
        finally:
            self._busy.discard(key)
        self._memo[key] = result
        return result

    def _instance(self, path: str, cls: str, depth: int) -> Kind | None:
        facts = self.files[path]["classes"].get(cls)
        if facts is None:
            return None
        where = Where(path, cls)
        is_module = False
        base_modes: list[bool | None] = []
        outputs = loss = None
        returns: Kind | None = None
        unknown_base = False
        for base in facts["bases"]:
            kind = self._kind(base, where, depth + 1) if isinstance(base, Ref) else None
            if kind is not None and kind.kind == "class" and kind.cls:
                base_path, base_cls = kind.cls.split(":", 1)
                parent = self.instance(base_path, base_cls, depth + 1)
                if parent is not None and parent.kind == K.MODULE:
                    is_module = True
                    base_modes.append(parent.mode)
                    outputs, loss, returns = parent.outputs, parent.loss, parent.result
                    continue
            found = self.resolve(path, base.name) if isinstance(base, Ref) else None
            if found is not None and found[0] == "torch":
                qualified = found[1]
                if qualified == "torch.nn.Module":
                    is_module = True
                    continue
                layer = _nn_layer(qualified)
                if layer is not None:
                    is_module = True
                    base_modes.append(None if layer in K.CONTAINERS else _nn_kind(
                        layer, (), {}, self, where, depth).mode)
                    continue
                if qualified == "object":
                    continue
            if base != Ref("object"):
                unknown_base = True
                base_modes.append(None)
        built_modes = []
        builds_modules = False
        for call in facts["calls"]:
            kind = self._kind(call, where, depth + 1)
            if kind is not None and kind.kind == K.MODULE:
                builds_modules = True
                built_modes.append(kind.mode)
            elif kind is None and isinstance(call.func, Ref) and call.func.name.rsplit(
                    ".", 1)[-1][:1].isupper():
                built_modes.append(None)
        if not is_module:
            # a base from another package that the class uses as a module
            if not (unknown_base and facts["super_init"] and builds_modules):
                return None
        mode = True if facts["mode_text"] else K.combine_modes([*base_modes, *built_modes])
        forward = facts["methods"].get("forward")
        if forward is not None:
            returns = None
            where_forward = Where(path, cls, _locals(forward, path, cls, "forward"))
            outputs = None
            if not forward["training"] and forward["returns"]:
                result = self._same(forward["returns"], where_forward, depth)
                if result is not None and result.kind == K.TENSOR:
                    outputs = result.outputs
                elif result is not None and result.kind == K.TUPLE:
                    returns = result
            loss = self._wrapped_loss(forward, where_forward, first=1, depth=depth)
        return Kind(K.MODULE, cls=f"{path}:{cls}", mode=mode, outputs=outputs, loss=loss,
                    result=returns)


def argument(params: list[str], offset: int, call: Call, name: str) -> Summary | None:
    """The summary of what the call summary `call` passes for the parameter `name` of a
    function whose parameters are `params` (`offset` 1 for a method called on its object):
    by position or keyword; UNKNOWN when a starred argument hides it; None when it is left to
    its default."""
    args, keywords = call.args, call.keywords
    if name in keywords:
        return keywords[name]
    position = params.index(name) - offset if name in params else -1
    if position < 0:
        return UNKNOWN
    if UNKNOWN in args[:position]:
        return UNKNOWN  # maybe a starred argument: the positions after it are not known
    if position < len(args):
        return args[position]
    return UNKNOWN if "**" in keywords else None


def _summary_name(summary: Summary, self_name: str | None) -> str | None:
    """The dotted name a summary of a name stands for (`SelfAttr("opt")` -> `self.opt`),
    None for another value."""
    if isinstance(summary, Ref):
        return summary.name
    if isinstance(summary, SelfAttr) and self_name is not None:
        return f"{self_name}.{summary.attr}"
    if isinstance(summary, Attr):
        inner = _summary_name(summary.base, self_name)
        return f"{inner}.{summary.name}" if inner is not None else None
    return None


def _locals(func: dict, path: str | None = None, cls: str | None = None,
            name: str | None = None) -> Callable[[str], Summary | None]:
    """The names local to a function: the summary of what each holds. A parameter of the
    project function `name` of `path` (a method of `cls`) holds what its call sites pass
    (`Param`); of another function (nested, or not named), UNKNOWN."""
    params = func["params"]
    own = set(params[1:] if cls is not None else params)
    assigns = func["assigns"]

    joins = func.get("joins", {})
    mutates = func.get("mutates", ())

    def local(local_name: str) -> Summary | None:
        if local_name in assigns:
            value = assigns[local_name]
            if value == UNKNOWN and local_name in joins:
                value = Join(tuple(joins[local_name]), local_name)
            return Mutated(value) if local_name in mutates else value
        if local_name in own and path is not None and name is not None:
            return Param(path, cls, name, local_name)
        if local_name in params:
            return UNKNOWN
        return None

    return local


def join(kinds: list[Kind]) -> Kind | None:
    """What a value is when it is one of `kinds` (the call sites of a parameter): their kind
    when they all have it, with what they agree on (a module's mode: True when any may
    behave differently in train and eval mode, None when any is unknown); None when they
    are of different kinds."""
    first = kinds[0]
    if all(k == first for k in kinds):
        return first
    if any(k.kind != first.kind for k in kinds):
        return None

    def same(field: str):
        values = {getattr(k, field) for k in kinds}
        return values.pop() if len(values) == 1 else None

    return Kind(first.kind, cls=same("cls"), mode=K.combine_modes(k.mode for k in kinds),
                outputs=same("outputs"), loss=same("loss"), step=same("step"),
                leaf=all(k.leaf for k in kinds), parameter=all(k.parameter for k in kinds))


def join_all(kinds: Iterable[Kind | None]) -> Kind | None:
    """The `join` of the kinds of a container's elements: None when there are none or one
    of them is not known."""
    found = list(kinds)
    if not found or any(k is None for k in found):
        return None
    return join(found)  # type: ignore[arg-type]


_SEQUENCES = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList"})
_MODULE_CONTAINERS = frozenset({*_SEQUENCES, "torch.nn.ModuleDict"})


def _member(kind: Kind | None) -> Kind | None:
    """What `value[key]` gives for a value of `kind`, where the key is not one the kind
    knows: any element of a container, a tensor of a tensor."""
    if kind is None:
        return None
    if kind.kind == K.TENSOR:
        return Kind(K.TENSOR)
    if kind.kind in (K.TUPLE, K.DICT) or kind.kind == K.MODULE and kind.cls in (
            _MODULE_CONTAINERS):
        return kind.element
    return None


def _sliced(kind: Kind | None) -> Kind | None:
    """What `value[i:j]` gives."""
    if kind is None:
        return None
    if kind.kind == K.TENSOR:
        return Kind(K.TENSOR)
    if kind.kind == K.TUPLE:
        return Kind(K.TUPLE, element=kind.element)
    if kind.kind == K.MODULE and kind.cls in _SEQUENCES:
        return Kind(K.MODULE, cls=kind.cls, mode=False if kind.mode is False else None,
                    element=kind.element)
    return None


def _mutated(kind: Kind | None) -> Kind | None:
    """A container changed after it was built (`xs.append(m)`): what it held is no longer
    all it holds."""
    if kind is None:
        return None
    if kind.kind in (K.TUPLE, K.DICT):
        return Kind(kind.kind)
    if kind.kind == K.MODULE and kind.cls in _MODULE_CONTAINERS:
        return Kind(K.MODULE, cls=kind.cls, mode=True if kind.mode else None)
    return kind


def _arithmetic(operator: str, left: Kind | None, right: Kind | None) -> Kind | None:
    """What `left <operator> right` gives: a tensor when one side is a tensor and the other
    a tensor or not known (a number); `[m] * n` and `xs + ys` are containers."""
    sides = (left, right)
    sequences = [k for k in sides if k is not None and k.kind == K.TUPLE]
    if operator == "*" and len(sequences) == 1 and any(k is None for k in sides):
        return Kind(K.TUPLE, element=sequences[0].element)
    if operator == "+" and len(sequences) == 2:
        first, second = sequences
        items = first.items + second.items if (
            first.items is not None and second.items is not None) else None
        return Kind(K.TUPLE, items=items, element=join_all(items) if items is not None else (
            None if first.element is None or second.element is None
            else join([first.element, second.element])))
    if any(k is not None and k.kind == K.TENSOR for k in sides) and all(
            k is None or k.kind == K.TENSOR for k in sides):
        return Kind(K.TENSOR)
    return None


def _mentions(summary: Any, name: str) -> bool:
    """The summary reads the local name `name` (`Ref("name...")`)."""
    if isinstance(summary, Ref):
        return summary.name.partition(".")[0] == name
    if isinstance(summary, dict):
        return any(_mentions(value, name) for value in summary.values())
    if isinstance(summary, tuple):
        return any(_mentions(part, name) for part in summary)
    if isinstance(summary, Summary) and not isinstance(summary, Known):
        return any(_mentions(getattr(summary, field.name), name) for field in fields(summary))
    return False


def _binding(where: Where, bound: Sequence[tuple[str, Summary]]) -> Where:
    """`where` with the names a comprehension's `for`s bind ((name, summary) pairs)."""
    names = {name: summary for name, summary in bound}
    outer = where.local

    def local(name: str) -> Summary | None:
        if name in names:
            return names[name]
        return outer(name) if outer is not None else None

    return Where(where.file, where.cls, local, where.at, where.kinds)


def _dict_view(kind: Kind, method: str) -> Kind | None:
    """`d.values()`, `d.items()` of a dict (or an `nn.ModuleDict`)."""
    if kind.element is None:
        return None
    if method == "values":
        return Kind(K.TUPLE, element=kind.element)
    if method == "items":
        return Kind(K.TUPLE, element=Kind(K.TUPLE, items=(None, kind.element)))
    return None


def _element(kind: Kind | None) -> Kind | None:
    """What iterating over a value of `kind` gives."""
    if kind is None:
        return None
    if kind.kind == K.PARAMETERS:
        return K.PARAMETER
    if kind.kind == K.MODULES:
        return K.SOME_MODULE
    if kind.kind == K.PARAM_GROUPS:
        return Kind(K.PARAM_GROUP)
    if kind.kind == K.TENSOR:
        return Kind(K.TENSOR)
    if kind.kind == K.TUPLE or kind.kind == K.MODULE and kind.cls in _SEQUENCES:
        return kind.element  # (a dict, an nn.ModuleDict: their keys)
    return None


def _called(kind: Kind | None) -> Kind | None:
    """What calling a value of `kind` gives."""
    if kind is None:
        return None
    if kind.kind == K.MODULE:
        if kind.result is not None:
            return kind.result
        return Kind(K.TENSOR, outputs=kind.outputs)
    if kind.kind == K.FUNCTION:
        return Kind(K.TENSOR)
    if kind.kind == "class" and kind.cls:
        return None  # resolved by the caller, which has the index
    return None


def _method(kind: Kind | None, method: str, args: Sequence[Summary]) -> Kind | None:
    """What `value.method(...)` gives, for a value of `kind`."""
    if method in K.ACTIVATION_METHODS and (kind is None or kind.kind == K.TENSOR):
        return Kind(K.TENSOR, outputs=K.ACTIVATION_METHODS[method])
    if kind is None:
        return None
    if kind.kind == K.MODULE:
        if method in K.RETURNS_SELF:
            return kind
        if method == "parameters":
            return Kind(K.PARAMETERS)
        if method in ("modules", "children"):
            return Kind(K.MODULES)
        if method in ("named_modules", "named_children"):
            return Kind(K.TUPLE, element=Kind(K.TUPLE, items=(None, K.SOME_MODULE)))
        if method == "named_parameters":
            return Kind(K.TUPLE, element=Kind(K.TUPLE, items=(None, K.PARAMETER)))
        if method == "forward":
            return _called(kind)
        if kind.cls == "torch.nn.ModuleDict":
            return _dict_view(kind, method)
        return None
    if kind.kind == K.DICT:
        return _dict_view(kind, method)
    if kind.kind == K.TENSOR and method in K.TENSOR_METHODS:
        return Kind(K.TENSOR, outputs=kind.outputs if method in K.VALUE_METHODS else None)
    return None


def _nn_layer(qualified: str) -> str | None:
    if qualified.startswith("torch.nn.") and qualified.count(".") == 2:
        layer = qualified[len("torch.nn."):]
        if layer[:1].isupper() and layer not in K.NN_NON_MODULES:
            return layer
    return None


def _torch_reference(qualified: str) -> Kind | None:
    """An outside name used as a value (not called)."""
    if qualified in K.LOSS_FUNCTIONS:
        return Kind(K.FUNCTION, cls=qualified, loss=K.LOSS_FUNCTIONS[qualified])
    return None


def _number(s: Summary) -> float | None:
    return s.value if isinstance(s, Num) else None


def _nn_kind(layer: str, args: Sequence[Summary], keywords: dict[str, Summary],
             index: Evaluation, where: Where,
             depth: int) -> Kind:
    cls = f"torch.nn.{layer}"
    if layer in K.ACTIVATION_MODULES:
        return Kind(K.MODULE, cls=cls, mode=False, outputs=K.ACTIVATION_MODULES[layer])
    if layer in K.LOSS_MODULES or layer.endswith("Loss"):
        return Kind(K.MODULE, cls=cls, mode=False, loss=K.LOSS_MODULES.get(layer, "other"))
    if layer in K.MODE_LAYERS:
        return Kind(K.MODULE, cls=cls, mode=True)
    if "**" in keywords or any(a == UNKNOWN for a in args) and layer in K.CONTAINERS:
        return Kind(K.MODULE, cls=cls, mode=None)
    if layer in K.DROPOUT_ARGUMENT:
        dropout = keywords.get("dropout")
        if dropout is None:
            return Kind(K.MODULE, cls=cls, mode=K.DROPOUT_ARGUMENT[layer] != 0)
        value = _number(dropout)
        return Kind(K.MODULE, cls=cls, mode=None if value is None else value != 0)
    if layer in K.INSTANCE_NORMS:
        tracked = keywords.get("track_running_stats")
        return Kind(K.MODULE, cls=cls, mode=tracked is not None and tracked != Const("False"))
    if layer in K.CONTAINERS:
        children: list[Kind | None] = [index._kind(a, where, depth + 1) for a in args]
        keys: tuple[str | None, ...] | None = None
        first = args[0] if args else None
        if layer == "Sequential" and len(args) == 1 and isinstance(first, Call):
            # Sequential(OrderedDict(...)): its values, in order
            pairs = _ordered_dict(first, index, where)
            if pairs is None:
                return Kind(K.MODULE, cls=cls, mode=None)
            children = [index._kind(value, where, depth + 1) for value in pairs]
        elif layer != "Sequential":
            # ModuleList([...]) / ModuleDict({...}): the list's elements, the dict's values
            if len(args) != 1:
                return Kind(K.MODULE, cls=cls, mode=None)
            pairs = _pairs(args[0]) if layer == "ModuleDict" else None
            if pairs is not None:
                children = [index._kind(value, where, depth + 1) for value in pairs]
                if isinstance(first, DictDisplay):
                    # `self.heads["cls"]` is the one of that key
                    keys = tuple(key for key, _ in first.entries)
            elif isinstance(first, Seq):
                children = [index._kind(a, where, depth + 1) for a in first.items]
            else:
                given = children[0]
                if given is None or given.kind not in (K.TUPLE, K.DICT):
                    return Kind(K.MODULE, cls=cls, mode=None)
                if given.items is None:
                    # a comprehension, `[block] * n`: as many elements as it makes, all alike
                    element = given.element
                    if element is None or element.kind != K.MODULE:
                        return Kind(K.MODULE, cls=cls, mode=None)
                    return Kind(K.MODULE, cls=cls, mode=element.mode, element=element)
                children = list(given.items)
        modes = [c.mode if c is not None and c.kind == K.MODULE else None for c in children]
        last = children[-1] if children and layer == "Sequential" else None
        outputs = last.outputs if last is not None and last.kind == K.MODULE else None
        element = join_all(children)
        return Kind(K.MODULE, cls=cls, mode=K.combine_modes(modes), outputs=outputs,
                    element=element if element is not None and element.kind == K.MODULE
                    else None, items=tuple(children) if keys is not None or (
                        layer != "ModuleDict") else None, keys=keys)
    if layer in K.WRAPPERS:
        return Kind(K.MODULE, cls=cls, mode=None)
    return Kind(K.MODULE, cls=cls, mode=False)


def _pairs(summary: Summary) -> list[Summary] | None:
    """The values of a dict display, or of a list of (key, value) pairs; None for another
    value."""
    if isinstance(summary, DictDisplay):
        return [value for _, value in summary.entries]
    if isinstance(summary, Seq) and all(isinstance(e, Seq) and len(e.items) == 2
                                        for e in summary.items):
        return [e.items[1] for e in summary.items if isinstance(e, Seq)]
    return None


def _ordered_dict(call: Call, index: Evaluation, where: Where) -> list[Summary] | None:
    """The values of `OrderedDict([(key, value), ...])` (or of a dict display), in order."""
    func = call.func
    if not isinstance(func, Ref) or len(call.args) != 1 or call.keywords or (
            where.local is not None and where.local(func.name.split(".")[0]) is not None):
        return None
    found = index.resolve(where.file, func.name)
    if found is None or found[0] != "torch" or found[1] not in (
            "collections.OrderedDict", "typing.OrderedDict", "dict"):
        return None
    return _pairs(call.args[0])


def _torch_call(qualified: str, args: Sequence[Summary], keywords: dict[str, Summary],
                index: Evaluation, where: Where,
                depth: int) -> Kind | None:
    """What a call of an outside (torch) name gives."""
    layer = _nn_layer(qualified)
    if layer is not None:
        return _nn_kind(layer, args, keywords, index, where, depth)
    if qualified in ("torch.nn.Parameter", "torch.nn.parameter.Parameter",
                     "torch.nn.UninitializedParameter"):
        return K.PARAMETER
    if qualified in K.ACTIVATION_FUNCTIONS:
        return Kind(K.TENSOR, outputs=K.ACTIVATION_FUNCTIONS[qualified])
    if qualified in K.LOSS_FUNCTIONS:
        return Kind(K.TENSOR)
    if qualified in K.VARIABLES:
        # `Variable(t)` is `t` since torch 0.4 (a leaf that requires grad when asked)
        inner = index._kind(args[0], where, depth + 1) if len(args) == 1 else None
        if inner is None or inner.kind != K.TENSOR:
            return None
        return inner.but(leaf=True) if keywords.get("requires_grad") == Const("True") else (
            inner)
    if qualified.startswith("torch.optim.lr_scheduler."):
        name = qualified.rsplit(".", 1)[1]
        if name in K.SCHEDULERS:
            return Kind(K.SCHEDULER, cls=qualified, step=K.SCHEDULERS[name])
        return None
    if qualified.startswith("torch.optim.") and not qualified.startswith(K.OPTIMIZER_NOT):
        name = qualified.rsplit(".", 1)[1]
        return Kind(K.OPTIMIZER, cls=qualified) if name[:1].isupper() else None
    if qualified in K.DATALOADERS:
        return Kind(K.DATALOADER, cls=qualified)
    if qualified.startswith("torch.") and qualified.count(".") == 1:
        name = qualified[len("torch."):]
        if name in K.TENSOR_FACTORIES:
            grad = keywords.get("requires_grad")
            return Kind(K.TENSOR, leaf=grad == Const("True"))
        if name in K.TENSOR_FUNCTIONS:
            return Kind(K.TENSOR)
    if qualified.startswith("torchvision.models.") and qualified.count(".") == 2:
        last = qualified.rsplit(".", 1)[1]
        if last[:1].islower() and last not in ("get_weight", "get_model_weights", "list_models"):
            return Kind(K.MODULE, cls=qualified, mode=None)
    return None
