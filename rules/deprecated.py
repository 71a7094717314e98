"""Deprecated API (ML9xx): spellings PyTorch kept for old code, with their modern forms."""

from __future__ import annotations

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import Fix, Invalid, Severity, StaticRule, dotted_name, snippet

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


VARIABLE_NAMES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# where the loop variable is a parameter or buffer: `for p in model.parameters():`
_TENSOR_ITERATORS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers"})


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


class DeprecatedVariable(StaticRule):
    """`torch.autograd.Variable` and `volatile=`, deprecated since PyTorch 0.4.

    ## What it does
    Finds calls of `torch.autograd.Variable(...)` (under any import spelling), and says so when
    they pass `volatile=`.

    ## Why is this bad?
    Since 0.4 tensors carry autograd themselves: `Variable(t)` just returns a tensor, and
    `Variable(t, requires_grad=True)` is `t.requires_grad_()`. `volatile=True` has no effect at
    all (PyTorch only warns), so code that relied on it to save memory during evaluation now
    builds the whole graph; use `torch.no_grad()` instead.

    ## Example
        x = Variable(images)
        y = Variable(labels, volatile=True)

    ## Use instead
        x = images
        with torch.no_grad():
            y = labels
    """

    code = "ML901"
    name = "deprecated-variable"
    severity = Severity.WARNING
    triggers = ("Variable",)
    valid = [
        HEADER + "x = torch.ones(3, requires_grad=True)\n",
        # a reference is not a call (isinstance checks still work)
        "from torch.autograd import Variable\n\ndef is_var(x):\n"
        "    return isinstance(x, Variable)\n",
        # someone else's Variable
        "import tensorflow as tf\n\nv = tf.Variable(3.0)\n",
        "class Variable:\n    pass\n\nv = Variable()\n",
    ]
    invalid = [
        Invalid("from torch.autograd import Variable\n\nx = Variable(torch.ones(3))\n", line=3),
        Invalid(HEADER + "x = torch.autograd.Variable(torch.ones(3), volatile=True)\n", line=5),
        Invalid(
            "import torch\nfrom torch.autograd.variable import Variable as V\n\n"
            "w = V(torch.zeros(2), requires_grad=True)\n",
            line=4,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.call_name(node) not in VARIABLE_NAMES:
            return
        name = dotted_name(node.func) or "Variable"
        if _keyword(node, "volatile") is not None:
            message = (
                f"`{name}(..., volatile=...)` does nothing since PyTorch 0.4; drop the "
                "`Variable` wrapper and run the code under `torch.no_grad()`"
            )
        elif _keyword(node, "requires_grad") is not None:
            message = (
                f"`{name}(...)` is deprecated since PyTorch 0.4; use the tensor itself with "
                "`.requires_grad_()` (or `requires_grad=True` when building it)"
            )
        else:
            message = (
                f"`{name}(...)` is deprecated since PyTorch 0.4 and returns the tensor "
                "unchanged; use the tensor directly"
            )
        self.report(node, message)


def _data_receiver(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """`p` for `p.data`, else None."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return expr.value
    return None


def _in_place_method(name: str) -> bool:
    return name.endswith("_") and not name.startswith("_") and len(name) > 1


class DataAttributeMutation(StaticRule):
    """An in-place write through `.data`, hidden from autograd.

    ## What it does
    Finds writes through a tensor's `.data`: in-place methods (`p.data.add_(...)`,
    `m.weight.data.normal_(...)`), assignments (`p.data = t`, `p.data[...] = t`) and augmented
    assignments (`p.data += t`). Reading `.data` is not reported. The receiver must look like a
    tensor: an attribute (`m.weight.data`), an item (`params[0].data`), or a name bound by
    `for p in model.parameters()`; `self.data` and other names are not reported, since
    datasets and containers often have a `data` attribute of their own.

    ## Why is this bad?
    `.data` gives a tensor that shares storage but is invisible to autograd: a change through
    it is not recorded and does not bump the version counter, so a backward that needs the old
    value silently computes wrong gradients instead of raising. The documented way to change
    parameters without recording it is `torch.no_grad()` (or `.detach()` for a view).

    ## Example
        for p in model.parameters():
            p.data.add_(-lr * p.grad)
        m.weight.data.normal_(0, 0.02)

    ## Use instead
        with torch.no_grad():
            for p in model.parameters():
                p.add_(-lr * p.grad)
        nn.init.normal_(m.weight, 0, 0.02)
    """

    code = "ML902"
    name = "data-attribute-mutation"
    severity = Severity.WARNING
    triggers = (".data",)
    valid = [
        # reading `.data` is fine
        HEADER + "def norm(model):\n    return sum(p.data.norm() for p in model.parameters())\n",
        HEADER + "def snapshot(m):\n    return m.weight.data.clone()\n",
        HEADER + "def update(model, lr):\n    with torch.no_grad():\n"
        "        for p in model.parameters():\n            p.add_(-lr * p.grad)\n",
        # a dataset's own `data` attribute
        "class Dataset:\n    def __init__(self, data):\n        self.data = data\n\n"
        "    def clear(self):\n        self.data[0] = None\n",
        # `.data` of something not known to be a tensor
        "def load(args):\n    args.data = '/tmp/data'\n",
        "def grow(batch):\n    batch.data += [1]\n",
    ]
    invalid = [
        Invalid(
            HEADER + "def update(model, lr):\n    for p in model.parameters():\n"
            "        p.data.add_(-lr * p.grad)\n",
            line=7,
        ),
        Invalid(
            HEADER + "def init(m):\n    if isinstance(m, nn.Linear):\n"
            "        m.weight.data.normal_(0, 0.02)\n",
            line=7,
        ),
        Invalid(HEADER + "def copy(m, w):\n    m.weight.data = w\n", line=6),
        Invalid(HEADER + "def clamp(m):\n    m.weight.data[m.weight.data < 0] = 0\n", line=6),
        Invalid(
            HEADER + "def shift(model):\n    for name, p in model.named_parameters():\n"
            "        p.data += 1\n",
            line=7,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # names bound by `for p in x.parameters()` in the enclosing loops
        self._loop_tensors: list[set[str]] = []

    def visit_For(self, node: cst.For) -> None:
        names: set[str] = set()
        iterator = node.iter
        if isinstance(iterator, cst.Call) and isinstance(iterator.func, cst.Attribute):
            if iterator.func.attr.value in _TENSOR_ITERATORS:
                target = node.target
                if isinstance(target, cst.Name):
                    names.add(target.value)
                elif isinstance(target, cst.Tuple) and target.elements:
                    last = target.elements[-1].value
                    if isinstance(last, cst.Name):
                        names.add(last.value)
        self._loop_tensors.append(names)

    def leave_For(self, original_node: cst.For) -> None:
        self._loop_tensors.pop()

    def _tensor_like(self, receiver: cst.BaseExpression) -> bool:
        if isinstance(receiver, cst.Name):
            return any(receiver.value in names for names in self._loop_tensors)
        if isinstance(receiver, cst.Subscript):
            return True
        if isinstance(receiver, cst.Attribute):
            # `self.data` is the object's own attribute, not a tensor's
            return True
        return False

    def _check_target(self, target: cst.BaseExpression, what: str) -> None:
        # `p.data = ...`, `p.data[i] = ...`
        node = target.value if isinstance(target, cst.Subscript) else target
        receiver = _data_receiver(node)
        if receiver is None or not self._tensor_like(receiver):
            return
        text = snippet(receiver)
        self.report(
            target,
            f"{what} `{text}.data` is hidden from autograd; write to `{text}` under "
            "`torch.no_grad()` instead",
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check_target(target.target, "assigning to")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check_target(node.target, "updating")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and _in_place_method(func.attr.value)):
            return
        receiver = _data_receiver(func.value)
        if receiver is None or not self._tensor_like(receiver):
            return
        text = snippet(receiver)
        method = func.attr.value
        self.report(
            node,
            f"`{text}.data.{method}(...)` changes `{text}` behind autograd's back; call "
            f"`{text}.{method}(...)` under `torch.no_grad()` instead",
        )


SOFTMAX_FUNCTIONS = frozenset(
    f"torch.nn.functional.{name}" for name in ("softmax", "log_softmax", "softmin")
)
SOFTMAX_MODULES = frozenset(f"torch.nn.{name}" for name in ("Softmax", "LogSoftmax", "Softmin"))
RENAMED = {"torch.nn.functional.sigmoid": "sigmoid", "torch.nn.functional.tanh": "tanh"}


class DeprecatedFunctional(StaticRule):
    """`F.sigmoid`/`F.tanh`, and softmax without `dim`.

    ## What it does
    Finds `F.sigmoid` and `F.tanh` (called or passed as a function), and
    `F.softmax`/`F.log_softmax`/`F.softmin` calls and `nn.Softmax()`/`nn.LogSoftmax()`/
    `nn.Softmin()` modules built without `dim`.

    ## Why is this bad?
    `F.sigmoid` and `F.tanh` were deprecated in PyTorch 0.4.1 in favour of `torch.sigmoid`
    and `torch.tanh` (they warned for several releases; today they are thin aliases that
    forward to `input.sigmoid()`), so these are reported at severity info. A softmax without `dim`
    guesses the dimension from the number of dimensions (1 for 2-D to 4-D input, else 0) and
    warns: for a batch of one sequence, or a 3-D input laid out as (batch, seq, classes), it
    normalises over the wrong axis without an error.

    The fix (safe) rewrites `F.sigmoid`/`F.tanh` to `torch.sigmoid`/`torch.tanh` when `torch`
    is imported. A missing `dim` has no automatic fix: only the author knows the axis.

    ## Example
        y = F.sigmoid(logits)
        probs = F.softmax(scores)

    ## Use instead
        y = torch.sigmoid(logits)
        probs = F.softmax(scores, dim=-1)
    """

    code = "ML903"
    name = "deprecated-functional"
    severity = Severity.WARNING
    fix = "safe"
    triggers = ("sigmoid", "tanh", "softmax", "Softmax", "softmin", "Softmin")
    valid = [
        HEADER + "y = torch.sigmoid(torch.ones(3))\nz = torch.tanh(y)\n",
        HEADER + "p = F.softmax(torch.ones(2, 3), dim=-1)\n",
        HEADER + "p = F.log_softmax(torch.ones(2, 3), 1)\n",
        HEADER + "layer = nn.Softmax(dim=1)\nother = nn.LogSoftmax(-1)\n",
        # the module forms and tensor methods are current
        HEADER + "act = nn.Sigmoid()\ny = torch.ones(3).sigmoid().tanh()\n",
        # arguments we cannot see
        HEADER + "def probs(x, **kw):\n    return F.softmax(x, **kw)\n",
        # someone else's sigmoid
        "import numpy as np\n\ndef sigmoid(x):\n    return 1 / (1 + np.exp(-x))\n\n"
        "y = sigmoid(np.zeros(3))\n",
        # F.hardtanh and F.logsigmoid are not deprecated
        HEADER + "y = F.hardtanh(torch.ones(3))\nz = F.logsigmoid(y)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "y = F.sigmoid(torch.ones(3))\n",
            line=5,
            fixed=HEADER + "y = torch.sigmoid(torch.ones(3))\n",
        ),
        Invalid(
            "import torch\nfrom torch.nn import functional as F\n\nact = F.tanh\n",
            line=4,
            fixed="import torch\nfrom torch.nn import functional as F\n\nact = torch.tanh\n",
        ),
        # no `torch` in scope: reported, not fixed
        Invalid("import torch.nn.functional as F\n\ndef f(x):\n    return F.tanh(x)\n", line=4),
        Invalid(HEADER + "p = F.softmax(torch.ones(2, 3))\n", line=5),
        Invalid(HEADER + "layer = nn.LogSoftmax()\n", line=5),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        self._check_reference(node.func)
        qualified = self.context.call_name(node)
        if qualified in SOFTMAX_FUNCTIONS:
            self._check_dim(node, qualified, position=1)
        elif qualified in SOFTMAX_MODULES:
            self._check_dim(node, qualified, position=0)

    def visit_Arg(self, node: cst.Arg) -> None:
        self._check_reference(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._check_reference(node.value)

    def visit_Element(self, node: cst.BaseElement) -> None:
        self._check_reference(node.value)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self._check_reference(node.value)

    def _check_reference(self, expr: cst.BaseExpression) -> None:
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return
        new_name = RENAMED.get(self.context.qualified_name(expr) or "")
        if new_name is None:
            return
        old = dotted_name(expr)
        torch_name = self._torch_alias()
        fix = None
        if torch_name is not None:
            fix = Fix(
                ((expr, cst.Attribute(value=cst.Name(torch_name), attr=cst.Name(new_name))),),
                f"use `{torch_name}.{new_name}`",
            )
        self.report(
            expr,
            f"`{old}` is a deprecated alias; use `torch.{new_name}`, the same function",
            fix=fix,
            severity=Severity.INFO,
        )

    def _torch_alias(self) -> str | None:
        aliases = self.context.imports.aliases
        if aliases.get("torch") == "torch":
            return "torch"
        for local, target in aliases.items():
            if target == "torch":
                return local
        return None

    def _check_dim(self, node: cst.Call, qualified: str, position: int) -> None:
        if any(arg.star for arg in node.args) or _keyword(node, "dim") is not None:
            return
        positional = [arg for arg in node.args if arg.keyword is None]
        if len(positional) > position:
            return
        name = dotted_name(node.func) or qualified
        self.report(
            node,
            f"`{name}(...)` without `dim` guesses the axis from the input's rank; pass "
            "`dim=` explicitly (usually `dim=-1`)",
        )


@hookimpl
def modellint_add_rules():
    return [DeprecatedVariable, DataAttributeMutation, DeprecatedFunctional]
