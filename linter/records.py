"""Records: classes of named fields, with the `__init__`, `__eq__`, `__repr__` (and, frozen,
`__hash__` and no assignment) that `@dataclass` would give them, made at a tenth of the cost.

`@dataclass` compiles each method of each class on its own (about half a millisecond a class);
modellint makes some sixty such classes at every start, one edited file's lint included,
where that was a fifth of all that modellint adds to LibCST's own start. A record compiles
only its `__init__` (the one method that would be slower made generic), when the class makes
its first instance; `__eq__`, `__hash__` and `__repr__` read the fields with
`operator.attrgetter`. Fields are declared as for a dataclass: annotations, a default as the
value, or `dataclasses.field(default=..., default_factory=..., repr=False, compare=False,
hash=False)`. A record is not a dataclass: `replace` here (for both) replaces
`dataclasses.replace`.

The classes of the plugin API that a plugin may hand to `dataclasses` (`Finding`, `Fix`,
`Config`, a rule's `Valid` and `Invalid` examples, ...) stay dataclasses.
"""
from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, field
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["FrozenInstanceError", "field", "fields", "record", "replace"]

_R = TypeVar("_R", bound=type)
_T = TypeVar("_T")
_MUTABLE_DEFAULTS = (list, dict, set)


class _Spec:
    """One field: what `dataclasses.field` says of it."""

    __slots__ = ("name", "default", "factory", "repr", "compare", "hash")

    def __init__(self, name: str, declared: Any) -> None:
        self.name = name
        self.default: Any = declared
        self.factory: Any = MISSING
        self.repr = self.compare = True
        self.hash: bool | None = None
        if isinstance(declared, Field):
            if not declared.init or declared.kw_only is True:
                raise TypeError(f"record field {name!r}: init=False and kw_only are not kept")
            self.default, self.factory = declared.default, declared.default_factory
            self.repr, self.compare, self.hash = declared.repr, declared.compare, declared.hash
        if isinstance(self.default, _MUTABLE_DEFAULTS):
            raise ValueError(f"record field {name!r}: a mutable default, use default_factory")

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING or self.factory is not MISSING

    @property
    def hashed(self) -> bool:
        return self.compare if self.hash is None else self.hash


def _own_specs(cls: type) -> list[_Spec]:
    specs = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if text.startswith(("ClassVar", "typing.ClassVar")):
            continue
        spec = _Spec(name, cls.__dict__.get(name, MISSING))
        specs.append(spec)
        if spec.default is MISSING:
            if name in cls.__dict__:
                delattr(cls, name)  # a field() without a default
        else:
            setattr(cls, name, spec.default)  # as dataclasses: the default, on the class
    return specs


def _frozen_setattr(self, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _make(cls: _R, frozen: bool) -> _R:
    specs: dict[str, _Spec] = {}
    for base in reversed(cls.__mro__[1:]):
        for spec in base.__dict__.get("__record_fields__", ()):
            specs[spec.name] = spec
    for spec in _own_specs(cls):
        specs[spec.name] = spec  # a field declared again keeps its place, as in a dataclass
    chosen = tuple(specs.values())
    for before, spec in zip(chosen, chosen[1:], strict=False):
        if before.has_default and not spec.has_default:
            raise TypeError(f"{cls.__qualname__}: field {spec.name!r} without a default "
                            "follows a field with one")
    compared = _values([spec.name for spec in chosen if spec.compare])
    hashed = _values([spec.name for spec in chosen if spec.hashed])
    shown = tuple(spec.name for spec in chosen if spec.repr)

    # the one method that is compiled (a generic one would slow every instance down), on the
    # class's first instance: many classes have none in a run
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        init = _compiled_init(cls, chosen, frozen)
        type.__setattr__(cls, "__init__", init)
        init(self, *args, **kwargs)

    def __eq__(self, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return compared(self) == compared(other)

    def __hash__(self) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return (f"{self.__class__.__qualname__}("
                + ", ".join(f"{name}={getattr(self, name)!r}" for name in shown) + ")")

    own = cls.__dict__
    # what the class defines itself stays, as with dataclasses (a `__hash__` of None is what
    # defining `__eq__` leaves, not a choice)
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    methods: dict[str, Any] = {"__init__": __init__}
    methods.update((name, method) for name, method in (("__eq__", __eq__), ("__repr__", __repr__))
                   if name not in own)
    if not explicit_hash:
        methods["__hash__"] = __hash__ if frozen else None
    if frozen:
        methods.update(__setattr__=_frozen_setattr, __delattr__=_frozen_delattr)
    for name, method in methods.items():
        if method is not None and name in ("__init__", "__eq__", "__hash__", "__repr__"):
            method.__qualname__ = f"{cls.__qualname__}.{name}"
        type.__setattr__(cls, name, method)
    type.__setattr__(cls, "__record_fields__", chosen)
    type.__setattr__(cls, "__match_args__", tuple(spec.name for spec in chosen))
    return cls


def _values(names: list[str]) -> Callable[[Any], tuple]:
    """A function that gives the tuple of an object's values of `names`."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        only = operator.attrgetter(names[0])
        return lambda item: (only(item),)
    return lambda item: ()


def _compiled_init(cls: type, chosen: tuple[_Spec, ...], frozen: bool) -> Callable[..., None]:
    namespace: dict[str, Any] = {"_set": object.__setattr__, "_MISSING": MISSING}
    params, body = [], []
    for spec in chosen:
        value = spec.name
        if spec.factory is not MISSING:
            namespace[f"_factory_{spec.name}"] = spec.factory
            params.append(f"{spec.name}=_MISSING")
            value = f"_factory_{spec.name}() if {spec.name} is _MISSING else {spec.name}"
        elif spec.default is not MISSING:
            namespace[f"_default_{spec.name}"] = spec.default
            params.append(f"{spec.name}=_default_{spec.name}")
        else:
            params.append(spec.name)
        body.append(f"    _set(self, {spec.name!r}, {value})\n" if frozen
                    else f"    self.{spec.name} = {value}\n")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()\n")
    source = f"def __init__(self, {', '.join(params)}):\n" + "".join(body) + "    pass\n"
    exec(source, namespace)  # noqa: S102 - our own text, made from our own class
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


@overload
def record(cls: _R, /) -> _R: ...
@overload
def record(*, frozen: bool = False) -> Callable[[_R], _R]: ...
@dataclass_transform(field_specifiers=(field, Field))
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """Make `cls` a record; `frozen`: its instances cannot be changed, and hash by value."""
    if cls is None:
        return lambda chosen: _make(chosen, frozen)
    return _make(cls, frozen)


def fields(item: Any) -> tuple[str, ...]:
    """The names of the fields of a record (a class or an instance), in order."""
    return tuple(spec.name for spec in item.__record_fields__)


def replace(item: _T, /, **changes: Any) -> _T:
    """A copy of the record (or dataclass) `item` with the fields `changes` names set to
    those values."""
    if not hasattr(item, "__record_fields__"):
        return dataclasses.replace(item, **changes)  # type: ignore[type-var]
    for name in fields(item):
        if name not in changes:
            changes[name] = getattr(item, name)
    return type(item)(**changes)
