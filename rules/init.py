"""Initialisation (ML6xx): init loops that miss nested layers, biases that may be None,
deprecated `nn.init` names, and `apply` called once per module."""

from __future__ import annotations

from typing import ClassVar, cast

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    CONTAINERS,
    LAYER_ATTRIBUTES,
    MODULE,
    RETURNS_SELF,
    TENSOR,
    Fix,
    Invalid,
    LazyPattern,
    Scope,
    StaticRule,
    canonical,
    child_nodes,
    dotted_name,
    scope_of,
    visit,
)

HEADER = "import torch\nimport torch.nn as nn\n\n"

_INIT_PREFIX = "torch.nn.init."
_CONTAINERS = frozenset(f"torch.nn.{name}" for name in CONTAINERS)
# in-place tensor methods that initialise a weight (`m.weight.data.normal_(0, 0.02)`)
_INPLACE_INIT = frozenset(
    {"normal_", "uniform_", "fill_", "zero_", "constant_", "copy_", "kaiming_normal_",
     "xavier_uniform_", "trunc_normal_"}
)


def _children_call(expr: cst.BaseExpression) -> cst.Call | None:
    """The `x.children()` / `x.named_children()` call a for loop iterates over (also through
    `list(...)`/`enumerate(...)`), else None."""
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("children", "named_children"):
            return expr if not expr.args else None
        if isinstance(func, cst.Name) and func.value in ("list", "enumerate") and expr.args:
            return _children_call(expr.args[0].value)
    return None


def _loop_module_name(target: cst.BaseExpression, iter_: cst.BaseExpression) -> str | None:
    """The loop variable that holds the module: `m` in `for m in x.children()`,
    `for name, m in x.named_children()`, `for i, m in enumerate(x.children())`."""
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        second = target.elements[1].value
        if isinstance(second, cst.Name):
            return second.value
    return None


# calls that may take the loop's module without initialising or reaching into it
_INSPECTING = frozenset({"isinstance", "hasattr", "type", "print", "len", "id", "repr", "str"})
# attributes of a layer itself (its parameters, buffers and settings): reading them does not
# reach the modules inside it
_LAYER_ATTRIBUTES = frozenset({
    "weight", "bias", "running_mean", "running_var", "num_batches_tracked", "weight_g",
    "weight_v", "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
    "groups", "in_features", "out_features", "num_features", "affine", "eps", "momentum",
    "track_running_stats", "padding_mode", "transposed", "output_padding", "normalized_shape",
    "elementwise_affine", "num_embeddings", "embedding_dim", "padding_idx", "input_size",
    "hidden_size", "num_layers", "__class__",
})


class _Scan(cst.CSTVisitor):
    """Does a loop body test `isinstance(<name>, ...)` and call an initialiser? Which classes
    does it test for, and may it reach the modules inside the loop's module (it hands the
    module on, `init_block(m)`, `m.reset_parameters()`, `m.apply(fn)`, or reads anything of
    it but a layer's own parameters and settings: `m.conv.weight`, `for layer in m`)?"""

    def __init__(self, context, name: str) -> None:
        self.context = context
        self.name = name
        self.isinstance = False
        self.initialises = False
        self.tested: list[cst.BaseExpression] = []
        self.delegates = False
        # the uses of the name that do not reach inside the module (visited parents first)
        self._harmless: set[int] = set()

    def _is_name(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Name) and expr.value == self.name

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._harmless.add(id(node.attr))  # `x.m` does not read the name `m`
        if self._is_name(node.value) and node.attr.value in _LAYER_ATTRIBUTES:
            self._harmless.add(id(node.value))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._harmless.add(id(node.keyword))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._harmless:
            self.delegates = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (
            isinstance(func, cst.Name)
            and func.value == "isinstance"
            and node.args
            and isinstance(node.args[0].value, cst.Name)
            and node.args[0].value.value == self.name
        ):
            self.isinstance = True
            if len(node.args) > 1:
                classes = node.args[1].value
                if isinstance(classes, cst.Tuple):
                    self.tested.extend(e.value for e in classes.elements)
                else:
                    self.tested.append(classes)
        if isinstance(func, cst.Name) and func.value in _INSPECTING:
            self._harmless.update(id(arg.value) for arg in node.args if self._is_name(arg.value))
        qualified = self.context.qualified_name(func)
        if qualified is not None and qualified.startswith(_INIT_PREFIX):
            self.initialises = True
        elif isinstance(func, cst.Attribute) and func.attr.value in _INPLACE_INIT:
            text = dotted_name(func.value) or ""
            if text.startswith(self.name + "."):
                self.initialises = True


class InitViaChildren(StaticRule):
    """An initialisation loop over `.children()` misses the layers nested inside them.

    ## What it does
    Finds `for m in model.children():` (or `named_children()`) loops that initialise layers
    picked by `isinstance(m, ...)`, where the model is known or likely to contain nested
    modules: a model built from module classes or containers of this file, a
    `torchvision.models` model, or a model passed in as an argument. Loops over a container
    whose contents are only known at run time (`nn.Sequential(*layers)`), and loops that hand
    the module on (`m.init_weights()`, `init_block(m)`: what is inside it may be initialised
    there), are not reported.

    With the semantic model it also finds loops that can never reach the layer they test
    for, wherever the model's class is defined (another file of the project, bases in other
    files): the loop runs over `self` in a method of the model's class (a class no other
    class of the project derives from), or over a model that the function built once
    (`model = Net().to(device)`, then perhaps `model = model.cuda()`) and did not change or
    hand to anything before the loop; every direct submodule of the model is known (its class and its project
    bases assign `self.x` only from layers, project modules, numbers, plain defaults, tensors
    and the like, never `add_module`/`setattr`, and have no base from outside the project
    but `nn.Module`); none of them is an instance of a `torch.nn` class the loop tests for
    (subclasses counted: a `LazyConv2d` is a `Conv2d`, and so is a project class deriving from
    it); and one nested deeper is (listed in an `nn.Sequential`/`nn.ModuleList` or assigned
    in a project module class). The message names the attributes that hold the skipped
    layers.

    ## Why is this bad?
    `children()` yields only the direct submodules. A `Conv2d` inside an `nn.Sequential`, a
    residual block or any custom submodule is never visited, so it keeps PyTorch's default
    initialisation while the code looks as if every layer were initialised. `modules()` walks
    the whole tree. The fix is unsafe: layers that were skipped before are now initialised.

    ## Example
        for m in self.children():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)

    ## Use instead
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
    """

    code = "ML601"
    name = "init-via-children"
    needs = frozenset({"project", "scope", "semantic"})
    fix = "unsafe"
    triggers = ("children",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.body = nn.Sequential(nn.Conv2d(3, 3, 3), nn.ReLU())\n"
        "        for m in self.modules():\n            if isinstance(m, nn.Conv2d):\n"
        "                nn.init.zeros_(m.weight)\n",
        # a flat stack of layers: children() is every layer
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 3, 3)\n        self.fc = nn.Linear(3, 2)\n"
        "        for m in self.children():\n            if isinstance(m, nn.Conv2d):\n"
        "                nn.init.zeros_(m.weight)\n",
        HEADER + "class Head(nn.Module):\n    def __init__(self, layers):\n"
        "        super().__init__()\n        self.conv = nn.Sequential(*layers)\n"
        "        for m in self.conv.children():\n            if isinstance(m, nn.Conv2d):\n"
        "                nn.init.zeros_(m.weight)\n",
        # not initialisation
        HEADER + "def count(model):\n    n = 0\n    for m in model.children():\n"
        "        if isinstance(m, nn.Conv2d):\n            n += 1\n    return n\n",
        HEADER + "def run(model, x):\n    for layer in model.children():\n"
        "        x = layer(x)\n    return x\n",
        # blocks initialise themselves
        HEADER + "class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 3, 3)\n\n    def init_weights(self):\n"
        "        nn.init.zeros_(self.conv.weight)\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.block = Block()\n        self.fc = nn.Linear(3, 2)\n"
        "        for m in self.children():\n            if isinstance(m, nn.Linear):\n"
        "                nn.init.zeros_(m.weight)\n"
        "            elif isinstance(m, Block):\n                m.init_weights()\n",
        # a child of the tested type is a project subclass of it
        HEADER + "class MyConv(nn.Conv2d):\n    pass\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = MyConv(3, 3, 3)\n        self.fc = nn.Linear(3, 2)\n\n"
        "model = Net().to('cuda')\nfor m in model.children():\n"
        "    if isinstance(m, nn.Conv2d):\n        nn.init.zeros_(m.weight)\n",
        # a child set from a parameter: it may be anything
        HEADER + "class Net(nn.Module):\n    def __init__(self, stem):\n"
        "        super().__init__()\n        self.stem = stem\n"
        "        self.body = nn.Sequential(nn.Conv2d(3, 3, 3))\n\n"
        "model = Net(nn.Conv2d(3, 3, 1)).to('cuda')\nfor m in model.children():\n"
        "    if isinstance(m, nn.Conv2d):\n        nn.init.zeros_(m.weight)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "def init_weights(model):\n    for m in model.children():\n"
            "        if isinstance(m, nn.Conv2d):\n            nn.init.kaiming_normal_(m.weight)\n",
            line=5,
            fixed=HEADER + "def init_weights(model):\n    for m in model.modules():\n"
            "        if isinstance(m, nn.Conv2d):\n            nn.init.kaiming_normal_(m.weight)\n",
        ),
        # the tutorial's myNet: the Conv2d inside convBN is missed
        Invalid(
            HEADER + "class myNet(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.convBN = nn.Sequential(nn.Conv2d(10, 10, 3), nn.BatchNorm2d(10))\n"
            "        self.linear = nn.Linear(10, 2)\n\n"
            "Net = myNet()\nfor name, module in Net.named_children():\n"
            "    if isinstance(module, (nn.Conv2d, nn.Linear)):\n"
            "        module.weight.data.normal_(0, 0.02)\n",
            line=11,
            fixed=HEADER + "class myNet(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.convBN = nn.Sequential(nn.Conv2d(10, 10, 3), nn.BatchNorm2d(10))\n"
            "        self.linear = nn.Linear(10, 2)\n\n"
            "Net = myNet()\nfor name, module in Net.named_modules():\n"
            "    if isinstance(module, (nn.Conv2d, nn.Linear)):\n"
            "        module.weight.data.normal_(0, 0.02)\n",
        ),
        Invalid(
            HEADER + "class Block(nn.Module):\n    pass\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.block = Block()\n        self.fc = nn.Linear(3, 2)\n"
            "        for m in self.children():\n            if isinstance(m, nn.Linear):\n"
            "                nn.init.zeros_(m.weight)\n",
            line=12,
            fixed=HEADER + "class Block(nn.Module):\n    pass\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.block = Block()\n        self.fc = nn.Linear(3, 2)\n"
            "        for m in self.modules():\n            if isinstance(m, nn.Linear):\n"
            "                nn.init.zeros_(m.weight)\n",
        ),
        # no direct child is a Conv2d: the loop initialises none (the model is moved to the
        # device first; the semantic model follows `.to()`)
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self, num_classes=10):\n"
            "        super().__init__()\n"
            "        self.features = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU())\n"
            "        self.scale = 64 ** -0.5\n"
            "        self.fc = nn.Linear(64, num_classes)\n\n"
            "model = Net().to('cuda')\nfor m in model.children():\n"
            "    if isinstance(m, nn.Conv2d):\n        nn.init.kaiming_normal_(m.weight)\n",
            line=12,
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self, num_classes=10):\n"
            "        super().__init__()\n"
            "        self.features = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU())\n"
            "        self.scale = 64 ** -0.5\n"
            "        self.fc = nn.Linear(64, num_classes)\n\n"
            "model = Net().to('cuda')\nfor m in model.modules():\n"
            "    if isinstance(m, nn.Conv2d):\n        nn.init.kaiming_normal_(m.weight)\n",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # name -> class name or "nested" for names assigned a model, per function scope
        self.built: dict[int | None, dict[str, str]] = {}

    def _scope(self):
        func = self.context.current_function
        return id(func) if func is not None else None

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        kind = None
        if isinstance(value, cst.Call):
            if isinstance(value.func, cst.Name) and value.func.value in self.context.module_classes:
                kind = value.func.value
            else:
                qualified = self.context.call_name(value)
                if qualified and qualified.startswith("torchvision.models.") and (
                    self.context.builds_module(value)
                ):
                    kind = "nested"
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                scope = self.built.setdefault(self._scope(), {})
                if kind is None:
                    scope.pop(target.target.value, None)
                else:
                    scope[target.target.value] = kind

    def visit_For(self, node: cst.For) -> None:
        call = _children_call(node.iter)
        if call is None:
            return
        name = _loop_module_name(node.target, node.iter)
        if name is None:
            return
        scan = _Scan(self.context, name)
        visit(node.body, scan)
        if not (scan.isinstance and scan.initialises):
            return
        func = cast(cst.Attribute, call.func)  # _children_call gives only `x.children()` calls
        receiver = func.value
        attr = func.attr
        replacement = "modules" if attr.value == "children" else "named_modules"
        owner = dotted_name(receiver) or "the model"
        fix = Fix(((attr, attr.with_changes(value=replacement)),),
                  f"loop over `.{replacement}()`", safe=False)
        missed = self._never_reached(node, receiver, scan)
        if missed:
            layers = " or ".join(f"`{layer}`" for layer in missed)
            inside = sorted({f"`{owner}.{a}`" for attrs in missed.values() for a in attrs})
            self.report(
                call,
                f"`{owner}.{attr.value}()` yields only the direct submodules of `{owner}`, "
                f"and none of them is a {layers}: the {layers} layers inside "
                f"{', '.join(inside)} keep their default initialisation; loop over "
                f"`{owner}.{replacement}()`",
                fix=fix,
            )
            return
        if scan.delegates or not self._may_nest(receiver):
            # handed on (`m.init_weights()`, `init_block(m)`): what is inside may be
            # initialised there
            return
        self.report(
            call,
            f"`{owner}.{attr.value}()` yields only direct submodules, so layers nested in "
            f"containers or blocks are not initialised; loop over `{owner}.{replacement}()`",
            fix=fix,
        )

    # -- a loop that can never reach the layers it tests for ----------------------------------
    def _never_reached(self, loop: cst.For, receiver: cst.BaseExpression,
                       scan: _Scan) -> dict[str, list[str]]:
        """The `torch.nn` layer classes the loop tests for that no direct submodule of the
        receiver is, while one nested deeper is -> the attributes of the receiver that hold
        them; only when the semantic model knows every direct submodule (a project class's
        instance: `self` in its methods, or a name this function built and has not changed
        or handed to anything before the loop) and the loop hands the module to nothing else."""
        if scan.delegates or not isinstance(receiver, cst.Name):
            return {}
        layers = []
        for expr in scan.tested:
            qualified = self.context.qualified_name(expr) or ""
            layer = qualified[len("torch.nn."):] if qualified.startswith("torch.nn.") else ""
            if layer and "." not in layer and layer[:1].isupper() and layer != "Module":
                layers.append(layer)
        if not layers:
            return {}
        if receiver.value != "self" and not self._unchanged_before(receiver.value, loop):
            return {}
        semantic = self.context.semantic
        children = semantic.children(receiver, *self._where(loop))
        if not children:
            return {}
        missed: dict[str, list[str]] = {}
        for layer in layers:
            if any(semantic.is_instance(child, layer) is not False for child in children):
                continue
            holders = sorted({child.attr for child in children if semantic.contains(child, layer)})
            if holders:
                missed[layer] = holders
        return missed

    def _where(self, loop: cst.For) -> tuple[Scope, int | None]:
        """(scope, order) of the loop, for the semantic model."""
        root = self.context.current_function or self.context.module_node
        assert root is not None  # the walk sets module_node before it visits any node
        scope = scope_of(self.context, root)
        site = scope.site(loop)
        return scope, site.order if site is not None else None

    def _unchanged_before(self, name: str, loop: cst.For) -> bool:
        """`name` was built once in this function (or script) and, before the loop, nothing
        set an attribute on it, registered a module on it or was handed it."""
        scope, order = self._where(loop)
        if order is None:
            return False  # not a loop of this scope
        assigned = scope.assigned(name, order)
        if not assigned or not all(_moved(a.value, name) for a in assigned[1:]):
            return False  # not built here, or built in more than one place (`if`/`else`)
        prefix = name + "."
        if any(a.target.startswith(prefix) for a in scope.assignments if a.site.order < order):
            return False
        for site in scope.calls:
            if site.order >= order:
                break
            call = site.node
            func = call.func
            if isinstance(func, cst.Attribute) and dotted_name(func.value) == name and (
                func.attr.value in ("add_module", "register_module", "__setattr__")
            ):
                return False
            for arg in call.args:
                passed = dotted_name(arg.value) or ""
                if passed == name or passed.startswith(prefix):
                    return False
        return True

    # -- does the receiver contain nested modules? --------------------------------------------
    def _may_nest(self, receiver: cst.BaseExpression) -> bool:
        if isinstance(receiver, cst.Name):
            if receiver.value == "self":
                cls = self.context.current_class
                return cls is not None and self._class_nests(cls, set())
            kind = self.built.get(self._scope(), {}).get(receiver.value)
            func = self.context.current_function
            if kind is None and func is not None:
                params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
                if receiver.value in params and receiver.value not in ("self", "cls"):
                    # an init function for any model it is given
                    return True
                kind = self.built.get(None, {}).get(receiver.value)
            if kind == "nested":
                return True
            if kind in self.context.module_classes:
                return self._class_nests(self.context.module_classes[kind], set())
            return False
        if (
            isinstance(receiver, cst.Attribute)
            and isinstance(receiver.value, cst.Name)
            and receiver.value.value == "self"
        ):
            cls = self.context.current_class
            if cls is None or not self.context.is_module_class(cls):
                return False
            values = self.context.class_info(cls).assignments.get(receiver.attr.value, [])
            return len(values) == 1 and self._value_nests(values[0][1], set())
        return False

    def _class_nests(self, cls: cst.ClassDef, seen: set[int]) -> bool:
        """A model of this class has a submodule that has submodules of its own."""
        if id(cls) in seen or not self.context.is_module_class(cls):
            return False
        seen.add(id(cls))
        for base in cls.bases:
            if self.context.qualified_name(base.value) in _CONTAINERS:
                # a container subclass: its children come from its caller
                return False
        info = self.context.class_info(cls)
        return any(
            self._has_submodules(value)
            for values in info.assignments.values()
            for _method, value in values
        )

    def _has_submodules(self, value: cst.BaseExpression) -> bool:
        """`value` builds a module with submodules: a module class of this file (a block), a
        container given modules, or a torchvision model."""
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if isinstance(func, cst.Name) and func.value in self.context.module_classes:
            return True
        qualified = self.context.call_name(value)
        if qualified in _CONTAINERS:
            return any(self.context.builds_module(el) for el in _container_elements(value))
        if qualified is not None and qualified.startswith("torchvision.models."):
            return self.context.builds_module(value)
        return False

    def _value_nests(self, value: cst.BaseExpression, seen: set[int]) -> bool:
        """The children of the module `value` builds have children of their own."""
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if isinstance(func, cst.Name) and func.value in self.context.module_classes:
            return self._class_nests(self.context.module_classes[func.value], seen)
        qualified = self.context.call_name(value)
        if qualified in _CONTAINERS:
            return any(self._has_submodules(el) for el in _container_elements(value))
        if qualified is not None and qualified.startswith("torchvision.models."):
            return self.context.builds_module(value)
        return False


def _moved(value: cst.BaseExpression | None, name: str) -> bool:
    """`value` is `name` itself through methods that return the module (`model.to(device)`,
    `model.cuda().eval()`)."""
    while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
           and value.func.attr.value in RETURNS_SELF):
        value = value.func.value
    return isinstance(value, cst.Name) and value.value == name


def _container_elements(call: cst.Call) -> list[cst.BaseExpression]:
    """The modules given to `nn.Sequential(...)`/`nn.ModuleList([...])`; empty when they are
    only known at run time (`*layers`, a variable)."""
    elements: list[cst.BaseExpression] = []
    for arg in call.args:
        if arg.star:
            return []
        if isinstance(arg.value, (cst.List, cst.Tuple)):
            elements.extend(el.value for el in arg.value.elements)
        elif isinstance(arg.value, cst.Dict):
            elements.extend(
                el.value for el in arg.value.elements if isinstance(el, cst.DictElement)
            )
        else:
            elements.append(arg.value)
    return elements


def _bias_guarded(function: cst.CSTNode, owner: str) -> bool:
    """Whether any condition in `function` looks at `<owner>.bias` (`is not None`, truthiness,
    `hasattr`/`getattr`)."""
    finder = _GuardFinder(owner)
    visit(function, finder)
    return finder.found


class _GuardFinder(cst.CSTVisitor):
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.found = False

    def _test(self, expr: cst.BaseExpression | None) -> None:
        if expr is None or self.found:
            return
        mentions = _Mentions(self.owner)
        visit(expr, mentions)
        self.found = mentions.found

    def visit_If(self, node: cst.If) -> None:
        self._test(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._test(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._test(node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._test(node.test)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._test(node.left)

    def visit_CompIf(self, node: cst.CompIf) -> None:
        self._test(node.test)


class _Mentions(cst.CSTVisitor):
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.found = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "bias" and dotted_name(node.value) == self.owner:
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        if (
            dotted_name(node.func) in ("hasattr", "getattr")
            and len(node.args) >= 2
            and dotted_name(node.args[0].value) == self.owner
            and isinstance(node.args[1].value, cst.SimpleString)
            and node.args[1].value.evaluated_value == "bias"
        ):
            self.found = True


# layers whose bias is None when built with bias=False
_OPTIONAL_BIAS = frozenset(
    {"Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
     "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
     "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"}
)
# norms whose bias is None when built with affine=False / elementwise_affine=False / bias=False
_OPTIONAL_AFFINE = frozenset(
    {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "InstanceNorm1d",
     "InstanceNorm2d", "InstanceNorm3d", "GroupNorm", "LayerNorm"}
)


def _path_to(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The chain of nodes from `root` down to `target` (both included), by identity."""
    stack: list[tuple[cst.CSTNode, list[cst.CSTNode]]] = [(root, [root])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        for child in child_nodes(node):
            stack.append((child, [*path, child]))
    return None


class InitUnguardedBias(StaticRule):
    """`nn.init.*(m.bias)` on a layer type whose bias may be `None`.

    ## What it does
    Finds `nn.init` calls on `m.bias` inside `if isinstance(m, nn.Conv2d)` (or `Linear`,
    `ConvTranspose*`, `Bilinear`; or a norm layer when the file builds one with
    `affine=False`), where nothing in the function checks `m.bias` first
    (`if m.bias is not None`, truthiness, `hasattr`/`getattr`).

    ## Why is this bad?
    Layers built with `bias=False` — every convolution followed by a batch norm — have
    `m.bias = None`, and `nn.init.constant_(None, 0)` raises `AttributeError`. The init
    function works on today's model and crashes on the first one with a bias-free layer.

    Off by default: in torchvision and timm every finding (11 of 11) is on a layer that the
    same file always builds with a bias, so the code cannot fail there; the rule flags a
    fragility, not a crash. Enable it for init helpers meant to work on any model.

    ## Example
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.normal_(module.weight, mean=0, std=1)
                nn.init.constant_(module.bias, 0)

    ## Use instead
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.normal_(module.weight, mean=0, std=1)
                if module.bias is not None:
                    nn.init.constant_(module.bias, 0)
    """

    code = "ML602"
    name = "init-unguarded-bias"
    needs = frozenset()
    default_enabled = False
    triggers = ("bias",)
    valid = [
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Conv2d):\n            nn.init.normal_(m.weight)\n"
        "            if m.bias is not None:\n                nn.init.constant_(m.bias, 0)\n",
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Linear) and m.bias is not None:\n"
        "            nn.init.zeros_(m.bias)\n",
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Linear):\n            if m.bias:\n"
        "                nn.init.zeros_(m.bias)\n",
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Linear):\n"
        "            if getattr(m, 'bias', None) is None:\n                continue\n"
        "            nn.init.zeros_(m.bias)\n",
        # norms are affine by default
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.BatchNorm2d):\n            nn.init.ones_(m.weight)\n"
        "            nn.init.zeros_(m.bias)\n",
        # a layer of known construction
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n        nn.init.zeros_(self.fc.bias)\n",
        # type unknown: not reported
        HEADER + "def init(m):\n    nn.init.zeros_(m.bias)\n",
        # another guard on the layer
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Conv2d):\n"
        "            if len(list(m.parameters())) > 1:\n"
        "                nn.init.zeros_(m.bias)\n",
    ]
    invalid = [
        # the tutorial's weights_init
        Invalid(
            HEADER + "class myNet(nn.Module):\n\n  def __init__(self):\n    super().__init__()\n"
            "    self.conv = nn.Conv2d(10,10,3)\n    self.bn = nn.BatchNorm2d(10)\n\n"
            "  def weights_init(self):\n    for module in self.modules():\n"
            "      if isinstance(module, nn.Conv2d):\n"
            "        nn.init.normal_(module.weight, mean = 0, std = 1)\n"
            "        nn.init.constant_(module.bias, 0)\n",
            line=15,
        ),
        Invalid(
            HEADER + "def init(model):\n    for m in model.modules():\n"
            "        if isinstance(m, nn.BatchNorm2d):\n            nn.init.ones_(m.weight)\n"
            "        elif isinstance(m, (nn.Linear, nn.Conv1d)):\n"
            "            nn.init.zeros_(m.bias)\n",
            line=9,
        ),
        Invalid(
            HEADER + "norm = nn.BatchNorm2d(3, affine=False)\n\n"
            "def init(model):\n    for m in model.modules():\n"
            "        if isinstance(m, nn.BatchNorm2d):\n            nn.init.zeros_(m.bias)\n",
            line=9,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self.root: cst.Module | None = None

    def visit_Module(self, node: cst.Module) -> None:
        self.root = node

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.call_name(node)
        if qualified is None or not qualified.startswith(_INIT_PREFIX) or not node.args:
            return
        target = node.args[0].value
        if not isinstance(target, cst.Attribute) or target.attr.value != "bias":
            return
        owner = dotted_name(target.value)
        if owner is None:
            return
        scope = self.context.current_function or self.root
        if scope is None or _bias_guarded(scope, owner):
            return
        path = _path_to(scope, node)
        if path is None:
            return
        layer = self._narrowed_type(path, owner)
        if layer is None:
            return
        self.report(
            node,
            f"`{owner}.bias` is None for a `{layer}` built with "
            f"{'bias=False' if layer in _OPTIONAL_BIAS else 'affine=False'}, and this "
            f"`{dotted_name(node.func)}` then fails; check `if {owner}.bias is not None` first",
        )

    def _narrowed_type(self, path: list[cst.CSTNode], owner: str) -> str | None:
        """A bias-optional layer type that an enclosing `if isinstance(owner, ...)` picks."""
        affine_off = "affine=False" in self.context.source
        found = None
        for parent, child in zip(path, path[1:], strict=False):
            if not isinstance(parent, cst.If) or child is not parent.body:
                continue
            if _tests_more_than_type(parent.test, owner):
                # `if len(list(m.parameters())) > 1:` and the like: some other guard
                return None
            for call in _isinstance_calls(parent.test, owner):
                for name in self._type_names(call.args[1].value):
                    short = name.rsplit(".", 1)[-1]
                    if found is None and (
                        short in _OPTIONAL_BIAS or (affine_off and short in _OPTIONAL_AFFINE)
                    ):
                        found = short
        return found

    def _type_names(self, expr: cst.BaseExpression) -> list[str]:
        if isinstance(expr, (cst.Tuple, cst.List)):
            out: list[str] = []
            for el in expr.elements:
                out.extend(self._type_names(el.value))
            return out
        qualified = self.context.qualified_name(expr)
        if qualified is not None and qualified.startswith("torch.nn."):
            return [qualified]
        return []


def _tests_more_than_type(test: cst.BaseExpression, owner: str) -> bool:
    """`test` looks at `owner` other than through `isinstance(owner, ...)`."""
    if isinstance(test, cst.BooleanOperation):
        return _tests_more_than_type(test.left, owner) or _tests_more_than_type(
            test.right, owner)
    if _isinstance_calls(test, owner):
        return False
    finder = _OwnerUse(owner)
    visit(test, finder)
    return finder.found


class _OwnerUse(cst.CSTVisitor):
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.found = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.owner:
            self.found = True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if dotted_name(node) == self.owner:
            self.found = True
            return False
        return True


def _isinstance_calls(test: cst.BaseExpression, owner: str) -> list[cst.Call]:
    """`isinstance(owner, T)` calls that must be true for `test` to be true."""
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And):
            return _isinstance_calls(test.left, owner) + _isinstance_calls(test.right, owner)
        return []
    if (
        isinstance(test, cst.Call)
        and dotted_name(test.func) == "isinstance"
        and len(test.args) == 2
        and dotted_name(test.args[0].value) == owner
    ):
        return [test]
    return []


_DEPRECATED_INIT = frozenset(
    {"normal", "uniform", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform",
     "kaiming_normal", "orthogonal", "sparse", "eye", "dirac"}
)


class DeprecatedInit(StaticRule):
    """`nn.init.normal` and friends without the trailing underscore are deprecated.

    ## What it does
    Finds calls of `nn.init.normal`, `uniform`, `constant`, `xavier_uniform`,
    `xavier_normal`, `kaiming_uniform`, `kaiming_normal`, `orthogonal`, `sparse`, `eye` and
    `dirac` — the old names of the in-place initialisers.

    ## Why is this bad?
    They warn on every call and are kept only for backward compatibility; the underscore
    names say that the tensor is changed in place, like every other in-place operation in
    PyTorch. The fix (safe) adds the underscore; it is offered when the function is called
    through the module (`nn.init.normal(...)`), not when it was imported by name.

    ## Example
        nn.init.xavier_uniform(layer.weight)

    ## Use instead
        nn.init.xavier_uniform_(layer.weight)
    """

    code = "ML603"
    name = "deprecated-init"
    needs = frozenset()
    fix = "safe"
    fix_availability = "sometimes"
    triggers = ("init",)
    valid = [
        HEADER + "nn.init.xavier_uniform_(nn.Linear(2, 2).weight)\n",
        HEADER + "x = torch.normal(0.0, 1.0, size=(2,))\n",
        HEADER + "import numpy as np\nx = np.random.normal(0, 1)\n",
        HEADER + "gain = nn.init.calculate_gain('relu')\n",
    ]
    invalid = [
        Invalid(
            HEADER + "layer = nn.Linear(2, 2)\nnn.init.xavier_uniform(layer.weight)\n",
            line=5,
            fixed=HEADER + "layer = nn.Linear(2, 2)\nnn.init.xavier_uniform_(layer.weight)\n",
        ),
        Invalid(
            "import torch\n\nw = torch.empty(3, 3)\ntorch.nn.init.normal(w, 0, 0.02)\n",
            line=4,
            fixed="import torch\n\nw = torch.empty(3, 3)\ntorch.nn.init.normal_(w, 0, 0.02)\n",
        ),
        Invalid(
            "from torch.nn.init import constant\nimport torch\n\n"
            "constant(torch.empty(2), 0.0)\n",
            line=4,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.call_name(node)
        if qualified is None or not qualified.startswith(_INIT_PREFIX):
            return
        short = qualified[len(_INIT_PREFIX):]
        if short not in _DEPRECATED_INIT:
            return
        fix = None
        func = node.func
        if isinstance(func, cst.Attribute):
            fix = Fix(((func.attr, func.attr.with_changes(value=short + "_")),),
                      f"use `{short}_`")
        self.report(
            node,
            f"`nn.init.{short}` is deprecated; use the in-place `nn.init.{short}_`",
            fix=fix,
        )


class ApplyInModulesLoop(StaticRule):
    """`m.apply(fn)` inside `for m in model.modules()` runs `fn` over and over.

    ## What it does
    Finds `x.apply(fn)` calls where `x` is the loop variable of a loop over `.modules()` or
    `.named_modules()`.

    ## Why is this bad?
    `apply` already walks every submodule recursively. Calling it for each module of
    `modules()` runs `fn` once per ancestor on every layer: quadratic work, and
    initialisers that are not idempotent (re-drawing random weights, scaling by a factor) are
    applied many times.

    ## Example
        for m in model.modules():
            m.apply(init_weights)

    ## Use instead
        model.apply(init_weights)
    """

    code = "ML604"
    name = "apply-in-modules-loop"
    needs = frozenset()
    triggers = ("apply",)
    valid = [
        HEADER + "model = nn.Sequential(nn.Linear(2, 2))\nmodel.apply(print)\n",
        HEADER + "model = nn.Sequential(nn.Linear(2, 2))\nfor m in model.children():\n"
        "    m.apply(print)\n",
        HEADER + "model = nn.Sequential(nn.Linear(2, 2))\nfor m in model.modules():\n"
        "    model.apply(print)\n    break\n",
    ]
    invalid = [
        Invalid(
            HEADER + "model = nn.Sequential(nn.Linear(2, 2))\nfor m in model.modules():\n"
            "    m.apply(print)\n",
            line=6,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def init(self):\n"
            "        for name, m in self.named_modules():\n"
            "            if isinstance(m, nn.Linear):\n                m.apply(self._init)\n",
            line=8,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self.loop_vars: list[str | None] = []

    def visit_For(self, node: cst.For) -> None:
        name = None
        it = node.iter
        if (
            isinstance(it, cst.Call)
            and isinstance(it.func, cst.Attribute)
            and it.func.attr.value in ("modules", "named_modules")
        ):
            name = _loop_module_name(node.target, it)
        self.loop_vars.append(name)

    def leave_For(self, original_node: cst.For) -> None:
        self.loop_vars.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (
            not isinstance(func, cst.Attribute)
            or func.attr.value != "apply"
            or not isinstance(func.value, cst.Name)
            or func.value.value not in self.loop_vars
        ):
            return
        name = func.value.value
        self.report(
            node,
            f"`{name}.apply(...)` inside a loop over `modules()` runs the function again for "
            f"every ancestor of each layer; call `apply` once on the root module instead of "
            "looping",
        )


# -- ML605 ------------------------------------------------------------------------------------

# a layer's parameters and buffers (tensors, or None where optional)
_TENSOR_ATTRIBUTE = LazyPattern(
    r"weight|bias|running_mean|running_var|num_batches_tracked|in_proj_weight|in_proj_bias|"
    r"bias_[kv]|[qkv]_proj_weight|(weight|bias)_(ih|hh|hr)(_l\d+(_reverse)?)?")
# torch's base classes of the layers of the attribute table, as the layer they stand for
_LAYER_BASES = {"_ConvNd": "Conv2d", "_ConvTransposeNd": "ConvTranspose2d",
                "_BatchNorm": "BatchNorm2d", "_NormBase": "BatchNorm2d",
                "_InstanceNorm": "InstanceNorm2d", "RNNBase": "LSTM", "RNNCellBase": "LSTMCell"}


def _truth_tested(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The expressions whose truth value `node` takes: an `if`/`while`/`assert`/conditional
    test, the operands of `and`/`or` and of `not`."""
    if isinstance(node, (cst.If, cst.While, cst.Assert, cst.IfExp, cst.CompIf)):
        return [node.test]
    if isinstance(node, cst.BooleanOperation):
        return [node.left, node.right]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return [node.expression]
    return []


class ParameterTruthValue(StaticRule):
    """The truth value of a layer's parameter: `if m.bias:` for `if m.bias is not None:`.

    ## What it does
    Finds a parameter or buffer of a torch layer (`.weight`, `.bias`, `.running_mean`, ...)
    used as a condition (`if`, `while`, `assert`, `and`/`or`, `not`), where the layer is
    known: the value is narrowed by `isinstance(m, nn.Conv2d)` (an init loop over
    `self.modules()`), or the semantic model knows it holds a torch layer (`self.fc =
    nn.Linear(...)`), and `nn.Parameter` attributes of the project's own modules
    (`self.bias = nn.Parameter(...)`). Where the condition is the attribute
    itself (or `not` it), the unsafe fix writes `is not None` (`is None`). Other tensors
    (`while loss:`, `if done:`) are not reported: the semantic model does not know their
    shapes, and the truth value of a one-element tensor is a legitimate test of its value.

    ## Why is this bad?
    The test was meant to ask whether the layer has the parameter at all (it is None when
    built with `bias=False`), but Python asks the tensor for its truth value: for a tensor of
    more than one element that raises `RuntimeError: Boolean value of Tensor with more than
    one value is ambiguous`, so the init function crashes on the first layer with a bias;
    for a one-element tensor it silently tests whether the value is non-zero, so a bias
    initialised to zero is skipped.

    ## Example
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias:
                    nn.init.zeros_(m.bias)

    ## Use instead
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    ## What it does not see
    Tensors other than layer parameters, by design (above): the bench/bugs case
    r-opennmt-ensemble-attn-truth-value tests `if attn:` on an attention tensor passed as an
    argument, which it does not report (1 of 2 cases found).
    """

    code = "ML605"
    name = "parameter-truth-value"
    needs = frozenset({"semantic"})
    fix = "unsafe"
    fix_availability = "sometimes"
    triggers = ("weight", "bias", "running_")
    valid: ClassVar = [
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Linear):\n            if m.bias is not None:\n"
        "                nn.init.zeros_(m.bias)\n",
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Linear) and m.bias is not None:\n"
        "            nn.init.zeros_(m.bias)\n",
        # not narrowed: a project module may keep a flag called `bias`
        HEADER + "def init(model):\n    for m in model.modules():\n        if m.bias:\n"
        "            print(m)\n",
        # a flag of the project's own module
        HEADER + "class Block(nn.Module):\n    def __init__(self, bias=True):\n"
        "        super().__init__()\n        self.bias = bias\n\n    def forward(self, x):\n"
        "        return x + 1 if self.bias else x\n",
        # a question about the tensor, not the tensor itself
        HEADER + "def init(model):\n    for m in model.modules():\n"
        "        if isinstance(m, nn.Linear) and m.weight.requires_grad:\n"
        "            nn.init.zeros_(m.bias)\n",
        HEADER + "def check(m):\n    if isinstance(m, nn.Linear):\n"
        "        assert torch.isfinite(m.weight).all()\n",
    ]
    invalid: ClassVar = [
        Invalid(
            HEADER + "def init(model):\n    for m in model.modules():\n"
            "        if isinstance(m, (nn.Conv2d, nn.Linear)):\n"
            "            nn.init.kaiming_normal_(m.weight)\n            if m.bias:\n"
            "                nn.init.zeros_(m.bias)\n",
            line=8,
            fixed=HEADER + "def init(model):\n    for m in model.modules():\n"
            "        if isinstance(m, (nn.Conv2d, nn.Linear)):\n"
            "            nn.init.kaiming_normal_(m.weight)\n            if m.bias is not None:\n"
            "                nn.init.zeros_(m.bias)\n",
        ),
        Invalid(
            HEADER + "def init(model):\n    for m in model.modules():\n"
            "        if isinstance(m, nn.Linear) and m.bias:\n            nn.init.zeros_(m.bias)\n",
            line=6,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2, bias=False)\n\n    def reset(self):\n"
            "        if not self.fc.bias:\n            return\n", line=10,
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(2, 2, bias=False)\n\n"
            "    def reset(self):\n        if self.fc.bias is None:\n            return\n",
        ),
        Invalid(
            HEADER + "class Scale(nn.Module):\n    def __init__(self, bias=True):\n"
            "        super().__init__()\n        self.weight = nn.Parameter(torch.ones(3))\n"
            "        self.bias = None\n        if bias:\n"
            "            self.bias = nn.Parameter(torch.zeros(3))\n\n"
            "    def forward(self, x):\n        x = x * self.weight\n"
            "        if self.bias:\n            x = x + self.bias\n        return x\n",
            line=14,
            fixed=HEADER + "class Scale(nn.Module):\n    def __init__(self, bias=True):\n"
            "        super().__init__()\n        self.weight = nn.Parameter(torch.ones(3))\n"
            "        self.bias = None\n        if bias:\n"
            "            self.bias = nn.Parameter(torch.zeros(3))\n\n"
            "    def forward(self, x):\n        x = x * self.weight\n"
            "        if self.bias is not None:\n            x = x + self.bias\n        return x\n",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self.root: cst.Module | None = None
        self._seen: set[int] = set()

    def visit_Module(self, node: cst.Module) -> None:
        self.root = node

    def visit_If(self, node: cst.If) -> None:
        self._visit_test(node)

    def visit_While(self, node: cst.While) -> None:
        self._visit_test(node)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._visit_test(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._visit_test(node)

    def visit_CompIf(self, node: cst.CompIf) -> None:
        self._visit_test(node)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._visit_test(node)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        self._visit_test(node)

    def _visit_test(self, node: cst.CSTNode) -> None:
        for tested in _truth_tested(node):
            if isinstance(tested, cst.Attribute) and id(tested) not in self._seen:
                self._seen.add(id(tested))
                self._check(tested, node)

    def _check(self, tested: cst.Attribute, holder: cst.CSTNode) -> None:
        attr = tested.attr.value
        if not _TENSOR_ATTRIBUTE.fullmatch(attr):
            return
        what = self._known_tensor(tested)
        if what is None:
            return
        spelled = dotted_name(tested) or attr
        negated = isinstance(holder, cst.UnaryOperation)
        fix = None
        if negated or isinstance(holder, (cst.If, cst.While, cst.Assert, cst.IfExp)):
            target: cst.CSTNode = holder if negated else tested
            operator = cst.Is() if negated else cst.IsNot()
            fix = Fix(((target, cst.Comparison(
                tested.with_changes(lpar=(), rpar=()),
                [cst.ComparisonTarget(operator, cst.Name("None"))],
                lpar=target.lpar if isinstance(target, cst.BaseExpression) else ())),),
                f"test `{spelled} is{'' if negated else ' not'} None`", safe=False)
        self.report(
            tested,
            f"`{spelled}` is {what}: its truth value raises for more than one element and "
            "tests the value, not whether it exists, for one; write "
            f"`{spelled} is {'' if negated else 'not '}None`",
            fix=fix,
        )

    def _known_tensor(self, tested: cst.Attribute) -> str | None:
        """What `tested` is known to hold (`the bias of an nn.Linear`), or None."""
        attr = tested.attr.value
        kind = self.context.semantic.kind_here(tested, None)
        if kind is not None and kind.kind == TENSOR and kind.parameter:
            return "an `nn.Parameter` (or None)"
        owner_kind = self.context.semantic.kind_here(tested.value, None)
        layers = []
        if owner_kind is not None and owner_kind.kind == MODULE and owner_kind.cls and (
                owner_kind.cls.startswith("torch.nn.")):
            layers.append(owner_kind.cls[len("torch.nn."):])
        owner = dotted_name(tested.value)
        scope = self.context.current_function or self.root
        if owner is not None and scope is not None:
            path = _path_to(scope, tested)
            if path is not None:
                layers.extend(self._narrowed(path, owner))
        for layer in layers:
            layer = _LAYER_BASES.get(layer, layer)
            known = LAYER_ATTRIBUTES.get(layer)
            if known is not None and (attr in known or attr.startswith(("weight_", "bias_"))):
                return f"the `{attr}` of an `nn.{layer}` (a tensor, or None)"
        return None

    def _narrowed(self, path: list[cst.CSTNode], owner: str) -> list[str]:
        """The torch layer classes that enclosing `isinstance(owner, ...)` tests pick."""
        calls: list[cst.Call] = []
        for parent, child in zip(path, path[1:], strict=False):
            if isinstance(parent, (cst.If, cst.IfExp)) and child is parent.body:
                calls.extend(_isinstance_calls(parent.test, owner))
            elif (isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And)
                  and child is parent.right):
                calls.extend(_isinstance_calls(parent.left, owner))
        layers = []
        for call in calls:
            types = call.args[1].value
            elements = ([el.value for el in types.elements]
                        if isinstance(types, (cst.Tuple, cst.List)) else [types])
            for element in elements:
                qualified = canonical(self.context.qualified_name(element) or "")
                if qualified.startswith("torch.nn."):
                    layers.append(qualified.rsplit(".", 1)[1])
        return layers


@hookimpl
def modellint_add_rules():
    return [InitViaChildren, InitUnguardedBias, DeprecatedInit, ApplyInModulesLoop,
            ParameterTruthValue]
