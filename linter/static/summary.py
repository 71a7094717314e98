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
from dataclasses import field
from typing import Any, ClassVar

from modellint.records import record


@record(frozen=True)
class Ref:
    TAG: ClassVar[str] = "ref"
    name: str


@record(frozen=True)
class SelfAttr:
    TAG: ClassVar[str] = "self"
    attr: str


@record(frozen=True)
class This:
    TAG: ClassVar[str] = "this"


@record(frozen=True)
class Call:
    TAG: ClassVar[str] = "call"
    func: Summary
    args: tuple[Summary, ...]
    keywords: dict[str, Summary] = field(hash=False)  # a dict: not hashable


@record(frozen=True)
class Attr:
    TAG: ClassVar[str] = "attr"
    base: Summary
    name: str


@record(frozen=True)
class Sub:
    TAG: ClassVar[str] = "sub"
    base: Summary
    key: str | None


@record(frozen=True)
class Item:
    TAG: ClassVar[str] = "item"
    base: Summary
    position: int


@record(frozen=True)
class Iter:
    TAG: ClassVar[str] = "iter"
    iterable: Summary


@record(frozen=True)
class Num:
    TAG: ClassVar[str] = "num"
    value: float


@record(frozen=True)
class Const:
    TAG: ClassVar[str] = "const"
    name: str  # "True", "False", "None"


@record(frozen=True)
class Str:
    TAG: ClassVar[str] = "str"


@record(frozen=True)
class Seq:
    TAG: ClassVar[str] = "seq"
    items: tuple[Summary, ...]


@record(frozen=True)
class DictDisplay:
    TAG: ClassVar[str] = "dict"
    entries: tuple[tuple[str | None, Summary], ...]


@record(frozen=True)
class Comp:
    TAG: ClassVar[str] = "comp"
    element: Summary
    bound: tuple[tuple[str, Summary], ...]
    is_dict: bool


@record(frozen=True)
class BinOp:
    TAG: ClassVar[str] = "bin"
    op: str
    left: Summary
    right: Summary


@record(frozen=True)
class UnaryOp:
    TAG: ClassVar[str] = "unary"
    op: str
    operand: Summary


@record(frozen=True)
class Slice:
    TAG: ClassVar[str] = "slice"
    base: Summary


@record(frozen=True)
class Join:
    TAG: ClassVar[str] = "join"
    values: tuple[Summary, ...]
    name: str | None = None


@record(frozen=True)
class Op:
    TAG: ClassVar[str] = "op"


@record(frozen=True)
class Unknown:
    TAG: ClassVar[str] = "?"


@record(frozen=True)
class Mutated:
    TAG: ClassVar[str] = "mutated"
    value: Summary


@record(frozen=True)
class Local:
    TAG: ClassVar[str] = "local"
    value: Summary
    order: int


@record(frozen=True)
class Param:
    TAG: ClassVar[str] = "param"
    path: str
    cls: str | None
    function: str
    name: str


@record(frozen=True)
class Known:
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
