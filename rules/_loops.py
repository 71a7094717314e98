"""Shared analysis of one function (or a module's top-level code) for the training rules.

The `Scope` of a function (where calls, loops and assignments are) is the engine's
(`modellint.rule.scope_of`); this module holds what the training rules ask of it: which names
are optimizers and schedulers, where they step, where gradients are off.
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from modellint.rule import (
    INFERENCE_MODE,
    LOOPS,  # noqa: F401 - re-exported for the rule modules, with the scope's other names
    NO_GRAD,
    RETURNS_SELF,
    CallSite,
    FileContext,
    Invalid,
    LazyPattern,
    Scope,
    Site,
    StaticRule,
    code_nodes,
    dotted_name,
    first_param_name,
    name_nodes,
    scope_of,
)
from modellint.rule import NESTED_SCOPES as _NESTED

_OPTIMIZER_NAME = LazyPattern(r"^(?:.*_)?(?:optimi[sz]er|optim|opt)(?:_.*|\d*)$|optimi[sz]er")
_SCHEDULER_NAME = LazyPattern(r"sched")
_NO_GRAD = NO_GRAD | INFERENCE_MODE
_SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})

# -- what a name is ---------------------------------------------------------------------------


def last_segment(name: str | None) -> str:
    return (name or "").rsplit(".", 1)[-1].lower()


def constructor_of(
    context: FileContext, scope: Scope, name: str, before: int | None = None
) -> cst.Call | None:
    """The call whose result was last assigned to `name` in this function, or, for a
    `self.x` inside a class, the call assigned to it if the class assigns it only once."""
    found = scope.assigned(name, before)
    if found:
        value = found[-1].value
        return value if isinstance(value, cst.Call) else None
    cls = context.current_class
    if cls is not None and name.startswith("self.") and name.count(".") == 1:
        values = context.class_info(cls).assignments.get(name[5:], [])
        if len(values) == 1 and isinstance(values[0][1], cst.Call):
            return values[0][1]
    return None


def constructed_class(
    context: FileContext, scope: Scope, name: str, before: int | None = None
) -> str | None:
    """Qualified name of the class (or function) whose call result `name` holds."""
    call = constructor_of(context, scope, name, before)
    if call is None:
        return None
    return context.call_name(call)


def scheduler_class(context: FileContext, scope: Scope, name: str) -> tuple[str, cst.Call] | None:
    """(`StepLR`, its constructor call) when `name` holds a `torch.optim.lr_scheduler` object."""
    call = constructor_of(context, scope, name)
    if call is None:
        return None
    qualified = context.call_name(call) or ""
    if qualified.startswith("torch.optim.lr_scheduler."):
        return qualified.rsplit(".", 1)[1], call
    return None


def is_scheduler(context: FileContext, scope: Scope, name: str | None) -> bool:
    if name is None:
        return False
    call = constructor_of(context, scope, name)
    if call is not None:
        # built here: only torch's (and transformers' LambdaLR-based) schedulers count; a
        # class of the project may well be meant to step before the optimizer
        qualified = context.call_name(call) or ""
        return qualified.startswith("torch.optim.lr_scheduler.") or (
            qualified.startswith("transformers.") and "schedule" in qualified
        )
    return bool(_SCHEDULER_NAME.search(last_segment(name))) and "noise" not in name.lower()


def is_optimizer(context: FileContext, scope: Scope, name: str | None) -> bool:
    if name is None:
        return False
    qualified = constructed_class(context, scope, name) or ""
    if qualified.startswith("torch.optim.") and not qualified.startswith(
        ("torch.optim.lr_scheduler", "torch.optim.swa_utils")
    ):
        return True
    if qualified:
        return False
    return is_optimizer_name(name)


def is_optimizer_name(name: str | None) -> bool:
    """The last segment of `name` says it is an optimizer (`optimizer`, `opt_g`), not a
    scheduler."""
    segment = last_segment(name)
    return bool(_OPTIMIZER_NAME.search(segment)) and "sched" not in segment


def optimizer_steps(context: FileContext, scope: Scope) -> list[CallSite]:
    """`optimizer.step()` and `scaler.step(optimizer)` calls."""
    found = []
    for site, receiver in scope.method_calls("step"):
        name = dotted_name(receiver)
        if is_optimizer(context, scope, name):
            found.append(site)
            continue
        args = site.node.args
        if "scaler" in last_segment(name) and args and is_optimizer(
            context, scope, dotted_name(args[0].value)
        ):
            found.append(site)
    return found


def scheduler_steps(context: FileContext, scope: Scope) -> list[tuple[CallSite, str]]:
    """`scheduler.step(...)` calls: (site, the scheduler's dotted name)."""
    found = []
    for site, receiver in scope.method_calls("step"):
        name = dotted_name(receiver)
        if name is not None and is_scheduler(context, scope, name):
            found.append((site, name))
    return found


def backward_calls(
    context: FileContext, scope: Scope
) -> list[tuple[CallSite, cst.BaseExpression]]:
    """`x.backward()`, `accelerator.backward(x)`, `torch.autograd.backward(x)`: (site, x)."""
    found = []
    for site in scope.calls:
        call = site.node
        func = call.func
        if context.is_call_to(call, "torch.autograd.backward"):
            if call.args:
                found.append((site, call.args[0].value))
        elif isinstance(func, cst.Attribute) and func.attr.value == "backward":
            if context.qualified_name(func) is not None:
                continue
            owner = last_segment(dotted_name(func.value))
            if call.args and call.args[0].keyword is None and any(
                word in owner for word in ("accelerator", "engine", "fabric", "trainer")
            ):
                found.append((site, call.args[0].value))
            else:
                found.append((site, func.value))
    return found


def is_no_grad_item(context: FileContext, expr: cst.BaseExpression) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`."""
    if not isinstance(expr, cst.Call):
        return context.qualified_name(expr) in _NO_GRAD
    name = context.call_name(expr)
    if name in _NO_GRAD:
        return not (name.endswith("inference_mode") and expr.args and _is_false(expr.args[0]))
    if name in _SET_GRAD_ENABLED:
        return bool(expr.args) and _is_false(expr.args[0])
    return False


def _is_false(arg: cst.Arg) -> bool:
    return isinstance(arg.value, cst.Name) and arg.value.value == "False"


# a project's own wrapper of no_grad/inference_mode (YOLOv5's `smart_inference_mode`)
_NO_GRAD_DECORATOR = LazyPattern(r"(?:^|_)(?:no_grad|inference_mode)$")


def function_without_grad(context: FileContext, func: cst.CSTNode) -> bool:
    """A function decorated with `@torch.no_grad()` / `@torch.inference_mode()`, or with a
    decorator of its own named so (`@smart_inference_mode()`)."""
    if not isinstance(func, cst.FunctionDef):
        return False
    for decorator in func.decorators:
        expr = decorator.decorator
        if is_no_grad_item(context, expr):
            return True
        name = dotted_name(expr.func if isinstance(expr, cst.Call) else expr) or ""
        if _NO_GRAD_DECORATOR.search(name.rsplit(".", 1)[-1]):
            return True
    return False


def under_no_grad(context: FileContext, site: Site, below: cst.CSTNode | None = None) -> bool:
    """The site runs inside a `with torch.no_grad()` (or similar) of this scope; with `below`,
    only `with` blocks inside that node count."""
    ancestors = site.ancestors_below(below) if below is not None else site.ancestors
    for ancestor in ancestors:
        if isinstance(ancestor, cst.With) and any(
            is_no_grad_item(context, item.item) for item in ancestor.items
        ):
            return True
    return False


def names_in(expr: cst.CSTNode) -> set[str]:
    """Every plain name read in an expression (attribute heads included), not looking into
    nested functions, classes and lambdas."""
    return {node.value for node in name_nodes(expr)}


# -- what a call runs, what a step steps --------------------------------------------------------


def receiver_name(site: CallSite) -> str:
    """The dotted name a method call is made on (`optimizer` for `optimizer.step()`),
    `optimizer` when it is not a name."""
    func = site.node.func
    return (dotted_name(func.value) if isinstance(func, cst.Attribute) else None) or "optimizer"


def stepped_optimizer(step: CallSite) -> str:
    """The optimizer an `optimizer.step()` / `scaler.step(optimizer)` call steps."""
    optimizer = receiver_name(step)
    if step.node.args and "scaler" in last_segment(optimizer):
        optimizer = dotted_name(step.node.args[0].value) or optimizer
    return optimizer


def callee_of(context: FileContext, scope: Scope, call: cst.Call) -> cst.FunctionDef | None:
    """The function of this file that `call` runs: `self.method(...)` in a method (a method
    of the same class), or `function(...)` for a function defined in the scope's own body or
    at the top of the file, that the scope does not rebind."""
    func = call.func
    root = scope.root
    if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and isinstance(root, cst.FunctionDef)):
        owner = context.method_owners.get(id(root))
        if owner is None or func.value.value != first_param_name(root):
            return None
        name = func.attr.value
        found = [s for s in owner.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
        return found[0] if len(found) == 1 else None
    if isinstance(func, cst.Name) and context.module_node is not None:
        name = func.value
        if scope.assigned(name) or (
            isinstance(root, cst.FunctionDef) and name in {p.name.value for p in root.params.params}
        ):
            return None
        # a function defined in this one (`def main(): def train(): ...`), else at the top
        for body in ((root.body.body,) if isinstance(root, cst.FunctionDef) else ()) + (
                context.module_node.body,):
            found = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name]
            if found:
                return found[0] if len(found) == 1 else None
    return None


# -- what a training framework runs per batch or per epoch -------------------------------------

# Ignite's events that fire once per iteration (batch) or once per epoch of their engine
IGNITE_EVENT_PERIODS = {"ITERATION_STARTED": "batch", "ITERATION_COMPLETED": "batch",
                        "EPOCH_STARTED": "epoch", "EPOCH_COMPLETED": "epoch"}
_IGNITE_EVENTS = LazyPattern(r"^ignite\.engine\.(?:events\.)?Events\.([A-Z_]+)$")
IGNITE_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine"})
# the methods that Lightning (a `LightningModule`, a `Callback`) and Hugging Face's `Trainer`
# (a `TrainerCallback`) run once per training batch or once per training epoch
_LIGHTNING_HOOKS = {"training_step": "batch", "on_train_batch_start": "batch",
                    "on_train_batch_end": "batch", "on_train_epoch_start": "epoch",
                    "on_train_epoch_end": "epoch"}
_TRANSFORMERS_HOOKS = {"on_step_begin": "batch", "on_step_end": "batch",
                       "on_epoch_begin": "epoch", "on_epoch_end": "epoch"}
_LIGHTNING_BASES = LazyPattern(
    r"^(?:lightning\.pytorch|lightning|pytorch_lightning)(?:\.[\w.]+)?\."
    r"(?:LightningModule|Callback)$")
_TRANSFORMERS_BASES = LazyPattern(r"^transformers(?:\.[\w.]+)?\.TrainerCallback$")


class Callback(NamedTuple):
    """A function that a training framework runs once per batch or once per epoch
    (`callback_of`): `period` is `batch` or `epoch`; `hook` says how, for a message
    (`a handler of `Events.ITERATION_COMPLETED``, `Lightning's `training_step``); `outer` is
    the scope of the function a handler is defined in (its names may be built there);
    `function` the function's name."""

    period: str
    hook: str
    outer: Scope | None = None
    function: str = ""


def callback_of(context: FileContext, scope: Scope) -> Callback | None:
    """What the function of `scope` is run as by Ignite (the process function of an
    `Engine(fn)`, run per batch; a handler of an iteration or epoch event, by
    `@engine.on(Events.X)` or `engine.add_event_handler(Events.X, handler)` in the function
    around it, or at the top of the module), Lightning (a hook of a
    `LightningModule` or a `Callback`) or Hugging Face's `Trainer` (a `TrainerCallback`
    method), when the class or the event says so; None for anything else (a filtered event
    such as `Events.ITERATION_COMPLETED(every=100)` included)."""
    root = scope.root
    if not isinstance(root, cst.FunctionDef):
        return None
    owner = context.method_owners.get(id(root))
    if owner is not None:
        return _framework_hook(context, owner, root.name.value)
    stack = context.function_stack
    if not stack or stack[-1] is not root:
        return None
    outer_root = stack[-2] if len(stack) > 1 else context.module_node
    if outer_root is None:
        return None
    outer = scope_of(context, outer_root)
    events: list[cst.BaseExpression] = []
    for decorator in root.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and (
                expr.func.attr.value == "on") and expr.args:
            events.append(expr.args[0].value)
    for site in outer.calls:
        args = site.node.args
        if context.call_name(site.node) in IGNITE_ENGINES and args and isinstance(
                args[0].value, cst.Name) and args[0].value.value == root.name.value and (
                args[0].keyword is None):
            return Callback("batch", "the process function of an Ignite `Engine`", outer,
                            root.name.value)
    for site, _ in outer.method_calls("add_event_handler"):
        args = site.node.args
        if len(args) >= 2 and isinstance(args[1].value, cst.Name) and (
                args[1].value.value == root.name.value):
            events.append(args[0].value)
    periods: set[str] = set()
    names: set[str] = set()
    for event in events:
        if isinstance(event, cst.Call):
            return None  # a filtered event: every n iterations, once
        match = _IGNITE_EVENTS.match(context.qualified_name(event) or "")
        period = IGNITE_EVENT_PERIODS.get(match.group(1)) if match else None
        if period is None:
            return None
        periods.add(period)
        names.add(match.group(1) if match else "")
    if len(periods) != 1:
        return None
    return Callback(periods.pop(), "a handler of " + ", ".join(
        f"`Events.{name}`" for name in sorted(names)), outer, root.name.value)


def callback_steps(context: FileContext, scope: Scope, period: str
                   ) -> tuple[Callback, list[tuple[CallSite, str]]] | None:
    """When a framework runs the function of `scope` once per `period` (`batch`, `epoch`;
    see `callback_of`): how, and the `x.step(...)` calls of the function's own body (not
    under an `if`, a loop or a `try`), with the dotted name of `x`; else None."""
    callback = callback_of(context, scope)
    root = scope.root
    if callback is None or callback.period != period or not isinstance(root, cst.FunctionDef):
        return None
    steps = []
    for site, receiver in scope.method_calls("step"):
        name = dotted_name(receiver)
        if name is not None and any(s is site.statement for s in root.body.body):
            steps.append((site, name))
    return callback, steps


def _framework_hook(context: FileContext, owner: cst.ClassDef, method: str) -> Callback | None:
    bases = [context.qualified_name(base.value) or "" for base in owner.bases]
    if any(_LIGHTNING_BASES.match(base) for base in bases) and method in _LIGHTNING_HOOKS:
        return Callback(_LIGHTNING_HOOKS[method], f"Lightning's `{method}`", function=method)
    if any(_TRANSFORMERS_BASES.match(base) for base in bases) and method in _TRANSFORMERS_HOOKS:
        return Callback(_TRANSFORMERS_HOOKS[method], f"the `TrainerCallback` hook `{method}`",
                        function=method)
    return None


def lightning_schedulers(context: FileContext, scope: Scope
                         ) -> list[tuple[cst.BaseExpression, str, cst.CSTNode, cst.Return]]:
    """The schedulers a Lightning `configure_optimizers` returns, with when Lightning steps
    them: (the scheduler's expression, `step` or `epoch`, the node that says so: the
    `"interval"` value, else the scheduler's expression; the `return` statement). An
    `"interval"` that is not a plain string leaves the scheduler out."""
    root = scope.root
    if not isinstance(root, cst.FunctionDef) or root.name.value != "configure_optimizers":
        return []
    owner = context.method_owners.get(id(root))
    if owner is None or not any(_LIGHTNING_BASES.match(context.qualified_name(b.value) or "")
                                for b in owner.bases):
        return []
    found: list[tuple[cst.BaseExpression, str, cst.CSTNode, cst.Return]] = []
    for node in code_nodes(root.body, prune=_NESTED):
        if not isinstance(node, cst.Return) or node.value is None:
            continue
        for dictionary in _returned_dicts(scope, node.value):
            entries = {_key(element): element.value for element in dictionary.elements
                       if isinstance(element, cst.DictElement) and _key(element)}
            scheduler = entries.get("scheduler")
            if scheduler is None:
                inner = entries.get("lr_scheduler")
                if inner is not None and not isinstance(inner, cst.Dict):
                    found.append((inner, "epoch", inner, node))
                continue
            interval = entries.get("interval")
            if interval is None:
                found.append((scheduler, "epoch", scheduler, node))
            elif isinstance(interval, cst.SimpleString) and interval.evaluated_value in (
                    "step", "epoch"):
                found.append((scheduler, str(interval.evaluated_value), interval, node))
        if isinstance(node.value, cst.Tuple) and len(node.value.elements) == 2:
            second = node.value.elements[1].value
            if isinstance(second, (cst.List, cst.Tuple)):
                for element in second.elements:
                    if isinstance(element.value, (cst.Name, cst.Call)):
                        found.append((element.value, "epoch", element.value, node))
    return found


def _returned_dicts(scope: Scope, expr: cst.BaseExpression) -> list[cst.Dict]:
    """The dicts a return value holds: itself, the elements of a list or tuple, the dicts
    inside those (`{"optimizer": ..., "lr_scheduler": {...}}`), and a dict a name there was
    last assigned."""
    found = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            assigned = scope.assigned(node.value)
            if assigned and isinstance(assigned[-1].value, cst.Dict):
                stack.append(assigned[-1].value)
        elif isinstance(node, cst.Dict):
            found.append(node)
            stack.extend(e.value for e in node.elements if isinstance(e, cst.DictElement))
        elif isinstance(node, (cst.List, cst.Tuple)):
            stack.extend(e.value for e in node.elements)
    return found


def _key(element: cst.DictElement) -> str | None:
    key = element.key
    if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
        return key.evaluated_value
    return None


# -- shared by the rule modules that check whole functions -------------------------------------


def line_of(source: str, text: str) -> int:
    for number, line in enumerate(source.splitlines(), 1):
        if text in line:
            return number
    raise ValueError(text)


def invalid_at(source: str, marker: str, fixed: str | None = None) -> Invalid:
    """An invalid example reported on the (first) line containing `marker`."""
    return Invalid(source, line=line_of(source, marker), fixed=fixed)


class ScopeRule(StaticRule):
    """A rule that checks a whole function body (or a script's top-level code) at once."""

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.check(scope_of(self.context, original_node))

    def leave_Module(self, original_node: cst.Module) -> None:
        self.check(scope_of(self.context, original_node))

    def check(self, scope: Scope) -> None:
        raise NotImplementedError

    def report_at(self, site: Site, node: cst.CSTNode, message: str, **kwargs) -> None:
        """`report` of `node` found at `site` of the scope just checked: the finding belongs
        to the site's statement (a noqa comment on any line of it applies)."""
        self.report(node, message, statement=site.statement or node, **kwargs)


def mode_receiver(receiver: cst.BaseExpression) -> str | None:
    """`model` for `model`, `model.to(device)`, `model.cuda().float()`."""
    while (
        isinstance(receiver, cst.Call)
        and isinstance(receiver.func, cst.Attribute)
        and receiver.func.attr.value in RETURNS_SELF
    ):
        receiver = receiver.func.value
    return dotted_name(receiver)


def _mode_argument(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "mode":
            return arg.value
    return None


def mode_calls(scope: Scope) -> tuple[dict[str, list[CallSite]], dict[str, list[CallSite]]]:
    """(names put in eval mode, names put in train mode) -> their call sites; `train(mode)`
    with a computed mode counts as both."""
    evals: dict[str, list[CallSite]] = {}
    trains: dict[str, list[CallSite]] = {}
    for site, receiver in scope.method_calls("eval"):
        name = mode_receiver(receiver)
        if name and not site.node.args:
            evals.setdefault(name, []).append(site)
    for site, receiver in scope.method_calls("train"):
        name = mode_receiver(receiver)
        if not name:
            continue
        mode = _mode_argument(site.node)
        if not site.node.args:
            trains.setdefault(name, []).append(site)
        elif isinstance(mode, cst.Name) and mode.value == "False":
            evals.setdefault(name, []).append(site)
        elif isinstance(mode, cst.Name) and mode.value == "True":
            trains.setdefault(name, []).append(site)
        else:
            # train(mode): unknown, counts as both
            evals.setdefault(name, []).append(site)
            trains.setdefault(name, []).append(site)
    return evals, trains


# the losses of `torch.nn.functional`
_LOSS_FUNCTIONS = frozenset({
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "ctc_loss",
    "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
    "multi_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
})


def is_loss_call(context, scope: Scope, value: cst.BaseExpression | None, before: int) -> bool:
    """`value` is a call of a loss: a `torch.nn.functional` loss, `nn.XLoss()(...)` or a
    name bound to an `nn.XLoss` before the site at `before`."""
    if not isinstance(value, cst.Call):
        return False
    qualified = context.call_name(value) or ""
    if qualified.startswith("torch.nn.functional.") and (
        qualified.rsplit(".", 1)[1] in _LOSS_FUNCTIONS
    ):
        return True
    func = value.func
    if isinstance(func, cst.Call):
        return (context.call_name(func) or "").endswith("Loss")
    name = dotted_name(func)
    if name is None:
        return False
    constructor = constructor_of(context, scope, name, before)
    qualified = context.call_name(constructor) if constructor is not None else None
    return (qualified is not None and qualified.startswith("torch.nn.")
            and qualified.endswith("Loss"))
