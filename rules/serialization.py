"""Serialization (ML5xx): loading pickles, saving whole modules (and loading them back under
the 2.6 weights-only default), and checking what `load_state_dict` reports; and `torch.load`
without `map_location` in code that chooses its device (ML913, from the real-bug benchmark)."""

from __future__ import annotations

import re
from typing import cast

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    RETURNS_SELF,
    Fix,
    Invalid,
    LazyPattern,
    Severity,
    StaticRule,
    Valid,
    argument,
    code_nodes,
    dotted_name,
    snippet,
    source_of,
    visit,
)
from modellint.rules._loops import Site, names_in, scope_of

HEADER = "import torch\nimport torch.nn as nn\n\n"

_LOADS = ("torch.load", "torch.serialization.load")
_SAVES = ("torch.save", "torch.serialization.save")


def _has_double_star(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _add_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    args = list(call.args)
    new = cst.Arg(
        keyword=cst.Name(name),
        value=cst.Name(value),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if args:
        last = args[-1]
        plain = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        if isinstance(last.comma, cst.Comma):
            # a trailing comma (often a multi-line call): the new argument takes it over and
            # the old last argument gets the separator the others use
            new = new.with_changes(comma=last.comma)
            previous = args[-2].comma if len(args) > 1 else plain
            args[-1] = last.with_changes(comma=previous)
        else:
            args[-1] = last.with_changes(comma=plain)
    args.append(new)
    return call.with_changes(args=args)


class _ModuleNames:
    """Which local names hold a module, per function scope (module level is scope None)."""

    def __init__(self) -> None:
        self.scopes: dict[int | None, dict[str, bool]] = {}

    def set(self, scope, name: str, is_module: bool) -> None:
        self.scopes.setdefault(scope, {})[name] = is_module

    def get(self, scope, name: str) -> bool:
        local = self.scopes.get(scope, {})
        if name in local:
            return local[name]
        if scope is None:
            return False
        return self.scopes.get(None, {}).get(name, False)


class _TracksModules(StaticRule):
    """Knows which local names hold a module (see `_ModuleNames`), for the rules on saving."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self.names = _ModuleNames()
        # what the names hold is asked only where a save can read it
        self.tracking = True

    def _scope(self):
        func = self.context.current_function
        return id(func) if func is not None else None

    def _is_module(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            if self.context.builds_module(expr):
                return True
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in RETURNS_SELF:
                return self._is_module(func.value)
            return False
        if isinstance(expr, cst.Name):
            if expr.value == "self":
                found = self.context.current_method()
                if found is not None and found[1] is self.context.current_function:
                    return True
            elif self.names.get(self._scope(), expr.value):
                return True
        return self._known_module(expr)

    def _known_module(self, expr: cst.BaseExpression) -> bool:
        """The semantic model knows `expr` holds a module: an instance of a project class of
        another file, what a project factory returns, a `self` attribute set to a module."""
        if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call)):
            return False
        kind = self.context.semantic.kind_here(expr, self._node)
        return kind is not None and kind.kind == "module"

    _node: cst.CSTNode | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if not self.tracking:
            return
        # parameters shadow module-level names
        for param in (*node.params.posonly_params, *node.params.params,
                      *node.params.kwonly_params):
            self.names.set(id(node), param.name.value, False)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.tracking:
            return
        self._node = node
        is_module = self._is_module(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.names.set(self._scope(), target.target.value, is_module)

    def saved_module(self, node: cst.Call) -> cst.BaseExpression | None:
        """The module `torch.save(module, ...)` pickles whole, or None."""
        if not self.context.is_call_to(node, *_SAVES) or not node.args:
            return None
        self._node = node
        first = node.args[0]
        if first.keyword is not None and first.keyword.value != "obj":
            return None
        return first.value if self._is_module(first.value) else None


class WholeModelSave(_TracksModules):
    """`torch.save` of a whole module pickles its class, not just its weights.

    ## What it does
    Finds `torch.save(model, path)` where `model` is known to be a module: built in the same
    function (or at module level) from a module class of the file, a `torch.nn` class or a
    `torchvision.models` builder, or `self` inside a module class; and, from the semantic
    model, a model built from a project class or factory of another file
    (`from models import Net`) or a `self` attribute assigned a module.

    ## Why is this bad?
    Pickling a module stores a reference to its class and the module path it was defined in:
    the file only loads where that exact code is importable, breaks after any refactoring, and
    needs `weights_only=False` to load — which runs arbitrary code. The `state_dict()` holds
    only tensors and loads anywhere the architecture can be built.

    ## Example
        model = Net()
        torch.save(model, "model.pt")

    ## Use instead
        model = Net()
        torch.save(model.state_dict(), "model.pt")
    """

    code = "ML502"
    name = "whole-model-save"
    needs = frozenset({"project", "semantic"})
    triggers = ("save",)
    valid = [
        HEADER + "model = nn.Linear(2, 2)\ntorch.save(model.state_dict(), 'model.pt')\n",
        HEADER + "state = {'epoch': 1}\ntorch.save(state, 'ckpt.pt')\n",
        # unknown objects are not reported
        HEADER + "def save(model, path):\n    torch.save(model, path)\n",
        HEADER + "model = nn.Linear(2, 2)\nmodel = model.state_dict()\n"
        "torch.save(model, 'model.pt')\n",
        HEADER + "class Ckpt:\n    def save(self):\n        torch.save(self, 'c.pt')\n",
    ]
    invalid = [
        Invalid(HEADER + "model = nn.Linear(2, 2)\ntorch.save(model, 'model.pt')\n", line=5),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
            "def main():\n    net = Net()\n    net = net.to('cpu').eval()\n"
            "    torch.save(net, 'net.pt')\n",
            line=11,
        ),
        Invalid(
            HEADER + "import torchvision\n\nmodel = torchvision.models.resnet18()\n"
            "torch.save(model, 'resnet.pt')\n",
            line=7,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def save(self, path):\n"
            "        torch.save(self, path)\n",
            line=6,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        module = self.saved_module(node)
        if module is None:
            return
        name = dotted_name(module) or "the module"
        self.report(
            module,
            f"`torch.save({name}, ...)` pickles the whole module, which only loads where its "
            f"class is importable unchanged; save `{name}.state_dict()` instead",
        )


def _path_argument(call: cst.Call, keyword: str) -> cst.BaseExpression | None:
    """The second argument of `torch.save` (`f=`), or the first of `torch.load` (`f=`)."""
    position = 1 if keyword == "save" else 0
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "f":
            return arg.value
    return positional[position].value if len(positional) > position else None


class _SavesModules(_TracksModules):
    """Knows the paths the file's `torch.save(module, path)` calls write a whole module to
    (the rules on loading those files): `record_save` in `visit_Call`, then
    `pickled_module(load_key(load))` once the walk is done."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self.saves: dict[tuple, cst.BaseExpression] = {}
        # the names matter only to a `torch.save` (`record_save`): a file without the word
        # has none, and most files these rules read (for `load`) save nothing
        self.tracking = "save" in context.source

    def record_save(self, node: cst.Call) -> bool:
        """Whether `node` saves a whole module (its path is then remembered)."""
        module = self.saved_module(node)
        if module is None:
            return False
        path = _path_argument(node, "save")
        key = self._path_key(path) if path is not None else None
        if key is not None:
            self.saves.setdefault(key, module)
        return True

    def load_key(self, call: cst.Call) -> tuple | None:
        path = _path_argument(call, "load")
        return self._path_key(path) if path is not None else None

    def pickled_module(self, key: tuple | None) -> cst.BaseExpression | None:
        """The module saved whole to the path of `key`, unless the file allows classes for
        the weights-only unpickler (`torch.serialization.add_safe_globals`/`safe_globals`)."""
        if key is None or "safe_globals" in self.context.source:
            return None
        return self.saves.get(key)

    def _path_key(self, path: cst.BaseExpression) -> tuple | None:
        """What identifies a path across the file: a literal's value, else the expression's
        text with where it lives (its class for `self.x`, its function for a name bound in
        that function)."""
        if isinstance(path, cst.SimpleString):
            return ("literal", path.evaluated_value)
        text = source_of(path)
        func = self.context.current_function
        if func is None:
            return ("text", text, None)
        if text.startswith("self."):
            cls = self.context.current_class
            return ("text", text, id(cls) if cls is not None else None)
        if _binds_any(func, _names(path)):
            return ("text", text, id(func))
        return ("text", text, None)


class UnsafeTorchLoad(_SavesModules):
    """`torch.load` unpickles arbitrary objects, which can run code from the file.

    ## What it does
    Finds `torch.load(..., weights_only=False)`, and — when the configured
    `target-torch-version` is older than 2.6, where `weights_only` still defaults to `False` —
    `torch.load` calls that do not pass `weights_only` at all. Calls that pass `**kwargs` are
    only reported for an explicit `weights_only=False`.

    ## Why is this bad?
    Without `weights_only=True`, `torch.load` is `pickle.load`: a checkpoint downloaded from the
    internet can execute any code while it is loaded. A state dict of tensors loads fine with
    `weights_only=True`. The fix is unsafe: files that pickle whole modules or custom classes
    stop loading (save `state_dict()` instead, or allow the classes with
    `torch.serialization.add_safe_globals`). Where the same file writes that path with
    `torch.save(model, ...)` of a whole module (as ML506 finds it), the load is still reported
    but no fix is offered: it would make the load fail.

    ## Example
        state = torch.load("model.pt", weights_only=False)

    ## Use instead
        state = torch.load("model.pt", weights_only=True)
    """

    code = "ML501"
    name = "unsafe-torch-load"
    needs = frozenset({"project", "semantic"})
    fix = "unsafe"
    fix_availability = "sometimes"
    triggers = ("load",)
    valid = [
        HEADER + "state = torch.load('model.pt', weights_only=True)\n",
        # 2.6 and later default to weights_only=True
        Valid(HEADER + "state = torch.load('model.pt')\n", {"target_torch_version": (2, 6)}),
        Valid(HEADER + "state = torch.load('model.pt', map_location='cpu')\n",
              {"target_torch_version": (2, 8)}),
        # the caller decides
        Valid(HEADER + "def load(path, **kwargs):\n    return torch.load(path, **kwargs)\n",
              {"target_torch_version": (2, 4)}),
        Valid(HEADER + "def load(path, weights_only=True):\n"
              "    return torch.load(path, weights_only=weights_only)\n",
              {"target_torch_version": (2, 4)}),
        # not torch's load
        HEADER + "import pickle\nwith open('a.pkl', 'rb') as f:\n    obj = pickle.load(f)\n",
        Valid(HEADER + "import json\nobj = json.load(open('a.json'))\n",
              {"target_torch_version": (2, 0)}),
    ]
    invalid = [
        Invalid(
            HEADER + "state = torch.load('model.pt', weights_only=False)\n",
            line=4,
            fixed=HEADER + "state = torch.load('model.pt', weights_only=True)\n",
        ),
        # the file holds a whole module: reported, not fixed (the fix would break the load)
        Invalid(HEADER + "model = nn.Linear(2, 2)\ntorch.save(model, 'model.pt')\n"
                "model = torch.load('model.pt', weights_only=False)\n", line=6),
        Invalid(
            HEADER + "state = torch.load('model.pt', map_location='cpu')\n",
            line=4,
            fixed=HEADER + "state = torch.load('model.pt', map_location='cpu', weights_only=True)\n",
            options={"target_torch_version": (2, 4)},
        ),
        Invalid(
            "from torch import load\n\nstate = load(\n    'model.pt',\n    map_location='cpu',\n)\n",
            line=3,
            fixed="from torch import load\n\nstate = load(\n    'model.pt',\n    map_location='cpu',\n"
            "    weights_only=True,\n)\n",
            options={"target_torch_version": (1, 13)},
        ),
        Invalid(
            HEADER + "def load(path, **kwargs):\n"
            "    return torch.load(path, weights_only=False, **kwargs)\n",
            line=5,
            fixed=HEADER + "def load(path, **kwargs):\n"
            "    return torch.load(path, weights_only=True, **kwargs)\n",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # (call, message, fix, path key, statement): reported once every save is known
        self.pending: list[tuple[cst.Call, str, Fix, tuple | None, cst.CSTNode | None]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if self.record_save(node) or not self.context.is_call_to(node, *_LOADS):
            return
        name = dotted_name(node.func) or "torch.load"
        arg = argument(node, "weights_only")
        if arg is not None:
            if _is_false(arg.value):
                self._later(
                    node,
                    f"`{name}(..., weights_only=False)` unpickles arbitrary objects and can run "
                    "code from the file; load a state dict with `weights_only=True`",
                    Fix(((arg.value, cst.Name("True")),), "pass `weights_only=True`",
                        safe=False),
                )
            return
        version = tuple(self.context.options.get("target_torch_version") or (2, 6))
        if version >= (2, 6) or _has_double_star(node):
            return
        target = ".".join(str(p) for p in version)
        self._later(
            node,
            f"`{name}` without `weights_only` unpickles arbitrary objects on torch {target} "
            "and can run code from the file; pass `weights_only=True`",
            Fix(((node, _add_keyword(node, "weights_only", "True")),),
                "pass `weights_only=True`", safe=False),
        )

    def _later(self, node: cst.Call, message: str, fix: Fix) -> None:
        self.pending.append((node, message, fix, self.load_key(node),
                             self.context.current_statement))

    def leave_Module(self, original_node: cst.Module) -> None:
        for call, message, fix, key, statement in self.pending:
            module = self.pickled_module(key)
            if module is None:
                self.report(call, message, fix=fix, statement=statement)
                continue
            # the file holds a whole module: `weights_only=True` would make the load fail
            name = snippet(module)
            self.report(call, f"{message}; not fixed here: the file is written by "
                        f"`torch.save({name}, ...)`, a whole module that a weights-only load "
                        f"refuses: save `{name}.state_dict()` instead (ML506)",
                        statement=statement)


class PickledModuleLoad(_SavesModules):
    """`torch.load` of a file the same code wrote with `torch.save(model, ...)`: fails on 2.6.

    ## What it does
    Finds `torch.load(path)` where the same file also runs `torch.save(model, path)` with a
    whole module (as ML502 knows it) and the same path: the same string literal, or the same
    variable, attribute or expression (a plain variable only within one function, unless it
    is a module-level name in both places; an attribute such as `args.output` anywhere in the
    file, `self.path` within one class). It reports the load when it runs with
    `weights_only=True`: given explicitly, or by default from torch 2.6 (`target-torch-version`).
    A load with `weights_only=False` is ML501's business, and a file that allows classes with
    `torch.serialization.add_safe_globals`/`safe_globals` is not reported. The save and the
    load must be in one file: a save in `train.py` and a load in `predict.py` are not matched.

    ## Why is this bad?
    torch 2.6 made `weights_only=True` the default of `torch.load`, which unpickles only
    tensors and plain containers. A pickled module names its class, so the load stops with
    `UnpicklingError: Weights only load failed ... Unsupported global`. Passing
    `weights_only=False` would make it load by running arbitrary code from the file; saving the
    `state_dict()` and loading it into a freshly built model works on every version.

    ## Example
        torch.save(model, "model.pt")
        model = torch.load("model.pt")

    ## Use instead
        torch.save(model.state_dict(), "model.pt")
        model = Net()
        model.load_state_dict(torch.load("model.pt"))
    """

    code = "ML506"
    name = "load-of-pickled-module"
    needs = frozenset({"project", "semantic"})
    triggers = ("save",)
    valid = [
        HEADER + "model = nn.Linear(2, 2)\ntorch.save(model.state_dict(), 'model.pt')\n"
        "model.load_state_dict(torch.load('model.pt'))\n",
        # another file
        HEADER + "model = nn.Linear(2, 2)\ntorch.save(model, 'model.pt')\n"
        "state = torch.load('other.pt')\n",
        # explicitly trusted: ML501 reports it
        HEADER + "model = nn.Linear(2, 2)\ntorch.save(model, 'model.pt')\n"
        "model = torch.load('model.pt', weights_only=False)\n",
        # before 2.6 the default unpickles it
        Valid(HEADER + "model = nn.Linear(2, 2)\ntorch.save(model, 'model.pt')\n"
              "model = torch.load('model.pt')\n", {"target_torch_version": (2, 5)}),
        # the same parameter name in two functions names two files
        HEADER + "def export(path):\n    model = nn.Linear(2, 2)\n    torch.save(model, path)\n\n"
        "def resume(path):\n    return torch.load(path)\n",
        # classes allowed for the weights-only unpickler
        HEADER + "torch.serialization.add_safe_globals([nn.Linear])\nmodel = nn.Linear(2, 2)\n"
        "torch.save(model, 'model.pt')\nmodel = torch.load('model.pt')\n",
    ]
    invalid = [
        Invalid(HEADER + "model = nn.Linear(2, 2)\ntorch.save(model, 'model.pt')\n"
                "model = torch.load('model.pt')\n", line=6),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n"
            "def load(args):\n    return torch.load(args.output, map_location='cpu')\n\n"
            "def train(args):\n    net = Net()\n    torch.save(net, args.output)\n",
            line=9,
        ),
        Invalid(HEADER + "PATH = 'net.pt'\n\ndef load():\n"
                "    return torch.load(PATH, weights_only=True)\n\n"
                "def save():\n    torch.save(nn.Linear(2, 2), PATH)\n", line=7,
                options={"target_torch_version": (2, 4)}),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # (call, path key, its statement)
        self.loads: list[tuple[cst.Call, tuple, cst.CSTNode | None]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if self.record_save(node):
            return
        if not self.context.is_call_to(node, *_LOADS) or _has_double_star(node):
            return
        weights_only = argument(node, "weights_only")
        if weights_only is None:
            if tuple(self.context.options.get("target_torch_version") or (2, 6)) < (2, 6):
                return
        elif not (isinstance(weights_only.value, cst.Name) and weights_only.value.value == "True"):
            return
        key = self.load_key(node)
        if key is not None:
            self.loads.append((node, key, self.context.current_statement))

    def leave_Module(self, original_node: cst.Module) -> None:
        for call, key, statement in self.loads:
            module = self.pickled_module(key)
            if module is None:
                continue
            name = snippet(module)
            path = source_of(cast(cst.BaseExpression, _path_argument(call, "load")))  # kept: has one
            self.report(
                call,
                f"`torch.load({path})` reads the file that `torch.save({name}, ...)` writes "
                "from a whole module, which the weights-only unpickler (the default since "
                f"torch 2.6) refuses; save `{name}.state_dict()` and load it with "
                "`load_state_dict` into a freshly built model",
                statement=statement,
            )


def _names(expr: cst.BaseExpression) -> set[str]:
    """The bare names in an expression. Attributes are left out, roots included: `args.output`
    in two functions is taken to be one setting (the parsed command line or config that both
    receive), while a bare `path` parameter of two functions names two files."""
    found: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            return False

    visit(expr, Names())
    return found


def _binds_any(func: cst.FunctionDef, names: set[str]) -> bool:
    """Whether `func` has one of `names` as a parameter or assigns it."""
    params = func.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params,
                  *([params.star_arg] if isinstance(params.star_arg, cst.Param) else []),
                  *([params.star_kwarg] if params.star_kwarg is not None else [])):
        if param.name.value in names:
            return True
    found = False

    class Binds(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal found
            if isinstance(node.target, cst.Name) and node.target.value in names:
                found = True

        def visit_For(self, node: cst.For) -> None:
            nonlocal found
            if isinstance(node.target, cst.Name) and node.target.value in names:
                found = True

    visit(func.body, Binds())
    return found


def _load_state_dict_call(expr: cst.BaseExpression) -> cst.Call | None:
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "load_state_dict"
    ):
        return expr
    return None


class _KeyNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("missing_keys", "unexpected_keys"):
            self.found = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in ("missing_keys", "unexpected_keys"):
            self.found = True


def _compares_keys(func: cst.FunctionDef) -> bool:
    finder = _KeyNames()
    visit(func, finder)
    return finder.found


class UncheckedNonStrictLoad(StaticRule):
    """`load_state_dict(..., strict=False)` whose result is ignored.

    ## What it does
    Finds `load_state_dict` calls with `strict=False` used as a statement, so the returned
    missing and unexpected keys are never looked at. A function that works out
    `missing_keys`/`unexpected_keys` itself (comparing the checkpoint's keys with the model's)
    is not reported.

    ## Why is this bad?
    `strict=False` silently skips every key that does not match: a renamed layer, a
    `module.` prefix left by `DataParallel`, or a checkpoint of another model loads "fine" and
    leaves the model at its random initialisation. The result lists the keys that did not
    load; check it (or log it) so that a mismatch is seen.

    ## Example
        model.load_state_dict(state, strict=False)

    ## Use instead
        result = model.load_state_dict(state, strict=False)
        assert not result.missing_keys, result.missing_keys

    Off by default: on the training-code corpus (docs/precision.md) half of its findings were
    loads of a dict already intersected with `model.state_dict()` and logged as "transferred
    n/m items", where the mismatch is visible without the result.
    """

    code = "ML503"
    name = "unchecked-non-strict-load"
    needs = frozenset()
    default_enabled = False
    triggers = ("load_state_dict",)
    valid = [
        HEADER + "model = nn.Linear(2, 2)\nmodel.load_state_dict({})\n",
        HEADER + "model = nn.Linear(2, 2)\n"
        "result = model.load_state_dict({}, strict=False)\nprint(result.missing_keys)\n",
        HEADER + "model = nn.Linear(2, 2)\n"
        "missing, unexpected = model.load_state_dict({}, strict=False)\n",
        HEADER + "def load(model, state):\n"
        "    return model.load_state_dict(state, strict=False)\n",
        HEADER + "def load(model, state):\n"
        "    missing_keys = set(model.state_dict()) - set(state)\n"
        "    if missing_keys:\n        raise KeyError(missing_keys)\n"
        "    model.load_state_dict(state, strict=False)\n",
    ]
    invalid = [
        Invalid(HEADER + "model = nn.Linear(2, 2)\nmodel.load_state_dict({}, strict=False)\n",
                line=5),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def load(self, state):\n"
            "        self.load_state_dict(state, strict=False)\n",
            line=6,
        ),
    ]

    def visit_Expr(self, node: cst.Expr) -> None:
        call = _load_state_dict_call(node.value)
        if call is None:
            return
        strict = argument(call, "strict")
        if strict is None or not _is_false(strict.value):
            return
        func = self.context.current_function
        if func is not None and _compares_keys(func):
            # the function works out the missing/unexpected keys itself
            return
        owner = dotted_name(cast(cst.Attribute, call.func).value) or "the module"
        self.report(
            call,
            f"`{owner}.load_state_dict(..., strict=False)` ignores its result, so keys that did "
            "not load go unnoticed; check the returned `missing_keys` and `unexpected_keys`",
        )


class LoadResultAssigned(StaticRule):
    """`model = model.load_state_dict(...)` replaces the model with the load report.

    ## What it does
    Finds assignments of a `load_state_dict(...)` result to the very name or attribute the
    method was called on (`model = model.load_state_dict(state)`), or to a name that then holds
    the result instead of a freshly built module (`model = Net().load_state_dict(state)`).

    ## Why is this bad?
    `load_state_dict` loads in place and returns an `_IncompatibleKeys` named tuple, not the
    module: `model` is now a tuple of key lists, and the next `model(x)` fails with "object is
    not callable" — far from the line that caused it.

    ## Example
        model = model.load_state_dict(torch.load("model.pt", weights_only=True))

    ## Use instead
        model.load_state_dict(torch.load("model.pt", weights_only=True))
    """

    code = "ML504"
    name = "load-result-assigned"
    needs = frozenset({"project"})
    triggers = ("load_state_dict",)
    valid = [
        HEADER + "model = nn.Linear(2, 2)\nmodel.load_state_dict({})\n",
        HEADER + "model = nn.Linear(2, 2)\nresult = model.load_state_dict({})\n",
        HEADER + "class Net(nn.Module):\n    def load(self, other):\n"
        "        self.report = other.load_state_dict({})\n",
    ]
    invalid = [
        Invalid(HEADER + "model = nn.Linear(2, 2)\nmodel = model.load_state_dict({})\n", line=5),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def load(self, state):\n"
            "        self.body = self.body.load_state_dict(state)\n",
            line=6,
        ),
        Invalid(HEADER + "model = nn.Linear(2, 2).load_state_dict({})\n", line=4),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        call = _load_state_dict_call(node.value)
        if call is None:
            return
        receiver = cast(cst.Attribute, call.func).value  # as _load_state_dict_call checked
        owner = dotted_name(receiver)
        for target in node.targets:
            name = dotted_name(target.target)
            if name is None:
                continue
            if name == owner or self.context.builds_module(receiver):
                self.report(
                    node,
                    f"`{name}` is assigned the result of `load_state_dict`, a report of the "
                    "missing and unexpected keys, not the module; call `load_state_dict` "
                    "without assigning its result to the model",
                )
                return


# -- ML913 ------------------------------------------------------------------------------------

# a name that holds the device the code runs on (`device`, `self._device`, `args.gpu`,
# `local_rank`), not a flag (`use_cuda`) or a count (`n_gpu`)
_DEVICE_NAME = LazyPattern(r"^(?:\w+_)?device$|^(?:dev|gpu|gpu_id|local_rank)$")
_CUDA_AVAILABLE = frozenset({"torch.cuda.is_available"})
_CUDA_WORDS = LazyPattern(r"cuda|gpu", re.IGNORECASE)
# a path or a name that says the file holds a model's (or a training run's) state
_STATE_WORDS = LazyPattern(r"ckpt|checkpoint|weight|model|resume|state|snapshot|pretrain|net",
                          re.IGNORECASE)
_STATE_LOADERS = frozenset({"load_state_dict", "load_objects"})


def _parameters(func: cst.FunctionDef) -> list[str]:
    params = func.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def _other_branch(first: Site, second: Site) -> bool:
    """`first` is in the body of an `if` whose `else` (or `elif`) holds `second`."""
    for ancestor in first.ancestors:
        if isinstance(ancestor, cst.If) and ancestor.orelse is not None and any(
                a is ancestor.orelse for a in second.ancestors):
            return True
    return False


class LoadWithoutMapLocation(StaticRule):
    """`torch.load` without `map_location` in code that chooses its device.

    ## What it does
    Finds `torch.load(...)` without `map_location` in code that shows which device it runs
    on: a function that takes or sets `map_location` itself (and does not pass it on), or a
    device (`device`, `self.device`, `local_rank`, `args.gpu`); or a script or function that
    runs with or without CUDA (`torch.cuda.is_available()`, `.cuda()` under `if use_cuda:`).
    Beyond a `map_location` left unused, only loads of a model's weights or a training
    checkpoint count (the result goes to `load_state_dict`, or the path or the name it is
    assigned to says `checkpoint`, `weights`, `model`, `resume`, ...): data and feature files
    are usually saved from the CPU, and so are the files of a file that saves `x.cpu()`.
    Calls that pass `**kwargs` are left alone. A `torch.load` in code that never names a
    device is not reported: whether its checkpoints come from a GPU is not known. Weights that
    another file of the project saves from the CPU are not known either, and are reported
    (a `map_location` costs nothing there). The fix
    (unsafe: where the tensors land changes) is offered only where the function has a
    `map_location` to pass.

    ## Why is this bad?
    Without `map_location`, `torch.load` puts every tensor back on the device it was saved
    from. A checkpoint saved on a GPU fails to load on a machine without CUDA ("Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is False"), and under
    `DistributedDataParallel` every process loads it onto the GPU that saved it (`cuda:0`),
    which costs that GPU one copy of the checkpoint per process, or runs it out of memory.
    This is independent of `weights_only` (ML501).

    ## Example
        def load_checkpoint(model, path, device):
            model.load_state_dict(torch.load(path, weights_only=True))

    ## Use instead
        def load_checkpoint(model, path, device):
            model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    """

    code = "ML913"
    name = "torch-load-without-map-location"
    needs = frozenset({"scope"})
    severity = Severity.WARNING
    fix = "unsafe"
    fix_availability = "sometimes"
    triggers = ("load",)
    valid = [
        HEADER + "def load(model, path, device):\n"
        "    model.load_state_dict(torch.load(path, map_location=device))\n",
        HEADER + "def load(path, map_location=None):\n"
        "    return torch.load(path, map_location)\n",
        # nothing says which device the code runs on
        HEADER + "def load(model, path):\n    model.load_state_dict(torch.load(path))\n",
        HEADER + "state = torch.load('model.pt', weights_only=True)\n",
        # the caller decides
        HEADER + "def load(path, device, **kwargs):\n    return torch.load(path, **kwargs)\n",
        # the load runs only with CUDA; without, it maps to the CPU
        HEADER + "use_cuda = True\nmodel = nn.Linear(2, 2)\nif use_cuda:\n"
        "    model.load_state_dict(torch.load('w.pth'))\n    model = model.cuda()\nelse:\n"
        "    model.load_state_dict(torch.load('w.pth', map_location='cpu'))\n",
        # data, not a model's state
        HEADER + "def knn(device):\n    feats = torch.load('train_features.pt')\n"
        "    return feats.to(device)\n",
        # the file saves its tensors from the CPU
        HEADER + "def dump(feats, path):\n    torch.save(feats.cpu(), path)\n\n"
        "def restore(path, device):\n    return torch.load(path).to(device)\n",
        # the file saves its tensors from the CPU
        HEADER + "def save(net, path):\n    state = {}\n    for k, v in net.state_dict().items():\n        state[k] = v.cpu()\n"
        "    torch.save(state, path)\n\n"
        "def load(net, path, device):\n    net.load_state_dict(torch.load(path))\n",
        # a GPU-only path: a TensorRT engine's weights
        HEADER + "def predictor(model, trt_file, device):\n    if trt_file is not None:\n"
        "        trt = TRTModule()\n        trt.load_state_dict(torch.load(trt_file))\n"
        "        model(torch.ones(1, 3).cuda())\n",
        # the author chose per branch
        HEADER + "def resume(args, model):\n    if args.gpu is None:\n"
        "        ckpt = torch.load(args.resume)\n    else:\n"
        "        ckpt = torch.load(args.resume, map_location=f'cuda:{args.gpu}')\n"
        "    model.load_state_dict(ckpt['state_dict'])\n",
        # a flag or a count is not a device
        HEADER + "def load(path, use_gpu, n_gpu):\n    return torch.load(path)\n",
        # always on the GPU: the checkpoint goes back where it was saved
        HEADER + "net = nn.Linear(2, 2)\nnet.load_state_dict(torch.load('net.pth'))\n"
        "net.cuda()\nfor i, x in enumerate(batches):\n    if i % 10 == 0:\n"
        "        print(net(x.cuda()))\n",
    ]
    invalid = [
        Invalid(HEADER + "def pt_load(path, map_location=None):\n"
                "    with open(path, 'rb') as f:\n"
                "        out = torch.load(f)\n"
                "    return out\n", line=6,
                fixed=HEADER + "def pt_load(path, map_location=None):\n"
                "    with open(path, 'rb') as f:\n"
                "        out = torch.load(f, map_location=map_location)\n"
                "    return out\n"),
        Invalid(HEADER + "def train(hyp, opt, device):\n"
                "    run_id = torch.load(opt.weights).get('wandb_id')\n", line=5),
        Invalid(HEADER + "class Trainer:\n"
                "    def __init__(self, model, device=torch.device('cpu')):\n"
                "        self.model = model\n        self.device = device\n\n"
                "    def load_checkpoint(self, path):\n"
                "        state = torch.load(path)\n"
                "        self.model.load_state_dict(state['model'])\n", line=10),
        Invalid(HEADER + "use_cuda = True\nmodel = nn.Linear(2, 2)\n"
                "model.load_state_dict(torch.load('weights.pth'))\n"
                "if use_cuda:\n    model = model.cuda()\n", line=6),
        Invalid(HEADER + "cuda = torch.cuda.is_available()\nnet = nn.Linear(2, 2)\n"
                "net.load_state_dict(torch.load('net.pth'))\n", line=6),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        if not context.is_call_to(node, *_LOADS) or _has_double_star(node):
            return
        if argument(node, "map_location", 1) is not None:
            return
        func = context.current_function
        if func is not None:
            names = _parameters(func) + [a.target for a in scope_of(context, func).assignments]
            if "map_location" in names:
                self.report(
                    node,
                    f"`{func.name.value}` has a `map_location` but does not pass it to "
                    "`torch.load`, which puts every tensor back on the device it was saved "
                    "from; pass `map_location=map_location`",
                    fix=Fix(((node, _add_keyword(node, "map_location", "map_location")),),
                            "pass `map_location=map_location`", safe=False),
                )
                return
        if not self._model_state(func, node) or self._saves_on_cpu() or (
                self._maps_elsewhere(func, node)):
            return
        device = self._device_name(func)
        if device is not None and not self._needs_cuda_here(func, node):
            where = f"this code runs on `{device}`"
            suggestion = f"pass `map_location={device}` (or `\"cpu\"`)"
        elif self._runs_without_cuda(func) and not self._under_cuda_test(func, node) and (
                not self._needs_cuda_here(func, node)):
            where = "this code runs with or without CUDA"
            suggestion = "pass `map_location=\"cpu\"` (or the device the code chose)"
        else:
            return
        self.report(
            node,
            f"`torch.load` without `map_location` puts every tensor back on the device it was "
            f"saved from, but {where}: a checkpoint saved on a GPU fails to load without CUDA, "
            f"and every process of a multi-GPU run loads it onto the GPU that saved it; "
            f"{suggestion}",
        )

    def _device_name(self, func: cst.FunctionDef | None) -> str | None:
        """The name of the device the enclosing function takes or sets, or of its class's
        `self.device`."""
        context = self.context
        if func is not None:
            names = _parameters(func) + [a.target for a in scope_of(context, func).assignments]
            for name in names:
                if _DEVICE_NAME.match(name.rsplit(".", 1)[-1]) and (
                        "." not in name or name.startswith("args.")):
                    return name
            cls = context.current_class
            params = _parameters(func)
            if cls is not None and params and params[0] == "self":
                for attr in context.class_info(cls).assignments:
                    if _DEVICE_NAME.match(attr):
                        return f"self.{attr}"
        return None

    def _model_state(self, func: cst.FunctionDef | None, call: cst.Call) -> bool:
        """What is loaded is a model's weights or a training checkpoint (tensors saved from
        where the model ran), not data: it goes to `load_state_dict`, or the path or the
        name it is assigned to says so (`checkpoint`, `weights`, `resume`, ...)."""
        context = self.context
        if call.args and _STATE_WORDS.search(source_of(call.args[0].value)):
            return True
        root = func if func is not None else context.module_node
        if root is None:
            return False
        scope = scope_of(context, root)
        targets = {a.target for a in scope.assignments if a.value is call}
        if any(_STATE_WORDS.search(target) for target in targets):
            return True
        for site in scope.calls:
            method = site.node.func
            if not (isinstance(method, cst.Attribute) and method.attr.value in _STATE_LOADERS):
                continue
            for arg in site.node.args:
                if arg.value is call or names_in(arg.value) & targets:
                    return True
        return False

    def _saves_on_cpu(self) -> bool:
        """The file saves what it loads from the CPU: `torch.save(x.cpu(), path)`, or the
        object saved is filled with `.cpu()` values (KAIR's `state_dict[key] = param.cpu()`)."""
        if self._cpu_saves is None:
            module = self.context.module_node
            self._cpu_saves = module is not None and any(
                self._saves_from_cpu(root) for root in code_nodes(module)
                if isinstance(root, (cst.Module, cst.FunctionDef)))
        return self._cpu_saves

    def _saves_from_cpu(self, root: cst.CSTNode) -> bool:
        saved: set[str] = set()
        for site in scope_of(self.context, root).calls:
            call = site.node
            if self.context.is_call_to(call, *_SAVES) and call.args:
                if ".cpu()" in source_of(call.args[0].value):
                    return True
                saved |= names_in(call.args[0].value)
        if not saved:
            return False
        body = root.body if isinstance(root, cst.FunctionDef) else root
        for node in code_nodes(body, stop=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if isinstance(node, cst.Assign) and ".cpu()" in source_of(node.value) and any(
                    names_in(target.target) & saved for target in node.targets):
                return True
        return False

    _cpu_saves: bool | None = None

    def _maps_elsewhere(self, func: cst.FunctionDef | None, call: cst.Call) -> bool:
        """A `torch.load` in the other branch of an `if` around this one passes
        `map_location`: the author chose where each loads (`if args.gpu is None:
        torch.load(path) else: torch.load(path, map_location=loc)`)."""
        root = func if func is not None else self.context.module_node
        if root is None:
            return False
        scope = scope_of(self.context, root)
        here = scope.site(call)
        if here is None:
            return False
        for site in scope.calls:
            if (site.node is not call and self.context.is_call_to(site.node, *_LOADS)
                    and argument(site.node, "map_location", 1) is not None
                    and (_other_branch(here, site) or _other_branch(site, here))):
                return True
        return False

    def _needs_cuda_here(self, func: cst.FunctionDef | None, call: cst.Call) -> bool:
        """The load's own block moves something with `.cuda()` unconditionally (a TensorRT
        engine, a GPU-only path): the checkpoint belongs on the GPU there."""
        root = func if func is not None else self.context.module_node
        if root is None:
            return False
        scope = scope_of(self.context, root)
        site = scope.site(call)
        if site is None:
            return False
        block = site.ancestors
        for other in scope.calls:
            method = other.node.func
            if (isinstance(method, cst.Attribute) and method.attr.value == "cuda"
                    and self.context.qualified_name(method) is None
                    and len(other.ancestors) == len(block)
                    and all(a is b for a, b in zip(other.ancestors, block, strict=True))):
                return True
        return False

    def _under_cuda_test(self, func: cst.FunctionDef | None, call: cst.Call) -> bool:
        """The load runs only when CUDA is there: `if use_cuda:`, `if torch.cuda.is_available():`."""
        root = func if func is not None else self.context.module_node
        site = scope_of(self.context, root).site(call) if root is not None else None
        return site is not None and any(
            isinstance(a, cst.If) and _CUDA_WORDS.search(source_of(a.test))
            for a in site.ancestors)

    def _runs_without_cuda(self, func: cst.FunctionDef | None) -> bool:
        """The function (or, at top level, the script) asks whether CUDA is there, or moves
        something with `.cuda()` only under a condition on CUDA (`if use_cuda:`)."""
        context = self.context
        root = func if func is not None else context.module_node
        if root is None:
            return False
        scope = scope_of(context, root)
        for site in scope.calls:
            if context.call_name(site.node) in _CUDA_AVAILABLE:
                return True
            call_func = site.node.func
            if (isinstance(call_func, cst.Attribute) and call_func.attr.value == "cuda"
                    and context.qualified_name(call_func) is None
                    and any(isinstance(a, cst.If) and _CUDA_WORDS.search(source_of(a.test))
                            for a in site.ancestors)):
                return True
        return False


@hookimpl
def modellint_add_rules():
    return [UnsafeTorchLoad, WholeModelSave, PickledModuleLoad, UncheckedNonStrictLoad,
            LoadResultAssigned, LoadWithoutMapLocation]
