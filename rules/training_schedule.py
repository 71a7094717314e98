"""Built-in rules: optimizer and scheduler state across epochs (ML328, ML329, ML340).

Mistakes seen in real training code (issue 25) that keep training running with the wrong
learning rate or the wrong optimizer state: an optimizer built anew every epoch, a scheduler
sized in iterations but stepped once per epoch (the mirror of ML301), `scheduler.get_lr()`
read instead of `get_last_lr()`. Loops come from `_loops.Scope`; what a value is comes from
the semantic model (`context.semantic`); the scheduler table is `static.kinds.SCHEDULERS`,
the same as ML301's. A name whose origin is unknown is never assumed to be anything.
"""

from __future__ import annotations

import re

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import Fix, Severity, dotted_name, source_of
from modellint.rules._loops import (
    LOOPS,
    CallSite,
    Scope,
    ScopeRule,
    Site,
    constructor_of,
    invalid_at,
    names_in,
    optimizer_steps,
    scheduler_steps,
    scope_of,
)
from modellint.rules.training import _callee
from modellint.static.kinds import OPTIMIZER, SCHEDULER, SCHEDULERS

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

# a loop header or function name that says it counts epochs
_EPOCH = re.compile(r"epoch", re.IGNORECASE)
# text of an argument that counts iterations (optimizer steps), not epochs: `len(loader)`,
# `total_steps`, `max_iter`, `num_batches`. Plain `steps` is not enough (`--lr-steps` often
# lists epochs).
_ITERATION_COUNT = re.compile(
    r"len\(|iter|batch|(?:total|training|train|num|max|warmup|n|optim|optimizer)_?steps|"
    r"steps_per_epoch|global_step",
    re.IGNORECASE,
)


def _text(node: cst.CSTNode) -> str:
    return source_of(node)


def _argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for index, arg in enumerate(call.args):
        if arg.star:
            continue
        if (arg.keyword is not None and arg.keyword.value == keyword) or (
            arg.keyword is None and index == position
        ):
            return arg.value
    return None


def _loop_header(loop: cst.CSTNode) -> str:
    if isinstance(loop, cst.For):
        return _text(loop.target) + " " + _text(loop.iter)
    if isinstance(loop, cst.While):
        return _text(loop.test)
    return ""


def _conditional_below(site: Site, loop: cst.CSTNode) -> bool:
    """The site runs only under an `if`/`else`/`try` between `loop` and itself."""
    return any(isinstance(a, (cst.If, cst.Else, cst.Try, cst.ExceptHandler))
               for a in site.ancestors_below(loop))


def _conditional(site: Site) -> bool:
    return any(isinstance(a, (cst.If, cst.Else, cst.Try, cst.ExceptHandler))
               for a in site.ancestors)


def _loop_text(loop: cst.CSTNode) -> str:
    """`for epoch in range(epochs)`, `while step < total`, shortened for a message."""
    text = ("for " if isinstance(loop, cst.For) else "while ") + (
        _text(loop.target) + " in " + _text(loop.iter) if isinstance(loop, cst.For)
        else _loop_header(loop))
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _assigned_name(scope: Scope, site: CallSite) -> str | None:
    """The dotted name the call's result is assigned to (`optimizer = Adam(...)`)."""
    for assignment in scope.assignments:
        if assignment.value is site.node:
            return assignment.target
    return None


def _function_name(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def _passes(call: cst.Call, name: str) -> bool:
    """`name` is one of the call's arguments (`train(model, optimizer)`)."""
    return any(dotted_name(arg.value) == name for arg in call.args)


def _steps_in_a_loop(context, callee: cst.FunctionDef) -> bool:
    """A function of this file that steps an optimizer inside a loop of its own: it runs
    (at least) one pass over the batches each call."""
    return any(step.loops for step in optimizer_steps(context, scope_of(context, callee)))


# -- ML328 ------------------------------------------------------------------------------------

_OPTIMIZER_SETUP = ("optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n")


class OptimizerRebuiltPerEpoch(ScopeRule):
    """An optimizer is built anew every epoch, so its state starts over each time.

    ## What it does
    Finds a torch optimizer (`torch.optim.SGD`, `Adam`, ... as the semantic model knows
    them) built unconditionally inside the epoch loop: the loop whose body holds the batch
    loop that steps that optimizer (or that passes the new optimizer to a function of the
    file that loops over the batches, or to a `train_one_epoch`-like function). Also finds a
    function that builds an optimizer and steps it in its batch loop when that function runs
    once per epoch: its name says so (`train_epoch`, `train_one_epoch`) or this file calls it
    inside a loop over epochs (`for epoch in range(...)`). A loop (or function) that also
    builds, copies or reloads the model the optimizer updates is a fresh run (a fold of a
    cross-validation, a trial, a meta-learning task) and is left alone, as is an optimizer
    rebuilt under a condition (`if epoch == unfreeze_at:`) or over parameters the loop
    itself chooses.

    ## Why is this bad?
    An optimizer's state lives in the object: SGD's momentum buffers, Adam's first and
    second moments and step count (its bias correction), any scheduler attached to it.
    Built again every epoch, that state is thrown away: every epoch starts with Adam's
    bias-corrected warm-up and momentum at zero, and a learning-rate scheduler built once
    keeps stepping an optimizer that is no longer used. Training converges more slowly or to
    a worse point, without any error.

    ## Example
        for epoch in range(epochs):
            optimizer = torch.optim.Adam(model.parameters(), lr=lr * 0.9 ** epoch)
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()

    ## Use instead
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    """

    code = "ML328"
    name = "optimizer-rebuilt-per-epoch"
    severity = Severity.WARNING
    triggers = ("optim",)
    _LOOP = (HEADER + "def train(model, loader, criterion, epochs):\n"
             "    for epoch in range(epochs):\n"
             "{rebuild}"
             "        for x, y in loader:\n"
             "            optimizer.zero_grad()\n"
             "            criterion(model(x), y).backward()\n"
             "            optimizer.step()\n")
    _EPOCH_FUNCTION = (HEADER + "def {name}(model, loader, criterion):\n"
                       "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
                       "    for x, y in loader:\n"
                       "        optimizer.zero_grad()\n"
                       "        criterion(model(x), y).backward()\n"
                       "        optimizer.step()\n")
    valid = [
        # built once
        HEADER + "def train(model, loader, criterion, epochs):\n"
        "    optimizer = torch.optim.Adam(model.parameters())\n"
        "    for epoch in range(epochs):\n"
        "        for x, y in loader:\n"
        "            optimizer.zero_grad()\n"
        "            criterion(model(x), y).backward()\n"
        "            optimizer.step()\n",
        # a new model and optimizer per fold: a fresh run
        HEADER + "def cross_validate(folds, criterion, epochs):\n"
        "    for train_loader in folds:\n"
        "        model = Net()\n"
        "        optimizer = torch.optim.Adam(model.parameters())\n"
        "        for x, y in train_loader:\n"
        "            optimizer.zero_grad()\n"
        "            criterion(model(x), y).backward()\n"
        "            optimizer.step()\n",
        # the model reloaded from a checkpoint per trial
        HEADER + "def trials(model, loader, criterion, lrs):\n"
        "    for lr in lrs:\n"
        "        model.load_state_dict(torch.load('init.pt', weights_only=True))\n"
        "        optimizer = torch.optim.SGD(model.parameters(), lr=lr)\n"
        "        for x, y in loader:\n"
        "            optimizer.zero_grad()\n"
        "            criterion(model(x), y).backward()\n"
        "            optimizer.step()\n",
        # a meta-learning task: a copy of the model per task, and its own inner optimizer
        HEADER + "import copy\n\n"
        "def meta_train(model, tasks, criterion):\n"
        "    for task in tasks:\n"
        "        learner = copy.deepcopy(model)\n"
        "        inner = torch.optim.SGD(learner.parameters(), lr=0.01)\n"
        "        for x, y in task:\n"
        "            inner.zero_grad()\n"
        "            criterion(learner(x), y).backward()\n"
        "            inner.step()\n",
        # rebuilt once, when the backbone is unfrozen
        _LOOP.format(rebuild="        if epoch == 10:\n"
                     "            model.backbone.requires_grad_(True)\n"
                     "            optimizer = torch.optim.Adam(model.parameters())\n"),
        # stages of a curriculum, each with its own epochs: the optimizer is per stage
        HEADER + "def train(model, loader, criterion, stages):\n"
        "    for lr, epochs in stages:\n"
        "        optimizer = torch.optim.SGD(model.parameters(), lr=lr)\n"
        "        for epoch in range(epochs):\n"
        "            for x, y in loader:\n"
        "                optimizer.zero_grad()\n"
        "                criterion(model(x), y).backward()\n"
        "                optimizer.step()\n",
        # the loop picks the parameters: one optimizer per group, on purpose
        HEADER + "def layerwise(model, loader, criterion):\n"
        "    for layer in model.layers:\n"
        "        optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)\n"
        "        for x, y in loader:\n"
        "            optimizer.zero_grad()\n"
        "            criterion(model(x), y).backward()\n"
        "            optimizer.step()\n",
        # a whole training run per call, the model built inside it
        HEADER + "def run(config, loader, criterion):\n"
        "    model = Net()\n"
        "    optimizer = torch.optim.Adam(model.parameters())\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        criterion(model(x), y).backward()\n"
        "        optimizer.step()\n\n\n"
        "for epoch in range(10):\n"
        "    run(config, loader, criterion)\n",
        # a training function that runs all the epochs itself, called once
        _EPOCH_FUNCTION.format(name="fit"),
        # an unknown builder: not known to be a torch optimizer
        _LOOP.format(rebuild="        optimizer = make_optimizer(model)\n"),
    ]
    invalid = [
        invalid_at(_LOOP.format(rebuild="        optimizer = torch.optim.Adam("
                                "model.parameters(), lr=1e-3 * 0.9 ** epoch)\n"),
                   "optimizer = torch.optim.Adam"),
        invalid_at(HEADER + "from torch import optim\n\n"
                   "for epoch in range(num_epochs):\n"
                   "    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)\n"
                   "    for i, (x, y) in enumerate(trainloader):\n"
                   "        optimizer.zero_grad()\n"
                   "        loss = criterion(net(x), y)\n"
                   "        loss.backward()\n"
                   "        optimizer.step()\n",
                   "optimizer = optim.SGD"),
        # the new optimizer handed to a function of the file that trains one epoch
        invalid_at(HEADER + "def run_epoch(model, loader, optimizer, criterion):\n"
                   "    for x, y in loader:\n"
                   "        optimizer.zero_grad()\n"
                   "        criterion(model(x), y).backward()\n"
                   "        optimizer.step()\n\n\n"
                   "def main(model, loader, criterion, epochs):\n"
                   "    for epoch in range(epochs):\n"
                   "        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n"
                   "        run_epoch(model, loader, optimizer, criterion)\n",
                   "optimizer = torch.optim.AdamW"),
        # a per-epoch function, by its name
        invalid_at(_EPOCH_FUNCTION.format(name="train_epoch"), "optimizer = torch.optim.Adam"),
        # ... or by where it is called
        invalid_at(_EPOCH_FUNCTION.format(name="train") + "\n\n"
                   "for epoch in range(args.epochs):\n"
                   "    train(model, train_loader, criterion)\n",
                   "optimizer = torch.optim.Adam"),
        # a method of a trainer, called once per epoch
        invalid_at(HEADER + "class Trainer:\n"
                   "    def train_one_epoch(self):\n"
                   "        self.optimizer = torch.optim.Adam(self.model.parameters())\n"
                   "        for x, y in self.loader:\n"
                   "            self.optimizer.zero_grad()\n"
                   "            self.criterion(self.model(x), y).backward()\n"
                   "            self.optimizer.step()\n",
                   "self.optimizer = torch.optim.Adam"),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._functions: list[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        self.check(scope_of(self.context, original_node))
        self._check_epoch_functions(original_node)

    # -- an optimizer built in the epoch loop -----------------------------------------------

    def check(self, scope: Scope) -> None:
        for site in scope.calls:
            if not site.loops:
                continue
            optimizer = self._optimizer_built(scope, site)
            if optimizer is None:
                continue
            name, cls = optimizer
            loop = site.loops[-1]
            if _conditional_below(site, loop) or self._fresh_run(scope, site, loop):
                continue
            evidence = self._epoch_loop_evidence(scope, site, loop, name)
            if evidence is None:
                continue
            self.report_at(
                site, site.node,
                f"`{name}` is built anew ({cls}) in every iteration of "
                f"`{_loop_text(loop)}`, {evidence}: its state (momentum, Adam's moments and "
                f"step count, the schedulers attached to it) starts over every epoch; build "
                f"it once before the loop and change the learning rate through a scheduler "
                f"or `param_groups`",
            )

    def _optimizer_built(self, scope: Scope, site: CallSite) -> tuple[str, str] | None:
        """(the name it is assigned to, its class) for a call that builds a torch optimizer."""
        kind = self.context.semantic.kind(site.node, scope, site.order)
        if kind is None or kind.kind != OPTIMIZER:
            return None
        name = _assigned_name(scope, site)
        if name is None:
            return None
        return name, f"`{(kind.cls or 'optimizer').rsplit('.', 1)[-1]}`"

    @staticmethod
    def _parameter_names(call: cst.Call) -> set[str]:
        """The names the optimizer's parameters come from (`model` in `model.parameters()`)."""
        if not call.args:
            return set()
        first = call.args[0]
        if first.keyword is not None and first.keyword.value != "params":
            first = next((a for a in call.args if a.keyword is not None
                          and a.keyword.value == "params"), first)
        names = names_in(first.value)
        dotted = {n for n in (dotted_name(node) for node in _attribute_heads(first.value)) if n}
        return names | dotted

    def _fresh_run(self, scope: Scope, site: CallSite, body: cst.CSTNode) -> bool:
        """The loop (or function) `body` builds, copies or reloads what the optimizer updates,
        or picks its parameters: each iteration (call) is a run of its own."""
        names = self._parameter_names(site.node)
        if isinstance(body, cst.For):
            if names & names_in(body.target):
                return True
        for assignment in scope.assignments:
            target = assignment.target
            inside = body is scope.root or assignment.site.inside(body)
            if inside and assignment.site.order < site.order and (
                    target in names or target.split(".", 1)[0] in names and "." not in target
                    or any(n.startswith(target + ".") or n == target for n in names)):
                return True
        for other in scope.calls:
            if not (body is scope.root or other.inside(body)):
                continue
            func = other.node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _RELOADS and (
                    dotted_name(func.value) in names):
                return True
        return False

    def _epoch_loop_evidence(self, scope: Scope, site: CallSite, loop: cst.CSTNode,
                             name: str) -> str | None:
        """What shows that `loop` runs once per epoch of the optimizer `name`'s training."""
        for step, receiver in scope.method_calls("step"):
            if dotted_name(receiver) != name or step.order < site.order:
                continue
            loops = step.loops
            if len(loops) >= 2 and loops[-2] is loop:
                return f"whose inner loop `{_loop_text(loops[-1])}` steps it"
        for call in scope.calls:
            if call.order < site.order or not call.loops or call.loops[-1] is not loop:
                continue
            if not _passes(call.node, name):
                continue
            callee = _callee(self.context, scope, call.node)
            called = dotted_name(call.node.func) or _function_name(call.node)
            if callee is not None and _steps_in_a_loop(self.context, callee):
                return f"which passes it to `{called}()`, whose batch loop steps it"
            if _EPOCH.search(_function_name(call.node)):
                return f"which passes it to `{called}()`"
        return None

    # -- an optimizer built in a function that runs once per epoch ---------------------------

    def _check_epoch_functions(self, module: cst.Module) -> None:
        candidates = {}
        for func in self._functions:
            scope = scope_of(self.context, func)
            for site in scope.calls:
                if site.loops or _conditional(site):
                    continue
                optimizer = self._optimizer_built(scope, site)
                if optimizer is None:
                    continue
                name, cls = optimizer
                steps = [s for s, receiver in scope.method_calls("step")
                         if dotted_name(receiver) == name and s.order > site.order]
                if not steps or any(len(s.loops) != 1 for s in steps):
                    continue  # not one pass over the batches per call
                if self._fresh_run(scope, site, scope.root):
                    continue
                candidates.setdefault(func.name.value, []).append((func, scope, site, name, cls))
        if not candidates:
            return
        callers = self._epoch_loop_callers(module, set(candidates))
        for func_name, found in candidates.items():
            for _func, _scope, site, name, cls in found:
                if _EPOCH.search(func_name):
                    why = "its name says it runs once per epoch"
                elif func_name in callers:
                    why = f"it is called once per epoch, in `{callers[func_name]}`"
                else:
                    continue
                self.report_at(
                    site, site.node,
                    f"`{func_name}` builds a new {cls} (`{name}`) every time it runs, and "
                    f"{why}: the optimizer's state (momentum, Adam's moments and step "
                    f"count, the schedulers attached to it) starts over every epoch; build "
                    f"it once outside and pass it in",
                )

    def _epoch_loop_callers(self, module: cst.Module, names: set[str]) -> dict[str, str]:
        """Function name -> the loop over epochs (`for epoch in range(...)`) of this file in
        which a call of it is made directly."""
        found: dict[str, str] = {}
        for root in [module, *self._functions]:
            scope = scope_of(self.context, root)
            for call in scope.calls:
                called = _function_name(call.node)
                if called not in names or called in found or not call.loops:
                    continue
                loop = call.loops[-1]
                if _EPOCH.search(_loop_header(loop)) and not _conditional_below(call, loop):
                    found[called] = _loop_text(loop)
        return found


# methods that put a model back to a known start (a checkpoint, fresh weights)
_RELOADS = frozenset({"load_state_dict", "reset_parameters", "apply", "init_weights",
                      "load_weights", "load_checkpoint", "to_empty"})


def _attribute_heads(expr: cst.CSTNode) -> list[cst.CSTNode]:
    """Every `a.b.c` attribute chain inside `expr`, outermost first."""
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            found.append(node.value)
            return True

    expr.visit(Collect())
    return found


@hookimpl
def modellint_add_rules():
    return [OptimizerRebuiltPerEpoch]
