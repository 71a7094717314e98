"""The example plugin's rules, registered through the `modellint` entry-point group: a static
rule (XMP101) and a runtime rule (XMP701)."""

from __future__ import annotations

import libcst as cst

from modellint import hookimpl
from modellint.rule import FORWARD, Invalid, RuntimeRule, Severity, StaticRule

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


DOUBLE_HEAD = (
    HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.body = nn.Linear(4, 4)\n        self.head = nn.Linear(4, 2){cast}\n\n"
    "    def forward(self, x):\n        return self.head(self.body(x){cast})\n"
)


class DoublePrecisionModule(RuntimeRule):
    """A module the forward calls computes in float64.

    ## What it does
    Runs the model once (the runtime pass, `modellint check --runtime`) and reports the first
    module, in the order the forward calls them, whose parameters are float64, at the line
    that built it.

    ## Why is this bad?
    GPUs run float64 many times slower than float32 (up to 64× on consumer cards), and a
    float64 layer doubles the memory of its parameters, gradients and optimizer state. It is
    usually a leftover `.double()` from a numerical test.

    ## Example
        self.head = nn.Linear(4, 2).double()

    ## Use instead
        self.head = nn.Linear(4, 2)
    """

    code = "XMP701"
    name = "double-precision-module"
    severity = Severity.WARNING
    needs = frozenset({FORWARD})  # one eval forward: its trace has each call's dtype
    valid = [DOUBLE_HEAD.format(cast="")]
    invalid = [Invalid(DOUBLE_HEAD.format(cast=".double()"), line=7)]

    def check(self, run) -> None:
        if run.first is None:
            return
        for row in run.first.rows:
            if row.dtype == "float64":
                location, note = run.report_location(row.path)
                run.report(self.code, f"`{row.path or run.name}` ({row.type}) computes in "
                           f"float64; use float32 (or bfloat16){note}", location)
                return


@hookimpl
def modellint_add_rules():
    return [PrintInForward, DoublePrecisionModule]
