"""The runtime halves of the registration rules (ML101-ML108, documented by their static
classes in `modellint.rules.registration`): what a built and traced model shows."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from itertools import chain
from typing import Any, NamedTuple

from modellint.rule import (
    FORWARD,
    REPEAT,
    Invalid,
    LazyPattern,
    RuntimeCheck,
    attribute_location,
    first_line,
    shape_text,
    source_line,
)

HEADER = "import torch\nimport torch.nn as nn\n\n\n"
_NO_ATTR = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def _owner(plain) -> str:
    return f"`{type(plain.module).__name__}`" + (f" (at `{plain.path}`)" if plain.path else "")


class UnregisteredModuleAtRuntime(RuntimeCheck):
    """ML101 at runtime: modules in plain containers, and modules called but not registered."""

    code = "ML101"
    needs = frozenset({FORWARD, REPEAT})
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])\n\n"
        "    def forward(self, x):\n        for layer in self.layers:\n"
        "            x = layer(x)\n        return x\n",
    ]
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
                "        self.layers = [nn.Linear(4, 4) for _ in range(2)]\n\n"
                "    def forward(self, x):\n        for layer in self.layers:\n"
                "            x = layer(x)\n        return self.fc(x)\n", line=9),
        # hidden from both `named_modules()` and the static pass: found when it is called
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
                "        object.__setattr__(self, \"extra\", nn.Linear(4, 4))\n\n"
                "    def forward(self, x):\n        return self.extra(self.fc(x))\n", line=12),
    ]

    def explains(self, run, failure) -> bool:
        stranded = _stranded(run, failure)
        return stranded is not None and not stranded.built_where_called

    def check(self, run) -> None:
        if run.model is None:
            return
        for plain in run.plain_attributes():
            if not plain.modules:
                continue
            loc = attribute_location(run, plain.module, plain.attr, plain.path)
            wrapper = "nn.ModuleDict" if isinstance(plain.value, dict) else "nn.ModuleList"
            run.report(self.code, f"`self.{plain.attr}` of {_owner(plain)} is a plain "
                       f"{type(plain.value).__name__} holding {len(plain.modules)} module(s) "
                       f"({_kinds(plain.modules)}) that `parameters()`, `.to()` and "
                       f"`state_dict()` never see; wrap it in `{wrapper}`", loc)
        for failure in run.failures:
            stranded = _stranded(run, failure)
            if stranded is not None and not stranded.built_where_called:
                run.report(self.code, f"a `{stranded.name}` called inside "
                           f"`{stranded.parent or run.name}` is not registered, so `.to()` "
                           f"never moved it: it is on {stranded.device} and the forward on "
                           f"{run.device} failed ({first_line(failure.exc)}); assign it to "
                           f"`self` or keep it in an nn.ModuleList", stranded.location)
        if run.first is None or run.repeat is None:
            return
        contained = run.contained()
        for key, (module, parent, site) in run.first.unregistered.items():
            if key in contained or key not in run.repeat.unregistered:
                continue  # reported where the container is assigned, or built per call
            loc = (site[0], site[1]) if site else run.location_of(parent)
            run.report(self.code, f"a `{type(module).__name__}` called inside "
                       f"`{parent or run.name}` is not registered: `named_modules()`, "
                       f"`parameters()` and `.to()` never see it; assign it to `self` or keep "
                       f"it in an nn.ModuleList", loc)


class UnregisteredParameterAtRuntime(RuntimeCheck):
    """ML102 at runtime: parameters in plain containers of the built model."""

    code = "ML102"
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
                "        self.scales = [nn.Parameter(torch.ones(4)) for _ in range(2)]\n\n"
                "    def forward(self, x):\n        return self.fc(x) * self.scales[0]\n",
                line=9),
    ]

    def check(self, run) -> None:
        if run.model is None:
            return
        for plain in run.plain_attributes():
            if not plain.parameters:
                continue
            loc = attribute_location(run, plain.module, plain.attr, plain.path)
            wrapper = "nn.ParameterDict" if isinstance(plain.value, dict) else "nn.ParameterList"
            run.report(self.code, f"`self.{plain.attr}` of {_owner(plain)} is a plain "
                       f"{type(plain.value).__name__} holding {len(plain.parameters)} "
                       f"parameter(s) that `parameters()` and the optimizer never see; wrap "
                       f"it in `{wrapper}`", loc)


class UnregisteredTensorAtRuntime(RuntimeCheck):
    """ML103 at runtime: plain tensor attributes of the built model's modules."""

    code = "ML103"
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
                "        self.mask = torch.ones(4)\n\n"
                "    def forward(self, x):\n        return self.fc(x) * self.mask\n", line=9),
    ]

    def check(self, run) -> None:
        if run.model is None:
            return
        for plain in run.plain_attributes():
            if not plain.is_tensor:
                continue
            loc = attribute_location(run, plain.module, plain.attr, plain.path)
            run.report(self.code, f"`self.{plain.attr}` of {_owner(plain)} is a plain tensor "
                       f"{shape_text(plain.value.shape)}, neither a parameter nor a buffer: "
                       f"`.to()`, `state_dict()` and the optimizer do not see it; use "
                       f"`self.register_buffer(\"{plain.attr}\", ...)` or `nn.Parameter`", loc)


class SuperInitLateAtRuntime(RuntimeCheck):
    """ML104 at runtime: building the model failed because a module or parameter was
    assigned before `super().__init__()`."""

    code = "ML104"
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        self.fc = nn.Linear(4, 4)\n        super().__init__()\n\n"
                "    def forward(self, x):\n        return self.fc(x)\n", line=7),
    ]

    def explains(self, run, failure) -> bool:
        return failure.phase == "build" and "before Module.__init__() call" in str(failure.exc)

    def check(self, run) -> None:
        failure = run.build_failure
        if failure is None or not self.explains(run, failure):
            return
        run.report(self.code, f"`{run.label}` assigns a module or parameter before calling "
                   f"`super().__init__()` ({first_line(failure.exc)}); call "
                   f"`super().__init__()` first", failure.site_location)


class UndefinedAttributeAtRuntime(RuntimeCheck):
    """ML106 at runtime: `forward` failed reading an attribute that was never assigned."""

    code = "ML106"
    needs = frozenset({FORWARD})
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
                "    def forward(self, x):\n        return getattr(self, 'f' + 'c2')(x)\n",
                line=11),
    ]

    def _missing(self, failure):
        match = _NO_ATTR.search(str(failure.exc))
        if (failure.phase != "build" and failure.mismatch is None
                and isinstance(failure.exc, AttributeError) and match and failure.site
                and failure.site[2] == "forward"):
            return match
        return None

    def explains(self, run, failure) -> bool:
        return self._missing(failure) is not None

    def check(self, run) -> None:
        for failure in run.failures:
            match = self._missing(failure)
            if match is None:
                continue
            run.report(self.code, f"`{match.group(1)}.forward` reads `self.{match.group(2)}`, "
                       f"which is never assigned ({first_line(failure.exc)}); define it in "
                       f"`__init__` or fix the name", failure.site_location)


class ModuleBuiltInForwardAtRuntime(RuntimeCheck):
    """ML107 at runtime: a module not registered, built anew on every forward."""

    code = "ML107"
    needs = frozenset({FORWARD, REPEAT})
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
                "    def forward(self, x):\n        make = nn.Linear\n"
                "        return make(4, 4)(self.fc(x))\n", line=12),
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
                "    def forward(self, x):\n        make = nn.Dropout\n"
                "        return make(0.5)(self.fc(x))\n", line=12),
    ]
    valid = [
        # a module without weights nor a train/eval difference behaves the same built anew
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        act = nn.ReLU\n"
        "        return act()(self.fc(x))\n",
    ]

    def explains(self, run, failure) -> bool:
        stranded = _stranded(run, failure)
        return stranded is not None and stranded.built_where_called

    def check(self, run) -> None:
        for failure in run.failures:
            stranded = _stranded(run, failure)
            if stranded is not None and stranded.built_where_called:
                run.report(self.code, f"a new `{stranded.name}` is built on every call inside "
                           f"`{stranded.parent or run.name}`, on {stranded.device}: the model's "
                           f"device never reaches it, and the forward on {run.device} failed "
                           f"({first_line(failure.exc)}); build it in `__init__`",
                           stranded.location)
        if run.first is None:
            return
        for key in run.rebuilt_in_forward():
            module, parent, site = run.first.unregistered[key]
            name = type(module).__name__
            holds_state = any(True for _ in module.parameters()) or any(
                True for _ in module.buffers())
            if not holds_state and not _follows_mode(module):
                continue  # an activation, a pad, a loss: built anew, it behaves the same
            loc, _ = _where_built(run, parent, site, name)
            what = ("its weights are re-initialised each forward and never trained"
                    if holds_state else
                    "it is always in training mode (`model.eval()` never reaches it)")
            run.report(self.code, f"a new `{name}` is built on every call inside "
                       f"`{parent or run.name}`: {what}; build it in `__init__`", loc)


# torch's words for tensors on two devices ("Expected all tensors to be on the same device",
# "Tensor on device cpu is not on the expected device meta!", a convolution's "Input type
# (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same")
_DEVICE_FAILURE = LazyPattern(r"device|Input type \(\S+\) and weight type")


class _Stranded(NamedTuple):
    """A module the model does not register, called in a forward that failed, whose weights
    are on another device than the model's."""

    name: str  # its class
    parent: str  # the path of the registered module that called it
    device: str  # where its weights are
    location: Any  # (file, line): where it is built, else where it is called
    built_where_called: bool  # built in the function that calls it (on every call)


def _stranded(run, failure) -> _Stranded | None:
    """The module `failure` raised in when the model does not register it and `.to(device)`
    left it behind (its weights on another device than the run's), else None."""
    import torch

    if failure.tracer is None or not _DEVICE_FAILURE.search(str(failure.exc)):
        return None
    held = failure.tracer.unregistered_on_stack()
    if held is None:
        return None
    module, parent, site = held
    weight = next(chain(module.parameters(), module.buffers()), None)
    target = torch.device(run.device)
    if weight is None or (weight.device.type == target.type
                          and target.index in (None, weight.device.index)):
        return None
    name = type(module).__name__
    location, built = _where_built(run, parent, site, name)
    return _Stranded(name, parent, str(weight.device), location, built)


def _where_built(run, parent: str, site, type_name: str) -> tuple[Any, bool]:
    """(where a module the model does not register is built, in the function that calls it
    at `site`, else where it is called or its parent was built; whether it is built there)."""
    built = _construction_line(site[0], site[1], type_name) if site else None
    if built is not None:
        return built, True
    return ((site[0], site[1]) if site else run.location_of(parent)), False


def _follows_mode(module) -> bool:
    """Whether `module` without weights still behaves differently in train and eval mode."""
    from torch import nn

    return isinstance(module, nn.modules.dropout._DropoutNd)


def _kinds(modules) -> str:
    """`2 Linear, 1 ReLU`: every kind of module a container holds, in its order."""
    counts = Counter(type(module).__name__ for module in modules)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{count} {name}" for name, count in counts.items())


def _construction_line(path: str, line: int, type_name: str) -> tuple[str, int] | None:
    """The line at or above `line`, in the same function, that calls `TypeName(`."""
    pattern = re.compile(rf"\b{re.escape(type_name)}\s*\(")
    for number in range(line, max(line - 40, 0), -1):
        text = source_line(path, number)
        if pattern.search(text):
            return path, number
        if text.lstrip().startswith("def "):
            break
    return None


class RepeatedModuleAtRuntime(RuntimeCheck):
    """ML108 at runtime: one module object registered at several places of one parent."""

    code = "ML108"
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        block = nn.Linear(4, 4)\n"
                "        self.layers = nn.Sequential(*[block] * 3)\n\n"
                "    def forward(self, x):\n        return self.layers(x)\n", line=9),
    ]

    def check(self, run) -> None:
        model = run.model
        if model is None:
            return
        places: dict[int, list[str]] = defaultdict(list)
        objects = {}
        for path, module in model.named_modules(remove_duplicate=False):
            places[id(module)].append(path)
            objects[id(module)] = module
        for key, paths in places.items():
            if len(paths) < 2 or not any(True for _ in objects[key].parameters()):
                continue
            by_parent: dict[str, list[str]] = defaultdict(list)
            for path in paths:
                parent, _, name = path.rpartition(".")
                by_parent[parent].append(name)
            for parent, names in by_parent.items():
                if len(names) < 2:
                    continue
                container = run.submodule(parent)
                where = f"`{parent}`" if parent else "the model"
                loc, _ = run.report_location(parent) if parent else (run.root_location, "")
                run.report(self.code, f"{where} ({type(container).__name__}) holds one "
                           f"`{type(objects[key]).__name__}` object at {len(names)} places "
                           f"({', '.join(names[:6])}): they share one set of weights; "
                           f"build a new instance for each place", loc)
