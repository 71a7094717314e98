"""Numerics (ML205–ML209): formulas that lose precision where torch has an exact function,
integer arithmetic that true division turned into floats (ML208), and a softmax over a
dimension the tensor does not have (ML209)."""

from __future__ import annotations

import re
from typing import ClassVar, cast

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    SOFTMAX_MODULES,
    Fix,
    Invalid,
    LazyPattern,
    Severity,
    StaticRule,
    argument,
    child_nodes,
    code_nodes,
    dotted_name,
    snippet,
    source_of,
)
from modellint.rules._loops import _NESTED, Scope, ScopeRule, invalid_at
from modellint.rules.torch_api import reference

HEADER = "import torch\n\n"
# (`type(node) in`: cheaper than a failing `isinstance` against LibCST's classes)
_NESTED_TYPES = frozenset(_NESTED)


def _is_one(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return node.value == "1"
    if isinstance(node, cst.Float):
        try:
            return float(node.value) == 1.0
        except ValueError:
            return False
    return False


def _is_number(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation):
        return _is_number(node.expression)
    return isinstance(node, (cst.Integer, cst.Float))


def _single_argument(call: cst.BaseExpression) -> cst.BaseExpression | None:
    """The one positional argument of `f(x)`, else None."""
    if not isinstance(call, cst.Call) or len(call.args) != 1:
        return None
    arg = call.args[0]
    if arg.keyword is not None or arg.star:
        return None
    return arg.value


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[], rpar=[]) if getattr(expr, "lpar", None) else expr


class _NumericsRule(StaticRule):
    def is_call(self, node: cst.BaseExpression, qualified: str) -> bool:
        return isinstance(node, cst.Call) and self.context.call_name(node) == qualified

    def call(self, qualified: str, args: list[cst.Arg], like: cst.BaseExpression) -> cst.Call | None:
        func = reference(self.context, qualified)
        if func is None:
            return None
        return cst.Call(func, args, lpar=getattr(like, "lpar", ()), rpar=getattr(like, "rpar", ()))


class LogOnePlus(_NumericsRule):
    """`torch.log(1 + x)` loses precision for small `x`; use `torch.log1p(x)`.

    ## What it does
    Finds `torch.log(1 + x)` and `torch.log(x + 1)` and rewrites them as `torch.log1p(x)`.

    ## Why is this bad?
    For `|x|` below the float's resolution (about 1e-7 in float32), `1 + x` rounds to 1 and the
    log is 0: the information in `x` is gone before the log is taken. `log1p` computes the
    same function accurately for every `x`, so losses and log-probabilities built on it stay
    correct (and differentiable) near zero.

    ## Example
        log_prob = torch.log(1 + torch.exp(-margin))

    ## Use instead
        log_prob = torch.log1p(torch.exp(-margin))
    """

    code = "ML205"
    name = "log-one-plus"
    needs = frozenset()
    severity = Severity.WARNING
    fix = "safe"
    triggers = ("log",)
    valid: ClassVar = [
        HEADER + "y = torch.log1p(x)\n",
        HEADER + "y = torch.log(2 + x)\n",
        HEADER + "y = torch.log(1 + x, out=buf)\n",
        "import math\n\ny = math.log(1 + x)\n",
        HEADER + "y = torch.log(x + 1e-8)\n",
    ]
    invalid: ClassVar = [
        Invalid(HEADER + "y = torch.log(1 + x)\n", line=3, fixed=HEADER + "y = torch.log1p(x)\n"),
        Invalid(HEADER + "y = torch.log(p.exp() + 1.0)\n", line=3,
                fixed=HEADER + "y = torch.log1p(p.exp())\n"),
        Invalid("import torch as th\n\nz = 2 * th.log(1 + x * y)\n", line=3,
                fixed="import torch as th\n\nz = 2 * th.log1p(x * y)\n"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.call_name(node) != "torch.log":
            return
        arg = _single_argument(node)
        if not (isinstance(arg, cst.BinaryOperation) and isinstance(arg.operator, cst.Add)):
            return
        if _is_one(arg.left) and not _is_one(arg.right):
            x = arg.right
        elif _is_one(arg.right) and not _is_one(arg.left):
            x = arg.left
        else:
            return
        if _is_number(x):
            return
        new = self.call("torch.log1p", [cst.Arg(_strip(x))], node)
        self.report(
            node,
            "`torch.log(1 + x)` rounds `1 + x` to 1 for small `x`; use `torch.log1p(x)`",
            fix=Fix(((node, new),), "use `torch.log1p`") if new is not None else None,
        )


class ExpMinusOne(_NumericsRule):
    """`torch.exp(x) - 1` loses precision for small `x`; use `torch.expm1(x)`.

    ## What it does
    Finds `torch.exp(x) - 1` and rewrites it as `torch.expm1(x)`.

    ## Why is this bad?
    For small `x`, `exp(x)` is close to 1 and the subtraction cancels almost every significant
    digit (catastrophic cancellation): below about 1e-7 in float32 the result is exactly 0.
    `expm1` computes `e^x - 1` accurately for every `x`.

    ## Example
        y = torch.exp(x) - 1

    ## Use instead
        y = torch.expm1(x)
    """

    code = "ML206"
    name = "exp-minus-one"
    needs = frozenset()
    severity = Severity.WARNING
    fix = "safe"
    triggers = ("exp",)
    valid: ClassVar = [
        HEADER + "y = torch.expm1(x)\n",
        HEADER + "y = torch.exp(x) - 2\n",
        HEADER + "y = 1 - torch.exp(x)\n",
        "import numpy as np\n\ny = np.exp(x) - 1\n",
    ]
    invalid: ClassVar = [
        Invalid(HEADER + "y = torch.exp(x) - 1\n", line=3, fixed=HEADER + "y = torch.expm1(x)\n"),
        Invalid(HEADER + "y = a * (torch.exp(x / t) - 1.0)\n", line=3,
                fixed=HEADER + "y = a * (torch.expm1(x / t))\n"),
    ]

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Subtract) or not _is_one(node.right):
            return
        left = node.left
        if not self.is_call(left, "torch.exp") or left.lpar:
            return
        x = _single_argument(left)
        if x is None or _is_number(x):
            return
        new = self.call("torch.expm1", [cst.Arg(x)], node)
        self.report(
            node,
            "`torch.exp(x) - 1` cancels to 0 for small `x`; use `torch.expm1(x)`",
            fix=Fix(((node, new),), "use `torch.expm1`") if new is not None else None,
        )


class LogSumExp(_NumericsRule):
    """`torch.log(torch.sum(torch.exp(x), dim))` overflows; use `torch.logsumexp(x, dim)`.

    ## What it does
    Finds the log of a sum of exponentials (`torch.log(torch.sum(torch.exp(x), dim))`,
    `torch.log(torch.exp(x).sum(dim))`, `torch.exp(x).sum(dim).log()`) and rewrites it as
    `torch.logsumexp(x, dim)` when the reduced dimension is given.

    ## Why is this bad?
    `exp` overflows to `inf` for inputs above about 88 in float32 (11 in float16), and
    underflows to 0 for large negative ones, giving `inf` or `-inf` and NaN gradients.
    `torch.logsumexp` subtracts the maximum first and is exact for any input range.

    ## Example
        log_z = torch.log(torch.sum(torch.exp(logits), dim=-1))

    ## Use instead
        log_z = torch.logsumexp(logits, dim=-1)
    """

    code = "ML207"
    name = "log-sum-exp"
    needs = frozenset()
    severity = Severity.WARNING
    fix = "safe"
    fix_availability = "sometimes"
    triggers = ("exp",)
    valid: ClassVar = [
        HEADER + "z = torch.logsumexp(x, dim=1)\n",
        HEADER + "z = torch.log(torch.sum(x, dim=1))\n",
        HEADER + "z = torch.sum(torch.exp(x), dim=1)\n",
    ]
    invalid: ClassVar = [
        Invalid(HEADER + "z = torch.log(torch.sum(torch.exp(x), dim=1))\n", line=3,
                fixed=HEADER + "z = torch.logsumexp(x, dim=1)\n"),
        Invalid(HEADER + "z = torch.log(torch.exp(s - m).sum(-1, keepdim=True)) + m\n", line=3,
                fixed=HEADER + "z = torch.logsumexp(s - m, -1, keepdim=True) + m\n"),
        Invalid(HEADER + "z = torch.exp(x).sum(1).log()\n", line=3,
                fixed=HEADER + "z = torch.logsumexp(x, 1)\n"),
        Invalid(HEADER + "z = torch.log(torch.exp(x).sum())\n", line=3),
    ]

    def _sum_of_exp(self, node: cst.BaseExpression) -> tuple[cst.BaseExpression, list[cst.Arg]] | None:
        """(x, the reduction's arguments) for `torch.sum(torch.exp(x), ...)` or
        `torch.exp(x).sum(...)`."""
        if not isinstance(node, cst.Call):
            return None
        if self.context.call_name(node) == "torch.sum" and node.args:
            first = node.args[0]
            if first.keyword is None and not first.star and self.is_call(first.value, "torch.exp"):
                x = _single_argument(first.value)
                return (x, list(node.args[1:])) if x is not None else None
            return None
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "sum" and self.is_call(
            func.value, "torch.exp"
        ):
            x = _single_argument(func.value)
            return (x, list(node.args)) if x is not None else None
        return None

    def _check(self, node: cst.Call, inner: cst.BaseExpression) -> None:
        found = self._sum_of_exp(inner)
        if found is None:
            return
        x, reduction = found
        fix = None
        has_dim = any(a.keyword is None or a.keyword.value == "dim" for a in reduction)
        if has_dim and all(
            not a.star and (a.keyword is None or a.keyword.value in ("dim", "keepdim"))
            for a in reduction
        ):
            args = [cst.Arg(x)] + [a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                   for a in reduction]
            new = self.call("torch.logsumexp", args, node)
            if new is not None:
                fix = Fix(((node, new),), "use `torch.logsumexp`")
        self.report(
            node,
            "the log of a sum of `torch.exp` overflows for large inputs; use "
            "`torch.logsumexp(x, dim)`",
            fix=fix,
        )

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.call_name(node) == "torch.log":
            inner = _single_argument(node)
            if inner is not None:
                self._check(node, inner)
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "log" and not node.args:
            self._check(node, func.value)


# -- ML208 ------------------------------------------------------------------------------------

# calls whose result is a tensor of indices (int64)
_INDEX_FUNCTIONS = frozenset({
    "torch.argmax", "torch.argmin", "torch.argsort", "torch.nonzero", "torch.multinomial",
    "torch.randint", "torch.randperm", "torch.searchsorted", "torch.bucketize",
})
_INDEX_METHODS = frozenset({"argmax", "argmin", "argsort", "nonzero", "multinomial"})
# calls returning (values, indices)
_PAIR_FUNCTIONS = frozenset({"torch.topk", "torch.sort", "torch.max", "torch.min",
                             "torch.kthvalue", "torch.mode", "torch.median"})
_PAIR_METHODS = frozenset({"topk", "sort", "max", "min", "kthvalue", "mode", "median"})
# calls and methods that round (or cast to an integer type) what they are given
_ROUNDING_FUNCTIONS = frozenset({
    "math.floor", "math.ceil", "math.trunc", "torch.floor", "torch.ceil", "torch.round",
    "torch.trunc", "torch.fix", "numpy.floor", "numpy.ceil", "numpy.round", "numpy.trunc",
    "numpy.rint", "numpy.int32", "numpy.int64",
})
_ROUNDING_METHODS = frozenset({
    "long", "int", "short", "byte", "floor", "ceil", "round", "trunc", "fix", "to", "type",
    "astype", "floor_", "ceil_", "round_", "trunc_", "type_as",
})
# a size computed with the convolution arithmetic: (L + 2p - d(k - 1) - 1) / s + 1
_CONV_TERMS = LazyPattern(r"kernel|dilation")
_STRIDE = LazyPattern(r"stride")
# where an integer is needed: indexing, sizes, counts
_SIZE_METHODS = frozenset({
    "view", "reshape", "expand", "repeat", "index_select", "gather", "narrow", "new_zeros",
    "new_ones", "new_empty", "new_full", "scatter", "scatter_", "scatter_add", "scatter_add_",
    "index_add", "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_",
    "take", "unflatten", "split", "chunk", "roll",
})
_SIZE_FUNCTIONS = frozenset({"range", "torch.zeros", "torch.ones", "torch.empty",
                             "torch.full", "torch.index_select", "torch.gather",
                             "torch.take", "torch.narrow"})


def _parents(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    """id(node) -> its parent, for the code of one scope (nested functions, classes and
    lambdas left out)."""
    parents: dict[int, cst.CSTNode] = {}
    stack = [_body(root)]
    while stack:
        node = stack.pop()
        for child in child_nodes(node):
            if type(child) in _NESTED_TYPES:
                continue
            parents[id(child)] = node
            stack.append(child)
    return parents


class IntegerTensorTrueDivision(ScopeRule):
    """`/` on integer tensors (indices, lengths) gives floats since torch 1.5.

    ## What it does
    Finds a true division `a / b` where `a` holds integers and the result is used as one,
    with nothing rounding it (`//`, `.long()`, `torch.floor`, `int(...)`):

    - `a` is a tensor of indices (from `topk`, `sort`, `max(dim)`, `argmax`, `nonzero`,
      `multinomial`...) and the quotient indexes a tensor, sizes a `view`/`range`/
      `index_select`, or sits next to `a % b` (unravelling a flat index into row and
      column, as a beam search does);
    - the division computes a length with the convolution arithmetic, `(length + 2 *
      padding - dilation * (kernel_size - 1) - 1) / stride + 1`.

    ## Why is this bad?
    Until torch 1.5, `/` between integer tensors rounded down; since then it is true division
    and returns floats. Code written for the old behaviour now indexes with a float tensor
    (an error), or carries fractions into lengths: a conv output length of 50.5 fed to the
    next layer's formula drifts from the real length, and the sequence lengths given to
    `pack_padded_sequence` or CTC are wrong.

    ## Example
        scores, flat = scores.view(-1).topk(k)
        beam = flat / vocab_size
        word = flat % vocab_size
        seqs = seqs[beam]

    ## Use instead
        scores, flat = scores.view(-1).topk(k)
        beam = flat // vocab_size
        word = flat % vocab_size
        seqs = seqs[beam]
    """

    code = "ML208"
    name = "integer-tensor-true-division"
    needs = frozenset({"scope"})
    fix = "unsafe"
    triggers = ("/",)
    _BEAM = (HEADER + "def step(scores, seqs, k, vocab_size):\n"
             "    top, flat = scores.view(-1).topk(k)\n"
             "    beam = {division}\n"
             "    return seqs[beam]\n")
    _LENGTHS = (HEADER + "import torch.nn as nn\n\n\n"
                "def output_lengths(conv, lengths):\n"
                "    for m in conv.modules():\n"
                "        if isinstance(m, nn.Conv2d):\n"
                "            lengths = (lengths + 2 * m.padding[1] - m.dilation[1] * "
                "(m.kernel_size[1] - 1) - 1) {divide} m.stride[1] + 1\n"
                "    return lengths.int()\n")
    valid = [
        _BEAM.format(division="flat // vocab_size"),
        _BEAM.format(division="torch.div(flat, vocab_size, rounding_mode='floor')"),
        _BEAM.format(division="(flat / vocab_size).long()"),
        # a float wanted: a position normalised to [0, 1]
        HEADER + "def position(heatmap, width):\n"
        "    return heatmap.argmax(1) / (width - 1)\n",
        # divided by a float
        HEADER + "def rows(heatmap, seqs, width):\n"
        "    idx = heatmap.argmax(1)\n"
        "    return seqs[idx / 2.0]\n",
        # rounded where it is used
        HEADER + "def step(scores, seqs, k, n):\n"
        "    _, flat = scores.view(-1).topk(k)\n"
        "    beam = flat / n\n"
        "    return seqs[beam.long()]\n",
        # the conv arithmetic, truncated at once
        HEADER + "def out_size(size, padding, kernel_size, stride):\n"
        "    return int((size + 2 * padding - kernel_size) / stride + 1)\n",
        # values, not indices
        HEADER + "def mean_top(scores, k, seqs):\n"
        "    top, flat = scores.topk(k)\n"
        "    return seqs[top / k]\n",
    ]
    invalid = [
        invalid_at(_BEAM.format(division="flat / vocab_size"), "flat / vocab_size",
                   fixed=_BEAM.format(division="flat // vocab_size")),
        invalid_at(HEADER + "def unravel(x, width):\n"
                   "    _, idx = torch.max(x.view(x.size(0), -1), 1)\n"
                   "    ys = idx / width\n"
                   "    xs = idx % width\n"
                   "    return xs, ys\n", "idx / width",
                   fixed=HEADER + "def unravel(x, width):\n"
                   "    _, idx = torch.max(x.view(x.size(0), -1), 1)\n"
                   "    ys = idx // width\n"
                   "    xs = idx % width\n"
                   "    return xs, ys\n"),
        invalid_at(_LENGTHS.format(divide="/"), "m.stride[1]",
                   fixed=_LENGTHS.format(divide="//")),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # divisions walked so far, and that count where each open function began: a function
        # without one under it (most) is not searched again
        self._divisions_seen = 0
        self._seen_at_start: list[int] = []

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator) is cst.Divide:
            self._divisions_seen += 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._seen_at_start.append(self._divisions_seen)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self._seen_at_start.pop() < self._divisions_seen:
            super().leave_FunctionDef(original_node)

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._divisions_seen:
            super().leave_Module(original_node)

    def check(self, scope: Scope) -> None:
        divisions: list[cst.BinaryOperation] = []
        for node in code_nodes(_body(scope.root), prune=_NESTED):
            if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
                divisions.append(node)
        if not divisions:
            return
        parents = _parents(scope.root)
        for division in divisions:
            divisor = source_of(division.right)
            if _floating(division.right, divisor) or self._rounded(division, parents):
                continue
            numerator = source_of(division.left)
            if _CONV_TERMS.search(numerator) and _STRIDE.search(divisor):
                why = ("this length follows the convolution arithmetic, which rounds down, but "
                       "`/` is true division (on integer tensors too, since torch 1.5): the "
                       "length keeps a fraction that the formulas after it carry on")
            else:
                indices = self._indices(scope, division.left)
                if indices is None or not self._used_as_integer(scope, division, parents):
                    continue
                why = (f"`{snippet(division.left)}` holds indices (from `{indices}`): since "
                       f"torch 1.5 `/` on integer tensors is true division and gives floats, "
                       f"not the rounded-down indices this expects")
            operator = cast(cst.Divide, division.operator)
            self.report(
                division,
                f"{why}; use `//` (or `torch.div(..., rounding_mode='floor')`)",
                fix=Fix(((division, division.with_changes(operator=cst.FloorDivide(
                    whitespace_before=operator.whitespace_before,
                    whitespace_after=operator.whitespace_after))),),
                    "divide with `//`", safe=False),
                statement=self._statement(division, parents),
            )

    def _statement(self, node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.CSTNode:
        while not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            parent = parents.get(id(node))
            if parent is None:
                return node
            node = parent
        return node

    def _rounded(self, node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
        """A call above `node` in its statement rounds it or casts it to an integer."""
        while True:
            parent = parents.get(id(node))
            if parent is None or isinstance(parent, (cst.BaseSmallStatement,
                                                     cst.BaseCompoundStatement)):
                return False
            if isinstance(parent, cst.BinaryOperation) and isinstance(
                    parent.operator, cst.FloorDivide):
                return True
            if isinstance(parent, cst.Call):
                func = parent.func
                if isinstance(func, cst.Name) and func.value in ("int", "round"):
                    return True
                if self.context.call_name(parent) in _ROUNDING_FUNCTIONS:
                    return True
                if isinstance(func, cst.Attribute) and func.attr.value in _ROUNDING_METHODS \
                        and node is func:
                    return True
            node = parent

    def _indices(self, scope: Scope, expr: cst.BaseExpression) -> str | None:
        """What makes `expr` a tensor of indices (`topk`, `argmax`), or None: a call that
        returns them, or a name every assignment of which in this scope is one."""
        if not isinstance(expr, cst.Name):
            return self._index_call(expr)
        found = None
        for assignment in scope.assigned(expr.value):
            if assignment.unpacks is not None and assignment.position == 1:
                found = self._pair_call(assignment.unpacks)
            elif assignment.value is not None:
                found = self._index_call(assignment.value)
            else:
                return None
            if found is None:
                return None
        return found

    def _index_call(self, expr: cst.BaseExpression) -> str | None:
        """`x.argmax(1)`, `torch.nonzero(m)`, `x.topk(k)[1]`, `x.topk(k).indices`."""
        if isinstance(expr, cst.Call):
            qualified = self.context.call_name(expr)
            if qualified in _INDEX_FUNCTIONS:
                return qualified.rsplit(".", 1)[-1]
            func = expr.func
            if qualified is None and isinstance(func, cst.Attribute) and (
                    func.attr.value in _INDEX_METHODS):
                return func.attr.value
            return None
        if isinstance(expr, cst.Attribute) and expr.attr.value == "indices":
            return self._pair_call(expr.value)
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and (
                    index.value.evaluated_value == 1):
                return self._pair_call(expr.value)
        return None

    def _pair_call(self, expr: cst.BaseExpression) -> str | None:
        """`x.topk(k)`, `torch.max(x, 1)`: a call returning (values, indices)."""
        if not isinstance(expr, cst.Call):
            return None
        qualified = self.context.call_name(expr)
        func = expr.func
        if qualified in _PAIR_FUNCTIONS:
            method = qualified.rsplit(".", 1)[-1]
            positional_dim = 1
        elif qualified is None and isinstance(func, cst.Attribute) and (
                func.attr.value in _PAIR_METHODS):
            method = func.attr.value
            positional_dim = 0
        else:
            return None
        if method in ("max", "min", "median") and (
                argument(expr, "dim", positional_dim) is None):
            return None  # the whole tensor's maximum, or an elementwise one: no indices
        return method

    def _used_as_integer(self, scope: Scope, division: cst.BinaryOperation,
                         parents: dict[int, cst.CSTNode]) -> bool:
        """The quotient indexes or sizes something, here or through the name it is assigned
        to, or the same numerator is taken modulo the same divisor (a flat index unravelled)."""
        numerator, divisor = source_of(division.left), source_of(division.right)
        if any(isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)
               and source_of(node.left) == numerator and source_of(node.right) == divisor
               for node in code_nodes(_body(scope.root), prune=_NESTED)):
            return True
        if self._integer_position(division, parents):
            return True
        assign = parents.get(id(division))
        if not (isinstance(assign, cst.Assign) and assign.value is division
                and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)):
            return False
        target = assign.targets[0].target.value
        return any(
            isinstance(node, cst.Name) and node.value == target and node is not (
                assign.targets[0].target) and not self._rounded(node, parents)
            and self._integer_position(node, parents)
            for node in code_nodes(_body(scope.root), prune=_NESTED))

    def _integer_position(self, node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
        """`node` (or the expression it is part of) is a subscript's index, or an argument
        of a call that takes sizes or indices."""
        while True:
            parent = parents.get(id(node))
            if parent is None or isinstance(parent, (cst.BaseSmallStatement,
                                                     cst.BaseCompoundStatement)):
                return False
            if isinstance(parent, cst.SubscriptElement):
                return True
            if isinstance(parent, cst.Arg):
                call = parents.get(id(parent))
                if isinstance(call, cst.Call):
                    func = call.func
                    return (self.context.call_name(call) in _SIZE_FUNCTIONS
                            or (isinstance(func, cst.Name) and func.value == "range")
                            or (isinstance(func, cst.Attribute)
                                and func.attr.value in _SIZE_METHODS))
                return False
            if isinstance(parent, (cst.Call, cst.Attribute)):
                return False  # a method's receiver or a call's result: another value
            node = parent


def _body(root: cst.CSTNode) -> cst.CSTNode:
    return root.body if isinstance(root, cst.FunctionDef) else root


def _floating(expr: cst.BaseExpression, text: str) -> bool:
    """A divisor that is a float: a float literal, `float(n)`, `x.float()` (`text`: its
    source)."""
    return any(isinstance(node, cst.Float) for node in code_nodes(expr)) or bool(
        re.search(r"\bfloat\(|\.float\(\)|\.double\(\)", text))


# -- ML209 ------------------------------------------------------------------------------------

_SOFTMAX_FUNCTIONS = frozenset({
    "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
    "torch.nn.functional.softmin", "torch.softmax", "torch.log_softmax",
})
_SOFTMAX_METHODS = frozenset({"softmax", "log_softmax"})
# layers and functions whose output has the rank of their input
_SAME_RANK_LAYERS = frozenset({
    "torch.nn.Linear", "torch.nn.Dropout", "torch.nn.ReLU", "torch.nn.GELU", "torch.nn.Tanh",
    "torch.nn.Sigmoid", "torch.nn.LayerNorm", "torch.nn.Identity", "torch.nn.LeakyReLU",
    "torch.nn.SiLU", "torch.nn.ELU", "torch.nn.BatchNorm1d",
})
_SAME_RANK_FUNCTIONS = frozenset({
    "torch.nn.functional.relu", "torch.nn.functional.gelu", "torch.nn.functional.dropout",
    "torch.nn.functional.linear", "torch.nn.functional.silu", "torch.nn.functional.elu",
    "torch.nn.functional.leaky_relu", "torch.relu", "torch.tanh", "torch.sigmoid",
})


def _literal_int(expr: cst.BaseExpression | None) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and (
            isinstance(expr.expression, cst.Integer)):
        return -int(expr.expression.evaluated_value)
    return None


class SoftmaxDimOutOfRange(ScopeRule):
    """A softmax over a dimension the tensor does not have.

    ## What it does
    Finds `F.softmax(x, dim=d)`, `x.softmax(d)` or a module's `nn.Softmax(dim=d)` layer
    applied to `x`, where the function has just given `x` a known number of dimensions
    (`x.view(n, -1)`, `x.reshape(b, t, c)`, `x.flatten(1)`, followed only by layers that keep
    it: `nn.Linear`, dropout, activations) and `d` is not one of them. For a layer built in
    `__init__`, the finding is at its `dim=`.

    ## Why is this bad?
    The dimension is usually copied from another head whose tensor had more axes (a 5-D
    video head's `dim=4` on the 2-D scores of a box head). The call raises `IndexError:
    Dimension out of range` on the path that uses it, often only in evaluation, where the
    softmax is applied, so training runs and testing crashes.

    ## Example
        self.act = nn.Softmax(dim=4)
        ...
        x = x.view(x.shape[0], -1)
        x = self.act(self.projection(x))

    ## Use instead
        self.act = nn.Softmax(dim=1)
        ...
        x = x.view(x.shape[0], -1)
        x = self.act(self.projection(x))

    ## What it does not see
    A softmax over an axis that exists but is the wrong one. simple-faster-rcnn took the
    softmax over the last axis of `(n, h, w, anchors * 2)` scores and only then viewed it as
    `(n, h, w, anchors, 2)`, mixing every anchor's two classes into one distribution
    (c-simple-faster-rcnn-rpn-softmax-axis). Telling that from a legitimate softmax over a
    flattened axis viewed back into a grid (a spatial softmax over `h * w` positions) needs
    the meaning of the sizes, not their count. It finds 1 of the 2 bench/bugs cases of
    softmax-over-wrong-axis.
    """

    code = "ML209"
    name = "softmax-dim-out-of-range"
    needs = frozenset({"scope"})
    triggers = ("oftm",)  # softmax, log_softmax, Softmax, Softmin
    _HEAD = (HEADER + "import torch.nn as nn\n\n\n"
             "class Head(nn.Module):\n"
             "    def __init__(self, dim_in, classes):\n"
             "        super().__init__()\n"
             "        self.projection = nn.Linear(dim_in, classes)\n"
             "        self.act = nn.Softmax(dim={dim})\n\n"
                  "    def forward(self, x):\n"
             "        x = x.view(x.shape[0], -1)\n"
             "        x = self.projection(x)\n"
             "        x = self.act(x)\n"
             "        return x\n")
    valid = [
        _HEAD.format(dim=1),
        _HEAD.format(dim=-1),
        # the rank is not known
        HEADER + "def probs(x):\n    return torch.softmax(x, dim=4)\n",
        HEADER + "def probs(x, shape):\n    x = x.view(shape)\n    return x.softmax(4)\n",
        # a layer that changes the rank in between
        HEADER + "import torch.nn as nn\n\n\n"
        "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.up = nn.Unflatten(1, (2, 3, 4, 5))\n"
        "        self.act = nn.Softmax(dim=4)\n\n"
        "    def forward(self, x):\n"
        "        x = x.flatten(1)\n"
        "        return self.act(self.up(x))\n",
        HEADER + "def probs(x, b, t):\n    y = x.reshape(b, t, -1)\n"
        "    return torch.nn.functional.log_softmax(y, dim=-3)\n",
    ]
    invalid = [
        invalid_at(_HEAD.format(dim=4), "nn.Softmax(dim=4)"),
        invalid_at(HEADER + "def probs(x, b, t):\n    y = x.reshape(b, t, -1)\n"
                   "    return torch.nn.functional.log_softmax(y, dim=3)\n", "log_softmax"),
        invalid_at(HEADER + "import torch.nn.functional as F\n\n\n"
                   "def probs(x):\n    x = F.relu(x.flatten(1))\n    return x.softmax(-3)\n",
                   "x.softmax(-3)"),
    ]

    def check(self, scope: Scope) -> None:
        for site in scope.calls:
            found = self._softmax(site.node)
            if found is None:
                continue
            tensor, dim, report_at = found
            # before the statement: `x = self.act(x)` reads the `x` of the line above
            start = min((a.site.order for a in scope.assignments
                         if a.site.statement is site.statement), default=site.order)
            rank = self._rank(scope, tensor, min(start, site.order), 6)
            if rank is None or -rank <= dim < rank:
                continue
            if id(report_at) in self._reported:
                continue
            self._reported.add(id(report_at))
            self.report(
                report_at,
                f"this softmax takes `dim={dim}` of `{snippet(tensor)}`, which has {rank} "
                f"dimension{'s' if rank != 1 else ''} where it is applied"
                f"{self._where(site.node, report_at)}: it raises `IndexError: Dimension out of "
                f"range`; take the class axis (`dim={rank - 1}` or `dim=-1` for the last)",
                statement=report_at if report_at is not site.node else (
                    site.statement or site.node),
            )

    def visit_Module(self, node: cst.Module) -> None:
        self._reported: set[int] = set()
        # a softmax layer's class is named in the file (`nn.Softmax`, `LogSoftmax`,
        # `Softmin`, or their import): else no `self.<attr>(x)` needs its class read
        self._names_layers = "Softm" in self.context.source

    def _where(self, call: cst.Call, report_at: cst.CSTNode) -> str:
        if report_at is call:
            return ""
        return f" (`{snippet(call)}`)"

    def _softmax(self, call: cst.Call
                 ) -> tuple[cst.BaseExpression, int, cst.CSTNode] | None:
        """(its input, its dim, the node to report) of a softmax call or layer use."""
        context = self.context
        qualified = context.call_name(call)
        func = call.func
        if qualified in _SOFTMAX_FUNCTIONS:
            if not call.args or call.args[0].keyword is not None:
                return None
            dim_arg = argument(call, "dim", 1)
            dim = _literal_int(dim_arg.value) if dim_arg is not None else None
            return (call.args[0].value, dim, call) if dim is not None else None
        if qualified is None and isinstance(func, cst.Attribute) and (
                func.attr.value in _SOFTMAX_METHODS):
            dim_arg = argument(call, "dim", 0)
            dim = _literal_int(dim_arg.value) if dim_arg is not None else None
            return (func.value, dim, call) if dim is not None else None
        layer = self._layer_call(func) if self._names_layers else None
        if layer is not None and len(call.args) == 1 and call.args[0].keyword is None:
            for built in layer:
                if context.call_name(built) in SOFTMAX_MODULES:
                    dim_arg = argument(built, "dim", 0)
                    dim = _literal_int(dim_arg.value) if dim_arg is not None else None
                    if dim is not None:
                        return call.args[0].value, dim, dim_arg or built
        return None

    def _layer_call(self, func: cst.BaseExpression) -> list[cst.Call] | None:
        """The calls `self.<attr>` is assigned from in its class, when each is a call."""
        cls = self.context.current_class
        name = dotted_name(func)
        if cls is None or name is None or not name.startswith("self.") or name.count(".") != 1:
            return None
        # a class that adds modules under computed names (`add_module(f"s{i}_pool", ...)`)
        # still assigns these by name
        values = [value for _, value in
                  self.context.class_info(cls).assignments.get(name[5:], [])]
        if not values or not all(isinstance(value, cst.Call) for value in values):
            return None
        return cast(list[cst.Call], values)

    def _rank(self, scope: Scope, expr: cst.BaseExpression, before: int,
              depth: int) -> int | None:
        """The number of dimensions of `expr` when this function has just set it."""
        if depth == 0:
            return None
        if isinstance(expr, cst.Name):
            assigned = scope.assigned(expr.value, before)
            if not assigned or assigned[-1].value is None:
                return None
            last = assigned[-1]
            return self._rank(scope, cast(cst.BaseExpression, last.value), last.site.order,
                              depth - 1)
        if not isinstance(expr, cst.Call) or any(a.star for a in expr.args):
            return None
        func = expr.func
        qualified = self.context.call_name(expr)
        if qualified is None and isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("view", "reshape"):
                return self._shape_length(expr)
            if method == "flatten":
                return self._flattened(expr, 0)
            if method in ("relu", "sigmoid", "tanh", "contiguous", "float", "detach"):
                return self._rank(scope, func.value, before, depth - 1)
        if qualified in ("torch.flatten",):
            return self._flattened(expr, 1)
        if qualified in ("torch.reshape",) and len(expr.args) == 2:
            value = expr.args[1].value
            if isinstance(value, (cst.Tuple, cst.List)):
                return len(value.elements)
            return None
        if qualified in _SAME_RANK_FUNCTIONS and expr.args:
            return self._rank(scope, expr.args[0].value, before, depth - 1)
        layer = self._layer_call(func)
        if layer is not None and len(expr.args) == 1 and all(
                self.context.call_name(built) in _SAME_RANK_LAYERS for built in layer):
            return self._rank(scope, expr.args[0].value, before, depth - 1)
        return None

    def _shape_length(self, call: cst.Call) -> int | None:
        if any(a.keyword is not None for a in call.args) or not call.args:
            return None
        if len(call.args) == 1:
            value = call.args[0].value
            if isinstance(value, (cst.Tuple, cst.List)):
                if any(isinstance(e, cst.StarredElement) for e in value.elements):
                    return None
                return len(value.elements)
            return 1 if _literal_int(value) is not None else None
        return len(call.args)

    def _flattened(self, call: cst.Call, first: int) -> int | None:
        """`x.flatten(start)` / `torch.flatten(x, start)`: start + 1 when it flattens to the
        end."""
        if len(call.args) > first + 1 or argument(call, "end_dim") is not None:
            return None
        start = argument(call, "start_dim", first)
        if start is None:
            return 1
        value = _literal_int(start.value)
        return value + 1 if value is not None and value >= 0 else None


@hookimpl
def modellint_add_rules():
    return [LogOnePlus, ExpMinusOne, LogSumExp, IntegerTensorTrueDivision,
            SoftmaxDimOutOfRange]
