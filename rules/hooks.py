"""Hooks (ML4xx): backward hooks that changed meaning, hooks that keep the graph alive, handles
that are lost, and hooks registered again on every forward call."""

from __future__ import annotations

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    Fix,
    Invalid,
    LazyPattern,
    Severity,
    StaticRule,
    code_nodes,
    dotted_name,
    visit,
)
from modellint.rules._loops import function_without_grad, is_no_grad_item

HEADER = "import torch\nimport torch.nn as nn\n\n"

_HOOK_METHOD = LazyPattern(r"^_?register_\w*hook$")
# hooks that see activations (and so can keep the autograd graph alive)
_FORWARD_HOOKS = frozenset(
    {"register_forward_hook", "register_forward_pre_hook", "register_module_forward_hook",
     "register_module_forward_pre_hook"}
)
# torch's hook registration methods (modules, tensors/parameters, optimizers); other
# `register_*_hook` methods belong to other libraries or to the user's own classes
_TORCH_HOOKS = frozenset(
    {"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
     "register_full_backward_pre_hook", "register_backward_hook", "register_state_dict_pre_hook",
     "register_state_dict_post_hook", "register_load_state_dict_pre_hook",
     "register_load_state_dict_post_hook", "register_post_accumulate_grad_hook",
     "register_step_pre_hook", "register_step_post_hook", "register_module_forward_hook",
     "register_module_forward_pre_hook", "register_module_full_backward_hook",
     "register_module_full_backward_pre_hook", "register_module_backward_hook"}
)


def _hook_method(context, call: cst.Call) -> str | None:
    """`register_forward_hook` for `layer.register_forward_hook(fn)` (and the module-global
    `torch.nn.modules.module.register_module_forward_hook(fn)`), else None."""
    func = call.func
    if isinstance(func, cst.Attribute):
        name = func.attr.value
        return name if _HOOK_METHOD.match(name) else None
    if isinstance(func, cst.Name):
        qualified = context.qualified_name(func)
        if qualified and qualified.startswith("torch.") and _HOOK_METHOD.match(func.value):
            return func.value
    return None


def _describe(call: cst.Call) -> str:
    text = dotted_name(call.func)
    return f"`{text}(...)`" if text else "the hook registration"


class DeprecatedBackwardHook(StaticRule):
    """`register_backward_hook` is deprecated and reports the wrong gradients.

    ## What it does
    Finds calls of `Module.register_backward_hook`.

    ## Why is this bad?
    The old backward hook is attached to the last autograd node of the module's forward, not to
    the module: for a module made of several operations, `grad_input` is the gradient of that
    last operation's inputs, not of the module's inputs. PyTorch deprecates it and warns.
    `register_full_backward_hook` gives the gradients with respect to the module's inputs and
    outputs. The fix is unsafe because the two differ for modules with several autograd nodes
    and for modules whose outputs are modified in place.

    ## Example
        handle = layer.register_backward_hook(print_grads)

    ## Use instead
        handle = layer.register_full_backward_hook(print_grads)
    """

    code = "ML401"
    name = "deprecated-backward-hook"
    needs = frozenset()
    fix = "unsafe"
    triggers = ("register_backward_hook",)
    valid = [
        HEADER + "layer = nn.Linear(2, 2)\nh = layer.register_full_backward_hook(print)\n",
        HEADER + "x = torch.ones(2, requires_grad=True)\nh = x.register_hook(print)\n",
        HEADER + "def register_backward_hook(fn):\n    return fn\n",
    ]
    invalid = [
        Invalid(
            HEADER + "layer = nn.Linear(2, 2)\nh = layer.register_backward_hook(print)\n",
            line=5,
            fixed=HEADER
            + "layer = nn.Linear(2, 2)\nh = layer.register_full_backward_hook(print)\n",
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n"
            "        self.fc.register_backward_hook(self._grad)\n",
            line=8,
            fixed=HEADER
            + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n"
            "        self.fc.register_full_backward_hook(self._grad)\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "register_backward_hook":
            return
        fix = Fix(
            ((func.attr, func.attr.with_changes(value="register_full_backward_hook")),),
            "use `register_full_backward_hook`",
            safe=False,
        )
        owner = dotted_name(func.value) or "the module"
        self.report(
            func.attr,
            f"`{owner}.register_backward_hook` is deprecated and reports the gradients of the "
            "module's last operation; use `register_full_backward_hook`",
            fix=fix,
        )


# -- ML402 ---------------------------------------------------------------------------------

# methods whose result no longer holds the autograd graph
_DETACHING = frozenset(
    {"detach", "item", "tolist", "numpy", "size", "dim", "numel", "nelement", "ndimension",
     "stride", "data_ptr", "element_size", "is_contiguous", "norm_", "__len__"}
)
# attributes that are not tensors that hold a graph
_PLAIN_ATTRIBUTES = frozenset(
    {"data", "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "grad_fn",
     "layout", "names", "is_leaf"}
)
_STORING_METHODS = frozenset({"append", "extend", "insert", "add", "appendleft", "put"})
# builtins that keep their argument's tensors (a list of tensors is still tensors)
_KEEPING_BUILTINS = frozenset({"list", "tuple", "dict"})


class _HookBody:
    """Which expressions of a hook's body still hold its inputs/outputs with their graph."""

    def __init__(self, context, tracked: set[str]) -> None:
        self.context = context
        self.tracked = set(tracked)

    def keeps(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.tracked
        if isinstance(expr, cst.Subscript):
            return self.keeps(expr.value)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _PLAIN_ATTRIBUTES:
                return False
            return self.keeps(expr.value)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute):
                if func.attr.value in _DETACHING:
                    return False
                if self.keeps(func.value):
                    return True
            qualified = self.context.qualified_name(func)
            keeping = (qualified is not None and qualified.startswith("torch.")) or (
                isinstance(func, cst.Name) and func.value in _KEEPING_BUILTINS
                and qualified is None
            )
            return keeping and any(self.keeps(arg.value) for arg in expr.args)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return any(
                self.keeps(el.value) for el in expr.elements
            )
        if isinstance(expr, cst.Dict):
            return any(
                isinstance(el, cst.DictElement) and self.keeps(el.value)
                or isinstance(el, cst.StarredDictElement) and self.keeps(el.value)
                for el in expr.elements
            )
        if isinstance(expr, cst.BinaryOperation):
            return self.keeps(expr.left) or self.keeps(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.keeps(expr.expression)
        if isinstance(expr, cst.IfExp):
            return self.keeps(expr.body) or self.keeps(expr.orelse)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._comp_keeps(expr.for_in, expr.elt)
        if isinstance(expr, cst.DictComp):
            return self._comp_keeps(expr.for_in, expr.value)
        return False

    def _comp_keeps(self, for_in: cst.CompFor, elt: cst.BaseExpression) -> bool:
        added: list[str] = []
        comp: cst.CompFor | None = for_in
        while comp is not None:
            if self.keeps(comp.iter):
                for name in _names(comp.target):
                    if name not in self.tracked:
                        self.tracked.add(name)
                        added.append(name)
            comp = comp.inner_for_in
        try:
            return self.keeps(elt)
        finally:
            self.tracked.difference_update(added)


def _names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[str] = []
        for el in target.elements:
            out.extend(_names(el.value))
        return out
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return []


def _root_name(expr: cst.BaseExpression) -> str | None:
    """`self` for `self.outputs[k].x`, `feats` for `feats.setdefault(k, [])`."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        else:
            return None


def _params(params: cst.Parameters) -> list[str]:
    return [p.name.value for p in (*params.posonly_params, *params.params)]


class _StoreFinder(cst.CSTVisitor):
    """Stores of graph-holding values in a hook body: `xs.append(out)`, `d[k] = out`,
    `obj.attr = out`, and assignments to names declared `global`/`nonlocal`."""

    def __init__(self, body: _HookBody, outer_names: set[str]) -> None:
        self.body = body
        self.outer_names = outer_names
        self.stores: list[tuple[cst.CSTNode, cst.BaseExpression]] = []
        # names bound inside the hook: a container reached through one of them lives only as
        # long as the call (or is something we cannot follow), so storing into it is not
        # reported
        self.local_names: set[str] = set()

    def _long_lived(self, container: cst.BaseExpression) -> bool:
        root = _root_name(container)
        return root is not None and (root in self.outer_names or root not in self.local_names)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_For(self, node: cst.For) -> None:
        self.local_names.update(_names(node.target))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self.local_names.update(_names(node.asname.name))

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Global(self, node: cst.Global) -> None:
        self.outer_names.update(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.outer_names.update(n.name.value for n in node.names)

    def _assigned(self, targets: list[cst.BaseExpression], value, node) -> None:
        if value is None:
            return
        keeps = self.body.keeps(value)
        for target in targets:
            if isinstance(target, (cst.Subscript, cst.Attribute)):
                if keeps and self._long_lived(target.value):
                    self.stores.append((node, value))
            elif isinstance(target, cst.Name):
                if target.value in self.outer_names:
                    if keeps:
                        self.stores.append((node, value))
                    continue
                self.local_names.add(target.value)
                if keeps:
                    self.body.tracked.add(target.value)
                else:
                    self.body.tracked.discard(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assigned([t.target for t in node.targets], node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assigned([node.target], node.value, node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        target = node.target
        if (
            isinstance(target, (cst.Subscript, cst.Attribute)) and self._long_lived(target.value)
        ) or (isinstance(target, cst.Name) and target.value in self.outer_names):
            if self.body.keeps(node.value):
                self.stores.append((node, node.value))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _STORING_METHODS:
            return
        if not self._long_lived(func.value):
            return
        for arg in node.args:
            if arg.keyword is None and self.body.keeps(arg.value):
                self.stores.append((node, arg.value))
                return


class HookKeepsGraph(StaticRule):
    """A forward hook stores a module's output (or input) without `.detach()`.

    ## What it does
    Finds forward hooks and forward pre-hooks (functions, lambdas, functions returned by a
    hook factory, or objects whose class defines `__call__(self, module, inputs, output)`)
    registered with `register_forward_hook`/`register_forward_pre_hook` that put their output
    or inputs, or parts of them, into a list, a dict, an attribute or a global without
    `.detach()` (`.item()` and `.tolist()` are fine too). `.cpu()` and `.clone()` alone are
    not enough: they are autograd operations and keep the graph. Only containers that outlive
    the call are considered: `self`, the module, closure variables and globals; a collector
    the hook looks up in its own body (`out = registry.get(); out.append(output)`) is not
    reported, since it is usually handed back to a caller that trains through it.

    ## Why is this bad?
    A stored activation keeps its whole autograd graph, and with it every intermediate tensor
    of the forward pass, alive for as long as it is stored. Feature-extraction loops run out of
    memory after a few batches, and a later `backward()` through a stored tensor raises
    "Trying to backward through the graph a second time". Under `torch.no_grad()` there is no
    graph: hooks registered under `no_grad`/`inference_mode` (a `with` block or a decorated
    function) are not reported, and if the model only ever runs that way elsewhere, silence the
    finding with `# noqa: ML402`. Nor is a hook whose store is read where the file calls
    `backward()` (a feature-matching or style loss built from the stored outputs): there the
    graph is the point.

    ## Example
        class SaveOutput:
            def __init__(self):
                self.outputs = []

            def __call__(self, module, module_in, module_out):
                self.outputs.append(module_out)

    ## Use instead
        class SaveOutput:
            def __init__(self):
                self.outputs = []

            def __call__(self, module, module_in, module_out):
                self.outputs.append(module_out.detach())

    ## What it does not see
    A hook that passes its output through a callable it does not know before storing it
    (`activation = self.reshape_transform(activation)` under an `if`, then
    `self.activations.append(activation.cpu())`): the result may be a new tensor, so it is
    not reported (c-grad-cam-hooks-keep-graph in bench/bugs).
    """

    code = "ML402"
    name = "hook-keeps-graph"
    needs = frozenset()
    triggers = ("register_",)
    valid = [
        HEADER + "feats = []\n\ndef hook(module, inputs, output):\n"
        "    feats.append(output.detach())\n\n"
        "h = nn.Linear(2, 2).register_forward_hook(hook)\n",
        HEADER + "feats = []\n\ndef hook(module, inputs, output):\n"
        "    feats.append(output.detach().cpu())\n\n"
        "h = nn.Linear(2, 2).register_forward_hook(hook)\n",
        HEADER + "stats = {}\n\ndef hook(module, inputs, output):\n"
        "    stats['mean'] = output.mean().item()\n    stats['shape'] = output.shape\n"
        "    stats['values'] = output.tolist()\n\n"
        "h = nn.Linear(2, 2).register_forward_hook(hook)\n",
        # printing or returning is not storing
        HEADER + "def hook(module, inputs, output):\n    print(output.shape)\n"
        "    return output * 2\n\nh = nn.Linear(2, 2).register_forward_hook(hook)\n",
        # a function that is never registered as a hook
        HEADER + "feats = []\n\ndef collect(module, inputs, output):\n"
        "    feats.append(output)\n",
        # backward hooks receive gradients, which hold no graph
        HEADER + "grads = []\n\ndef hook(module, grad_in, grad_out):\n"
        "    grads.append(grad_out)\n\n"
        "h = nn.Linear(2, 2).register_full_backward_hook(hook)\n",
        HEADER + "class SaveOutput:\n    def __init__(self):\n        self.outputs = []\n\n"
        "    def __call__(self, module, module_in, module_out):\n"
        "        self.outputs.append(module_out.detach())\n\n"
        "save_output = SaveOutput()\n"
        "h = nn.Conv2d(3, 3, 3).register_forward_hook(save_output)\n",
        HEADER + "acts = {}\n\ndef get_activation(name):\n"
        "    def hook(model, inputs, output):\n        acts[name] = output.detach()\n"
        "    return hook\n\nh = nn.Linear(2, 2).register_forward_hook(get_activation('fc'))\n",
        # registered only under no_grad: no graph is recorded
        HEADER + "feats = []\n\ndef hook(module, inputs, output):\n    feats.append(output)\n\n"
        "@torch.no_grad()\ndef extract(model, x):\n"
        "    handle = model.register_forward_hook(hook)\n    model(x)\n    handle.remove()\n",
        HEADER + "feats = []\nmodel = nn.Linear(2, 2)\nwith torch.no_grad():\n"
        "    handle = model.register_forward_hook(lambda m, i, o: feats.append(o))\n"
        "    model(torch.ones(1, 2))\n    handle.remove()\n",
        # the stored output is the objective being backpropagated (a perceptual loss)
        HEADER + "class Perceptual:\n    def __init__(self, layer):\n        self.features = []\n"
        "        layer.register_forward_hook(self.save)\n\n"
        "    def save(self, module, inputs, output):\n        self.features.append(output)\n\n"
        "def step(model, perceptual, x, target, optimizer):\n    perceptual.features.clear()\n"
        "    model(x)\n    loss = sum(((f - target) ** 2).mean() for f in perceptual.features)\n"
        "    loss.backward()\n    optimizer.step()\n",
        # a per-call collector looked up inside the hook
        HEADER + "import contextvars\n\ncollector = contextvars.ContextVar('c', default=None)\n\n"
        "def hook(module, inputs, output):\n    outputs = collector.get()\n"
        "    if outputs is not None:\n        outputs.append(output)\n\n"
        "h = nn.Linear(2, 2).register_forward_hook(hook)\n",
    ]
    invalid = [
        # the hooks tutorial's SaveOutput
        Invalid(
            HEADER + "class SaveOutput:\n    def __init__(self):\n        self.outputs = []\n\n"
            "    def __call__(self, module, module_in, module_out):\n"
            "        self.outputs.append(module_out)\n\n"
            "    def clear(self):\n        self.outputs = []\n\n"
            "save_output = SaveOutput()\nhook_handles = []\n"
            "for layer in nn.Sequential(nn.Conv2d(3, 3, 3)).modules():\n"
            "    if isinstance(layer, nn.Conv2d):\n"
            "        handle = layer.register_forward_hook(save_output)\n"
            "        hook_handles.append(handle)\n",
            line=9,
        ),
        # a script that trains, but never reads the stored outputs where it backpropagates
        Invalid(
            HEADER + "feats = []\n\ndef hook(module, inputs, output):\n    feats.append(output)\n\n"
            "model = nn.Linear(2, 2)\nmodel.register_forward_hook(hook)\n"
            "for x in loader:\n    model(x).sum().backward()\n",
            line=7,
        ),
        # `.cpu()` alone keeps the graph
        Invalid(
            HEADER + "feats = []\n\ndef hook(module, inputs, output):\n"
            "    feats.append(output.cpu())\n\n"
            "h = nn.Linear(2, 2).register_forward_hook(hook)\n",
            line=7,
        ),
        Invalid(
            HEADER + "acts = {}\n\ndef get_activation(name):\n"
            "    def hook(model, inputs, output):\n        acts[name] = output\n"
            "    return hook\n\nh = nn.Linear(2, 2).register_forward_hook(get_activation('fc'))\n",
            line=8,
        ),
        Invalid(
            HEADER + "feats = []\nlayer = nn.Linear(2, 2)\n"
            "h = layer.register_forward_hook(lambda m, i, o: feats.append(o))\n",
            line=6,
        ),
        Invalid(
            HEADER + "class Probe(nn.Module):\n    def __init__(self, body):\n"
            "        super().__init__()\n        self.body = body\n"
            "        self.h = body.register_forward_pre_hook(self._save)\n\n"
            "    def _save(self, module, inputs):\n        self.last_input = inputs[0]\n",
            line=11,
        ),
        Invalid(
            HEADER + "last = None\n\ndef hook(module, inputs, output):\n    global last\n"
            "    out = output[0]\n    last = out.clone()\n\n"
            "h = nn.Linear(2, 2).register_forward_hook(hook)\n",
            line=9,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.instances: dict[str, str] = {}
        self.registrations: list[tuple[cst.BaseExpression, cst.ClassDef | None]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.setdefault(node.name.value, []).append(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes[node.name.value] = node

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self.instances[target.target.value] = value.func.value

    def visit_Call(self, node: cst.Call) -> None:
        method = _hook_method(self.context, node)
        if method not in _FORWARD_HOOKS or not node.args:
            return
        hook = node.args[0]
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "hook":
                hook = arg
        if hook.keyword is not None and hook.keyword.value != "hook":
            return
        if self._registered_without_grad():
            return  # the hook lives only while no graph is recorded
        self.registrations.append((hook.value, self.context.current_class))

    def _registered_without_grad(self) -> bool:
        """The registration runs under `no_grad`/`inference_mode` (a `with` block or a
        decorated function)."""
        context = self.context
        return any(
            isinstance(s, cst.With) and any(is_no_grad_item(context, i.item) for i in s.items)
            for s in context.statement_stack
        ) or any(function_without_grad(context, f) for f in context.function_stack)

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self.registrations:
            return
        seen: set[int] = set()
        self._backpropagated = _names_read_where_backpropagated(original_node)
        for expr, cls in self.registrations:
            for params, body, label in self._hooks(expr, cls, depth=0):
                key = id(body)
                if key in seen:
                    continue
                seen.add(key)
                self._check(params, body, label)

    # -- what a registered expression runs ----------------------------------------------------
    def _hooks(self, expr, cls, depth):
        if depth > 3:
            return
        if isinstance(expr, cst.Lambda):
            yield _params(expr.params), expr.body, "the lambda hook"
            return
        if isinstance(expr, cst.Call):
            func = expr.func
            qualified = self.context.qualified_name(func)
            if qualified in ("functools.partial",) and expr.args:
                # partial(fn, a, b): the bound positional arguments come first
                bound = sum(1 for a in expr.args[1:] if a.keyword is None and not a.star)
                for params, body, label in self._hooks(expr.args[0].value, cls, depth + 1):
                    yield params[bound:], body, label
                return
            if isinstance(func, cst.Name) and func.value in self.classes:
                yield from self._callable_class(self.classes[func.value])
                return
            if isinstance(func, cst.Name):
                # a hook factory: `get_activation("fc")` returning an inner function
                for factory in self.functions.get(func.value, []):
                    for inner in _returned_functions(factory):
                        yield _params(inner.params), inner.body, f"the hook `{inner.name.value}`"
            return
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in self.instances and self.instances[name] in self.classes:
                yield from self._callable_class(self.classes[self.instances[name]])
                return
            for func in self.functions.get(name, []):
                if _is_method(func, self.classes):
                    continue
                yield _params(func.params), func.body, f"the hook `{name}`"
            return
        if (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
            and cls is not None
        ):
            for stmt in cls.body.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value == expr.attr.value:
                    if _is_static(stmt):
                        yield _params(stmt.params), stmt.body, f"the hook `{stmt.name.value}`"
                    else:
                        yield (_params(stmt.params)[1:], stmt.body,
                               f"the hook `self.{stmt.name.value}`")

    def _callable_class(self, cls: cst.ClassDef):
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__call__":
                yield (_params(stmt.params)[1:], stmt.body,
                       f"the hook `{cls.name.value}.__call__`")

    def _check(self, params: list[str], body, label: str) -> None:
        # the first parameter is the module; the others are its inputs (and output)
        tracked = set(params[1:])
        if not tracked:
            return
        finder = _StoreFinder(_HookBody(self.context, tracked), set())
        visit(body, finder)
        for node, value in finder.stores:
            if _container_name(node) in self._backpropagated:
                continue  # the stored output is the objective: its graph is wanted
            stored = dotted_name(value)
            what = f"`{stored}`" if stored else "its inputs or output"
            self.report(
                node,
                f"{label} stores {what} with the autograd graph, which keeps the activations "
                "of the whole forward pass alive; store a `.detach()`ed copy instead",
            )


def _container_name(store: cst.CSTNode) -> str | None:
    """The name a store writes into: `feats` for `feats.append(o)` and `feats[k] = o`,
    `.outputs` for `self.outputs.append(o)` and `self.outputs = o`."""
    if isinstance(store, cst.Call) and isinstance(store.func, cst.Attribute):
        target = store.func.value
    elif isinstance(store, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        target = store.targets[0].target if isinstance(store, cst.Assign) else store.target
    else:
        return None
    while isinstance(target, cst.Subscript):
        target = target.value
    if isinstance(target, cst.Attribute):
        return "." + target.attr.value
    return target.value if isinstance(target, cst.Name) else None


def _backpropagates(node: cst.CSTNode) -> bool:
    return any(
        isinstance(each, cst.Call)
        and (dotted_name(each.func) or "").endswith((".backward", "autograd.grad",
                                                      "autograd.backward"))
        for each in code_nodes(node))


def _names_read_where_backpropagated(module: cst.Module) -> set[str]:
    """Names and attribute names (`.name`) read in a function (or the module's top-level code) that
    calls `backward()` or `torch.autograd.grad`: a hook storing into one of them feeds a loss
    (a perceptual or feature-matching loss, a style loss), whose graph must be kept."""
    names: set[str] = set()
    top_level = [s for s in module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))]
    units: list[cst.CSTNode] = [cst.Module(body=top_level)]
    units += [node for node in code_nodes(module) if isinstance(node, cst.FunctionDef)]
    for unit in units:
        if _backpropagates(unit):
            # `feats = []` creates the container; it reads nothing
            for node in code_nodes(unit, prune=(cst.AssignTarget,)):
                if isinstance(node, cst.Name):
                    names.add(node.value)
                elif isinstance(node, cst.Attribute):
                    names.add("." + node.attr.value)
    return names


def _is_static(func: cst.FunctionDef) -> bool:
    return any(dotted_name(d.decorator) == "staticmethod" for d in func.decorators)


def _is_method(func: cst.FunctionDef, classes: dict[str, cst.ClassDef]) -> bool:
    return any(func in cls.body.body for cls in classes.values())


def _returned_functions(factory: cst.FunctionDef) -> list[cst.FunctionDef]:
    inner = {
        stmt.name.value: stmt for stmt in factory.body.body if isinstance(stmt, cst.FunctionDef)
    }
    found = []
    for stmt in factory.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if (
                    isinstance(small, cst.Return)
                    and isinstance(small.value, cst.Name)
                    and small.value.value in inner
                ):
                    found.append(inner[small.value.value])
    return found


class HookHandleDiscarded(StaticRule):
    """The handle returned by `register_*_hook` is thrown away.

    ## What it does
    Finds torch hook registrations (`register_forward_hook`, `register_forward_pre_hook`,
    `register_full_backward_hook`, state-dict, parameter and optimizer hooks) used as a
    statement, so the returned `RemovableHandle` is lost. Tensor hooks (`x.register_hook(fn)`)
    are not reported: they go away with the tensor; neither are private
    `_register_*` calls nor other libraries' `register_*_hook` methods.

    ## Why is this bad?
    Without the handle the hook can never be removed: it keeps running (and keeps whatever it
    captured alive) for the life of the module, and registering it again — in a second
    evaluation run, say — stacks a second copy. Off by default: in libraries most discarded
    handles belong to hooks that are meant to stay for the module's whole life (state-dict
    conversion hooks, gradient-reduction hooks): 2 of 8 findings in transformers and timm were
    hooks that should have been removable. Enable it for scripts and notebooks.

    ## Example
        model.layer4.register_forward_hook(save_features)

    ## Use instead
        handle = model.layer4.register_forward_hook(save_features)
        ...
        handle.remove()
    """

    code = "ML403"
    name = "hook-handle-discarded"
    needs = frozenset()
    severity = Severity.WARNING
    default_enabled = False
    triggers = ("register_",)
    valid = [
        HEADER + "layer = nn.Linear(2, 2)\nhandle = layer.register_forward_hook(print)\n"
        "handle.remove()\n",
        HEADER + "handles = []\nlayer = nn.Linear(2, 2)\n"
        "handles.append(layer.register_forward_hook(print))\n",
        # a tensor hook goes away with the tensor
        HEADER + "def forward(x):\n    x.register_hook(print)\n    return x\n",
        HEADER + "def f(layer):\n    return layer.register_forward_hook(print)\n",
        # private registration and another library's hook method
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self._register_load_state_dict_pre_hook(print)\n",
        HEADER + "def setup(trainer):\n    trainer.register_post_step_hook(print)\n",
        # a user method that happens to have a hook-like name
        HEADER + "class Debug:\n    def register_forward_hook(self):\n        pass\n\n"
        "    def start(self):\n        self.register_forward_hook()\n",
    ]
    invalid = [
        Invalid(HEADER + "layer = nn.Linear(2, 2)\nlayer.register_forward_hook(print)\n", line=5),
        Invalid(
            HEADER + "model = nn.Sequential(nn.Linear(2, 2))\n"
            "for m in model.modules():\n    m.register_full_backward_hook(print)\n",
            line=6,
        ),
    ]

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not isinstance(call, cst.Call):
            return
        method = _hook_method(self.context, call)
        if method not in _TORCH_HOOKS or not call.args:
            return
        self.report(
            call,
            f"the handle returned by {_describe(call)} is discarded, so the hook can never be "
            "removed; keep it and call `.remove()` when the hook is no longer needed",
        )


class HookRegisteredInForward(StaticRule):
    """A hook is registered inside `forward`, so a new copy is added on every call.

    ## What it does
    Finds `register_*_hook` calls (module hooks, state-dict hooks, parameter hooks) inside a
    module's `forward`. Tensor hooks registered on the forward's own activations
    (`x.register_hook(fn)`) are not reported: a new tensor gets one hook per call.

    ## Why is this bad?
    Module hooks live as long as the module. Registering one in `forward` adds another copy on
    every call: after `n` batches the hook runs `n` times per call, slowing training down
    and keeping whatever the hooks captured alive.

    ## Example
        def forward(self, x):
            self.body.register_forward_hook(self._save)
            return self.body(x)

    ## Use instead
        def __init__(self):
            ...
            self._handle = self.body.register_forward_hook(self._save)

        def forward(self, x):
            return self.body(x)
    """

    code = "ML404"
    name = "hook-registered-in-forward"
    needs = frozenset({"project"})
    triggers = ("register_",)
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n"
        "        self.h = self.fc.register_forward_hook(print)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n",
        # a tensor hook on an activation
        HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
        "        if x.requires_grad:\n            x.register_hook(print)\n        return x\n",
        # `forward` of a class that is not a module
        HEADER + "class Wrapper:\n    def forward(self, m):\n"
        "        return m.register_forward_hook(print)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n\n"
            "    def forward(self, x):\n        self.fc.register_forward_hook(print)\n"
            "        return self.fc(x)\n",
            line=10,
        ),
        Invalid(
            HEADER + "class Net(nn.Module):\n    def forward(self, x):\n"
            "        handle = self.register_forward_pre_hook(print)\n        return x\n",
            line=6,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        method = _hook_method(self.context, node)
        if method not in _TORCH_HOOKS or not node.args:
            return
        found = self.context.current_method()
        if found is None or found[1].name.value != "forward":
            return
        # only calls directly in forward (not in a function defined inside it)
        if self.context.current_function is not found[1]:
            return
        self.report(
            node,
            f"{_describe(node)} in `forward` registers another hook on every call; register it "
            "once in `__init__` (or outside the model) and keep the handle",
        )


@hookimpl
def modellint_add_rules():
    return [DeprecatedBackwardHook, HookKeepsGraph, HookHandleDiscarded, HookRegisteredInForward]
