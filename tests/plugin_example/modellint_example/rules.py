"""The example plugin's rules, registered through the `modellint` entry-point group."""

from __future__ import annotations

import libcst as cst

from modellint import hookimpl
from modellint.rule import Invalid, Severity, StaticRule

HEADER = "import torch.nn as nn\n\n"


class PrintInForward(StaticRule):
    """A module's `forward` calls `print()`.

    ## What it does
    Finds calls of the built-in `print` inside the `forward` method of an `nn.Module` subclass.

    ## Why is this bad?
    `forward` runs on every batch: a `print` there floods the log, slows training down by
    synchronising with the GPU when it prints a tensor, and breaks `torch.compile` and
    `torch.jit.script`.

    ## Example
        class Net(nn.Module):
            def forward(self, x):
                print(x.shape)
                return self.fc(x)

    ## Use instead
        logger = logging.getLogger(__name__)

        class Net(nn.Module):
            def forward(self, x):
                logger.debug("input shape %s", x.shape)
                return self.fc(x)
    """

    code = "XMP101"
    name = "print-in-forward"
    severity = Severity.WARNING
    default_enabled = True
    triggers = ("print",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        print('building')\n",
        HEADER + "class Plain:\n    def forward(self, x):\n        print(x)\n",
        HEADER + "from rich import print\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        print(x)\n        return x\n",
        "def forward(x):\n    print(x)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        print(x.shape)\n"
            "        return x\n",
            line=5,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        if x.sum() > 0:\n"
            "            print('positive')\n        return x\n",
            line=6,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value == "print"):
            return
        if self.context.qualified_name(node.func) is not None:
            return  # an imported `print` (rich, a logger helper) is not the built-in
        found = self.context.current_method()
        if found is None or found[1].name.value != "forward":
            return
        self.report(
            node,
            f"`{found[0].name.value}.forward` calls `print()`, which runs on every batch; "
            "use `logging` or remove it",
        )


@hookimpl
def modellint_add_rules():
    return [PrintInForward]
