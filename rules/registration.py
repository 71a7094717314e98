"""Registration & structure (ML1xx): what `parameters()`, `.to()` and `state_dict()` can see."""

from __future__ import annotations

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import Fix, Invalid, StaticRule

HEADER = "import torch\nimport torch.nn as nn\n\n"


def _self_attribute(target: cst.BaseExpression, self_name: str) -> str | None:
    if (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == self_name
    ):
        return target.attr.value
    return None


class MethodMissingSelf(StaticRule):
    """A method of a module class is defined without `self`.

    ## What it does
    Finds instance methods of `nn.Module` subclasses (such as `def forward(x):`) whose first
    parameter is missing, i.e. methods that are neither `@staticmethod` nor `@classmethod` and
    take no `self`.

    ## Why is this bad?
    Python passes the module itself as the first argument: `forward(x)` receives the module as
    `x` and fails with "takes 1 positional argument but 2 were given", and `self` inside it is
    undefined.

    ## Example
        class Net(nn.Module):
            def forward(x):
                return self.fc(x)

    ## Use instead
        class Net(nn.Module):
            def forward(self, x):
                return self.fc(x)
    """

    code = "ML105"
    name = "method-missing-self"
    fix = "safe"
    triggers = ("def ",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n",
        HEADER + "class Net(nn.Module):\n    @staticmethod\n    def helper(x):\n        return x\n",
        HEADER + "class Net(nn.Module):\n    @classmethod\n    def build(cls):\n        return cls()\n",
        HEADER + "class Plain:\n    def forward(x):\n        return x\n",
        HEADER + "class Net(nn.Module):\n    def forward(*args):\n        return args\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(x):\n        return x\n",
            line=5,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def reset():\n        pass\n",
            line=5,
            fixed=HEADER + "class Net(nn.Module):\n    def reset(self):\n        pass\n",
        ),
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        cls = self.context.current_class
        if cls is None or not self.context.is_module_class(cls) or node not in cls.body.body:
            return
        for decorator in node.decorators:
            expr = decorator.decorator
            name = expr.value if isinstance(expr, cst.Name) else getattr(
                getattr(expr, "attr", None), "value", None)
            if name in ("staticmethod", "classmethod"):
                return
        params = node.params
        if params.posonly_params or params.star_arg not in (cst.MaybeSentinel.DEFAULT, None):
            return
        if params.params:
            first = params.params[0].name.value
            if first in ("self", "cls", "_self", "this", "module", "m"):
                return
            if node.name.value != "forward" and first != "x":
                # a first parameter with another name may well be `self` renamed
                return
        fix = Fix(
            ((params, params.with_changes(
                params=(cst.Param(cst.Name("self")), *params.params))),),
            "insert `self` as the first parameter",
        )
        self.report(
            node.name,
            f"method `{node.name.value}` of module class `{cls.name.value}` has no `self`; "
            "Python passes the module as its first argument",
            fix=fix,
        )


@hookimpl
def modellint_add_rules():
    return [MethodMissingSelf]
