"""Runtime check of what `state_dict()` saves: ML505."""

from __future__ import annotations

from modellint.rule import (
    FORWARD,
    TWIN,
    Invalid,
    RuntimeRule,
    attribute_location,
    fingerprints_differ,
    first_line,
)

HEADER = "import torch\nimport torch.nn as nn\n\n\n"


def differing_attribute(a, b) -> tuple[str, str] | None:
    """(module path, attribute) of a plain attribute whose value differs between two
    instances (modules): state that `state_dict()` does not carry."""
    import torch
    from torch import nn

    from modellint.rule import BASE_ATTRS

    others = dict(b.named_modules())
    for path, module in a.named_modules():
        twin = others.get(path)
        if twin is None:
            continue
        theirs = vars(twin)
        for attr, value in vars(module).items():
            if attr in BASE_ATTRS or attr not in theirs:
                continue
            other = theirs[attr]
            if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
                if value != other:
                    return path, attr
            elif isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                if (not isinstance(other, torch.Tensor) or value.shape != other.shape
                        or not torch.equal(value, other)):
                    return path, attr
    return None


class StateNotInStateDict(RuntimeRule):
    """A fresh instance loaded from `state_dict()` computes something else.

    ## What it does
    Builds a second instance of the model, loads the first one's `state_dict()` with
    `strict=True`, and compares eval-mode outputs on the same input. When they differ it names
    the attribute that differs between the instances (or the first module whose output does).

    ## Why is this bad?
    State kept in plain Python attributes or unregistered tensors is not saved by
    `torch.save(model.state_dict())`: a reloaded checkpoint silently computes something else.

    ## Example
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.temperature = 1.0 + float(torch.rand(()))

    ## Use instead
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.register_buffer("temperature", 1.0 + torch.rand(()))
    """

    code = "ML505"
    name = "state-not-in-state-dict"
    needs = frozenset({FORWARD, TWIN})
    numeric = True
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n"
        "        self.register_buffer(\"temperature\", 1.0 + torch.rand(()))\n\n"
        "    def forward(self, x):\n        return self.fc(x) / self.temperature\n",
    ]
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
                "        self.temperature = 1.0 + float(torch.rand(()))\n\n"
                "    def forward(self, x):\n        return self.fc(x) / self.temperature\n",
                line=9),
    ]

    def check(self, run) -> None:
        twin = run.twin
        if twin is None:
            return
        if twin.load_error is not None:
            run.report(self.code, f"a fresh `{run.label}` cannot load this one's "
                       f"`state_dict()` ({first_line(twin.load_error)}): the saved state does "
                       f"not describe the model", None)
            return
        if twin.matches is not False:
            return
        differing = differing_attribute(run.model, twin.model)
        if differing is not None:
            path, attr = differing
            owner = run.submodule(path)
            loc = attribute_location(run, owner, attr, path)
            run.report(self.code, f"a fresh `{run.name}` loaded with this one's `state_dict()` "
                       f"computes different outputs: `self.{attr}` of `{type(owner).__name__}` "
                       f"differs between instances and is not saved; register it with "
                       f"`register_buffer` (or make it an `nn.Parameter`)", loc)
            return
        path = ""
        for (kind, p, a), (_, _, b) in zip(run.first.fingerprints, twin.tracer.fingerprints,
                                           strict=False):
            if fingerprints_differ(a, b):
                path = p if kind == "out" else p.rpartition(".")[0]
                break
        loc, note = run.report_location(path) if path else (None, "")
        first = f", first at `{path}`" if path else ""
        run.report(self.code, f"a fresh `{run.name}` loaded with this one's `state_dict()` "
                   f"computes different outputs{first}: some state lives outside the "
                   f"parameters and buffers; register it with `register_buffer` or make it "
                   f"an `nn.Parameter`{note}", loc)
