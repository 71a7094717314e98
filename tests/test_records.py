"""Records behave as the dataclasses they replace: construction, equality, hashing, `repr`,
freezing, inheritance, pickling, and what `dataclasses` does with a dataclass."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import FrozenInstanceError, asdict, field, fields, is_dataclass, replace
from typing import ClassVar

import pytest

from modellint.records import record


@record(frozen=True)
class Point:
    KIND: ClassVar[str] = "point"
    x: int
    y: int = 0
    label: str = field(default="", compare=False, repr=False)
    extra: dict = field(default_factory=dict, hash=False)


@record
class Bag:
    name: str
    items: list = field(default_factory=list)


@record(frozen=True)
class Labelled(Point):
    tag: str = "t"


@dataclasses.dataclass(frozen=True)
class DataPoint:
    x: int
    y: int = 0
    label: str = field(default="", compare=False, repr=False)
    extra: dict = field(default_factory=dict, hash=False)


def test_a_frozen_record_is_the_dataclass_it_replaces():
    for make in (Point, DataPoint):
        a, b = make(1, 2, label="a"), make(1, 2, label="b")
        assert a == b and hash(a) == hash(b)  # the label is not compared
        assert make(1, 2, extra={"k": 1}) == make(1, 2, extra={"k": 1})
        assert hash(make(1, 2, extra={"k": 1})) == hash(make(1, 2))  # a dict is not hashed
        assert make(1) != make(2) and make(1).y == 0
        with pytest.raises(FrozenInstanceError):
            a.x = 3  # type: ignore[misc]
        with pytest.raises(FrozenInstanceError):
            del a.x  # type: ignore[misc]
    assert repr(Point(1, 2, label="a")) == "Point(x=1, y=2, extra={})"
    assert repr(DataPoint(1, 2, label="a")) == "DataPoint(x=1, y=2, extra={})"
    assert Point(1) != DataPoint(1)


def test_defaults_and_factories():
    assert Point(1).extra is not Point(1).extra
    assert Point.KIND == "point" and Point.y == 0
    bag = Bag("b")
    bag.items.append(1)
    assert Bag("b").items == [] and bag == Bag("b", [1])
    assert [f.name for f in fields(Point)] == ["x", "y", "label", "extra"]


def test_a_mutable_record_changes_and_does_not_hash():
    bag = Bag("b")
    bag.name = "c"
    assert bag.name == "c"
    with pytest.raises(TypeError):
        hash(bag)


def test_inherited_fields_come_first():
    labelled = Labelled(1, 2, tag="u")
    assert [f.name for f in fields(Labelled)] == ["x", "y", "label", "extra", "tag"]
    assert labelled != Point(1, 2) and labelled == Labelled(1, 2, tag="u")
    assert repr(labelled) == "Labelled(x=1, y=2, extra={}, tag='u')"


def test_dataclasses_knows_a_record_and_it_pickles():
    point = Point(1, 2, label="a", extra={"k": 1})
    moved = replace(point, y=5)
    assert (moved.x, moved.y, moved.label, moved.extra) == (1, 5, "a", {"k": 1})
    assert is_dataclass(point) and asdict(point) == {"x": 1, "y": 2, "label": "a",
                                                     "extra": {"k": 1}}
    copied = pickle.loads(pickle.dumps(Labelled(1, tag="v")))
    assert copied == Labelled(1, tag="v") and copied.tag == "v"


def test_what_the_class_defines_stays():
    @record(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __hash__(self) -> int:
            return 7

    assert repr(Named("a")) == "<a>" and hash(Named("a")) == 7


def test_mistakes_in_a_declaration_are_refused():
    with pytest.raises(ValueError, match="default_factory"):
        @record
        class Shared:
            items: list = []  # noqa: RUF012

    with pytest.raises(TypeError, match="follows"):
        @record
        class Order:
            first: int = 0
            second: int


def test_the_first_instances_and_the_later_ones_are_made_alike():
    @record(frozen=True)
    class Fresh:
        x: int
        y: int = 0
        extra: list = field(default_factory=list)

    def refused() -> None:
        for wrong_args, wrong_keywords in (((), {}), ((1, 2, [], 4), {}), ((1,), {"x": 1}),
                                           ((1,), {"z": 1})):
            with pytest.raises(TypeError):
                Fresh(*wrong_args, **wrong_keywords)

    refused()  # made field by field
    made = [Fresh(n, y=n * 2) if n % 2 else Fresh(x=n) for n in range(40)]
    refused()  # by the compiled __init__
    assert [(f.x, f.y, f.extra) for f in made] == [
        (n, n * 2 if n % 2 else 0, []) for n in range(40)]
    assert len({id(f.extra) for f in made}) == 40  # a new list each
    assert Fresh.__init__.__qualname__.endswith("Fresh.__init__")
