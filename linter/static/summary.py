"""The summary of an expression: a small tree of frozen value classes, built by both readers of
Python (CPython's `ast` for the project's facts, `modellint.static.facts.summarize`; LibCST for
the file a rule looks at, `modellint.static.semantic.summarize`) and evaluated to a `Kind` by
`modellint.static.evaluate`.

In the JSON of the facts cache a summary is a tagged list (`to_json`, `from_json`):

    ["ref", "a.b"]              Ref: a dotted name as written
    ["self", "x"]               SelfAttr: self.x inside a method
    ["this"]                    This: self itself
    ["call", f, [args], {kw}]   Call (the key "**" when a `**kwargs` is passed)
    ["attr", base, "name"]      Attr: an attribute of something that is not a dotted name
    ["sub", base, "key"|None]   Sub: a subscript (a string key is kept)
    ["item", base, 1]           Item: a subscript by an integer, an element of a tuple target
    ["iter", s]                 Iter: an element of the iterable s (a `for` target)
    ["num", 1.0] ["const", "True"] ["str"] ["?"]    Num, Const, Str, Unknown
    ["seq", [...]]              Seq: a list or tuple display
    ["dict", [[key|None, value], ...]]          DictDisplay (string keys kept)
    ["comp", element, [[name, binding], ...], is_dict]  Comp: a comprehension: its element,
                                with the names its `for`s bind (["iter", s] or ["?"])
    ["bin", op, left, right] ["unary", op, s]   BinOp, UnaryOp: arithmetic (`a + b`, `-x`)
    ["slice", base]             Slice: `base[i:j]`
    ["join", [s, ...], name?]   Join: one of several values (`a if c else b`; the values of a
                                name assigned several times, which they may read)
    ["op"]                      Op: a comparison, an f-string, `not x`

and, made while evaluating (never in the facts): Mutated (a container that the code changes
after building it), Local (a local name's value at a point of its function), Param (a
parameter of a project function: what its call sites pass), Known (a kind already found).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import Any, ClassVar, TypeVar, dataclass_transform

_R = TypeVar("_R", bound=type)
# a field left out of the hash (a dict: not hashable)
_UNHASHED = object()


class _Frozen:
    """What `@dataclass(frozen=True)` forbids: setting or deleting a field."""

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(frozen_default=True)
def _frozen(cls: _R) -> _R:
    """A frozen value class, as `@dataclass(frozen=True)` makes it (`__init__`, `__eq__`,
    `__hash__` and `__repr__` from its annotations; a default as the class attribute), at a
    tenth of the cost: these classes are made at every start of modellint, one edited file's
    lint included, where dataclasses took a tenth of what modellint's imports cost."""
    names = tuple(name for name, annotation in cls.__dict__.get("__annotations__", {}).items()
                  if not str(annotation).startswith("ClassVar"))
    defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
    hashed = tuple(name for name in names if defaults.get(name) is not _UNHASHED)
    for name, default in list(defaults.items()):
        if default is _UNHASHED:
            delattr(cls, name)
            del defaults[name]
    params = ", ".join(f"{name}=_defaults[{name!r}]" if name in defaults else name
                       for name in names)

    def fields_of(prefix: str, chosen: tuple[str, ...]) -> str:
        return "".join(f"{prefix}.{name}, " for name in chosen)

    shown = ", ".join(f"{name}={{self.{name}!r}}" for name in names)
    source = (
        f"def __init__(self, {params}):\n"
        + "".join(f"    _set(self, {name!r}, {name})\n" for name in names)
        + "    pass\n"
        "def __eq__(self, other):\n"
        "    if other.__class__ is not self.__class__:\n"
        "        return NotImplemented\n"
        f"    return ({fields_of('self', names)}) == ({fields_of('other', names)})\n"
        "def __hash__(self):\n"
        f"    return hash(({fields_of('self', hashed)}))\n"
        "def __repr__(self):\n"
        f"    return f\"{cls.__name__}({shown})\"\n"
    )
    namespace: dict[str, Any] = {"_set": object.__setattr__, "_defaults": defaults}
    exec(source, namespace)  # noqa: S102 - our own text, made from our own class
    for method in ("__init__", "__eq__", "__hash__", "__repr__"):
        function = namespace[method]
        function.__qualname__ = f"{cls.__qualname__}.{method}"
        type.__setattr__(cls, method, function)
    type.__setattr__(cls, "FIELDS", names)
    return cls


@_frozen
class Ref(_Frozen):
    TAG: ClassVar[str] = "ref"
    name: str


@_frozen
class SelfAttr(_Frozen):
    TAG: ClassVar[str] = "self"
    attr: str


@_frozen
class This(_Frozen):
    TAG: ClassVar[str] = "this"


@_frozen
class Call(_Frozen):
    TAG: ClassVar[str] = "call"
    func: Summary
    args: tuple[Summary, ...]
    keywords: dict[str, Summary] = _UNHASHED  # type: ignore[assignment]


@_frozen
class Attr(_Frozen):
    TAG: ClassVar[str] = "attr"
    base: Summary
    name: str


@_frozen
class Sub(_Frozen):
    TAG: ClassVar[str] = "sub"
    base: Summary
    key: str | None


@_frozen
class Item(_Frozen):
    TAG: ClassVar[str] = "item"
    base: Summary
    position: int


@_frozen
class Iter(_Frozen):
    TAG: ClassVar[str] = "iter"
    iterable: Summary


@_frozen
class Num(_Frozen):
    TAG: ClassVar[str] = "num"
    value: float


@_frozen
class Const(_Frozen):
    TAG: ClassVar[str] = "const"
    name: str  # "True", "False", "None"


@_frozen
class Str(_Frozen):
    TAG: ClassVar[str] = "str"


@_frozen
class Seq(_Frozen):
    TAG: ClassVar[str] = "seq"
    items: tuple[Summary, ...]


@_frozen
class DictDisplay(_Frozen):
    TAG: ClassVar[str] = "dict"
    entries: tuple[tuple[str | None, Summary], ...]


@_frozen
class Comp(_Frozen):
    TAG: ClassVar[str] = "comp"
    element: Summary
    bound: tuple[tuple[str, Summary], ...]
    is_dict: bool


@_frozen
class BinOp(_Frozen):
    TAG: ClassVar[str] = "bin"
    op: str
    left: Summary
    right: Summary


@_frozen
class UnaryOp(_Frozen):
    TAG: ClassVar[str] = "unary"
    op: str
    operand: Summary


@_frozen
class Slice(_Frozen):
    TAG: ClassVar[str] = "slice"
    base: Summary


@_frozen
class Join(_Frozen):
    TAG: ClassVar[str] = "join"
    values: tuple[Summary, ...]
    name: str | None = None


@_frozen
class Op(_Frozen):
    TAG: ClassVar[str] = "op"


@_frozen
class Unknown(_Frozen):
    TAG: ClassVar[str] = "?"


@_frozen
class Mutated(_Frozen):
    TAG: ClassVar[str] = "mutated"
    value: Summary


@_frozen
class Local(_Frozen):
    TAG: ClassVar[str] = "local"
    value: Summary
    order: int


@_frozen
class Param(_Frozen):
    TAG: ClassVar[str] = "param"
    path: str
    cls: str | None
    function: str
    name: str


@_frozen
class Known(_Frozen):
    TAG: ClassVar[str] = "kind"
    kind: Any  # a `Kind`


Summary = (Ref | SelfAttr | This | Call | Attr | Sub | Item | Iter | Num | Const | Str | Seq
           | DictDisplay | Comp | BinOp | UnaryOp | Slice | Join | Op | Unknown | Mutated | Local
           | Param | Known)

UNKNOWN = Unknown()
THIS = This()
STR = Str()
OP = Op()
NONE = Const("None")


def to_json(s: Summary) -> list:
    """The tagged list of a summary of the facts (see the module's docstring)."""
    encode = _ENCODERS.get(type(s))
    if encode is None:
        raise TypeError(f"not a summary of the facts: {s!r}")
    return encode(s)


# by class, not by a chain of isinstance: the facts of a large project hold millions of them
_ENCODERS: dict[type, Callable[[Any], list]] = {
    Ref: lambda s: ["ref", s.name],
    SelfAttr: lambda s: ["self", s.attr],
    This: lambda s: ["this"],
    Call: lambda s: ["call", to_json(s.func), [to_json(a) for a in s.args],
                     {k: to_json(v) for k, v in s.keywords.items()}],
    Attr: lambda s: ["attr", to_json(s.base), s.name],
    Sub: lambda s: ["sub", to_json(s.base), s.key],
    Item: lambda s: ["item", to_json(s.base), s.position],
    Iter: lambda s: ["iter", to_json(s.iterable)],
    Num: lambda s: ["num", s.value],
    Const: lambda s: ["const", s.name],
    Str: lambda s: ["str"],
    Seq: lambda s: ["seq", [to_json(e) for e in s.items]],
    DictDisplay: lambda s: ["dict", [[k, to_json(v)] for k, v in s.entries]],
    Comp: lambda s: ["comp", to_json(s.element), [[n, to_json(b)] for n, b in s.bound],
                     s.is_dict],
    BinOp: lambda s: ["bin", s.op, to_json(s.left), to_json(s.right)],
    UnaryOp: lambda s: ["unary", s.op, to_json(s.operand)],
    Slice: lambda s: ["slice", to_json(s.base)],
    Join: lambda s: (["join", [to_json(v) for v in s.values]] if s.name is None
                     else ["join", [to_json(v) for v in s.values], s.name]),
    Op: lambda s: ["op"],
    Unknown: lambda s: ["?"],
    Mutated: lambda s: ["mutated", to_json(s.value)],
}


def _json_default(value: Any) -> Any:
    return to_json(value)


# for json.dumps of facts that hold summaries
JSON_DEFAULT: Callable[[Any], Any] = _json_default


def _many(values: Any) -> tuple[Summary, ...]:
    return tuple(from_json(v) for v in values)


_DECODERS: dict[str, Callable[[list], Summary]] = {
    "ref": lambda x: Ref(x[1]),
    "self": lambda x: SelfAttr(x[1]),
    "this": lambda x: THIS,
    "call": lambda x: Call(from_json(x[1]), _many(x[2]),
                           {k: from_json(v) for k, v in x[3].items()}),
    "attr": lambda x: Attr(from_json(x[1]), x[2]),
    "sub": lambda x: Sub(from_json(x[1]), x[2]),
    "item": lambda x: Item(from_json(x[1]), x[2]),
    "iter": lambda x: Iter(from_json(x[1])),
    "num": lambda x: Num(x[1]),
    "const": lambda x: Const(x[1]),
    "str": lambda x: STR,
    "seq": lambda x: Seq(_many(x[1])),
    "dict": lambda x: DictDisplay(tuple((k, from_json(v)) for k, v in x[1])),
    "comp": lambda x: Comp(from_json(x[1]), tuple((n, from_json(b)) for n, b in x[2]), x[3]),
    "bin": lambda x: BinOp(x[1], from_json(x[2]), from_json(x[3])),
    "unary": lambda x: UnaryOp(x[1], from_json(x[2])),
    "slice": lambda x: Slice(from_json(x[1])),
    "join": lambda x: Join(_many(x[1]), x[2] if len(x) > 2 else None),
    "op": lambda x: OP,
    "?": lambda x: UNKNOWN,
}


def from_json(value: Any) -> Summary:
    """The summary of a tagged list (`to_json`); ValueError for anything else."""
    if not isinstance(value, list) or not value or value[0] not in _DECODERS:
        raise ValueError(f"not a summary: {value!r:.80}")
    return _DECODERS[value[0]](value)


def _function(func: dict, convert: Callable[[Any], Any]) -> dict:
    found = dict(func)
    for key in ("defaults", "assigns"):
        if key in found:
            found[key] = {name: convert(v) for name, v in found[key].items()}
    for key in ("returns", "steps", "invokes"):
        if key in found:
            found[key] = [convert(v) for v in found[key]]
    if "joins" in found:
        found["joins"] = {name: [convert(v) for v in values]
                          for name, values in found["joins"].items()}
    return found


def convert_facts(facts: dict, convert: Callable[[Any], Any]) -> dict:
    """A copy of a file's facts with `convert` applied to each summary in them (`to_json` for
    the cache, `from_json` from it)."""
    found = dict(facts)
    if "functions" in found:
        found["functions"] = {name: _function(f, convert)
                              for name, f in found["functions"].items()}
    if "classes" in found:
        classes = {}
        for name, cls in found["classes"].items():
            cls = dict(cls)
            cls["bases"] = [convert(b) for b in cls["bases"]]
            cls["calls"] = [convert(c) for c in cls["calls"]]
            cls["attrs"] = {attr: [[method, convert(v)] for method, v in values]
                            for attr, values in cls["attrs"].items()}
            cls["methods"] = {method: _function(f, convert)
                              for method, f in cls["methods"].items()}
            classes[name] = cls
        found["classes"] = classes
    if "globals" in found:
        found["globals"] = {name: convert(v) for name, v in found["globals"].items()}
    if "global_joins" in found:
        found["global_joins"] = {name: [convert(v) for v in values]
                                 for name, values in found["global_joins"].items()}
    if found.get("script"):
        found["script"] = _function(found["script"], convert)
    return found
