"""Forward pass & devices (ML2xx): what changes between train and eval, and where tensors live."""

from __future__ import annotations

from typing import cast

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    Fix,
    Invalid,
    Severity,
    StaticRule,
    argument,
    code_nodes,
    dotted_name,
    has_star_args,
    positional_args,
    snippet,
    visit,
)
from modellint.rules._loops import invalid_at

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


# methods of a torch.distributed.rpc RRef that return a proxy whose methods run remotely
_RREF_PROXIES = frozenset({"remote", "rpc_sync", "rpc_async"})

DROPOUT_FUNCTIONS = frozenset(
    f"torch.nn.functional.{name}"
    for name in (
        "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
        "feature_alpha_dropout",
    )
)
# torch factories that build a new tensor on the default device unless given `device=`
DEVICE_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
        "linspace", "logspace", "eye", "tensor", "empty_strided", "scalar_tensor",
    )
)
# `.to(...)` arguments that only change the dtype
_DTYPE_NAMES = frozenset(
    f"torch.{name}"
    for name in (
        "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8",
        "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64",
        "complex128", "cfloat", "cdouble",
    )
)


def _self_name(context, cls: cst.ClassDef, method: cst.FunctionDef) -> str | None:
    """The name of `self` in an instance method of a module class, else None."""
    info = context.class_info(cls)
    if method.name.value in info.static_or_class_methods:
        return None
    params = method.params
    first = params.posonly_params[:1] or params.params[:1]
    return first[0].name.value if first else None


def _append_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `keyword=value` added after its last argument, keeping its layout."""
    new = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if not call.args:
        return call.with_changes(args=(new,))
    *rest, last = call.args
    if isinstance(last.comma, cst.Comma):
        # a trailing comma: the new argument takes it over, so a one-per-line call stays so
        comma = last.comma
        # the space between arguments: the one before the last argument, or after `(`
        if rest and isinstance(rest[-1].comma, cst.Comma):
            between = rest[-1].comma.whitespace_after
        else:
            between = call.whitespace_before_args
        if isinstance(between, cst.SimpleWhitespace) and not between.value:
            between = cst.SimpleWhitespace(" ")
        last = last.with_changes(comma=comma.with_changes(whitespace_after=between))
        new = new.with_changes(comma=comma)
    else:
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        last = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
    return call.with_changes(args=(*rest, last, new))


class DropoutIgnoresEval(StaticRule):
    """Functional dropout in a module that stays on after `model.eval()`.

    ## What it does
    Finds `F.dropout`, `F.dropout1d/2d/3d`, `F.alpha_dropout` and `F.feature_alpha_dropout`
    called in a method of an `nn.Module` subclass without a `training` argument, or with
    `training=True`. A plain function that passes its own `training` argument through is fine,
    and so is any `training=` expression other than the literal `True`. A call in the body of
    `if self.training:` (or of `... if self.training else ...`) runs only in training mode and
    is not flagged.

    ## Why is this bad?
    Unlike `nn.Dropout`, the functional form does not know the module's mode: its `training`
    argument defaults to `True`, so `model.eval()` does not switch it off. Evaluation and
    inference stay random and scaled, and accuracy measured in eval mode is wrong.

    The fix adds `training=self.training` (safe). A literal `training=True` is reported too but
    only gets an unsafe fix, since Monte Carlo dropout keeps dropout on at inference on purpose.

    ## Example
        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(self.fc(x), p=0.5)

    ## Use instead
        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(self.fc(x), p=0.5, training=self.training)
    """

    code = "ML201"
    name = "dropout-ignores-eval"
    needs = frozenset({"project"})
    fix = "safe/unsafe"
    triggers = ("dropout",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return F.dropout(x, 0.5, training=self.training)\n",
        # the training flag passed positionally
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return F.dropout(x, 0.5, self.training)\n",
        # a plain function passing `training` through
        HEADER + "def drop(x, p, training):\n    return F.dropout(x, p, training=training)\n",
        HEADER + "def drop(x, p, training=False):\n    return F.dropout(x, p, training)\n",
        # any expression other than the literal True
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return F.dropout2d(x, 0.1, training=self.training and self.drop)\n",
        # the module form follows eval() by itself
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.drop = nn.Dropout(0.5)\n\n    def forward(self, x):\n"
        "        return self.drop(x)\n",
        # not a module class
        HEADER + "class Helper:\n    def run(self, x):\n        return F.dropout(x, 0.5)\n",
        # arguments we cannot see
        HEADER + "class Net(nn.Module):\n    def forward(self, x, **kw):\n"
        "        return F.dropout(x, **kw)\n",
        # only reached in training mode
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        if self.training:\n"
        "            x = F.dropout(x, 0.5)\n        return x\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        if self.training and self.p > 0:\n            x = F.dropout2d(x, self.p)\n"
        "        return x\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return F.dropout(x, 0.5) if self.training else x\n",
        # a local function called `dropout` is not torch's
        "def dropout(x, p):\n    return x\n\nclass Net:\n    def forward(self, x):\n"
        "        return dropout(x, 0.5)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return F.dropout(x, p=0.5)\n",
            line=7,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return F.dropout(x, p=0.5, training=self.training)\n",
        ),
        # the other branch of `if self.training:` runs in eval mode
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        if self.training:\n"
            "            return x\n        return F.dropout(x, p=0.5)\n",
            line=9,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        if self.training:\n            return x\n"
            "        return F.dropout(x, p=0.5, training=self.training)\n",
        ),
        Invalid(
            "import torch.nn as nn\nfrom torch.nn.functional import dropout\n\n"
            "class Net(nn.Module):\n    def forward(self, x):\n        return dropout(x)\n",
            line=6,
            fixed="import torch.nn as nn\nfrom torch.nn.functional import dropout\n\n"
            "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return dropout(x, training=self.training)\n",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return F.alpha_dropout(x, 0.2, training=True)\n",
            line=7,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return F.alpha_dropout(x, 0.2, training=self.training)\n",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        x = torch.nn.functional.dropout2d(\n            x,\n            0.1,\n"
            "        )\n        return x\n",
            line=7,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        x = torch.nn.functional.dropout2d(\n            x,\n            0.1,\n"
            "            training=self.training,\n        )\n        return x\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.call_name(node)
        if qualified not in DROPOUT_FUNCTIONS or has_star_args(node):
            return
        found = self.context.current_method()
        if found is None:
            return
        self_name = _self_name(self.context, *found)
        if self_name is None:
            return
        if _guarded_by_training(self.context, node, self_name):
            return
        short = qualified.rsplit(".", 1)[1]
        training = argument(node, "training")
        positional = positional_args(node)
        if training is None and len(positional) >= 3:
            training = positional[2]
        replacement = cst.Attribute(value=cst.Name(self_name), attr=cst.Name("training"))
        if training is None:
            fix = Fix(
                ((node, _append_keyword(node, "training", replacement)),),
                f"add `training={self_name}.training`",
            )
            self.report(
                node,
                f"`{short}(...)` stays active after `model.eval()`: its `training` argument "
                f"defaults to True; pass `training={self_name}.training`",
                fix=fix,
            )
            return
        value = training.value
        if isinstance(value, cst.Name) and value.value == "True":
            fix = Fix(
                ((value, replacement),),
                f"replace `True` with `{self_name}.training`",
                safe=False,
            )
            self.report(
                value,
                f"`{short}(..., training=True)` stays active after `model.eval()`; pass "
                f"`training={self_name}.training` unless dropout at inference is intended",
                fix=fix,
            )


def _is_training_test(test: cst.BaseExpression, self_name: str) -> bool:
    """`self.training`, or `self.training and ...`: true only in training mode."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _is_training_test(test.left, self_name) or _is_training_test(test.right, self_name)
    return dotted_name(test) == f"{self_name}.training"


def _contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(each is node for each in code_nodes(tree))


def _guarded_by_training(context, node: cst.Call, self_name: str) -> bool:
    """The call runs only in training mode: in the body of `if self.training:` (or of
    `... if self.training else ...`), where eval() already switches it off."""
    method = context.current_method()[1]
    stack = context.statement_stack
    start = next((i for i, s in enumerate(stack) if s is method), 0)
    for statement in stack[start:]:
        if isinstance(statement, cst.If) and _is_training_test(statement.test, self_name):
            if _contains(statement.body, node):
                return True

    found = False

    class Conditional(cst.CSTVisitor):
        def visit_IfExp(self, expr: cst.IfExp) -> None:
            nonlocal found
            if not found and _is_training_test(expr.test, self_name) and _contains(expr.body, node):
                found = True

    if stack:
        visit(stack[-1], Conditional())
    return found


class ForwardCalledDirectly(StaticRule):
    """`m.forward(x)` called directly instead of `m(x)`.

    ## What it does
    Finds calls of a `forward` method through an object, such as `self.encoder.forward(x)`,
    inside `nn.Module` subclasses, and outside them on values the semantic model knows hold a
    module: names built from a module class (`model = Net(); model.forward(x)`, also a class
    or factory of another file of the project) and `self` attributes assigned a module
    anywhere in the class (also by tuple: `self.net, self.ema = Net(), Net()`). `super().forward(...)` and the unbound form
    `Base.forward(self, ...)` are how a subclass extends its parent and are not reported, nor
    are `forward` methods of other objects (pipelines, `torch.classes` objects), nor RPC
    proxies (`rref.remote().forward(...)`) and `RemoteModule`s, whose documented API is
    `.forward(...)`: there `m(...)` would break the program.

    ## Why is this bad?
    `nn.Module.__call__` runs the forward pre-hooks and hooks, backward hooks and
    `torch.compile`/FSDP wrappers around `forward`; calling `forward` directly skips all of
    them, so hooks that capture activations, quantization observers and pruning masks silently
    do nothing.

    The fix replaces `m.forward(...)` with `m(...)`: safe when the semantic model knows `m`
    holds a module (or it is the module itself), else unsafe (`m(...)` of an object that is no
    module may not call its `forward`).

    ## Example
        def forward(self, x):
            return self.head.forward(self.body.forward(x))

    ## Use instead
        def forward(self, x):
            return self.head(self.body(x))

    ## What it does not see
    `model.forward(x)` on a name the file never assigns (a snippet's `model`): nothing says it
    holds a module, as in the bench/bugs case r-pysi-105009-forward-called-directly.
    """

    code = "ML202"
    name = "forward-called-directly"
    needs = frozenset({"project", "semantic"})
    fix = "safe/unsafe"
    triggers = (".forward(",)
    valid = [
        HEADER + "class Net(nn.Linear):\n    def forward(self, x):\n"
        "        return super().forward(x) * 2\n",
        HEADER + "class Net(nn.Linear):\n    def forward(self, x):\n"
        "        return super(Net, self).forward(x) * 2\n",
        # the unbound call of a parent's forward
        HEADER + "class Net(nn.Linear):\n    def forward(self, x):\n"
        "        return nn.Linear.forward(self, x) * 2\n",
        HEADER + "class Base(nn.Module):\n    def forward(self, x):\n        return x\n\n"
        "class Net(Base):\n    def forward(self, x):\n        return Base.forward(self, x) + 1\n",
        # autograd.Function's static forward
        HEADER + "class Square(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x * x\n\n"
        "def twice(x):\n    return Square.forward(None, x)\n",
        # `forward` of things that are not modules: a pipeline, a torch custom class
        HEADER + "class Pipeline:\n    def forward(self, x):\n        return x\n\n"
        "    def __call__(self, x):\n        return self.forward(x)\n",
        HEADER + "def run(pipe, x):\n    return pipe.forward(x)\n",
        HEADER + "class Act(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.op = torch.classes.ext.Op()\n\n    def forward(self, x):\n"
        "        return self.op.forward(x)\n",
        # a reference, not a call
        HEADER + "def run(model, x):\n    fn = model.forward\n    return fn\n",
        # RPC: an RRef's proxy and a RemoteModule are no nn.Module to call
        HEADER + "class Trainer(nn.Module):\n    def __init__(self, rref):\n"
        "        super().__init__()\n        self.rref = rref\n\n    def forward(self, x):\n"
        "        return self.rref.remote().forward(x).to_here()\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, rref, x):\n"
        "        return rref.rpc_sync().forward(x)\n",
        HEADER + "from torch.distributed.nn import RemoteModule\n\n"
        "class Hybrid(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.remote = RemoteModule('worker1/cpu', nn.Linear, args=(4, 2))\n\n"
        "    def forward(self, x):\n        return self.remote.forward(x)\n",
        HEADER + "from torch.distributed.nn.api.remote_module import RemoteModule\n\n"
        "remote = RemoteModule('worker1/cpu', nn.Linear, args=(4, 2))\n"
        "y = remote.forward(torch.ones(1, 4))\n",
        HEADER + "def run(model, x):\n    return model(x)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return self.head.forward(x)\n",
            line=7,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return self.head(x)\n",
        ),
        Invalid(
            HEADER + "model = nn.Linear(2, 2)\ny = model.forward(torch.ones(1, 2))\n",
            line=6,
            fixed=HEADER + "model = nn.Linear(2, 2)\ny = model(torch.ones(1, 2))\n",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
            "    def predict(self, x):\n        with torch.no_grad():\n"
            "            return self.forward(x).argmax(-1)\n",
            line=11,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
            "    def predict(self, x):\n        with torch.no_grad():\n"
            "            return self(x).argmax(-1)\n",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        for block in self.blocks:\n            x = block.forward(x)\n"
            "        return x\n",
            line=8,
            fixed=HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        for block in self.blocks:\n            x = block(x)\n"
            "        return x\n",
        ),
        # `self.encoder` is not known to be a module: the finding stands, its fix is unsafe
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self, encoder):\n"
            "        super().__init__()\n        self.encoder = encoder\n\n"
            "    def forward(self, x):\n        return self.encoder.forward(x)\n",
            line=11,
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self, encoder):\n"
            "        super().__init__()\n        self.encoder = encoder\n\n"
            "    def forward(self, x):\n        return self.encoder(x)\n",
        ),
        # a trainer (no module) whose models are set by tuple in __init__
        invalid_at(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n\n\n"
            "class Trainer:\n    def __init__(self):\n        self.net, self.ema = Net(), Net()\n\n"
            "    def step(self, x):\n        return self.net.forward(x)\n",
            "return self.net.forward(x)",
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n\n\n"
            "class Trainer:\n    def __init__(self):\n        self.net, self.ema = Net(), Net()\n\n"
            "    def step(self, x):\n        return self.net(x)\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "forward"):
            return
        receiver = func.value
        if isinstance(receiver, cst.Call) and dotted_name(receiver.func) == "super":
            return
        if self._remote(receiver):
            return
        self._call = node
        if self._names_a_class(receiver) or not self._may_be_module(receiver):
            return
        positional = positional_args(node)
        found = self.context.current_method()
        if found is not None and positional:
            # `Base.forward(self, x)` spelled through any expression: an unbound call
            self_name = _self_name(self.context, *found)
            first = positional[0].value
            if self_name and isinstance(first, cst.Name) and first.value == self_name:
                return
        text = snippet(receiver)
        fix = Fix(((node, node.with_changes(func=receiver)),), f"call `{text}(...)`",
                  safe=self._proven_module(receiver))
        self.report(
            node,
            f"`{text}.forward(...)` skips the module's hooks and wrappers; call "
            f"`{text}(...)` instead",
            fix=fix,
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        # `model = Net()` / `model = nn.Linear(...)`: names known to hold a module
        if self.context.builds_module(node.value):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self._module_names.add(target.target.value)

    def _may_be_module(self, receiver: cst.BaseExpression) -> bool:
        """Inside a module class anything but a known non-module; outside, only names built
        from a module class (a pipeline's or an exported program's `forward` is not a
        module's)."""
        found = self.context.current_method()
        if found is None:
            if isinstance(receiver, cst.Name) and receiver.value in self._module_names:
                return True
            return self._known_module(receiver)
        cls, method = found
        self_name = _self_name(self.context, cls, method)
        if (
            isinstance(receiver, cst.Attribute)
            and isinstance(receiver.value, cst.Name)
            and receiver.value.value == self_name
        ):
            # `self.op.forward` where `self.op` is set from a torch object that is no module
            # (`torch.classes.ext.Op()`)
            for value in _attribute_values(cls, self_name, receiver.attr.value):
                qualified = self.context.call_name(value)
                if (
                    qualified is not None
                    and qualified.startswith("torch.")
                    and not self.context.builds_module(value)
                ):
                    return False
        return True

    def _proven_module(self, receiver: cst.BaseExpression) -> bool:
        """`receiver` is known to hold an `nn.Module`: `self` of a module class, a name built
        from a module class here, or what the semantic model knows is a module."""
        found = self.context.current_method()
        if found is not None and isinstance(receiver, cst.Name) and (
                receiver.value == _self_name(self.context, *found)):
            return self.context.is_module_class(found[0])
        if isinstance(receiver, cst.Name) and receiver.value in self._module_names:
            return True
        return self._known_module(receiver)

    def _known_module(self, receiver: cst.BaseExpression) -> bool:
        """The semantic model knows `receiver` holds a module: a `self` attribute assigned
        a module class anywhere in the class (also by tuple), a model built from a project
        class or factory of another file, a module-level model."""
        kind = self.context.semantic.kind_here(receiver, self._call)
        return kind is not None and kind.kind == "module"

    def _remote(self, receiver: cst.BaseExpression) -> bool:
        """An RPC proxy (`rref.remote()`, `rref.rpc_sync()`, `rref.rpc_async()`) or a
        `RemoteModule`: their documented API is `.forward(...)`, and `proxy(...)` is no call of
        the remote module (the proxy is not callable; RemoteModule has no `__call__` forward)."""
        if isinstance(receiver, cst.Call):
            func = receiver.func
            return isinstance(func, cst.Attribute) and func.attr.value in _RREF_PROXIES
        name = dotted_name(receiver)
        if name is None:
            return False
        values: list[cst.BaseExpression] = []
        value = self.context.lookup(name)
        if value is not None:
            values.append(value)
        found = self.context.current_method()
        if found is not None and name.count(".") == 1:
            self_name = _self_name(self.context, *found)
            owner, attr = name.split(".")
            if owner == self_name:
                values += _attribute_values(found[0], self_name, attr)
        return any(
            (self.context.call_name(v) or dotted_name(v.func) or "").rsplit(".", 1)[-1]
            == "RemoteModule"
            for v in values if isinstance(v, cst.Call)
        )

    def _names_a_class(self, expr: cst.BaseExpression) -> bool:
        name = dotted_name(expr)
        if name is None:
            return False
        last = name.rsplit(".", 1)[-1]
        if name in self.context.module_classes or name in self._local_classes():
            return True
        # `nn.Linear.forward`, `SomeImportedBlock.forward`: a class, by convention
        return last[:1].isupper() and not last.isupper()

    _call: cst.Call | None  # the `.forward(...)` call being checked

    def __init__(self, context) -> None:
        super().__init__(context)
        self._module_names: set[str] = set()
        self._call = None

    def _local_classes(self) -> set[str]:
        return {cls.name.value for cls in self.context.class_stack}


def _attribute_values(
    cls: cst.ClassDef, self_name: str | None, attr: str
) -> list[cst.BaseExpression]:
    """The values assigned to `self.<attr>` anywhere in the class body."""
    values: list[cst.BaseExpression] = []

    class Collector(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                t = target.target
                if (
                    isinstance(t, cst.Attribute)
                    and isinstance(t.value, cst.Name)
                    and t.value.value == self_name
                    and t.attr.value == attr
                ):
                    values.append(node.value)

    visit(cls, Collector())
    return values


def _reachable_from_forward(context, cls: cst.ClassDef) -> set[str]:
    """Names of the methods of `cls` that `forward` calls on `self`, transitively."""
    methods = context.class_info(cls).methods
    seen: set[str] = set()
    todo = ["forward"]
    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        todo.extend(methods[name].calls_on_self)
    return seen


class TensorWithoutDevice(StaticRule):
    """A tensor built in `forward` without `device=` lands on the CPU.

    ## What it does
    Finds `torch.zeros`, `ones`, `empty`, `full`, `rand`, `randn`, `randint`, `randperm`,
    `arange`, `linspace`, `logspace`, `eye` and `tensor` called without `device=` inside
    `forward` of an `nn.Module` subclass, or in a method that `forward` calls. Tensors built
    with `*_like` or `x.new_*`, and factories moved in the same expression
    (`torch.ones(n).to(x.device)`, `.type_as(x)`, `.cuda()`), are fine.

    ## Why is this bad?
    A factory without `device=` always builds on the default device (the CPU). The model works
    on the CPU and fails with a device mismatch as soon as it is moved to a GPU, or silently
    copies data back and forth.

    Off by default: on torchvision, timm and transformers most of its 123 findings are
    lookup tables read back with `.item()` (44 in torchvision's AutoAugment), index tensors and
    positional tables moved in a later statement, which PyTorch accepts or which are moved
    before use; judged precision there was 0.1 to 0.2, below the 0.95 a default rule needs.
    Enable it with `--select ML203` for your own model code.

    ## Example
        def forward(self, x):
            mask = torch.ones(x.shape[0], x.shape[1])
            return x * mask

    ## Use instead
        def forward(self, x):
            mask = torch.ones(x.shape[0], x.shape[1], device=x.device)
            return x * mask
    """

    code = "ML203"
    name = "tensor-without-device"
    needs = frozenset({"project"})
    severity = Severity.WARNING
    default_enabled = False
    triggers = ("torch",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.ones(x.shape, device=x.device)\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.ones_like(x)\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x * x.new_ones(x.shape)\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        mask = torch.triu(torch.ones(4, 4)).to(x.device)\n        return x * mask\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.arange(4).type_as(x)\n",
        # __init__ builds buffers; the module's .to() moves them
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('mask', torch.ones(4))\n\n"
        "    def forward(self, x):\n        return x * self.mask\n",
        # a method forward never calls
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
        "    def example_input(self):\n        return torch.randn(1, 4)\n",
        # device given through keyword arguments we cannot see
        HEADER + "class Net(nn.Module):\n    def forward(self, x, **factory_kwargs):\n"
        "        return torch.zeros(4, **factory_kwargs)\n",
        # not a module class
        HEADER + "class Sampler:\n    def forward(self, n):\n        return torch.randn(n)\n",
        # decided in Python, and 0-d tensors, which combine with tensors on any device
        HEADER + "class Aug(nn.Module):\n    def forward(self, x):\n"
        "        if torch.rand(1) < 0.5:\n            return x.flip(-1)\n"
        "        k = int(torch.randint(4, (1,)).item())\n        return x.rot90(k)\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        drop = torch.rand([])\n        return x * torch.tensor(0.5) if drop > 0.1 else x\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        mask = torch.ones(x.shape[0], x.shape[1])\n        return x * mask\n",
            line=7,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return x * torch.triu(torch.ones(4, 4))\n",
            line=7,
        ),
        # dtype alone does not move it
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return x + torch.arange(4).to(torch.float32)\n",
            line=7,
        ),
        # a method forward calls
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return x + self.noise(x.shape)\n\n    def noise(self, shape):\n"
            "        return torch.randn(shape)\n",
            line=10,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._moved: set[int] = set()

    def visit_If(self, node: cst.If) -> None:
        # `if torch.rand(1) < self.p:` decides in Python; the device does not matter
        _mark(node.test, self._moved)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        _mark(node.test, self._moved)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and (
            self._moves(node) or func.attr.value in _TO_PYTHON
        ):
            # everything built inside the receiver ends up on the target device, or in Python
            _mark(func.value, self._moved)
            return
        if isinstance(func, cst.Name) and func.value in ("int", "float", "bool"):
            _mark(node, self._moved)
            return
        qualified = self.context.call_name(node)
        if qualified not in DEVICE_FACTORIES or id(node) in self._moved:
            return
        if _zero_dim(qualified, node):
            # a 0-d tensor combines with tensors on any device
            return
        if has_star_args(node) or argument(node, "device") or argument(node, "out"):
            return
        found = self.context.current_method()
        if found is None:
            return
        cls, method = found
        if method.name.value not in _reachable_from_forward(self.context, cls):
            return
        short = qualified.rsplit(".", 1)[1]
        self.report(
            node,
            f"`torch.{short}(...)` in `{method.name.value}` builds its tensor on the CPU; pass "
            "`device=` (such as `device=x.device`) or use a `*_like` factory",
        )

    def _moves(self, call: cst.Call) -> bool:
        attr = cast(cst.Attribute, call.func).attr.value  # visit_Call checked
        if attr in ("cuda", "type_as", "to_device"):
            return True
        if attr != "to":
            return False
        for arg in call.args:
            if arg.keyword is not None:
                if arg.keyword.value == "device":
                    return True
                continue
            if arg.star:
                return True
            if self.context.qualified_name(arg.value) not in _DTYPE_NAMES:
                return True
        return False


_TO_PYTHON = frozenset({"item", "tolist", "numpy"})


def _zero_dim(qualified: str, call: cst.Call) -> bool:
    """`torch.tensor(0.5)`, `torch.rand([])`: a 0-d tensor."""
    positional = positional_args(call)
    if qualified in ("torch.tensor", "torch.scalar_tensor"):
        if not positional:
            return False
        value = positional[0].value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Float)):
            return True
        return isinstance(value, cst.Name) and value.value in ("True", "False")
    if qualified in ("torch.rand", "torch.randn", "torch.zeros", "torch.ones", "torch.empty"):
        return len(positional) == 1 and (
            isinstance(positional[0].value, (cst.List, cst.Tuple))
            and not positional[0].value.elements
        )
    return False


def _mark(expr: cst.CSTNode, ids: set[int]) -> None:
    class Marker(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            ids.add(id(node))

    visit(expr, Marker())


def _cuda_literal(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        if isinstance(value, str) and (value == "cuda" or value.startswith("cuda:")):
            return value
    return None


def _mentions_cuda(expr: cst.CSTNode) -> bool:
    found: list[cst.CSTNode] = []

    class Finder(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if "cuda" in node.value:
                found.append(node)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            if "cuda" in node.value:
                found.append(node)

    visit(expr, Finder())
    return bool(found)


class HardcodedDevice(StaticRule):
    """A module that puts its tensors on `"cuda"` by name.

    ## What it does
    Finds `.cuda()`, `.to("cuda")`, `device="cuda"` and `torch.device("cuda")` (any `cuda:N`
    too) inside the body of an `nn.Module` subclass. Code under a test that mentions CUDA
    (`if x.is_cuda:`, `if torch.cuda.is_available():`) is not reported.

    ## Why is this bad?
    The module then only runs on a CUDA machine (CPU-only tests and MPS fail), always on the
    first GPU whatever device the model was moved to, and under DDP every rank puts its tensors
    on GPU 0. Take the device from the input or a parameter instead.

    ## Example
        def forward(self, x):
            mask = torch.ones(x.shape[-1], device="cuda")
            return x * mask.cuda()

    ## Use instead
        def forward(self, x):
            mask = torch.ones(x.shape[-1], device=x.device)
            return x * mask
    """

    code = "ML204"
    name = "hardcoded-device"
    needs = frozenset({"project"})
    severity = Severity.WARNING
    triggers = ("cuda",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.ones(4, device=x.device)\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        if x.is_cuda:\n            return self.fast(x.cuda())\n        return x\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        if torch.cuda.is_available():\n            x = x.to('cuda')\n        return x\n",
        # the device passed in, and an override of `Module.cuda` itself
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return self.table.cuda(x.device)\n",
        HEADER + "class Net(nn.Module):\n    def cuda(self, *args, **kwargs):\n"
        "        return super().cuda(*args, **kwargs)\n",
        # outside module classes (a training script chooses its device)
        HEADER + "model = nn.Linear(2, 2).cuda()\nx = torch.ones(2, device='cuda')\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x.to(self.weight.device)\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        with torch.autocast(device_type='cuda'):\n            return x\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return x.to('cpu')\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return x * torch.ones(4).cuda()\n",
            line=7,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return x * torch.ones(4, device='cuda')\n",
            line=7,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return x.to('cuda:0')\n",
            line=7,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.device = torch.device('cuda')\n",
            line=8,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.context.in_module_class or self._under_cuda_test():
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            if dotted_name(func.value) == "torch" or not _literal_device_args(node):
                return
            self.report(
                node,
                f"`{snippet(func.value)}.cuda()` in module code pins it to the GPU; move it to "
                "the input's device (`.to(x.device)`) instead",
            )
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "to":
            positional = positional_args(node)
            if positional and (literal := _cuda_literal(positional[0].value)):
                self.report(
                    positional[0].value,
                    f"`.to({literal!r})` in module code pins the tensor to one GPU; use the "
                    "input's device (`.to(x.device)`) instead",
                )
        if self.context.is_call_to(node, "torch.device"):
            positional = positional_args(node)
            if positional and (literal := _cuda_literal(positional[0].value)):
                self.report(
                    node,
                    f"`torch.device({literal!r})` in module code pins tensors to one GPU; use "
                    "the input's or a parameter's device instead",
                )
        device = argument(node, "device")
        if device is not None and (literal := _cuda_literal(device.value)):
            self.report(
                device,
                f"`device={literal!r}` in module code pins the tensor to one GPU; use "
                "`device=x.device` instead",
            )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._cuda_tests = 0

    def visit_If(self, node: cst.If) -> None:
        if _mentions_cuda(node.test):
            self._cuda_tests += 1

    def leave_If(self, original_node: cst.If) -> None:
        if _mentions_cuda(original_node.test):
            self._cuda_tests -= 1

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if _mentions_cuda(node.test):
            self._cuda_tests += 1

    def leave_IfExp(self, original_node: cst.IfExp) -> None:
        if _mentions_cuda(original_node.test):
            self._cuda_tests -= 1

    def _under_cuda_test(self) -> bool:
        return self._cuda_tests > 0


def _literal_device_args(call: cst.Call) -> bool:
    """`.cuda()` or `.cuda(0)`: a device fixed in the code, not passed in."""
    return all(
        arg.keyword is not None and arg.keyword.value != "device"
        or isinstance(arg.value, cst.Integer)
        for arg in call.args
        if not (arg.keyword is not None and arg.keyword.value == "non_blocking")
    ) and not any(arg.star for arg in call.args)


@hookimpl
def modellint_add_rules():
    return [DropoutIgnoresEval, ForwardCalledDirectly, TensorWithoutDevice, HardcodedDevice]
