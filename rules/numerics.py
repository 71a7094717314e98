"""Numerics (ML205–ML207): formulas that lose precision where torch has an exact function."""

from __future__ import annotations

from typing import ClassVar

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import Fix, Invalid, Severity, StaticRule
from modellint.rules.torch_api import reference

HEADER = "import torch\n\n"


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


@hookimpl
def modellint_add_rules():
    return [LogOnePlus, ExpMinusOne, LogSumExp]
