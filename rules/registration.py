"""Registration & structure (ML1xx): what `parameters()`, `.to()` and `state_dict()` can see."""

from __future__ import annotations

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    MODULE_ATTRIBUTES,
    REGISTERING_METHODS,
    STATEFUL_LAYERS,
    TENSOR_FACTORIES,
    VARIABLES,
    FileContext,
    Fix,
    Invalid,
    StaticRule,
    code_nodes,
    dotted_name,
    first_param_name,
    visit,
)
from modellint.rules._loops import invalid_at

HEADER = "import torch\nimport torch.nn as nn\n\n"
CONTAINER_CLASSES = frozenset(
    {
        "torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential",
        "torch.nn.ParameterList", "torch.nn.ParameterDict",
    }
)


def self_attribute(target: cst.BaseExpression, self_name: str = "self") -> str | None:
    """`x` for `self.x`, else None."""
    if (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == self_name
    ):
        return target.attr.value
    return None


def nn_reference(context: FileContext, attr: str) -> cst.BaseExpression | None:
    """An expression for `torch.nn.<attr>` under this file's imports (`nn.ModuleList`), or None
    when neither `torch.nn` nor `torch` is imported under a usable name."""
    for local, target in context.imports.aliases.items():
        if target == "torch.nn":
            return cst.Attribute(cst.Name(local), cst.Name(attr))
    for local, target in context.imports.aliases.items():
        if target == "torch":
            return cst.Attribute(cst.Attribute(cst.Name(local), cst.Name("nn")), cst.Name(attr))
    return None


def _class_method_body(context: FileContext) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
    """The module class and method whose body is being visited (directly, not nested)."""
    method = context.current_method()
    if method is None or context.current_function is not method[1]:
        return None
    return method


def _references_attribute(node: cst.CSTNode, names: set[str]) -> bool:
    """Whether `node` mentions `self.<name>` or a bare `<name>` for one of `names`."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Attribute(self, attr: cst.Attribute) -> None:
            nonlocal found
            if attr.attr.value in names and isinstance(attr.value, cst.Name):
                found = True

        def visit_Name(self, name: cst.Name) -> None:
            nonlocal found
            if name.value in names:
                found = True

    visit(node, Finder())
    return found


def _wrapped_in_container(context: FileContext, scope: cst.CSTNode, names: set[str]) -> bool:
    """Whether `scope` passes `self.<name>` / `<name>` to nn.ModuleList, nn.Sequential ..."""
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            nonlocal found
            if context.call_name(call) in CONTAINER_CLASSES and any(
                _references_attribute(arg.value, names) for arg in call.args
            ):
                found = True

    visit(scope, Finder())
    return found


def _lookup_table(cls: cst.ClassDef, self_name: str, attr: str) -> bool:
    """`self.<attr>` is a table to choose from: an element of it (`self.<attr>[key]`, also
    through a method that returns one) is assigned to another attribute of the object, which
    registers the module chosen (SimCLR's `self.backbone = self._get_basemodel(name)` over a
    dict of torchvision models)."""

    def element(expr: cst.CSTNode, names: set[str]) -> bool:
        for node in code_nodes(expr):
            if isinstance(node, cst.Subscript) and self_attribute(node.value, self_name) == attr:
                return True
            if isinstance(node, cst.Name) and node.value in names:
                return True
        return False

    returning: set[str] = set()
    for statement in cls.body.body:
        if not isinstance(statement, cst.FunctionDef):
            continue
        names: set[str] = set()
        for node in code_nodes(statement):
            if isinstance(node, cst.Assign) and element(node.value, set()):
                names.update(t.target.value for t in node.targets
                             if isinstance(t.target, cst.Name))
        if any(isinstance(node, cst.Return) and node.value is not None
               and element(node.value, names) for node in code_nodes(statement)):
            returning.add(statement.name.value)
    for node in code_nodes(cls):
        if not isinstance(node, cst.Assign) or not any(
                self_attribute(t.target, self_name) not in (None, attr) for t in node.targets):
            continue
        if element(node.value, set()):
            return True
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
                dotted_name(value.func.value) == self_name
                and value.func.attr.value in returning):
            return True
    return False


class _PlainContainer(StaticRule):
    """Shared logic of ML101 and ML102: what counts as an element is the subclass's."""

    list_class: str
    dict_class: str
    what: str
    triggers = ("self.",)

    def holds(self, node: cst.CSTNode) -> bool:
        raise NotImplementedError

    def _element(self, node: cst.BaseExpression) -> bool:
        if self.holds(node):
            return True
        if self._inner_list(node):
            return True
        if isinstance(node, cst.Name):
            value = self.context.lookup(node.value)
            return value is not None and value is not node and self.holds(value)
        return False

    def _inner_list(self, node: cst.BaseExpression) -> bool:
        """A list (tuple, comprehension) of our elements inside another container: a list of
        lists of layers, which needs a wrapper at every level."""
        return (isinstance(node, (cst.List, cst.Tuple, cst.ListComp))
                and self.container_kind(node) == "list")

    def _nested(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return any(self._inner_list(el.value) for el in value.elements)
        if isinstance(value, (cst.ListComp, cst.SetComp)):
            return self._inner_list(value.elt)
        if isinstance(value, cst.Dict):
            return any(isinstance(el, cst.DictElement) and self._inner_list(el.value)
                       for el in value.elements)
        if isinstance(value, cst.DictComp):
            return self._inner_list(value.value)
        return False

    def container_kind(self, value: cst.BaseExpression) -> str | None:
        """"list" or "dict" when `value` is a plain container holding our elements."""
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            if any(self._element(el.value) for el in value.elements):
                return "list"
        elif isinstance(value, (cst.ListComp, cst.SetComp)):
            if self._element(value.elt):
                return "list"
        elif isinstance(value, cst.Dict):
            if any(isinstance(el, cst.DictElement) and self._element(el.value)
                   for el in value.elements):
                return "dict"
        elif isinstance(value, cst.DictComp):
            if self._element(value.value):
                return "dict"
        return None

    def _wrap(self, value: cst.BaseExpression, kind: str) -> Fix | None:
        if kind == "dict" and isinstance(value, cst.Dict) and not all(
            isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
            for el in value.elements
        ):
            return None  # ModuleDict keys must be strings
        if isinstance(value, (cst.Set, cst.SetComp)):
            return None
        func = nn_reference(self.context, self.list_class if kind == "list" else self.dict_class)
        if func is None:
            return None
        return Fix(
            ((value, cst.Call(func, [cst.Arg(value)])),),
            f"wrap in `nn.{self.list_class if kind == 'list' else self.dict_class}`",
            safe=False,
        )

    def _message(self, attr: str, kind: str, origin: str = "", nested: bool = False) -> str:
        wrapper = self.list_class if kind == "list" else self.dict_class
        if nested:
            return (
                f"`self.{attr}` is a plain {kind}{origin} of lists of {self.what}; wrap each "
                f"inner list in `nn.{self.list_class}` and the outer {kind} in `nn.{wrapper}` "
                "so that they are registered (parameters(), .to(), state_dict())"
            )
        return (
            f"`self.{attr}` is a plain {kind}{origin} of {self.what}; wrap it in "
            f"`nn.{wrapper}` so that they are registered (parameters(), .to(), state_dict())"
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        found = _class_method_body(self.context)
        if found is None:
            return
        cls, method = found
        for target in node.targets:
            attr = self_attribute(target.target)
            if attr is None:
                continue
            value = node.value
            origin = ""
            if isinstance(value, cst.Name):
                bound = self.context.lookup(value.value)
                if bound is None:
                    continue
                origin = f" (`{value.value}`)"
                kind = self.container_kind(bound)
                if kind is not None and _wrapped_in_container(
                    self.context, method, {value.value}
                ):
                    continue
            else:
                kind = self.container_kind(value)
            if kind is None or _wrapped_in_container(self.context, cls, {attr}):
                continue
            if self.context.class_info(cls).dynamic:
                continue  # add_module(str(i), layer) registers the elements one by one
            if kind == "dict" and _lookup_table(cls, first_param_name(method) or "self", attr):
                continue  # the module chosen from it is registered where it is kept
            container = self.context.lookup(value.value) if isinstance(value, cst.Name) else value
            if container is not None and self._nested(container):
                # one wrapper around lists of layers does not register them (and raises)
                self.report(node, self._message(attr, kind, origin, nested=True))
                continue
            self.report(node, self._message(attr, kind, origin), fix=self._wrap(value, kind)
                        if not isinstance(value, cst.Name) else self._wrap_name(value, kind))

    def _wrap_name(self, value: cst.Name, kind: str) -> Fix | None:
        func = nn_reference(self.context, self.list_class if kind == "list" else self.dict_class)
        if func is None:
            return None
        return Fix(((value, cst.Call(func, [cst.Arg(value)])),), "wrap", safe=False)

    def visit_Call(self, node: cst.Call) -> None:
        # self.x = [] ... self.x.append(<element>)
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend",
                                                                           "insert")):
            return
        attr = self_attribute(func.value)
        if attr is None or not node.args:
            return
        found = _class_method_body(self.context) or (
            self.context.current_method() if self.context.current_function else None
        )
        if found is None:
            return
        cls, _ = found
        added = node.args[-1].value
        if func.attr.value == "extend":
            if self.container_kind(added) is None:
                return
        elif not self._element(added):
            return
        info = self.context.class_info(cls)
        assigned = info.assignments.get(attr, [])
        if not assigned or not all(
            isinstance(value, cst.List) and not value.elements for _, value in assigned
        ):
            return
        if _wrapped_in_container(self.context, cls, {attr}) or info.dynamic:
            return
        key = (id(cls), attr)
        reported = self.__dict__.setdefault("_reported", set())
        if key in reported:
            return
        reported.add(key)
        empty = assigned[0][1]
        nested = (self._nested(added) if func.attr.value == "extend"
                  else self._inner_list(added))
        func_ref = nn_reference(self.context, self.list_class)
        fix = None
        if func_ref is not None and not nested:
            fix = Fix(((empty, cst.Call(func_ref, [])),), f"use `nn.{self.list_class}()`",
                      safe=False)
        self.report(node, self._message(attr, "list", nested=nested), fix=fix)


class ModuleInPlainContainer(_PlainContainer):
    """Modules kept in a plain list, tuple or dict attribute are invisible to PyTorch.

    ## What it does
    Finds `nn.Module` objects stored in a plain `list`, `tuple` or `dict` attribute of a module:
    a literal or comprehension assigned to `self.x`, a list built in a variable and then
    assigned, or `self.x = []` followed by `self.x.append(layer)`. A list of lists of layers
    is reported too, without a fix: each level needs its own `nn.ModuleList`.

    ## Why is this bad?
    `parameters()`, `.to(device)`, `state_dict()`, `train()`/`eval()` and the optimizer never see
    them: the layers are not trained, not moved to the GPU, and not saved.

    ## Example
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(8, 8) for _ in range(3)]

    ## Use instead
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
    """

    code = "ML101"
    passes = ("static", "runtime")
    name = "module-in-plain-container"
    needs = frozenset({"project"})
    fix = "unsafe"
    fix_availability = "sometimes"
    list_class = "ModuleList"
    dict_class = "ModuleDict"
    what = "modules"
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.layers = nn.ModuleList([nn.Linear(2, 2)])\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        layers = [nn.Linear(2, 2), nn.ReLU()]\n        self.body = nn.Sequential(*layers)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.sizes = [1, 2, 3]\n        self.names = ['a', 'b']\n",
        HEADER + "class Config:\n    def __init__(self):\n        self.layers = [nn.Linear(2, 2)]\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = [nn.Linear(2, 2)]\n        self.seq = nn.Sequential(*self.blocks)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.layers = nn.ModuleList()\n        self.layers.append(nn.Linear(2, 2))\n",
        HEADER + "class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.layers = [nn.Linear(2, 2), nn.ReLU()]\n"
        "        for i, layer in enumerate(self.layers):\n"
        "            self.add_module(str(i), layer)\n",
        # a table of models to choose from (SimCLR's): the one chosen is registered
        HEADER + "import torchvision.models as models\n\n\n"
        "class ResNetSimCLR(nn.Module):\n    def __init__(self, base_model, out_dim):\n"
        "        super().__init__()\n"
        "        self.resnet_dict = {'resnet18': models.resnet18(num_classes=out_dim),\n"
        "                            'resnet50': models.resnet50(num_classes=out_dim)}\n"
        "        self.backbone = self._get_basemodel(base_model)\n\n"
        "    def _get_basemodel(self, model_name):\n"
        "        model = self.resnet_dict[model_name]\n        return model\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self, kind):\n        super().__init__()\n"
        "        self.heads = {'a': nn.Linear(2, 2), 'b': nn.Linear(2, 3)}\n"
        "        self.head = self.heads[kind]\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.layers = [nn.Linear(2, 2), nn.ReLU()]\n",
            line=7,
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])\n",
        ),
        Invalid(
            HEADER + "layer_list = [nn.Conv2d(5, 5, 3), nn.BatchNorm2d(5), nn.Linear(5, 2)]\n\n"
            "class myNet(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.layers = layer_list\n",
            line=9,
            fixed=HEADER + "layer_list = [nn.Conv2d(5, 5, 3), nn.BatchNorm2d(5), nn.Linear(5, 2)]"
            "\n\nclass myNet(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.layers = nn.ModuleList(layer_list)\n",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.heads = {'a': nn.Linear(2, 2)}\n",
            line=7,
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.heads = nn.ModuleDict({'a': nn.Linear(2, 2)})\n",
        ),
        # a list of lists of layers: no single wrapper fixes it, so there is no fix
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.stages = [[nn.Linear(2, 2) for _ in range(2)] for _ in range(3)]\n",
            line=7,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.stages = []\n        for _ in range(3):\n"
            "            self.stages.append([nn.Linear(2, 2), nn.ReLU()])\n",
            line=9,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.blocks = []\n        for _ in range(3):\n"
            "            self.blocks.append(nn.Linear(2, 2))\n",
            line=9,
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.blocks = nn.ModuleList()\n"
            "        for _ in range(3):\n            self.blocks.append(nn.Linear(2, 2))\n",
        ),
    ]

    def holds(self, node: cst.CSTNode) -> bool:
        return self.context.builds_module(node)


class ParameterInPlainContainer(_PlainContainer):
    """Parameters kept in a plain list or dict attribute are not registered.

    ## What it does
    Finds `nn.Parameter` objects stored in a plain `list`, `tuple` or `dict` attribute of a
    module (literal, comprehension, variable, or `.append` onto `[]`).

    ## Why is this bad?
    `parameters()` does not return them, so the optimizer never updates them; `.to(device)`
    does not move them and `state_dict()` does not save them.

    ## Example
        self.scales = [nn.Parameter(torch.ones(4)) for _ in range(3)]

    ## Use instead
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(4)) for _ in range(3)])
    """

    code = "ML102"
    passes = ("static", "runtime")
    name = "parameter-in-plain-container"
    needs = frozenset({"project"})
    fix = "unsafe"
    list_class = "ParameterList"
    dict_class = "ParameterDict"
    what = "parameters"
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.scales = nn.ParameterList([nn.Parameter(torch.ones(2))])\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.shapes = [torch.Size([2])]\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.scales = [nn.Parameter(torch.ones(2)) for _ in range(3)]\n",
            line=7,
            fixed=HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.scales = nn.ParameterList("
            "[nn.Parameter(torch.ones(2)) for _ in range(3)])\n",
        ),
    ]

    def holds(self, node: cst.CSTNode) -> bool:
        return self.context.builds_parameter(node)


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
    needs = frozenset({"project"})
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



def _is_super_init(call: cst.Call) -> bool:
    """`super().__init__(...)`, `super(Cls, self).__init__(...)` or `Base.__init__(self, ...)`."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__"):
        return False
    receiver = func.value
    if isinstance(receiver, cst.Call) and dotted_name(receiver.func) == "super":
        return True
    return dotted_name(receiver) is not None and bool(call.args)


def _is_unbound_init_without_self(call: cst.Call) -> bool:
    """`nn.Module.__init__()`: an unbound base initialiser called with no instance."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "__init__"
        and not call.args
        and dotted_name(func.value) is not None
    )


class _CallFinder(cst.CSTVisitor):
    def __init__(self, predicate) -> None:
        self.predicate = predicate
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if self.predicate(node):
            self.found = True


def _contains_call(node: cst.CSTNode, predicate) -> bool:
    finder = _CallFinder(predicate)
    visit(node, finder)
    return finder.found


def _moved_to_device(expr: cst.BaseExpression) -> bool:
    """`... .to(device)`, `... .cuda()`."""
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("to", "cuda"))


def _self_method_call(expr: cst.BaseExpression) -> bool:
    """`self.method(...)`."""
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and isinstance(expr.func.value, cst.Name) and expr.func.value.value == "self")


class UnregisteredTensor(StaticRule):
    """A tensor attribute of a module that is neither a parameter nor a buffer.

    ## What it does
    Finds `self.x = torch.ones(3, 4)` (any torch tensor factory or legacy tensor type such as
    `torch.cuda.FloatTensor`, directly or through a local variable; or an expression the
    semantic model knows is a tensor, when it is moved to a device,
    `torch.sqrt(torch.tensor([0.5])).to(device)`, wrapped in `Variable(...)`, or returned by
    a helper method of the class) in a module's `__init__` when `x` is never registered with
    `register_buffer` or wrapped in `nn.Parameter`. The module class may subclass a module
    class of another file of the project.

    ## Why is this bad?
    A plain tensor attribute is not in `parameters()`, not moved by `.to(device)` / `.cuda()`,
    and not saved in `state_dict()`: the model breaks on the GPU and loses that state when it
    is saved and loaded.

    ## Example
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = torch.ones(3, 4)

    ## Use instead
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("scale", torch.ones(3, 4))  # state, not trained
                # or: self.scale = nn.Parameter(torch.ones(3, 4))  # trained

    ## What it does not see
    On the benchmark of real bugs (bench/bugs) it finds 7 of 8 cases (a tensor wrapped in
    `Variable(...)` counts as the tensor, and so does one set only when given:
    `self.w = torch.tensor(w) if w is not None else None`). It misses tensors assigned in a
    method other than `__init__` (an `init_states` helper that `__init__` calls:
    r-xlstm-states-not-buffers): a helper may also run per batch, where a plain tensor is
    the usual choice.
    """

    code = "ML103"
    passes = ("static", "runtime")
    name = "unregistered-tensor"
    needs = frozenset({"project", "semantic"})
    triggers = ("torch",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('scale', torch.ones(3))\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.scale = nn.Parameter(torch.ones(3))\n",
        HEADER + "class Helper:\n    def __init__(self):\n        self.scale = torch.ones(3)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('scale', None)\n        self.scale = torch.ones(3)\n",
        # derived from the constructor's arguments and used where it is (torchvision's
        # RandomResizedCrop)
        HEADER + "class Crop(nn.Module):\n    def __init__(self, ratio):\n"
        "        super().__init__()\n        self._log_ratio = torch.log(torch.tensor(ratio))\n",
        # a Variable of what the constructor is given, not known to be a tensor
        HEADER + "from torch.autograd import Variable\n\n\n"
        "class Net(nn.Module):\n    def __init__(self, data):\n        super().__init__()\n"
        "        self.data_ = Variable(data)\n",
        # a parameter, whatever expression builds it
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = self._make()\n\n"
        "    def _make(self):\n        return nn.Parameter(torch.zeros(3))\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class net1(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.conv = nn.Linear(10, 5)\n        self.tens = torch.ones(3, 4)\n",
            line=8,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        mask = torch.tril(torch.ones(4, 4))\n        self.mask = mask\n",
            line=8,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self, device):\n"
            "        super().__init__()\n"
            "        self.scale = torch.sqrt(torch.tensor([0.5])).to(device)\n",
            line=7,
        ),
        Invalid(
            HEADER + "class Pool(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.p = torch.cuda.FloatTensor([3])\n",
            line=7,
        ),
        # `Variable(t)` is `t`
        Invalid(
            HEADER + "from torch.autograd import Variable\n\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.e = Variable(torch.Tensor([2.718]), requires_grad=False)\n",
            line=10,
        ),
        # set only when given (chemprop's per-task loss weights)
        invalid_at(
            HEADER + "class WeightedLoss(nn.Module):\n    def __init__(self, w_t=None):\n"
            "        super().__init__()\n"
            "        self.w_t = torch.tensor(w_t) if w_t is not None else None\n",
            "self.w_t =",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.mask = self._causal_mask(8)\n\n"
            "    def _causal_mask(self, n):\n        return torch.tril(torch.ones(n, n))\n",
            line=7,
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.context.in_method("__init__"):
            return
        found = _class_method_body(self.context)
        if found is None:
            return
        cls, _ = found
        value = node.value
        if isinstance(value, cst.IfExp):
            # `torch.tensor(w) if w is not None else None`: a plain tensor whenever it is set
            kept = [b for b in (value.body, value.orelse)
                    if not (isinstance(b, cst.Name) and b.value == "None")]
            if len(kept) == 1:
                value = kept[0]
        # `Variable(t)` is `t` since torch 0.4; wrapping marks a value meant for the graph
        wrapped = _variable_argument(self.context, value)
        if wrapped is not None:
            value = wrapped
        if isinstance(value, cst.Name):
            bound = self.context.lookup(value.value)
            value = bound if bound is not None else value
        if not (self.context.builds_tensor(value) or _legacy_cuda_tensor(self.context, value)):
            # a tensor-valued expression the semantic model knows, not a parameter, when it is
            # moved to a device (`torch.sqrt(...).to(device)`: the module's own `.to()` will not
            # follow), comes from a helper method of the class (`self._causal_mask(n)`) or is
            # wrapped in `Variable(...)`; a tensor merely derived from the constructor's
            # arguments (torchvision's `torch.log(torch.tensor(self.ratio))`, used on the CPU)
            # is left alone
            if not (wrapped is not None or _moved_to_device(node.value)
                    or _self_method_call(node.value)):
                return
            kind = self.context.semantic.kind_here(
                wrapped if wrapped is not None else node.value, node)
            if kind is None or kind.kind != "tensor" or kind.parameter:
                return
        info = self.context.class_info(cls)
        for target in node.targets:
            attr = self_attribute(target.target)
            if attr is None or attr in info.registered:
                continue
            if any(self.context.builds_parameter(v) for _, v in info.assignments.get(attr, ())):
                continue
            self.report(
                node,
                f"`self.{attr}` is a plain tensor, so `.to(device)` and `state_dict()` skip it; "
                f"register it with `self.register_buffer(\"{attr}\", ...)`, or wrap it in "
                "`nn.Parameter` if it should be trained",
            )


def _legacy_cuda_tensor(context: FileContext, value: cst.BaseExpression) -> bool:
    """`torch.cuda.FloatTensor([3])`: a legacy tensor type, built like `torch.FloatTensor`."""
    qualified = context.call_name(value) or ""
    return qualified.startswith("torch.cuda.") and qualified.endswith("Tensor") and (
        qualified[len("torch.cuda."):] in TENSOR_FACTORIES)


def _variable_argument(context: FileContext, value: cst.BaseExpression
                       ) -> cst.BaseExpression | None:
    """The tensor `Variable(tensor, ...)` wraps; None for anything else."""
    if not isinstance(value, cst.Call) or context.call_name(value) not in VARIABLES:
        return None
    if not value.args or value.args[0].keyword is not None or value.args[0].star:
        return None
    return value.args[0].value


class MissingSuperInit(StaticRule):
    """A module's `__init__` does not call `super().__init__()` first.

    ## What it does
    Finds module classes whose `__init__` never calls `super().__init__()` (or
    `Base.__init__(self)`), or assigns a sub-module or parameter before that call.

    ## Why is this bad?
    `nn.Module.__init__` creates the registries of parameters, buffers and sub-modules.
    Without it, assigning a layer raises "cannot assign module before Module.__init__() call",
    and the module cannot be called.

    ## Example
        class Net(nn.Module):
            def __init__(self):
                self.fc = nn.Linear(2, 2)
                super().__init__()

    ## Use instead
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
    """

    code = "ML104"
    passes = ("static", "runtime")
    name = "missing-super-init"
    needs = frozenset({"project"})
    triggers = ("__init__",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)\n"
        "        self.fc = nn.Linear(2, 2)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self, width):\n        self.width = width\n"
        "        super(Net, self).__init__()\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n",
        HEADER + "class Plain:\n    def __init__(self):\n        self.fc = nn.Linear(2, 2)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        self.fc = nn.Linear(2, 2)\n",
            line=5,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        self.fc = nn.Linear(2, 2)\n        super().__init__()\n",
            line=6,
        ),
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        found = self.context.current_method()
        if found is None or found[1] is not node or node.name.value != "__init__":
            return
        cls = found[0]
        statements = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
        for index, statement in enumerate(statements):
            if _contains_call(statement, _is_super_init):
                for earlier in statements[:index]:
                    self._check_early_assignment(cls, earlier)
                return
        message = (
            f"`{cls.name.value}.__init__` never calls `super().__init__()`; call it first, "
            "before assigning layers or parameters"
        )
        if _contains_call(node.body, _is_unbound_init_without_self):
            message = (
                f"`{cls.name.value}.__init__` calls a base `__init__()` without `self`, which "
                "raises TypeError; call `super().__init__()`"
            )
        self.report(node.name, message)

    def _check_early_assignment(self, cls: cst.ClassDef, statement: cst.CSTNode) -> None:
        if not isinstance(statement, cst.SimpleStatementLine):
            return
        for small in statement.body:
            if not isinstance(small, cst.Assign):
                continue
            if not (self.context.builds_module(small.value)
                    or self.context.builds_parameter(small.value)):
                continue
            for target in small.targets:
                attr = self_attribute(target.target)
                if attr is not None:
                    self.report(
                        small,
                        f"`self.{attr}` is assigned before `super().__init__()`; PyTorch raises "
                        "\"cannot assign module before Module.__init__() call\" — call "
                        "`super().__init__()` first",
                    )


# attributes every nn.Module has (and every object), so reading them is never a mistake
_ALWAYS_DEFINED = MODULE_ATTRIBUTES | {"__class__", "__dict__", "__module__", "__doc__"}


class UndefinedModuleAttribute(StaticRule):
    """`forward` reads an attribute that the module never defines.

    ## What it does
    Finds `self.x` read in `forward` (and the methods it calls) when the class — with its
    in-file base classes — never assigns, registers or declares `x`. The message lists the
    attributes that do exist and the closest one. Classes using `setattr`, `__getattr__`, or a
    base class from another file are skipped.

    ## Why is this bad?
    The model fails with `AttributeError` on its first forward pass — often a layer that was
    renamed in `__init__` (`self.conv`) but not in `forward` (`self.linear`).

    ## Example
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Linear(10, 5)

            def forward(self, x):
                return self.linear(x)

    ## Use instead
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(10, 5)

            def forward(self, x):
                return self.linear(x)
    """

    code = "ML106"
    passes = ("static", "runtime")
    name = "undefined-module-attribute"
    needs = frozenset({"project"})
    triggers = ("forward",)
    valid = [
        HEADER + "class Net(nn.Module):\n    scale = 2\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
        "        self.register_buffer('mean', torch.zeros(2))\n"
        "    def forward(self, x):\n        return self.fc(x) * self.scale - self.mean\n",
        HEADER + "class Base(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n\nclass Child(Base):\n"
        "    def forward(self, x):\n        return self.fc(x) if self.training else x\n",
        HEADER + "from mylib import Mixin\n\nclass Net(Mixin, nn.Module):\n"
        "    def forward(self, x):\n        return self.mixed(x)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        for i in range(2):\n            setattr(self, f'fc{i}', nn.Linear(2, 2))\n"
        "    def forward(self, x):\n        return self.fc0(x)\n",
        HEADER + "class Mixer(nn.Module):\n    def forward(self, x):\n        return x * self.scale\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.mixer = Mixer()\n        self.mixer.register_buffer('scale', torch.ones(1))\n",
        HEADER + "class Bottleneck(nn.Module):\n    def forward(self, x):\n"
        "        return self.conv1(x)\n\nclass SEBottleneck(Bottleneck):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.conv1 = nn.Conv2d(3, 3, 1)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.add_module('head', nn.Linear(2, 2))\n"
        "    @property\n    def width(self):\n        return 2\n"
        "    def forward(self, x):\n        return self.head(x) * self.width\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.conv = nn.Linear(10, 5)\n\n    def forward(self, x):\n"
            "        return self.linear(x)\n",
            line=10,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n    def forward(self, x):\n"
            "        return self.head(x)\n    def head(self, x):\n        return self.fcc(x)\n",
            line=11,
        ),
    ]

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.classes: list[cst.ClassDef] = []
        self.base_names: set[str] = set()
        # attributes that code elsewhere in the file sets on some object (`model.x = ...`)
        self.external: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        # `layer.mamba.register_buffer("mup_vector", ...)` defines the attribute from outside
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in REGISTERING_METHODS
            and node.args
            and isinstance(node.args[0].value, cst.SimpleString)
            and not (isinstance(func.value, cst.Name) and func.value.value == "self")
        ):
            name = node.args[0].value.evaluated_value
            if isinstance(name, str):
                self.external.add(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            attr = target.target
            if isinstance(attr, cst.Attribute) and not (
                isinstance(attr.value, cst.Name) and attr.value.value == "self"
            ):
                self.external.add(attr.attr.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.base_names.update(
            name.rsplit(".", 1)[-1] for base in node.bases
            if (name := dotted_name(base.value)) is not None
        )
        if self.context.is_module_class(node):
            self.classes.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        for cls in self.classes:
            # a base class may read attributes that only its subclasses define
            if cls.name.value not in self.base_names:
                self.check_class(cls)

    def check_class(self, node: cst.ClassDef) -> None:
        import difflib  # for a message: most runs report nothing

        infos = self.context.base_class_infos(node)
        if infos is None or any(info.dynamic for info in infos):
            return
        info = infos[0]
        if "forward" not in info.methods:
            return
        defined = _ALWAYS_DEFINED | self.external
        for each in infos:
            defined |= each.defined_names
        reachable, pending = set(), ["forward"]
        while pending:
            name = pending.pop()
            if name in reachable or name not in info.methods:
                continue
            reachable.add(name)
            pending.extend(info.methods[name].calls_on_self)
        candidates = sorted(
            n for n in (info.instance_attributes | set(info.methods)) if not n.startswith("__")
        )
        for name in sorted(reachable):
            reported: set[str] = set()
            for attr_node, attr in info.methods[name].reads:
                if attr in defined or attr in reported or attr.startswith("_"):
                    continue
                reported.add(attr)
                close = difflib.get_close_matches(attr, candidates, n=1, cutoff=0.5)
                hint = f" — did you mean `self.{close[0]}`?" if close else ""
                existing = ", ".join(f"`{c}`" for c in candidates[:8]) or "none"
                self.report(
                    attr_node,
                    f"`self.{attr}` is read in `{name}` but `{node.name.value}` never defines "
                    f"it{hint} (defined: {existing})",
                )


class ModuleCreatedInForward(StaticRule):
    """A layer is constructed inside `forward`.

    ## What it does
    Finds `torch.nn` layers that hold weights, statistics or train/eval behaviour (Linear,
    Conv, norms, Embedding, RNNs, Dropout, containers ...) and module classes of the same file
    constructed inside a module's `forward`. Stateless layers (activations, padding, losses)
    are not flagged.

    ## Why is this bad?
    A layer built in `forward` gets fresh random weights on every call, is never registered
    (the optimizer cannot train it), stays on the CPU, and is always in training mode.

    ## Example
        def forward(self, x):
            return nn.Linear(16, 4)(x)

    ## Use instead
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(16, 4)

        def forward(self, x):
            return self.head(x)
    """

    code = "ML107"
    passes = ("static", "runtime")
    name = "module-created-in-forward"
    needs = frozenset({"project", "semantic"})
    triggers = ("forward",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n    def forward(self, x):\n        return self.fc(x)\n",
        HEADER + "import torch.nn.functional as F\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        return F.relu(x)\n",
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return nn.Parameter is None\n",
        HEADER + "class Lazy(nn.Module):\n    def forward(self, x):\n        if self.head is None:\n"
        "            head = nn.Linear(x.shape[-1], 2)\n            self.head = head\n"
        "        return self.head(x)\n",
        # a module of the project without parameters, buffers or dropout: an activation, an
        # upsampling layer
        HEADER + "class Swish(nn.Module):\n    def forward(self, x):\n"
        "        return x * torch.sigmoid(x)\n\n\n"
        "class Up(nn.Module):\n    def __init__(self, scale=2):\n        super().__init__()\n"
        "        self.scale = scale\n        self.up = nn.Upsample(scale_factor=scale)\n\n"
        "    def forward(self, x):\n        return self.up(x)\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x):\n"
        "        return Up(2)(Swish()(x))\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        return nn.Linear(16, 4)(x)\n",
            line=6,
        ),
        # a module of the project with weights
        invalid_at(
            HEADER + "class Head(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(8, 2)\n\n"
            "    def forward(self, x):\n        return self.fc(x)\n\n\n"
            "class Net(nn.Module):\n    def forward(self, x):\n        return Head()(x)\n",
            "return Head()(x)",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.context.in_method("forward") or not self.context.builds_module(node):
            return
        qualified = self.context.call_name(node)
        if qualified is not None and qualified.rsplit(".", 1)[-1] not in STATEFUL_LAYERS:
            return  # activations, pads, losses ... hold no weights and no train/eval state
        if qualified is None and self.context.semantic.holds_state(node) is False:
            return  # a project module that holds no parameters, buffers nor dropout
        _, method = self.context.current_method() or (None, None)
        if method is None or self.context.current_function is not method:
            return  # a nested factory function inside forward
        if self._kept_on_self(node, method):
            return  # built once and registered (a lazily created or replaced layer)
        name = dotted_name(node.func) or "module"
        if qualified is not None and "Dropout" in qualified.rsplit(".", 1)[-1]:
            what = "it is always in training mode (`model.eval()` never reaches it)"
        else:
            what = "its weights are re-initialised, never registered nor trained"
        self.report(node, f"`{name}(...)` is built on every call of `forward`: {what}; create it "
                    "once in `__init__`")


    def _kept_on_self(self, call: cst.Call, method: cst.FunctionDef) -> bool:
        """`self.x = nn.Linear(...)`, or `layer = nn.Linear(...)` ... `self.x = layer`."""
        statement = self.context.current_statement
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        assign = next((s for s in statement.body if isinstance(s, cst.Assign)), None)
        if assign is None or assign.value is not call:
            return False
        names = set()
        for target in assign.targets:
            if self_attribute(target.target) is not None:
                return True
            if isinstance(target.target, cst.Name):
                names.add(target.target.value)
        stored = False

        class Finder:
            def visit_Assign(self, node: cst.Assign) -> None:
                nonlocal stored
                if isinstance(node.value, cst.Name) and node.value.value in names and any(
                    self_attribute(t.target) is not None for t in node.targets
                ):
                    stored = True

        visit(method, Finder())
        return stored


class RepeatedModuleInstance(StaticRule):
    """One module object placed several times in a container.

    ## What it does
    Finds `[block] * n`, `nn.Sequential(*[block] * n)` and comprehensions that repeat one
    pre-built module (`[layer for _ in range(n)]`) inside containers of modules. A module is
    a `torch.nn` layer or a module class built here, or what the semantic model knows returns
    one: `[make_block()] * n` where `make_block` is a project function (of any file) that
    returns a module.

    ## Why is this bad?
    The container holds the same object `n` times: every "layer" shares one set of weights, so
    the model is far smaller than it looks, and `named_modules()` lists it once.

    ## Example
        self.blocks = nn.Sequential(*[nn.Linear(8, 8)] * 4)

    ## Use instead
        self.blocks = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])

    ## What it does not see
    A module reused through a copy of a list rather than a repeat: `decoder = encoder` and
    then `[m for m in reversed(decoder) ...]` puts the encoder's own layers into the decoder
    (r-segnet-decoder-shares-encoder-modules in bench/bugs, 1 of its 2 cases found).
    """

    code = "ML108"
    passes = ("static", "runtime")
    name = "repeated-module-instance"
    needs = frozenset({"project", "semantic"})
    triggers = ("*", "for ")
    valid = [
        HEADER + "blocks = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])\n",
        HEADER + "sizes = [64] * 4\n",
        HEADER + "shared_head = nn.Linear(8, 8)\nheads = nn.ModuleList([shared_head] * 3)\n",
        HEADER + "layers = [nn.Linear(8, 8) for _ in range(4)]\n",
        # a factory of something else
        HEADER + "def make_size(width):\n    return width * 2\n\n\nsizes = [make_size(8)] * 3\n",
    ]
    invalid = [
        Invalid(HEADER + "blocks = nn.Sequential(*[nn.Linear(8, 8)] * 4)\n", line=4),
        Invalid(HEADER + "block = nn.Linear(8, 8)\nlayers = nn.ModuleList([block] * 3)\n", line=5),
        Invalid(
            HEADER + "block = nn.Linear(8, 8)\nlayers = nn.ModuleList([block for _ in range(3)])\n",
            line=5,
        ),
        # a factory that returns a module
        Invalid(
            HEADER + "def make_block(width):\n    return nn.Sequential(nn.Linear(width, width), "
            "nn.ReLU())\n\n\nlayers = nn.ModuleList([make_block(8)] * 3)\n",
            line=8,
        ),
    ]

    def _is_module(self, node: cst.BaseExpression) -> bool:
        if self.context.builds_module(node):
            return True
        if isinstance(node, cst.Name):
            value = self.context.lookup(node.value)
            if value is not None and self.context.builds_module(value):
                return True
        if isinstance(node, (cst.Call, cst.Name)):
            # the semantic model: `make_block()` of a project factory, a class of another file
            kind = self.context.semantic.kind_here(node)
            return kind is not None and kind.kind == "module"
        return False

    def _intentional(self, names: list[str]) -> bool:
        # `[shared_head] * n` under `if config.share_heads:` ties weights on purpose
        texts = [n.lower() for n in names]
        for statement in self.context.statement_stack:
            if isinstance(statement, cst.If):
                texts.append((dotted_name(statement.test) or "").lower())
        return any("share" in t or "tie" in t or "tying" in t for t in texts)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Multiply):
            return
        for side in (node.left, node.right):
            if isinstance(side, (cst.List, cst.Tuple)) and any(
                self._is_module(el.value) for el in side.elements
            ) and not self._intentional(
                [el.value.value for el in side.elements if isinstance(el.value, cst.Name)]
            ):
                self.report(
                    node,
                    "multiplying a list of modules repeats the same module objects, so the "
                    "copies share weights; build each one in a comprehension instead",
                )
                return

    def _comprehension(self, node: cst.ListComp | cst.GeneratorExp) -> None:
        elt = node.elt
        if isinstance(elt, cst.Name) and self._is_module(elt):
            targets: set[str] = set()
            comp: cst.CompFor | None = node.for_in
            while comp is not None:
                targets.update(n for n in _names(comp.target))
                comp = comp.inner_for_in
            if elt.value in targets or self._intentional([elt.value]):
                return
            self.report(
                node,
                f"the comprehension repeats the one module `{elt.value}`; every entry shares its "
                "weights — construct a new module in each iteration",
            )

    visit_ListComp = _comprehension
    visit_GeneratorExp = _comprehension


def _names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _names(el.value)]
    return []


class ParameterOverwritten(StaticRule):
    """A registered parameter is reassigned with a plain tensor.

    ## What it does
    Finds `self.w = <tensor expression>` in a module class where `self.w` was registered as an
    `nn.Parameter`.

    ## Why is this bad?
    PyTorch raises "cannot assign 'torch.FloatTensor' as parameter 'w'"; and where it does not
    (after `del self.w`), the parameter silently leaves `parameters()` and stops training.

    ## Example
        self.w = nn.Parameter(torch.ones(3))
        ...
        self.w = self.w * 2

    ## Use instead
        with torch.no_grad():
            self.w.mul_(2)
    """

    code = "ML109"
    name = "parameter-overwritten"
    needs = frozenset({"project"})
    triggers = ("Parameter",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.ones(3))\n    def reset(self):\n"
        "        self.w = nn.Parameter(torch.zeros(3))\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.ones(3))\n    def forward(self, x):\n"
        "        w = self.w * 2\n        return x * w\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.w = nn.Parameter(torch.ones(3))\n    def forward(self, x):\n"
            "        self.w = self.w * 2\n        return x * self.w\n",
            line=9,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.w = nn.Parameter(torch.ones(3))\n        self.w = torch.zeros(3)\n",
            line=8,
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        # most assignments in a method set locals: those need no name lookup nor class analysis
        attrs = [attr for target in node.targets
                 if (attr := self_attribute(target.target)) is not None]
        if not attrs:
            return
        found = self.context.current_method()
        if found is None:
            return
        value = node.value
        plain = isinstance(value, cst.BinaryOperation) or (
            isinstance(value, cst.Call)
            and (self.context.call_name(value) or "").startswith("torch.")
            and not self.context.builds_parameter(value)
            and not self.context.builds_module(value)
        )
        if not plain:
            return
        info = self.context.class_info(found[0])
        for attr in attrs:
            if any(self.context.builds_parameter(v) for _, v in info.assignments.get(attr, ())):
                self.report(
                    node,
                    f"`self.{attr}` is an `nn.Parameter` but is reassigned with a plain tensor; "
                    "update it in place under `torch.no_grad()` or assign a new `nn.Parameter`",
                )


@hookimpl
def modellint_add_rules():
    return [
        ModuleInPlainContainer,
        ParameterInPlainContainer,
        UnregisteredTensor,
        MissingSuperInit,
        MethodMissingSelf,
        UndefinedModuleAttribute,
        ModuleCreatedInForward,
        RepeatedModuleInstance,
        ParameterOverwritten,
    ]
