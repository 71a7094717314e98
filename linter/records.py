"""`@record`: a dataclass, with the `__init__`, `__eq__`, `__repr__` (and, frozen, `__hash__` and
no assignment) that `@dataclass` would give it, made at a tenth of the cost.

`@dataclass` compiles each method of each class on its own (about half a millisecond a class);
modellint makes some seventy such classes at every start, one edited file's lint included,
where that was a fifth of all that modellint adds to LibCST's own start. A record is made by
`@dataclass` with no method to write (its fields, `dataclasses.fields`, `replace`, `asdict`
and `is_dataclass` are the dataclass's own); its `__init__`, the one method that would be
slower made generic, is compiled once the class has made a few instances (most classes make
only a few in a run, many none); `__eq__`, `__hash__` and `__repr__` read the fields with
`operator.attrgetter`. Fields are declared as for a dataclass: annotations, a default as the
value, or `dataclasses.field(default=..., default_factory=..., repr=False, compare=False,
hash=False)`.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
import sys
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, field
from typing import Any, TypeVar, overload

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # what it tells type checkers, Python 3.10 does without
    def dataclass_transform(**_: Any) -> Any:
        return lambda decorated: decorated

_R = TypeVar("_R", bound=type)


def _frozen_setattr(self, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _has_default(spec: Field) -> bool:
    return spec.default is not MISSING or spec.default_factory is not MISSING


def _make(cls: _R, frozen: bool) -> _R:
    own = dict(cls.__dict__)
    # what the class defines itself stays, as with dataclasses (a `__hash__` of None is what
    # defining `__eq__` leaves, not a choice)
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    doc = own.get("__doc__")
    if not doc:  # else dataclasses writes one from `inspect.signature`: four times the rest
        type.__setattr__(cls, "__doc__", "-")
    dataclasses.dataclass(init=False, repr=False, eq=False)(cls)  # the fields, kept as it keeps them
    if not doc:
        type.__setattr__(cls, "__doc__", doc)
    chosen = dataclasses.fields(cls)
    for spec in chosen:
        if not spec.init or spec.kw_only is True:
            raise TypeError(f"{cls.__qualname__}: init=False and kw_only fields are not kept")
    for before, spec in zip(chosen, chosen[1:], strict=False):
        if _has_default(before) and not _has_default(spec):
            raise TypeError(f"{cls.__qualname__}: field {spec.name!r} without a default "
                            "follows a field with one")
    compared = _values([spec.name for spec in chosen if spec.compare])
    hashed = _values([spec.name for spec in chosen
                      if (spec.compare if spec.hash is None else spec.hash)])
    shown = tuple(spec.name for spec in chosen if spec.repr)

    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        if made <= _COMPILE_AFTER:
            _bind(self, chosen, frozen, args, kwargs)
            return
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

    methods: dict[str, Any] = {"__init__": __init__}
    methods.update((name, method) for name, method in (("__eq__", __eq__), ("__repr__", __repr__))
                   if name not in own)
    if not explicit_hash:
        methods["__hash__"] = __hash__ if frozen else None
    for name, method in methods.items():
        if method is not None:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
        type.__setattr__(cls, name, method)
    if frozen:
        type.__setattr__(cls, "__setattr__", _frozen_setattr)
        type.__setattr__(cls, "__delattr__", _frozen_delattr)
    return cls


def _values(names: list[str]) -> Callable[[Any], tuple]:
    """A function that gives the tuple of an object's values of `names`."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        only = operator.attrgetter(names[0])
        return lambda item: (only(item),)
    return lambda item: ()


# a class's first instances are made by `_bind`; past these, by an `__init__` compiled for it
# (most classes make a handful of instances in a run: compiling costs more than binding them)
_COMPILE_AFTER = 16


def _bind(self: Any, chosen: tuple[Field, ...], frozen: bool, args: tuple,
          kwargs: dict[str, Any]) -> None:
    """What the compiled `__init__` does, field by field."""
    if len(args) > len(chosen):
        raise TypeError(f"{type(self).__qualname__}() takes {len(chosen)} arguments, "
                        f"{len(args)} were given")
    setter = object.__setattr__ if frozen else setattr
    for position, spec in enumerate(chosen):
        if position < len(args):
            if spec.name in kwargs:
                raise TypeError(f"{type(self).__qualname__}() got multiple values for "
                                f"argument {spec.name!r}")
            value = args[position]
        elif spec.name in kwargs:
            value = kwargs.pop(spec.name)
        elif spec.default_factory is not MISSING:
            value = spec.default_factory()
        elif spec.default is not MISSING:
            value = spec.default
        else:
            raise TypeError(f"{type(self).__qualname__}() missing argument {spec.name!r}")
        setter(self, spec.name, value)
    if kwargs:
        raise TypeError(f"{type(self).__qualname__}() got an unexpected keyword argument "
                        f"{next(iter(kwargs))!r}")
    if hasattr(self, "__post_init__"):
        self.__post_init__()


def _compiled_init(cls: type, chosen: tuple[Field, ...], frozen: bool) -> Callable[..., None]:
    namespace: dict[str, Any] = {"_set": object.__setattr__, "_MISSING": MISSING}
    params, body = [], []
    for spec in chosen:
        value = spec.name
        if spec.default_factory is not MISSING:
            namespace[f"_factory_{spec.name}"] = spec.default_factory
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
