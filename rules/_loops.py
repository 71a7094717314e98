"""Shared analysis of one function (or a module's top-level code) for the training rules.

The `Scope` of a function (where calls, loops and assignments are) is the engine's
(`modellint.static.scope`); this module holds what the training rules ask of it: which names
are optimizers and schedulers, where they step, where gradients are off.
"""

from __future__ import annotations

import re

import libcst as cst

from modellint.rule import FileContext, Invalid, StaticRule, dotted_name, name_nodes
from modellint.static.scope import (  # noqa: F401 - re-exported for the rule modules
    _NESTED,
    LOOPS,
    Assignment,
    CallSite,
    Scope,
    Site,
    scope_of,
)

_OPTIMIZER_NAME = re.compile(r"^(?:.*_)?(?:optimi[sz]er|optim|opt)(?:_.*|\d*)$|optimi[sz]er")
_SCHEDULER_NAME = re.compile(r"sched")
_NO_GRAD = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.inference_mode",
})
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
_NO_GRAD_DECORATOR = re.compile(r"(?:^|_)(?:no_grad|inference_mode)$")


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


# nn.Module methods that return the module itself, so `model.to(device).train()` sets the mode
# of `model`
_RETURNS_SELF = frozenset({
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "type", "train", "eval",
    "requires_grad_", "zero_grad", "apply", "to_empty", "share_memory", "xpu", "mps",
})


def mode_receiver(receiver: cst.BaseExpression) -> str | None:
    """`model` for `model`, `model.to(device)`, `model.cuda().float()`."""
    while (
        isinstance(receiver, cst.Call)
        and isinstance(receiver.func, cst.Attribute)
        and receiver.func.attr.value in _RETURNS_SELF
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
