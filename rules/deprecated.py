"""Deprecated API (ML9xx): spellings PyTorch kept for old code, with their modern forms, and
idioms of old PyTorch that now raise (`loss.data[0]`, `iterator.next()`)."""

from __future__ import annotations

import re
from typing import cast

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    DATALOADERS,
    SOFTMAX_MODULES,
    VARIABLES,
    Fix,
    Invalid,
    LazyPattern,
    Severity,
    StaticRule,
    Valid,
    argument,
    dotted_name,
    snippet,
    visit,
)

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


# where the loop variable is a parameter or buffer: `for p in model.parameters():`
_TENSOR_ITERATORS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers"})


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
    needs = frozenset()
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
        # `requires_grad=False` is the default: the advice is to drop the wrapper
        Invalid(
            "from torch.autograd import Variable\n\nx = Variable(x, requires_grad=False)\n",
            line=3,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.call_name(node) not in VARIABLES:
            return
        name = dotted_name(node.func) or "Variable"
        if argument(node, "volatile") is not None:
            message = (
                f"`{name}(..., volatile=...)` does nothing since PyTorch 0.4; drop the "
                "`Variable` wrapper and run the code under `torch.no_grad()`"
            )
        elif _requires_grad_set(node):
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


def _requires_grad_set(call: cst.Call) -> bool:
    """`requires_grad=` given, and not a literal `False` (which changes nothing)."""
    arg = argument(call, "requires_grad")
    return arg is not None and not (
        isinstance(arg.value, cst.Name) and arg.value.value == "False")


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
    tensor: an attribute (`m.weight.data`), an item (`params[0].data`), a name bound by
    `for p in model.parameters()`, or a name the semantic model knows holds a tensor (built by
    a torch tensor function, `p` of `for p in group["params"]` over an optimizer's
    `param_groups`); `self.data` and other names are not reported, since datasets and
    containers often have a `data` attribute of their own.

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
    needs = frozenset({"semantic"})
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
        # known tensors: a leaf built here, the parameters of an optimizer's groups
        Invalid(
            HEADER + "def fit(x, lr):\n    w = torch.zeros(3, requires_grad=True)\n"
            "    (x @ w).sum().backward()\n    w.data -= lr * w.grad\n",
            line=8,
        ),
        Invalid(
            HEADER + "def clip(model):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    for group in opt.param_groups:\n        for p in group['params']:\n"
            "            p.data.clamp_(-1, 1)\n",
            line=9,
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

    def _tensor_like(self, receiver: cst.BaseExpression, node: cst.CSTNode) -> bool:
        if isinstance(receiver, cst.Name):
            if any(receiver.value in names for names in self._loop_tensors):
                return True
            # the semantic model knows it is a tensor (`w = torch.zeros(3, requires_grad=True)`,
            # `p` of an optimizer's `group["params"]`)
            kind = self.context.semantic.kind_here(receiver, node)
            return kind is not None and kind.kind == "tensor"
        if isinstance(receiver, cst.Subscript):
            return True
        if isinstance(receiver, cst.Attribute):
            # `self.data` is the object's own attribute, not a tensor's
            return True
        return False

    def _check_target(self, target: cst.BaseExpression, what: str, statement: cst.CSTNode) -> None:
        # `p.data = ...`, `p.data[i] = ...`
        node = target.value if isinstance(target, cst.Subscript) else target
        receiver = _data_receiver(node)
        if receiver is None or not self._tensor_like(receiver, statement):
            return
        text = snippet(receiver)
        self.report(
            target,
            f"{what} `{text}.data` is hidden from autograd; write to `{text}` under "
            "`torch.no_grad()` instead",
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check_target(target.target, "assigning to", node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check_target(node.target, "updating", node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and _in_place_method(func.attr.value)):
            return
        receiver = _data_receiver(func.value)
        if receiver is None or not self._tensor_like(receiver, node):
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
    needs = frozenset()
    severity = Severity.WARNING
    fix = "safe"
    fix_availability = "sometimes"
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
        if any(arg.star for arg in node.args) or argument(node, "dim") is not None:
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


def _target_version(context) -> tuple[int, ...]:
    return tuple(context.options.get("target_torch_version") or (2, 6))


# methods that keep a tensor's shape, stripped to find the tensor (`loss.cpu().data[0]`)
_SAME_SHAPE = frozenset({"cpu", "cuda", "detach", "float", "double", "half", "clone"})
# methods that reduce a whole tensor to 0-dim when called without arguments
_FULL_REDUCTIONS = frozenset({"sum", "mean", "prod", "norm", "max", "min", "std", "var"})


def _is_loss_function(qualified: str | None) -> bool:
    if not qualified or not qualified.startswith("torch.nn."):
        return False
    last = qualified.rsplit(".", 1)[1]
    if qualified.startswith("torch.nn.functional."):
        return last.endswith("_loss") or last in (
            "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div")
    return last.endswith("Loss")


def _reduction_none(call: cst.Call) -> bool:
    """`reduction="none"` (or a reduction we cannot read): the loss is not a scalar."""
    arg = argument(call, "reduction")
    if arg is None:
        return any(a.star for a in call.args)
    return not (isinstance(arg.value, cst.SimpleString) and arg.value.evaluated_value != "none")


class _Backwards(cst.CSTVisitor):
    """Names `x` of `x.backward()` calls without arguments (which need a one-element tensor),
    outside nested functions."""

    def __init__(self, root: cst.CSTNode | None) -> None:
        self.root = root
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "backward" and not node.args
                and isinstance(func.value, cst.Name)):
            self.names.add(func.value.value)


class ZeroDimDataIndex(StaticRule):
    """`loss.data[0]` on a 0-dim tensor: an IndexError since PyTorch 0.5.

    ## What it does
    Finds `x.data[0]` where `x` is a scalar (0-dim) tensor: the result of a loss function
    (`F.cross_entropy(...)`, `criterion(...)` built from an `nn.*Loss` without
    `reduction="none"`), a name that `.backward()` is called on without arguments, or a full
    reduction such as `(pred == y).sum()`. The fix (unsafe) rewrites it to `x.item()`.

    ## Why is this bad?
    Before PyTorch 0.4 a loss was a one-element 1-D tensor and `loss.data[0]` read its value.
    Losses and full reductions are 0-dim since 0.4: indexing one warned in 0.4 and raises
    `IndexError: invalid index of a 0-dim tensor` since 0.5, so old training scripts crash at
    the first logging step. `.item()` returns the Python number. The fix is unsafe because
    on a tensor that really has one element in a dimension, `data[0]` gave a tensor and
    `.item()` gives a number.

    ## Example
        loss = criterion(model(x), y)
        loss.backward()
        running_loss += loss.data[0]

    ## Use instead
        running_loss += loss.item()

    ## What it does not see
    A loss made by a criterion the file reads as a global it never assigns: nothing says the
    result is 0-dim. c-cifar100-loss-data-zero-index's `loss = loss_function(outputs, labels)`
    then `loss.data[0]` is such a case (its excerpt leaves out where `loss_function` is
    built); it finds 3 of 4 bench/bugs cases.
    """

    code = "ML910"
    name = "zero-dim-data-index"
    needs = frozenset()
    severity = Severity.ERROR
    fix = "unsafe"
    triggers = (".data[0]",)
    valid = [
        # a batch: indexing its first element is fine
        HEADER + "def first(batch):\n    return batch.data[0]\n",
        HEADER + "def step(model, x):\n    out = model(x)\n    return out.data[0]\n",
        # a per-sample loss keeps its batch dimension
        HEADER + "def step(out, y):\n    losses = F.cross_entropy(out, y, reduction='none')\n"
        "    return losses.data[0]\n",
        HEADER + "def step(loss):\n    return loss.item()\n",
        # a reduction over one dimension keeps the others
        HEADER + "def step(x):\n    return x.sum(0).data[0]\n",
        Valid(HEADER + "def step(out, y):\n    loss = F.nll_loss(out, y)\n"
              "    return loss.data[0]\n", {"target_torch_version": (0, 4)}),
    ]
    invalid = [
        Invalid(
            HEADER + "def step(model, x, y, criterion):\n    loss = criterion(model(x), y)\n"
            "    loss.backward()\n    return loss.data[0]\n",
            line=8,
            fixed=HEADER + "def step(model, x, y, criterion):\n    loss = criterion(model(x), y)\n"
            "    loss.backward()\n    return loss.item()\n",
        ),
        Invalid(
            HEADER + "criterion = nn.CrossEntropyLoss()\n\ndef step(out, y):\n"
            "    loss = criterion(out, y)\n    print(loss.data[0])\n",
            line=9,
            fixed=HEADER + "criterion = nn.CrossEntropyLoss()\n\ndef step(out, y):\n"
            "    loss = criterion(out, y)\n    print(loss.item())\n",
        ),
        Invalid(HEADER + "def accuracy(pred, y):\n    return (pred == y).sum().data[0]\n", line=6,
                fixed=HEADER + "def accuracy(pred, y):\n    return (pred == y).sum().item()\n"),
        Invalid(HEADER + "def step(out, y):\n    loss = F.mse_loss(out, y)\n"
                "    return loss.cpu().data[0]\n", line=7,
                fixed=HEADER + "def step(out, y):\n    loss = F.mse_loss(out, y)\n"
                "    return loss.cpu().item()\n"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._backwards: dict[int | None, set[str]] = {}

    def _backward_names(self) -> set[str]:
        root = self.context.current_function
        key = id(root) if root is not None else None
        if key not in self._backwards:
            finder = _Backwards(root)
            if root is not None:
                visit(root, finder)
            self._backwards[key] = finder.names
        return self._backwards[key]

    def visit_Module(self, node: cst.Module) -> None:
        finder = _Backwards(node)
        visit(node, finder)
        self._backwards[None] = finder.names

    def visit_Subscript(self, node: cst.Subscript) -> None:
        data = node.value
        if not (isinstance(data, cst.Attribute) and data.attr.value == "data"):
            return
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        if not (isinstance(index, cst.Integer) and index.value == "0"):
            return
        if _target_version(self.context) < (0, 5) or not self._scalar(data.value):
            return
        receiver = data.value
        text = snippet(receiver)
        self.report(
            node,
            f"`{text}` is a 0-dim tensor: `{text}.data[0]` raises IndexError since PyTorch 0.5; "
            f"use `{text}.item()` for its value",
            fix=Fix(((node, cst.Call(cst.Attribute(receiver, cst.Name("item")))),),
                    "use `.item()`", safe=False),
        )

    def _scalar(self, expr: cst.BaseExpression) -> bool:
        while (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
               and expr.func.attr.value in _SAME_SHAPE and not expr.args):
            expr = expr.func.value
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _FULL_REDUCTIONS:
                return not expr.args
            return self._loss_call(expr)
        if isinstance(expr, cst.Name):
            if expr.value in self._backward_names():
                return True
            value = self.context.lookup(expr.value)
            return isinstance(value, cst.Call) and self._loss_call(value)
        return False

    def _loss_call(self, call: cst.Call) -> bool:
        if _is_loss_function(self.context.call_name(call)):
            return not _reduction_none(call)
        constructor: cst.BaseExpression | None = None
        if isinstance(call.func, cst.Call):
            constructor = call.func  # nn.MSELoss()(out, y)
        elif isinstance(call.func, cst.Name):
            constructor = self.context.lookup(call.func.value)
        return (isinstance(constructor, cst.Call)
                and _is_loss_function(self.context.call_name(constructor))
                and not _reduction_none(constructor))


_LOADER_NAME = LazyPattern(r"loader", re.IGNORECASE)
_REBINDS_NEXT = LazyPattern(r"\bdef\s+next\s*\(|\bnext\s*=[^=]|\bimport\b[^\n]*\bnext\b")


class DataLoaderIteratorNext(StaticRule):
    """`it.next()` on a DataLoader iterator: removed in PyTorch 1.13.

    ## What it does
    Finds `.next()` called on the iterator of a DataLoader: `iter(loader).next()`, or a name or
    `self` attribute assigned `iter(loader)` in the same function or class and then called
    `.next()`. The loader is one built by `torch.utils.data.DataLoader(...)` in the file, or a
    name that says it is one (`train_loader`, `self.dataloader`). The fix rewrites it to
    `next(it)`: safe for a DataLoader built in the file, unsafe when only the name says so.

    ## Why is this bad?
    `.next()` is Python 2's iterator protocol. DataLoader iterators kept a `next` alias for it
    until PyTorch 1.13 removed it, so old training code stops with `AttributeError:
    '_MultiProcessingDataLoaderIter' object has no attribute 'next'`. The built-in `next(it)`
    works on every version.

    ## Example
        batches = iter(train_loader)
        images, labels = batches.next()

    ## Use instead
        batches = iter(train_loader)
        images, labels = next(batches)

    ## What it does not see
    Iterators kept in a container: `for it in self.dataloader_iter_list: it.next()`, where a
    list was filled with `iter(loader)`s (r-dtrb-loader-iterator-next in bench/bugs).
    """

    code = "ML911"
    name = "dataloader-iterator-next"
    needs = frozenset()
    severity = Severity.ERROR
    fix = "safe/unsafe"
    triggers = (".next()",)
    valid = [
        "def first(loader):\n    return next(iter(loader))\n",
        # someone else's iterator with a `next` method
        "def step(reader):\n    it = iter(reader)\n    return it.next()\n",
        "class Stream:\n    def next(self):\n        return 1\n\nvalue = Stream().next()\n",
        Valid("def first(train_loader):\n    it = iter(train_loader)\n    return it.next()\n",
              {"target_torch_version": (1, 12)}),
    ]
    invalid = [
        Invalid(
            "from torch.utils.data import DataLoader\n\nloader = DataLoader(dataset)\n"
            "images, labels = iter(loader).next()\n",
            line=4,
            fixed="from torch.utils.data import DataLoader\n\nloader = DataLoader(dataset)\n"
            "images, labels = next(iter(loader))\n",
        ),
        Invalid(
            "def show(train_loader):\n    dataiter = iter(train_loader)\n"
            "    images, labels = dataiter.next()\n",
            line=3,
            fixed="def show(train_loader):\n    dataiter = iter(train_loader)\n"
            "    images, labels = next(dataiter)\n",
        ),
        Invalid(
            "class Trainer:\n    def __init__(self, loader):\n        self.batches = iter(loader)\n\n"
            "    def step(self):\n        return self.batches.next()\n",
            line=6,
            fixed="class Trainer:\n    def __init__(self, loader):\n"
            "        self.batches = iter(loader)\n\n"
            "    def step(self):\n        return next(self.batches)\n",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # (scope, dotted name) -> the iterator's loader is certain (built by DataLoader)
        self._iterators: dict[tuple[int | None, str], bool] = {}
        # (call, key in its scope, key at module level, its statement)
        self._calls: list[tuple[cst.Call, tuple[int | None, str], tuple[int | None, str],
                                cst.CSTNode | None]] = []

    def _scope(self, name: str) -> int | None:
        """Where a dotted name lives: `self.x` in its class, a plain name in its function."""
        if "." in name:
            cls = self.context.current_class
            return id(cls) if cls is not None else None
        func = self.context.current_function
        return id(func) if func is not None else None

    def _loader(self, expr: cst.BaseExpression) -> bool | None:
        """True: a DataLoader built in this file; False: a name that says it is a loader;
        None: not a loader as far as we know."""
        if isinstance(expr, cst.Call):
            return True if self.context.call_name(expr) in DATALOADERS else None
        if isinstance(expr, cst.Name):
            value = self.context.lookup(expr.value)
            if isinstance(value, cst.Call) and self.context.call_name(value) in DATALOADERS:
                return True
        name = dotted_name(expr)
        if name is not None and _LOADER_NAME.search(name.rsplit(".", 1)[-1]):
            return False
        return None

    def _iterator_of(self, expr: cst.BaseExpression) -> bool | None:
        """`iter(loader)`: whether its loader is certain (see `_loader`)."""
        if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)
                and expr.func.value == "iter" and len(expr.args) == 1 and not expr.args[0].star
                and self.context.qualified_name(expr.func) in (None, "iter")):
            return self._loader(expr.args[0].value)
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        certain = self._iterator_of(node.value)
        if certain is None:
            return
        for target in node.targets:
            name = dotted_name(target.target)
            if name is not None:
                self._iterators[(self._scope(name), name)] = certain

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "next" and not node.args):
            return
        if _target_version(self.context) < (1, 13):
            return
        certain = self._iterator_of(func.value)
        if certain is not None:
            self._report(node, certain)
            return
        name = dotted_name(func.value)
        if name is not None:
            self._calls.append((node, (self._scope(name), name), (None, name),
                                self.context.current_statement))

    def leave_Module(self, original_node: cst.Module) -> None:
        for call, key, module_key, statement in self._calls:
            certain = self._iterators.get(key, self._iterators.get(module_key))
            if certain is not None:
                self._report(call, certain, statement)

    def _report(self, call: cst.Call, certain: bool,
                statement: cst.CSTNode | None = None) -> None:
        receiver = cast(cst.Attribute, call.func).value  # visit_Call keeps only `x.next()`
        text = snippet(receiver)
        fix = None
        if not _REBINDS_NEXT.search(self.context.source):
            fix = Fix(((call, cst.Call(cst.Name("next"), [cst.Arg(receiver)])),),
                      "use `next(...)`", safe=certain)
        self.report(
            call,
            f"`{text}.next()`: DataLoader iterators have no `next` method since PyTorch 1.13 "
            f"(AttributeError); use `next({text})`",
            fix=fix, statement=statement,
        )


@hookimpl
def modellint_add_rules():
    return [DeprecatedVariable, DataAttributeMutation, DeprecatedFunctional, ZeroDimDataIndex,
            DataLoaderIteratorNext]
