"""Built-in rules: optimizer and scheduler state across epochs (ML328, ML329, ML340), and one
training step's order and graph (ML341, ML342).

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
from modellint.rule import (
    MODULE,
    OPTIMIZER,
    SCHEDULER,
    SCHEDULERS,
    VALUE_METHODS,
    VARIABLES,
    Fix,
    LazyPattern,
    Severity,
    argument,
    code_nodes,
    dotted_name,
    source_of,
)
from modellint.rules._loops import (
    _NESTED,
    CallSite,
    Scope,
    ScopeRule,
    Site,
    backward_calls,
    callback_steps,
    callee_of,
    constructor_of,
    function_without_grad,
    invalid_at,
    is_loss_call,
    is_optimizer,
    last_segment,
    lightning_schedulers,
    names_in,
    optimizer_steps,
    receiver_name,
    scheduler_steps,
    scope_of,
    stepped_optimizer,
    under_no_grad,
)
from modellint.rules.training import HEADER

# a loop header or function name that says it counts epochs
_EPOCH = LazyPattern(r"epoch", re.IGNORECASE)
# text of an argument that counts iterations (optimizer steps), not epochs: `len(loader)`,
# `total_steps`, `max_iter`, `num_batches`. Plain `steps` is not enough (`--lr-steps` often
# lists epochs).
_ITERATION_COUNT = LazyPattern(
    r"len\(|iter|batch|(?:total|training|train|num|max|warmup|n|optim|optimizer)_?steps|"
    r"steps_per_epoch|global_step",
    re.IGNORECASE,
)


def _argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    found = argument(call, keyword, position)
    return found.value if found is not None else None


def _loop_header(loop: cst.CSTNode) -> str:
    if isinstance(loop, cst.For):
        return source_of(loop.target) + " " + source_of(loop.iter)
    if isinstance(loop, cst.While):
        return source_of(loop.test)
    return ""


def _conditional_below(site: Site, loop: cst.CSTNode) -> bool:
    """The site runs only under an `if`/`else`/`try` between `loop` and itself."""
    return any(isinstance(a, (cst.If, cst.Else, cst.Try, cst.ExceptHandler))
               for a in site.ancestors_below(loop))


def _loop_text(loop: cst.CSTNode) -> str:
    """`for epoch in range(epochs)`, `while step < total`, shortened for a message."""
    text = ("for " if isinstance(loop, cst.For) else "while ") + (
        source_of(loop.target) + " in " + source_of(loop.iter) if isinstance(loop, cst.For)
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


def _closures(root: cst.CSTNode) -> dict[str, list[cst.FunctionDef]]:
    """The functions defined inside a function's body (at any depth of its statements, not
    inside another function or class), by name: one per branch of an `if` may share it."""
    found: dict[str, list[cst.FunctionDef]] = {}
    if isinstance(root, cst.FunctionDef):
        for node in code_nodes(root.body, stop=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if isinstance(node, cst.FunctionDef):
                found.setdefault(node.name.value, []).append(node)
    return found


def _steps_of(context, scope: Scope, name: str, after: int) -> list[CallSite]:
    """Where the scope steps the optimizer held by `name` after `after`: `name.step()`, or a
    call of a function defined inside this one (a closure such as `def train_step(batch)`,
    any of its definitions) that does."""
    found = [site for site, receiver in scope.method_calls("step")
             if dotted_name(receiver) == name and site.order > after]
    closures = _closures(scope.root)
    if closures:
        stepping = {
            func_name for func_name, funcs in closures.items() if any(
                dotted_name(receiver) == name
                for func in funcs for _, receiver in scope_of(context, func).method_calls("step"))
        }
        found += [site for site in scope.calls if site.order > after
                  and isinstance(site.node.func, cst.Name) and site.node.func.value in stepping]
    return sorted(found, key=lambda site: site.order)


def _built_once_under(site: Site, name: str, root: cst.CSTNode) -> bool:
    """In a function: an `if` around the site makes it a one-off (`if self.optimizer is
    None:`, `if epoch == 0:`); a test of configuration (`if args.optim == "adam":`) does not,
    nor does `if opt is None:` of a parameter `opt` (a default, built on every call that
    passes none)."""
    params = _parameters(root)
    for ancestor in site.ancestors:
        if not isinstance(ancestor, cst.If):
            continue
        if name in params and _is_none_test(ancestor.test, name):
            continue
        text = source_of(ancestor.test)
        if _EPOCH.search(text) or re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text):
            return True
    return False


def _parameters(root: cst.CSTNode) -> list[str]:
    if not isinstance(root, cst.FunctionDef):
        return []
    return [p.name.value for p in (*root.params.posonly_params, *root.params.params,
                                   *root.params.kwonly_params)]


def _is_none_test(test: cst.BaseExpression, name: str) -> bool:
    return (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name)
            and test.left.value == name and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Is)
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None")


# -- ML328 ------------------------------------------------------------------------------------


class OptimizerRebuiltPerEpoch(ScopeRule):
    """An optimizer is built anew every epoch, so its state starts over each time.

    ## What it does
    Finds a torch optimizer (`torch.optim.SGD`, `Adam`, ..., or what a factory of the
    project named for it returns, `build_optimizer(...)`, when the semantic model knows it is
    one) built unconditionally inside the epoch loop: the loop whose body holds the batch
    loop that steps that optimizer (or that passes the new optimizer to a function of the
    file that loops over the batches, or to a `train_one_epoch`-like function). Also finds a
    function that builds an optimizer and steps it in its batch loop (itself, or through a
    function defined inside it, such as a `train_step` closure) when that function runs
    once per epoch: its name says so (`train_epoch`, `train_one_epoch`) or this file calls it
    inside a loop over epochs (`for epoch in range(...)`). `if opt is None: opt = Adam(...)`
    of a parameter `opt` counts, unless a call in the file passes `opt`. A loop (or
    function) that also builds, copies or reloads the model the optimizer updates is a fresh
    run (a fold of a cross-validation, a trial, a meta-learning task) and is left alone, as
    is an optimizer rebuilt under a condition (`if epoch == unfreeze_at:`, `if
    self.optimizer is None:`) or over parameters the loop itself chooses. Callers in other
    files are not looked at: a per-epoch function whose name does not say so is found only
    when its own file calls it in the epoch loop.

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
    needs = frozenset({"project", "scope", "semantic"})
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
        called = (self.context.call_name(site.node) or _function_name(site.node)).lower()
        if "opt" not in called.rsplit(".", 1)[-1] and not called.startswith("torch.optim."):
            # asking the semantic model of every call is costly: a torch optimizer class
            # (`optim.SGD`) or a factory named for what it builds (`build_optimizer`)
            return None
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
                    target in names or any(n.startswith(target + ".") for n in names)):
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
        for step in _steps_of(self.context, scope, name, site.order):
            loops = step.loops
            if len(loops) >= 2 and loops[-2] is loop:
                return f"whose inner loop `{_loop_text(loops[-1])}` steps it"
        for call in scope.calls:
            if call.order < site.order or not call.loops or call.loops[-1] is not loop:
                continue
            if not _passes(call.node, name):
                continue
            callee = callee_of(self.context, scope, call.node)
            called = dotted_name(call.node.func) or _function_name(call.node)
            if callee is not None and _steps_in_a_loop(self.context, callee):
                return f"which passes it to `{called}()`, whose batch loop steps it"
            if _EPOCH.search(_function_name(call.node)):
                return f"which passes it to `{called}()`"
        return None

    # -- an optimizer built in a function that runs once per epoch ---------------------------

    def _check_epoch_functions(self, module: cst.Module) -> None:
        candidates: dict[str, list] = {}
        for func in self._functions:
            scope = scope_of(self.context, func)
            for site in scope.calls:
                if site.loops:
                    continue
                optimizer = self._optimizer_built(scope, site)
                if optimizer is None:
                    continue
                name, cls = optimizer
                if _built_once_under(site, name, func):
                    continue
                steps = _steps_of(self.context, scope, name, site.order)
                if not steps or any(len(s.loops) != 1 for s in steps):
                    continue  # not one pass over the batches per call
                if self._fresh_run(scope, site, scope.root):
                    continue
                candidates.setdefault(func.name.value, []).append((func, site, name, cls))
        if not candidates:
            return
        callers = self._epoch_loop_callers(module, set(candidates))
        for func_name, found in candidates.items():
            for func, site, name, cls in found:
                default = name in _parameters(func)
                if default and self._passed_by_a_caller(module, func, name):
                    continue
                if _EPOCH.search(func_name):
                    why = "its name says it runs once per epoch"
                elif func_name in callers:
                    why = f"it is called once per epoch, in `{callers[func_name]}`"
                else:
                    continue
                unless = f" without being given `{name}`" if default else ""
                self.report_at(
                    site, site.node,
                    f"`{func_name}` builds a new {cls} (`{name}`) every time it runs{unless}, "
                    f"and {why}: the optimizer's state (momentum, Adam's moments and step "
                    f"count, the schedulers attached to it) starts over every epoch; build "
                    f"it once outside and pass it in",
                )

    def _passed_by_a_caller(self, module: cst.Module, func: cst.FunctionDef, name: str) -> bool:
        """A call of `func` in this file passes the parameter `name` (by keyword or place)."""
        position = _parameters(func).index(name)
        if self.context.method_owners.get(id(func)) is not None:
            position -= 1  # `self` is not passed
        for root in [module, *self._functions]:
            for call in scope_of(self.context, root).calls:
                if _function_name(call.node) != func.name.value:
                    continue
                positional = [a for a in call.node.args if a.keyword is None]
                if any(a.star for a in call.node.args) or any(
                        a.keyword is not None and a.keyword.value == name
                        for a in call.node.args) or len(positional) > position:
                    return True
        return False

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


def _attribute_heads(expr: cst.CSTNode) -> list[cst.BaseExpression]:
    """What each attribute inside `expr` is read from (`model.fc` for `model.fc.parameters`),
    not looking into nested functions, classes and lambdas."""
    return [node.value for node in code_nodes(expr, prune=(cst.FunctionDef, cst.ClassDef,
                                                            cst.Lambda))
            if isinstance(node, cst.Attribute)]


# -- ML329 ------------------------------------------------------------------------------------

# the arguments that size each scheduler of `torch.optim.lr_scheduler` (position, keyword);
# its classes are those of the engine's table (`static.kinds.SCHEDULERS`)
_SIZE_ARGUMENTS = {
    "StepLR": ((1, "step_size"),),
    "MultiStepLR": ((1, "milestones"),),
    "CosineAnnealingLR": ((1, "T_max"),),
    "PolynomialLR": ((1, "total_iters"),),
    "CosineAnnealingWarmRestarts": ((1, "T_0"),),
    "LinearLR": ((3, "total_iters"),),
    "ConstantLR": ((2, "total_iters"),),
    "OneCycleLR": ((2, "total_steps"),),
    "CyclicLR": ((3, "step_size_up"), (4, "step_size_down")),
    "LambdaLR": ((1, "lr_lambda"),),
    "MultiplicativeLR": ((1, "lr_lambda"),),
}
# transformers' schedule builders (`get_linear_schedule_with_warmup`, `get_scheduler`): a
# `LambdaLR` sized in optimizer steps (`num_training_steps`, `num_warmup_steps`)
_TRANSFORMERS_SCHEDULE = LazyPattern(r"^transformers\.(?:optimization\.)?get_\w*schedul")


def _scheduler_built(context, scope: Scope, name: str) -> tuple[str, cst.Call] | None:
    """(`OneCycleLR`, its call) for a name that holds a torch scheduler built in this scope
    (or a `self` attribute assigned once in the class); (`get_linear_schedule_with_warmup`,
    its call) for one of transformers' builders."""
    call = constructor_of(context, scope, name)
    if call is None:
        return None
    qualified = context.call_name(call) or ""
    kind = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torch.optim.lr_scheduler.") and kind in SCHEDULERS:
        return kind, call
    if _TRANSFORMERS_SCHEDULE.match(qualified):
        return kind, call
    return None


def _counted_text(scope: Scope, expr: cst.BaseExpression, before: int) -> str:
    """The argument's text and, for a plain name, the value last assigned to it here."""
    text = source_of(expr)
    if isinstance(expr, cst.Name):
        found = scope.assigned(expr.value, before)
        if found and found[-1].value is not None:
            text += " " + source_of(found[-1].value)
    return text


def _iteration_sized(scope: Scope, kind: str, call: cst.Call) -> str | None:
    """How the scheduler's arguments count optimizer steps (`T_max=len(loader) * epochs`),
    or None when they do not, or may count epochs."""
    site = scope.site(call)
    before = site.order if site is not None else None
    if kind not in SCHEDULERS:  # a transformers builder: every argument after the optimizer
        for arg in call.args[1:]:
            text = _counted_text(scope, arg.value, before or 0)
            if _ITERATION_COUNT.search(text) and not arg.star:
                return f"`{_short(arg)}`"
        return None
    if kind == "OneCycleLR" and _argument(call, 4, "steps_per_epoch") is not None:
        return "`steps_per_epoch=`"
    if kind == "CyclicLR":
        if any(_EPOCH.search(source_of(arg.value)) for arg in call.args[1:]):
            return None
        if _argument(call, 3, "step_size_up") is None:
            return "its default `step_size_up=2000` iterations"
    for position, keyword in _SIZE_ARGUMENTS.get(kind, ()):
        value = _argument(call, position, keyword)
        if value is None:
            continue
        if keyword == "lr_lambda" and not isinstance(value, cst.Lambda):
            continue  # a function of the project: what it counts is not known here
        text = _counted_text(scope, value, before or 0)
        if _ITERATION_COUNT.search(text):
            return f"`{keyword}={_short_text(source_of(value))}`"
    return None


def _short(arg: cst.Arg) -> str:
    text = source_of(arg.value)
    return (f"{arg.keyword.value}=" if arg.keyword is not None else "") + _short_text(text)


def _short_text(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


def _per_epoch_evidence(context, scope: Scope, site: CallSite, scheduler: str) -> str | None:
    """For `scheduler.step()` whose innermost loop is the epoch loop: what in that loop
    runs the batches (a batch loop nested in it that steps the optimizer, or a call of a
    function that does); None when nothing shows it."""
    if not site.loops:
        return None
    loop = site.loops[-1]
    for step in optimizer_steps(context, scope):
        if len(step.loops) >= 2 and step.loops[-2] is loop:
            return f"the batch loop `{_loop_text(step.loops[-1])}` inside it steps the optimizer"
    for call in scope.calls:
        if not call.loops or call.loops[-1] is not loop or _passes(call.node, scheduler):
            continue
        callee = callee_of(context, scope, call.node)
        called = dotted_name(call.node.func) or _function_name(call.node)
        if callee is not None and _steps_in_a_loop(context, callee):
            return f"`{called}()`, called in it, loops over the batches and steps the optimizer"
        if callee is None and _EPOCH.search(_function_name(call.node)) and re.search(
                r"train|fit|run", _function_name(call.node), re.IGNORECASE):
            return f"`{called}()`, called in it, trains one epoch"
    return None


class IterationSchedulerSteppedPerEpoch(ScopeRule):
    """A scheduler sized in iterations is stepped once per epoch.

    ## What it does
    The mirror of ML301. Finds `scheduler.step()` called once per epoch (in the epoch loop,
    after the batch loop that steps the optimizer, or after a call of a function of the
    file that runs the batch loop, or of a `train_one_epoch`-like function) when the
    scheduler was built in the same function (or is a `self` attribute assigned once in the
    class, or was built by the caller and passed to a function of the same file that steps
    it in its epoch loop, or after its batch loop while the caller calls it once per epoch)
    with arguments that count optimizer steps: a `torch.optim.lr_scheduler` class
    whose period names iterations (`CosineAnnealingLR(optimizer, T_max=len(loader) *
    epochs)`, `LinearLR(..., total_iters=warmup_iters)`, `StepLR(..., step_size=10 *
    len(loader))`, a `LambdaLR` whose lambda counts `warmup_steps`), `OneCycleLR` with
    `steps_per_epoch=` or a `total_steps=` in iterations, `CyclicLR` (sized in iterations
    by default), and transformers' `get_*_schedule_with_warmup` / `get_scheduler` with
    `num_training_steps=` in steps. Arguments that name epochs (`T_max=args.epochs`), plain
    numbers, lambdas defined elsewhere and `scheduler.step(epoch)` are left alone. A
    scheduler picked by a configuration switch (`if name == "cosine": ... elif name ==
    "cyclic": ...`) counts when one of its choices is sized in steps: stepped once per epoch
    whatever the choice, that choice is wrong (unless the step is itself switched between
    per batch and per epoch).

    What a training framework runs once per epoch counts as the epoch loop: an Ignite
    handler of `Events.EPOCH_STARTED`/`EPOCH_COMPLETED`, Lightning's `on_train_epoch_*`
    hooks, a `TrainerCallback`'s `on_epoch_begin`/`on_epoch_end`; so does a scheduler that
    Lightning's `configure_optimizers` returns without an `"interval"` (Lightning's default
    is `"epoch"`) or with `"interval": "epoch"`.

    ## Why is this bad?
    The scheduler counts its `step()` calls. Sized for `len(loader) * epochs` steps but
    stepped once per epoch, it has moved `1 / len(loader)` of the way through its schedule
    when training ends: a cosine or linear decay never decays, a warm-up never finishes (the
    learning rate stays near zero for the whole run), a one-cycle schedule never reaches
    its peak.

    ## Example
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=0.1, epochs=epochs, steps_per_epoch=len(loader))
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
            scheduler.step()

    ## Use instead
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=0.1, epochs=epochs, steps_per_epoch=len(loader))
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
                scheduler.step()
    """

    code = "ML329"
    name = "iteration-scheduler-stepped-per-epoch"
    needs = frozenset({"scope"})
    severity = Severity.WARNING
    triggers = ("lr_scheduler", "schedule")
    _TRAIN = (HEADER + "def train(model, loader, criterion, epochs):\n"
              "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "    scheduler = {scheduler}\n"
              "    for epoch in range(epochs):\n"
              "        for x, y in loader:\n"
              "            optimizer.zero_grad()\n"
              "            criterion(model(x), y).backward()\n"
              "            optimizer.step()\n"
              "{batch_end}"
              "{epoch_end}")
    valid = [
        # stepped per batch, as sized
        _TRAIN.format(scheduler="torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, "
                      "epochs=epochs, steps_per_epoch=len(loader))",
                      batch_end="            scheduler.step()\n", epoch_end=""),
        # sized in epochs, stepped per epoch
        _TRAIN.format(scheduler="torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, "
                      "T_max=epochs)", batch_end="", epoch_end="        scheduler.step()\n"),
        _TRAIN.format(scheduler="torch.optim.lr_scheduler.MultiStepLR(optimizer, "
                      "milestones=args.lr_steps)", batch_end="",
                      epoch_end="        scheduler.step()\n"),
        # a plain number: epochs or iterations, not known
        _TRAIN.format(scheduler="torch.optim.lr_scheduler.LinearLR(optimizer, "
                      "total_iters=5)", batch_end="", epoch_end="        scheduler.step()\n"),
        # a lambda of the project: what it counts is not known
        _TRAIN.format(scheduler="torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)",
                      batch_end="", epoch_end="        scheduler.step()\n"),
        # an explicit position in the schedule
        _TRAIN.format(scheduler="torch.optim.lr_scheduler.CosineAnnealingWarmRestarts("
                      "optimizer, T_0=len(loader))", batch_end="",
                      epoch_end="        scheduler.step(epoch)\n"),
        # a builder of the project
        _TRAIN.format(scheduler="build_scheduler(optimizer, len(loader))", batch_end="",
                      epoch_end="        scheduler.step()\n"),
        # the scheduler handed to the epoch function, which steps it per batch
        HEADER + "from engine import train_one_epoch\n\n"
        "def main(model, loader, epochs):\n"
        "    optimizer = torch.optim.AdamW(model.parameters())\n"
        "    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, "
        "total_steps=epochs * len(loader))\n"
        "    for epoch in range(epochs):\n"
        "        train_one_epoch(model, loader, optimizer, scheduler)\n",
        # handed to a function of the file that steps it per batch
        HEADER + "def train_epoch(model, loader, optimizer, scheduler):\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        F.cross_entropy(model(x), y).backward()\n"
        "        optimizer.step()\n"
        "        scheduler.step()\n\n\n"
        "def main(model, loader, epochs):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, epochs=epochs, "
        "steps_per_epoch=len(loader))\n"
        "    for epoch in range(epochs):\n"
        "        train_epoch(model, loader, optimizer, scheduler)\n",
        # the configuration picks the scheduler, and whether it steps per batch or per epoch
        HEADER + "def train(model, loader, epochs, name):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    per_batch = False\n"
        "    if name == 'cosine':\n"
        "        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)\n"
        "    else:\n"
        "        scheduler = torch.optim.lr_scheduler.CyclicLR(optimizer, 0.001, 0.1)\n"
        "        per_batch = True\n"
        "    for epoch in range(epochs):\n"
        "        for x, y in loader:\n"
        "            optimizer.zero_grad()\n"
        "            F.cross_entropy(model(x), y).backward()\n"
        "            optimizer.step()\n"
        "            if per_batch:\n"
        "                scheduler.step()\n"
        "        if not per_batch:\n"
        "            scheduler.step()\n",
        # one loop: the batch loop itself
        HEADER + "def fit(model, loader, criterion, optimizer):\n"
        "    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, len(loader))\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        criterion(model(x), y).backward()\n"
        "        optimizer.step()\n"
        "        scheduler.step()\n",
        # Lightning steps it per batch, as sized
        HEADER + "import lightning as L\n\n\nclass Classifier(L.LightningModule):\n"
        "    def configure_optimizers(self):\n"
        "        optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3)\n"
        "        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, "
        "total_steps=self.trainer.estimated_stepping_batches)\n"
        "        return {\"optimizer\": optimizer, \"lr_scheduler\": {\"scheduler\": "
        "scheduler, \"interval\": \"step\"}}\n",
    ]
    invalid = [
        invalid_at(_TRAIN.format(scheduler="torch.optim.lr_scheduler.OneCycleLR(optimizer, "
                                 "0.1, epochs=epochs, steps_per_epoch=len(loader))",
                                 batch_end="", epoch_end="        scheduler.step()\n"),
                   "        scheduler.step()"),
        invalid_at(_TRAIN.format(scheduler="torch.optim.lr_scheduler.CosineAnnealingLR("
                                 "optimizer, T_max=epochs * len(loader))",
                                 batch_end="", epoch_end="        scheduler.step()\n"),
                   "        scheduler.step()"),
        # sized through a local name
        invalid_at(HEADER + "from torch.optim.lr_scheduler import LinearLR\n\n"
                   "def train(model, loader, criterion, epochs):\n"
                   "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                   "    warmup_iters = 500\n"
                   "    scheduler = LinearLR(optimizer, 0.01, total_iters=warmup_iters)\n"
                   "    for epoch in range(epochs):\n"
                   "        for x, y in loader:\n"
                   "            optimizer.zero_grad()\n"
                   "            criterion(model(x), y).backward()\n"
                   "            optimizer.step()\n"
                   "        scheduler.step()\n",
                   "        scheduler.step()"),
        invalid_at(_TRAIN.format(scheduler="torch.optim.lr_scheduler.LambdaLR(optimizer, "
                                 "lambda step: min(1.0, (step + 1) / warmup_steps))",
                                 batch_end="", epoch_end="        scheduler.step()\n"),
                   "        scheduler.step()"),
        invalid_at(HEADER + "from transformers import get_linear_schedule_with_warmup\n\n"
                   "def train(model, loader, epochs):\n"
                   "    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)\n"
                   "    total_steps = len(loader) * epochs\n"
                   "    scheduler = get_linear_schedule_with_warmup(optimizer, 0, total_steps)\n"
                   "    for epoch in range(epochs):\n"
                   "        for batch in loader:\n"
                   "            model(**batch).loss.backward()\n"
                   "            optimizer.step()\n"
                   "            optimizer.zero_grad()\n"
                   "        scheduler.step()\n",
                   "        scheduler.step()"),
        # the batch loop in a function of the file
        invalid_at(HEADER + "def run_epoch(model, loader, optimizer):\n"
                   "    for x, y in loader:\n"
                   "        optimizer.zero_grad()\n"
                   "        F.cross_entropy(model(x), y).backward()\n"
                   "        optimizer.step()\n\n\n"
                   "def main(model, loader, epochs):\n"
                   "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                   "    scheduler = torch.optim.lr_scheduler.CyclicLR(optimizer, 0.001, 0.1)\n"
                   "    for epoch in range(epochs):\n"
                   "        run_epoch(model, loader, optimizer)\n"
                   "        scheduler.step()\n",
                   "        scheduler.step()"),
        # a configuration switch: stepped once per epoch, the CyclicLR choice is wrong (ivadomed)
        invalid_at(HEADER + "def train(model, loader, epochs, name):\n"
                   "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                   "    if name == 'cosine':\n"
                   "        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, "
                   "epochs)\n"
                   "    elif name == 'cyclic':\n"
                   "        scheduler = torch.optim.lr_scheduler.CyclicLR(optimizer, 0.001, 0.1)\n"
                   "    for epoch in range(epochs):\n"
                   "        for x, y in loader:\n"
                   "            optimizer.zero_grad()\n"
                   "            F.cross_entropy(model(x), y).backward()\n"
                   "            optimizer.step()\n"
                   "        scheduler.step()\n",
                   "        scheduler.step()"),
        # handed to a function of the file that steps it after its batch loop, once per call
        invalid_at(HEADER + "def train_epoch(model, loader, optimizer, scheduler):\n"
                   "    for x, y in loader:\n"
                   "        optimizer.zero_grad()\n"
                   "        F.cross_entropy(model(x), y).backward()\n"
                   "        optimizer.step()\n"
                   "    scheduler.step()\n\n\n"
                   "def main(model, loader, epochs):\n"
                   "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                   "    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, "
                   "epochs=epochs, steps_per_epoch=len(loader))\n"
                   "    for epoch in range(epochs):\n"
                   "        train_epoch(model, loader, optimizer, scheduler)\n",
                   "    scheduler.step()"),
        # ... or to a training function with its own epoch loop
        invalid_at(HEADER + "def fit(model, optimizer, loader, epochs, scheduler=None):\n"
                   "    for epoch in range(epochs):\n"
                   "        for x, y in loader:\n"
                   "            optimizer.zero_grad()\n"
                   "            F.cross_entropy(model(x), y).backward()\n"
                   "            optimizer.step()\n"
                   "        if scheduler is not None:\n"
                   "            scheduler.step()\n\n\n"
                   "optimizer = torch.optim.NAdam(model.parameters(), lr=1e-3)\n"
                   "onecycle = torch.optim.lr_scheduler.OneCycleLR(\n"
                   "    optimizer, epochs=60, steps_per_epoch=len(train_loader), max_lr=1e-2)\n"
                   "fit(model, optimizer, train_loader, 60, scheduler=onecycle)\n",
                   "            scheduler.step()"),
        # Lightning's default interval is one step per epoch
        invalid_at(HEADER + "import lightning as L\n\n\nclass Classifier(L.LightningModule):\n"
                   "    def configure_optimizers(self):\n"
                   "        optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3)\n"
                   "        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, "
                   "max_lr=1e-2, total_steps=self.trainer.estimated_stepping_batches)\n"
                   "        return {\"optimizer\": optimizer, \"lr_scheduler\": scheduler}\n",
                   "        return {"),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._reported: set[int] = set()

    def check(self, scope: Scope) -> None:
        for site, name in scheduler_steps(self.context, scope):
            if site.node.args:
                continue  # an explicit position in the schedule
            built = self._iteration_sized(scope, name)
            if built is None:
                continue
            if _also_stepped_per_batch(scope, site, name):
                continue  # a switch between the two (`if step_per_batch:`)
            evidence = _per_epoch_evidence(self.context, scope, site, name)
            if evidence is not None:
                self._report(site, name, *built, evidence)
        self._check_passed(scope)
        self._check_callback(scope)
        self._check_lightning(scope)

    def _check_callback(self, scope: Scope) -> None:
        """A scheduler sized in iterations stepped, unconditionally, in a function a
        framework runs once per epoch (an Ignite `EPOCH_COMPLETED` handler, Lightning's
        `on_train_epoch_end`, a `TrainerCallback.on_epoch_end`)."""
        found = callback_steps(self.context, scope, "epoch")
        if found is None:
            return
        callback, steps = found
        for site, name in steps:
            if site.node.args:
                continue
            built = self._iteration_sized(scope, name)
            if built is None and callback.outer is not None and not scope.assigned(
                    name.split(".")[0]):
                built = self._iteration_sized(callback.outer, name)
            if built is not None:
                self._report(site, name, *built,
                             f"in `{callback.function}()`, {callback.hook}")

    def _check_lightning(self, scope: Scope) -> None:
        """A scheduler sized in iterations that Lightning's `configure_optimizers` leaves
        to step once per epoch (no `"interval"`, or `"interval": "epoch"`)."""
        for scheduler, interval, said, statement in lightning_schedulers(self.context, scope):
            if interval != "epoch":
                continue
            built = None
            if isinstance(scheduler, cst.Name):
                built = self._iteration_sized(scope, scheduler.value)
            elif isinstance(scheduler, cst.Call):
                qualified = self.context.call_name(scheduler) or ""
                kind = qualified.rsplit(".", 1)[-1]
                if (qualified.startswith("torch.optim.lr_scheduler.") and kind in SCHEDULERS
                        ) or _TRANSFORMERS_SCHEDULE.match(qualified):
                    sized = _iteration_sized(scope, kind, scheduler)
                    built = (kind, sized) if sized is not None else None
            if built is None or id(said) in self._reported:
                continue
            self._reported.add(id(said))
            named = source_of(scheduler) if isinstance(scheduler, cst.Name) else "the scheduler"
            how = "its `\"interval\": \"epoch\"`" if said is not scheduler else (
                "no `\"interval\"`")
            self.report(
                said,
                f"`{named}` ({built[0]}) is sized in optimizer steps ({built[1]}) but "
                f"`configure_optimizers` returns it with {how}, so Lightning steps it once "
                "per epoch: the schedule advances one step per epoch instead of one per "
                "batch; return it with `\"interval\": \"step\"`",
                statement=statement,
            )

    def _iteration_sized(self, scope: Scope, name: str) -> tuple[str, str] | None:
        """(its class, how it counts steps) for a scheduler built here in iterations, or for
        the first such choice of several schedulers assigned to the name (one per branch of
        a configuration switch); None when none counts steps, or the name may hold another
        value."""
        built = _scheduler_built(self.context, scope, name)
        if built is None:
            return None
        kind, constructor = built
        sized = _iteration_sized(scope, kind, constructor)
        # the other schedulers assigned to the name: one per branch of a configuration switch
        in_steps: list[tuple[str, str]] = [] if sized is None else [(kind, sized)]
        in_epochs = sized is None
        for assignment in scope.assigned(name):
            value = assignment.value
            if value is constructor:
                continue
            qualified = self.context.call_name(value) if isinstance(value, cst.Call) else None
            other = (qualified or "").rsplit(".", 1)[-1]
            if not isinstance(value, cst.Call) or not (
                    (qualified or "").startswith("torch.optim.lr_scheduler.")
                    or _TRANSFORMERS_SCHEDULE.match(qualified or "")):
                return None
            other_sized = _iteration_sized(scope, other, value)
            if other_sized is None:
                in_epochs = True
            elif any(isinstance(a, cst.If) for a in assignment.site.ancestors):
                in_steps.append((other, other_sized))
        if not in_steps:
            return None
        if in_epochs:
            # a switch that may build a scheduler counted in epochs: stepping once per epoch
            # is still wrong for the branch that builds one counted in steps (ivadomed's
            # `CyclicLR` next to `CosineAnnealingLR(optimizer, num_epochs)`)
            kind, sized = in_steps[0]
            return kind, f"{sized}, when the configuration picks it"
        return in_steps[0]

    def _check_passed(self, scope: Scope) -> None:
        """A scheduler built here in iterations and passed to a function of this file that
        steps it once per epoch: in its own epoch loop, or once per call after its batch loop
        when this scope calls it in a loop."""
        for call in scope.calls:
            callee = callee_of(self.context, scope, call.node)
            if callee is None:
                continue
            for arg, parameter in _arguments_to_parameters(self.context, call.node, callee):
                name = dotted_name(arg)
                built = self._iteration_sized(scope, name) if name else None
                if built is None:
                    continue
                inner = scope_of(self.context, callee)
                for step, receiver in inner.method_calls("step"):
                    if dotted_name(receiver) != parameter or step.node.args or (
                            _also_stepped_per_batch(inner, step, parameter)):
                        continue
                    evidence = _per_epoch_evidence(self.context, inner, step, parameter)
                    if evidence is None and not step.loops and call.loops and any(
                            s.loops and s.order < step.order
                            for s in optimizer_steps(self.context, inner)):
                        evidence = (f"`{callee.name.value}()` steps it once per call, after "
                                    f"its batch loop, and is called in "
                                    f"`{_loop_text(call.loops[-1])}`")
                    if evidence is not None:
                        self._report(step, parameter, *built, evidence, built_as=name)

    def _report(self, site: CallSite, name: str, kind: str, sized: str, evidence: str,
                built_as: str | None = None) -> None:
        if id(site.node) in self._reported:
            return
        self._reported.add(id(site.node))
        passed = f", passed in as `{built_as}`" if built_as and built_as != name else ""
        self.report_at(
            site, site.node,
            f"`{name}` ({kind}{passed}) is sized in optimizer steps ({sized}) but "
            f"`{name}.step()` runs once per epoch ({evidence}): the schedule advances one "
            f"step per epoch instead of one per batch, so training ends near its start; call "
            f"it after each `optimizer.step()`, in the batch loop, or size it in epochs",
        )


def _also_stepped_per_batch(scope: Scope, site: CallSite, name: str) -> bool:
    """`name.step()` is also called in a loop nested in the loop (or function body) of `site`:
    the code steps it per batch or per epoch by configuration."""
    outer = site.loops[-1] if site.loops else None
    for other, receiver in scope.method_calls("step"):
        if other is site or dotted_name(receiver) != name:
            continue
        loops = other.loops
        if outer is None and loops or outer is not None and any(
                loop is outer for loop in loops[:-1]):
            return True
    return False


def _arguments_to_parameters(context, call: cst.Call, callee: cst.FunctionDef
                             ) -> list[tuple[cst.BaseExpression, str]]:
    """(argument, the callee's parameter it binds) for each plain argument of the call."""
    params = _parameters(callee)
    if context.method_owners.get(id(callee)) is not None and isinstance(
            call.func, cst.Attribute):
        params = params[1:]  # `self.fit(...)`: self is bound
    found = []
    for index, arg in enumerate(call.args):
        if arg.star:
            break
        if arg.keyword is not None:
            if arg.keyword.value in params:
                found.append((arg.value, arg.keyword.value))
        elif index < len(params):
            found.append((arg.value, params[index]))
    return found


# -- ML340 ------------------------------------------------------------------------------------

# base classes and schedulers whose `get_lr()` raises (NotImplementedError): not flagged
_GET_LR_RAISES = frozenset({"LRScheduler", "_LRScheduler", "ReduceLROnPlateau", "SequentialLR",
                            "ChainedScheduler"})
# schedulers whose `get_lr()` is computed from the step count alone: the value read outside
# `step()` is the rate in use, only the warning is wrong (checked against the installed torch
# by tests/test_rules_training_schedule.py); the others compute the next rate from the
# current one
_CLOSED_FORM = frozenset({"LambdaLR", "CyclicLR", "OneCycleLR", "CosineAnnealingWarmRestarts"})


class SchedulerGetLr(ScopeRule):
    """`scheduler.get_lr()` is read instead of `scheduler.get_last_lr()`.

    ## What it does
    Finds a call of `get_lr()` on a learning-rate scheduler of `torch.optim.lr_scheduler`
    (as the semantic model knows the value: built in the function, a `self` attribute set
    in the class, a factory of the project) or on one of transformers' schedules (a
    `LambdaLR`). A class of the project with its own `get_lr`, a scheduler subclass calling
    its own `get_lr`, the schedulers whose `get_lr()` raises, and receivers of unknown kind
    (`trainer.get_lr()`, `optim_wrapper.get_lr()`) are left alone. The fix (unsafe: the
    value read changes) calls `get_last_lr()`.

    ## Why is this bad?
    Since PyTorch 1.4, `get_lr()` is the scheduler's internal step, meant to run only inside
    `step()`. Called from outside, it warns on every call ("To get the last learning rate
    computed by the scheduler, please use `get_last_lr()`"), and for the chainable
    schedulers (`StepLR`, `MultiStepLR`, `ExponentialLR`, `CosineAnnealingLR`, `LinearLR`,
    `ConstantLR`, `PolynomialLR`, `MultiplicativeLR`) it computes the *next* rate from the
    current one, which is not the rate in use on the steps where it changes:
    `StepLR(gamma=0.5)` reports a quarter of the rate instead of half. Logs, and any
    learning rate set from them, are wrong. (`LambdaLR`, `OneCycleLR`, `CyclicLR` and
    `CosineAnnealingWarmRestarts` compute it from the step count: their value is right and
    only the warning is; `SequentialLR`, `ChainedScheduler` and `ReduceLROnPlateau` raise.)

    ## Example
        print(f"lr {scheduler.get_lr()[0]:.5f}")

    ## Use instead
        print(f"lr {scheduler.get_last_lr()[0]:.5f}")
    """

    code = "ML340"
    name = "scheduler-get-lr-read"
    needs = frozenset({"scope", "semantic"})
    severity = Severity.WARNING
    fix = "unsafe"
    triggers = ("get_lr",)
    _LOOP = (HEADER + "def train(model, loader, epochs):\n"
             "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
             "    scheduler = {scheduler}\n"
             "    for epoch in range(epochs):\n"
             "        for x, y in loader:\n"
             "            optimizer.zero_grad()\n"
             "            F.cross_entropy(model(x), y).backward()\n"
             "            optimizer.step()\n"
             "        scheduler.step()\n"
             "        print('lr', scheduler.{read}()[0])\n")
    valid = [
        _LOOP.format(scheduler="torch.optim.lr_scheduler.StepLR(optimizer, 30)",
                     read="get_last_lr"),
        # a scheduler of the project, with its own get_lr
        HEADER + "class Warmup:\n"
        "    def __init__(self, optimizer, steps):\n"
        "        self.optimizer, self.steps, self.n = optimizer, steps, 0\n\n"
        "    def get_lr(self):\n"
        "        return [0.1 * min(1.0, self.n / self.steps)]\n\n\n"
        "def log(optimizer):\n"
        "    scheduler = Warmup(optimizer, 100)\n"
        "    print(scheduler.get_lr())\n",
        # a subclass of a torch scheduler computing its rate in get_lr
        HEADER + "class Scaled(torch.optim.lr_scheduler.LRScheduler):\n"
        "    def get_lr(self):\n"
        "        return [lr * 0.5 for lr in super().get_lr()]\n\n"
        "    def _get_closed_form_lr(self):\n"
        "        return self.get_lr()\n",
        # an object of unknown kind
        HEADER + "def log(trainer):\n    print(trainer.get_lr())\n",
        # ReduceLROnPlateau has no get_lr to misread (it raises)
        _LOOP.format(scheduler="torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)",
                     read="get_last_lr"),
    ]
    invalid = [
        invalid_at(
            _LOOP.format(scheduler="torch.optim.lr_scheduler.StepLR(optimizer, 30)",
                         read="get_lr"),
            "get_lr()",
            fixed=_LOOP.format(scheduler="torch.optim.lr_scheduler.StepLR(optimizer, 30)",
                               read="get_last_lr"),
        ),
        # an attribute of a trainer
        invalid_at(
            HEADER + "from torch.optim import lr_scheduler\n\n"
            "class Trainer:\n"
            "    def __init__(self, model):\n"
            "        self.optimizer = torch.optim.Adam(model.parameters())\n"
            "        self.scheduler = lr_scheduler.CosineAnnealingLR(self.optimizer, 100)\n\n"
            "    def log(self, writer, epoch):\n"
            "        writer.add_scalar('lr', self.scheduler.get_lr()[0], epoch)\n",
            "get_lr()",
            fixed=HEADER + "from torch.optim import lr_scheduler\n\n"
            "class Trainer:\n"
            "    def __init__(self, model):\n"
            "        self.optimizer = torch.optim.Adam(model.parameters())\n"
            "        self.scheduler = lr_scheduler.CosineAnnealingLR(self.optimizer, 100)\n\n"
            "    def log(self, writer, epoch):\n"
            "        writer.add_scalar('lr', self.scheduler.get_last_lr()[0], epoch)\n",
        ),
        invalid_at(
            HEADER + "from transformers import get_linear_schedule_with_warmup\n\n"
            "def train(optimizer, steps):\n"
            "    scheduler = get_linear_schedule_with_warmup(optimizer, 100, steps)\n"
            "    lr = scheduler.get_lr()[0]\n",
            "get_lr()",
            fixed=HEADER + "from transformers import get_linear_schedule_with_warmup\n\n"
            "def train(optimizer, steps):\n"
            "    scheduler = get_linear_schedule_with_warmup(optimizer, 100, steps)\n"
            "    lr = scheduler.get_last_lr()[0]\n",
        ),
    ]

    def check(self, scope: Scope) -> None:
        for site, receiver in scope.method_calls("get_lr"):
            if site.node.args:
                continue
            name = dotted_name(receiver)
            if name is None:
                continue  # `super().get_lr()` in a scheduler's own method
            found = self._scheduler_kind(scope, site, receiver, name)
            if found is None:
                continue
            kind, chainable = found
            func = site.node.func
            assert isinstance(func, cst.Attribute)
            if not chainable:
                consequence = "it returns the rate in use, but warns on every call"
            else:
                which = "it" if len(chainable) == 1 and " or " not in kind else (
                    "for " + " or ".join(f"`{cls}`" for cls in chainable) + " it")
                consequence = (f"it warns on every call, and {which} computes the next rate "
                               f"from the current one, which on the steps where the rate "
                               f"changes is not the rate in use")
            self.report_at(
                site, site.node,
                f"`{name}.get_lr()` on a {kind} is the scheduler's internal step, meant to run "
                f"only inside `step()`: {consequence}; read `{name}.get_last_lr()`",
                fix=Fix(((func, func.with_changes(attr=cst.Name("get_last_lr"))),),
                        "read `get_last_lr()`", safe=False),
            )

    def _scheduler_kind(self, scope: Scope, site: CallSite, receiver: cst.BaseExpression,
                        name: str) -> tuple[str, list[str]] | None:
        """(`StepLR`, those of its possible classes whose get_lr is not the closed form) when
        the receiver holds one of torch's schedulers (or transformers' `LambdaLR`s); None
        when not known."""
        kind = self.context.semantic.kind(receiver, scope, site.order)
        if kind is not None:
            if kind.kind != SCHEDULER or not (kind.cls or "").startswith(
                    "torch.optim.lr_scheduler."):
                return None
            classes = self._branch_classes(scope, name, site.order) or [
                (kind.cls or "").rsplit(".", 1)[-1]]
            if any(cls in _GET_LR_RAISES for cls in classes):
                return None
            described = " or ".join(f"`{cls}`" for cls in classes)
            return described, [cls for cls in classes if cls not in _CLOSED_FORM]
        built = _scheduler_built(self.context, scope, name)
        if built is not None and built[0] not in SCHEDULERS:
            return f"transformers `{built[0]}` schedule (a `LambdaLR`)", []
        return None

    def _branch_classes(self, scope: Scope, name: str, before: int) -> list[str]:
        """The torch scheduler classes assigned to `name` in this scope before `before`, when
        there are several (one per branch of `if config == ...:`), in source order."""
        classes: list[str] = []
        for assignment in scope.assigned(name, before):
            value = assignment.value
            qualified = self.context.call_name(value) if isinstance(value, cst.Call) else None
            if qualified and qualified.startswith("torch.optim.lr_scheduler."):
                cls = qualified.rsplit(".", 1)[-1]
                if cls not in classes:
                    classes.append(cls)
        return classes if len(classes) > 1 else []


# -- ML341 ------------------------------------------------------------------------------------


class ZeroGradBeforeStep(ScopeRule):
    """`zero_grad()` runs between `backward()` and `step()` in one training step.

    ## What it does
    Finds `optimizer.zero_grad()` (or `model.zero_grad()`) that, in one iteration of a loop
    (or in the body of a function run once per step), comes after `loss.backward()` and before
    the `step()` of the same optimizer, with no other `backward()` in between. A
    `model.zero_grad()` counts only when the function steps a single optimizer.

    Not reported: a `zero_grad()` under a condition (`if`, `else`, `try`), as in gradient
    accumulation; one after the step (the usual order at the end of an iteration); the
    `zero_grad()` of another optimizer (a GAN's `opt_d.zero_grad()` before `opt_g.step()`);
    a step that passes a closure (LBFGS zeroes inside it); a `zero_grad()` followed by a new
    `backward()` before the step.

    ## Why is this bad?
    `backward()` stores the gradients in `.grad`; `zero_grad()` then clears them (sets them
    to `None` by default), so `step()` applies nothing, or only weight decay and momentum.
    The model trains without error but does not learn.

    ## Example
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()

    ## Use instead
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    """

    code = "ML341"
    name = "zero-grad-before-step"
    needs = frozenset({"scope"})
    severity = Severity.ERROR
    triggers = ("zero_grad",)
    valid = [
        # the usual order
        HEADER + "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        optimizer.step()\n",
        # cleared at the end of the iteration, after the step
        HEADER + "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        optimizer.step()\n"
        "        optimizer.zero_grad()\n",
        # gradient accumulation: cleared under a condition
        HEADER + "def train(model, loader, optimizer, accum=4):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        (F.mse_loss(model(x), y) / accum).backward()\n"
        "        if (i + 1) % accum == 0:\n"
        "            optimizer.step()\n"
        "            optimizer.zero_grad()\n",
        # a GAN: the generator's optimizer is zeroed before the discriminator's step; the
        # generator's gradients of the discriminator's loss are not wanted
        HEADER + "def train(G, D, loader, opt_g, opt_d):\n"
        "    for real in loader:\n"
        "        fake = G(torch.randn(real.size(0), 8))\n"
        "        opt_d.zero_grad()\n"
        "        (D(fake).mean() - D(real).mean()).backward()\n"
        "        opt_g.zero_grad()\n"
        "        opt_d.step()\n"
        "        (-D(fake).mean()).backward()\n"
        "        opt_g.step()\n",
        # a model zeroed before another backward that the step uses
        HEADER + "def train(G, D, loader, opt_g, opt_d):\n"
        "    for real in loader:\n"
        "        D(real).mean().backward()\n"
        "        opt_d.step()\n"
        "        G.zero_grad()\n"
        "        (-D(G(real)).mean()).backward()\n"
        "        opt_g.step()\n",
        # LBFGS: the closure zeroes, then computes the gradients
        HEADER + "def train(model, x, y, optimizer):\n"
        "    for _ in range(20):\n"
        "        def closure():\n"
        "            optimizer.zero_grad()\n"
        "            loss = F.mse_loss(model(x), y)\n"
        "            loss.backward()\n"
        "            return loss\n"
        "        optimizer.step(closure)\n",
        # zeroed after backward, then the gradients are computed again before the step
        HEADER + "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        optimizer.zero_grad()\n"
        "        F.l1_loss(model(x), y).backward()\n"
        "        optimizer.step()\n",
    ]
    invalid = [
        invalid_at(
            HEADER + "def train(model, loader, optimizer):\n"
            "    for x, y in loader:\n"
            "        loss = F.mse_loss(model(x), y)\n"
            "        loss.backward()\n"
            "        optimizer.zero_grad()\n"
            "        optimizer.step()\n",
            "optimizer.zero_grad()",
        ),
        # a script's top-level loop, zeroing through the model
        invalid_at(
            HEADER + "model = nn.Linear(4, 1)\n"
            "opt = torch.optim.Adam(model.parameters())\n"
            "for x, y in data:\n"
            "    F.mse_loss(model(x), y).backward()\n"
            "    model.zero_grad()\n"
            "    opt.step()\n",
            "model.zero_grad()",
        ),
        # a function run once per training step
        invalid_at(
            HEADER + "class Trainer:\n"
            "    def __init__(self, model):\n"
            "        self.model = model\n"
            "        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n\n"
            "    def train_step(self, x, y):\n"
            "        F.cross_entropy(self.model(x), y).backward()\n"
            "        self.optimizer.zero_grad()\n"
            "        self.optimizer.step()\n",
            "self.optimizer.zero_grad()",
        ),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        zeroings = scope.method_calls("zero_grad")
        if not zeroings:
            return
        backwards = [site for site, _ in backward_calls(context, scope)]
        if not backwards:
            return
        steps = [step for step in optimizer_steps(context, scope)
                 if not (step.node.args and "scaler" not in last_segment(receiver_name(step)))]
        stepped = {stepped_optimizer(step) for step in steps}
        for site, receiver in zeroings:
            name = dotted_name(receiver)
            if name is None:
                continue
            if is_optimizer(context, scope, name):
                mine = [step for step in steps if stepped_optimizer(step) == name]
            elif len(stepped) == 1:
                mine = steps  # a model's zero_grad(): the one optimizer the function steps
            else:
                continue
            region = site.loops[-1] if site.loops else scope.root
            if any(isinstance(a, (cst.If, cst.Else, cst.Try, cst.ExceptHandler, cst.IfExp))
                   for a in site.ancestors_below(region)):
                continue
            in_region = [s for s in mine if region is scope.root or s.inside(region)]
            after = [s for s in in_region if s.order > site.order]
            before = [b for b in backwards
                      if (region is scope.root or b.inside(region)) and b.order < site.order]
            if not after or not before:
                continue
            step = after[0]
            last_backward = before[-1]
            if any(last_backward.order < s.order < site.order for s in in_region):
                continue  # stepped since that backward: this zeroing starts the next step
            if any(site.order < b.order < step.order for b in backwards):
                continue  # the gradients are computed again before the step
            self.report_at(
                site, site.node,
                f"`{name}.zero_grad()` runs after `backward()` and before "
                f"`{stepped_optimizer(step)}.step()`, so the step applies cleared gradients and the "
                "model does not learn; call `zero_grad()` before `backward()` (or after "
                "`step()`)",
            )


# -- ML342 ------------------------------------------------------------------------------------

# methods and attributes that give the same values as their tensor: what is re-wrapped
# (`.type(dtype)` casts as `.float()` does)
_SAME_VALUES = VALUE_METHODS | {"data", "type"}
# a callable whose name says it is a model, a part of one, or a loss (when nothing else is
# known of it)
_MODEL_OR_LOSS_NAME = LazyPattern(
    r"loss|criterion|model|net|encoder|decoder|embed|head|backbone|classifier|generator|"
    r"discriminator|^[gd]$", re.IGNORECASE)


def _true(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _rewrapped(context, call: cst.Call) -> cst.BaseExpression | None:
    """The tensor that `call` turns into a new leaf: `Variable(x, requires_grad=True)`,
    `torch.tensor(x, requires_grad=True)`, `x.detach().requires_grad_()`,
    `x.data.requires_grad_()`; else None."""
    qualified = context.call_name(call)
    if qualified in VARIABLES or qualified == "torch.tensor":
        if call.args and call.args[0].keyword is None and _true(
                _argument(call, -1, "requires_grad")):
            return call.args[0].value
        return None
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_"):
        return None
    if call.args and not _true(call.args[0].value):
        return None
    inner = func.value
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and (
            inner.func.attr.value == "detach"):
        return inner.func.value
    if isinstance(inner, cst.Attribute) and inner.attr.value == "data":
        return inner.value
    return None


def _strip_same_values(expr: cst.BaseExpression) -> cst.BaseExpression:
    while True:
        if isinstance(expr, cst.Attribute) and expr.attr.value in _SAME_VALUES:
            expr = expr.value
        elif (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
              and expr.func.attr.value in _SAME_VALUES):
            expr = expr.func.value
        else:
            return expr


def _model_output(context, scope: Scope, expr: cst.BaseExpression, before: int,
                  statement: cst.CSTNode | None = None, depth: int = 0) -> bool:
    """`expr` is a tensor that this function computes with a model or a loss: the call of a
    module (known to be one, or a callable whose name says so), of `torch.nn.functional`,
    a name assigned such a value earlier in the function (not by `statement`, the one that
    re-wraps it), or arithmetic on one."""
    expr = _strip_same_values(expr)
    if depth > 4:
        return False
    if isinstance(expr, cst.BinaryOperation):
        return any(_model_output(context, scope, side, before, statement, depth + 1)
                   for side in (expr.left, expr.right))
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and dotted_name(expr.func) is None:
            # a method of a computed tensor: `head(x).mean()`
            return _model_output(context, scope, expr.func.value, before, statement, depth + 1)
        qualified = context.call_name(expr)
        if qualified is not None:
            return qualified.startswith("torch.nn.functional.")
        kind = context.semantic.kind(expr.func, scope, before)
        if kind is not None:
            return kind.kind == MODULE
        return bool(_MODEL_OR_LOSS_NAME.search(last_segment(dotted_name(expr.func))))
    name = dotted_name(expr)
    if name is None:
        return False
    found = [a for a in scope.assigned(name, before) if a.site.statement is not statement]
    if not found or found[-1].value is None:
        return False  # a parameter, a loop's batch, a global: not known to be computed here
    return _model_output(context, scope, found[-1].value, found[-1].site.order, None,
                         depth + 1)


class GraphCutBeforeLoss(ScopeRule):
    """A model's output or loss is re-wrapped as a new leaf tensor, then backpropagated.

    ## What it does
    Finds `Variable(x, requires_grad=True)`, `torch.tensor(x, requires_grad=True)`,
    `x.detach().requires_grad_()` or `x.data.requires_grad_()` where `x` is a tensor the
    function computed with a model or a loss (the call of a module, of a loss function, or of
    a callable whose name says it is one), when the new tensor (or what is computed from it)
    later reaches `backward()`.

    Not reported: a tensor of unknown origin (a parameter, a data batch, a global), a tensor
    built by torch (`torch.randn(...)`), and a leaf the code wants gradients of: one whose
    `.grad` is read, passed to `torch.autograd.grad`, or given to an optimizer (adversarial
    examples, style transfer, feature inversion).

    ## Why is this bad?
    The new tensor is a leaf of the autograd graph: it has no history, so `backward()` stops
    there and no gradient reaches the model's parameters. `requires_grad=True` only makes the
    error go away ("element 0 of tensors does not require grad"); the optimizer then steps
    with no gradients and the model does not learn.

    ## Example
        out = model(x)
        loss = Variable(criterion(out, y), requires_grad=True)
        loss.backward()

    ## Use instead
        out = model(x)
        loss = criterion(out, y)
        loss.backward()

    ## What it does not see
    On the real-bug benchmark (3 of 5 cases): a re-wrapped value the function never assigns
    (a snippet's `entity_logits` that comes from elsewhere, r-pysi-112135), and a graph cut by
    `.detach()` alone before a loss that other terms still feed (the generator loss of
    r-image2reverb-generator-loss-detached): the cut is only certain where a new leaf is made.
    """

    code = "ML342"
    name = "graph-cut-before-loss"
    needs = frozenset({"scope", "semantic"})
    severity = Severity.ERROR
    triggers = ("requires_grad",)
    valid = [
        HEADER + "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        loss = F.cross_entropy(model(x), y)\n"
        "        loss.backward()\n"
        "        optimizer.step()\n",
        # an adversarial example: the gradient of the input is what is wanted
        HEADER + "def fgsm(model, x, y, eps):\n"
        "    x_adv = x.detach().requires_grad_()\n"
        "    loss = F.cross_entropy(model(x_adv), y)\n"
        "    loss.backward()\n"
        "    return x_adv + eps * x_adv.grad.sign()\n",
        # style transfer: the image is optimized
        HEADER + "def transfer(model, content, style_loss, steps):\n"
        "    image = torch.tensor(model(content), requires_grad=True)\n"
        "    optimizer = torch.optim.LBFGS([image])\n"
        "    for _ in range(steps):\n"
        "        optimizer.zero_grad()\n"
        "        style_loss(image).backward()\n"
        "        optimizer.step()\n",
        # a data batch made a leaf: not the model's output
        HEADER + "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        x = torch.tensor(x, requires_grad=True)\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        optimizer.step()\n",
        # re-wrapped but never backpropagated (a value kept for logging)
        HEADER + "def evaluate(model, x, y):\n"
        "    loss = F.mse_loss(model(x), y)\n"
        "    kept = loss.detach().requires_grad_()\n"
        "    return kept\n",
    ]
    invalid = [
        invalid_at(
            HEADER + "from torch.autograd import Variable\n\n"
            "def train(model, loader, optimizer, criterion):\n"
            "    for x, y in loader:\n"
            "        optimizer.zero_grad()\n"
            "        loss = Variable(criterion(model(x), y), requires_grad=True)\n"
            "        loss.backward()\n"
            "        optimizer.step()\n",
            "Variable(",
        ),
        # a model's features re-wrapped, then the rest of the model and the loss
        invalid_at(
            HEADER + "def train(encoder, head, x, y, optimizer):\n"
            "    features = encoder(x)\n"
            "    features = features.detach().requires_grad_()\n"
            "    loss = F.cross_entropy(head(features), y)\n"
            "    loss.backward()\n"
            "    optimizer.step()\n",
            "requires_grad_()",
        ),
        invalid_at(
            HEADER + "def step(model, x, y, optimizer):\n"
            "    out = model(x)\n"
            "    out = torch.tensor(out.float(), requires_grad=True)\n"
            "    F.mse_loss(out, y).backward()\n"
            "    optimizer.step()\n",
            "torch.tensor(",
        ),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        backwards = backward_calls(context, scope)
        if not backwards:
            return
        for site in scope.calls:
            wrapped = _rewrapped(context, site.node)
            if wrapped is None or not _model_output(context, scope, wrapped, site.order,
                                                    site.statement):
                continue
            reached = self._reaches_backward(scope, site, backwards)
            if reached is None:
                continue
            self.report_at(
                site, site.node,
                f"a new leaf tensor is made of `{source_of(wrapped)}`, which the model "
                f"computed, and {reached}: backward() stops at the new leaf, so no gradient "
                "reaches the model; use the tensor itself (drop the re-wrapping)",
            )

    def _reaches_backward(self, scope: Scope, site: CallSite,
                          backwards: list[tuple[CallSite, cst.BaseExpression]]) -> str | None:
        """How the re-wrapped tensor reaches a later `backward()` (None when it does not, or
        when the code wants the gradient of the new leaf itself)."""
        statement = site.statement
        assign = statement
        if isinstance(assign, cst.SimpleStatementLine) and len(assign.body) == 1:
            assign = assign.body[0]
        target = None
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            target = dotted_name(assign.targets[0].target)
        for b, _ in backwards:
            if b.order > site.order and b.statement is statement:
                return "it is backpropagated"
        if target is None:
            return None
        if re.search(rf"\b{re.escape(target)}\.grad\b", scope.code()):
            return None
        for call in scope.calls:
            qualified = self.context.call_name(call.node) or ""
            if (qualified == "torch.autograd.grad" or qualified.startswith("torch.optim.")) and (
                    target.split(".")[0] in names_in(call.node)):
                return None
        tainted = {target}
        for assignment in sorted(scope.assignments, key=lambda a: a.site.order):
            if assignment.site.order <= site.order or assignment.value is None:
                continue
            if names_in(assignment.value) & tainted or (
                    dotted_name(assignment.value) in tainted):
                tainted.add(assignment.target)
        heads = {name.split(".")[0] for name in tainted}
        for b, expr in backwards:
            if b.order > site.order and (names_in(expr) & heads):
                return f"`{source_of(expr)}.backward()` follows from it"
        return None


# -- ML350 ------------------------------------------------------------------------------------

# a discount factor: what makes `r + gamma * q(s')` a temporal-difference target
_DISCOUNT = LazyPattern(r"gamma|discount", re.IGNORECASE)
# a name that holds a value or Q network: `q_target`, `target_net`, `self.critic`, `qnet`
_VALUE_NETWORK = LazyPattern(
    r"^(?:q|v)(?:_|\d|$)|q_?net|value_?net|critic|target_?(?:net|model|q)|(?:^|_)net(?:\d|_|$)|"
    r"(?:^|_)model(?:\d|_|$)|dqn", re.IGNORECASE)
_CUTS_GRAPH = frozenset({"detach", "detach_", "item", "tolist", "numpy", "data"})


class TdTargetNotDetached(ScopeRule):
    """A temporal-difference target computed by a network keeps its graph into the loss.

    ## What it does
    Finds a loss call (`F.mse_loss`, `F.smooth_l1_loss`, a `torch.nn` loss built in the
    function) given a target that is a discounted bootstrap, `r + gamma * q_target(s').max(1)[0]`:
    an expression multiplied by a name such as `gamma` or `discount`, computed (through the
    function's assignments) from a call of a network (`q_target(...)`, `self.target_net(...)`,
    `critic(...)`) with no `.detach()`, `.item()` or `.data` on the way, outside
    `torch.no_grad()` (and not in a function decorated with it), in a file that never turns
    off `requires_grad` of a network. Off by default: the training-code corpus holds no
    reinforcement learning, so its precision has not been measured. The fix (unsafe: the
    gradient changes) detaches the target in the loss call.

    ## Why is this bad?
    Q-learning and TD(0) regress the prediction `Q(s, a)` onto a fixed target. Left
    attached, `backward()` also pushes gradients through the target: computed by the online
    network, the update chases its own moving target (the residual-gradient method, not
    Q-learning, which learns slower and to a different fixed point); computed by a separate
    target network, it accumulates gradients into parameters that no optimizer steps,
    wasting memory and time, and a shared optimizer would update them. No error is raised.

    ## Example
        max_q_next = q_target(s_next).max(1)[0].unsqueeze(1)
        target = r + gamma * max_q_next * done_mask
        loss = F.smooth_l1_loss(q(s).gather(1, a), target)

    ## Use instead
        with torch.no_grad():
            max_q_next = q_target(s_next).max(1)[0].unsqueeze(1)
        target = r + gamma * max_q_next * done_mask
        loss = F.smooth_l1_loss(q(s).gather(1, a), target)

    ## What it does not see
    A target computed in another method than the loss (a `compute_q_targets` helper), and a
    loss written out by hand (`((q_a - target) ** 2).mean()`). It finds the 1 bench/bugs case
    of its class (c-deep-rl-algorithms-dqn-targets-with-grad, once counted here, already
    detaches the network's output: its fix only adds `torch.no_grad()`, which saves memory).
    """

    code = "ML350"
    name = "td-target-not-detached"
    needs = frozenset({"scope"})
    severity = Severity.WARNING
    default_enabled = False
    fix = "unsafe"
    triggers = ("gamma", "discount", "GAMMA")
    _DQN = (
        HEADER + "\n\ndef train(q, q_target, memory, optimizer, gamma):\n"
        "    s, a, r, s_prime, done_mask = memory.sample(32)\n"
        "    q_a = q(s).gather(1, a)\n"
        "{next_q}"
        "    target = r + gamma * max_q_prime * done_mask\n"
        "    loss = F.smooth_l1_loss(q_a, {target})\n"
        "    optimizer.zero_grad()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    _NEXT_Q = "    max_q_prime = q_target(s_prime).max(1)[0].unsqueeze(1)\n"
    valid = [
        _DQN.format(next_q=_NEXT_Q, target="target.detach()"),
        _DQN.format(next_q="    max_q_prime = q_target(s_prime).detach().max(1)[0]\n",
                    target="target"),
        _DQN.format(next_q="    with torch.no_grad():\n    " + _NEXT_Q, target="target"),
        # a return computed from rewards only
        HEADER + "\n\ndef train(v, states, rewards, gamma, optimizer):\n"
        "    returns = rewards[0] + gamma * rewards[1]\n"
        "    loss = F.mse_loss(v(states), returns)\n",
        # the target network never requires grad
        _DQN.format(next_q=_NEXT_Q, target="target")
        + "\n\ndef freeze(q_target):\n    q_target.requires_grad_(False)\n",
    ]
    invalid = [
        invalid_at(_DQN.format(next_q=_NEXT_Q, target="target"), "loss = F.smooth_l1_loss",
                   fixed=_DQN.format(next_q=_NEXT_Q, target="target.detach()")),
        # in one expression, with the online network
        invalid_at(
            HEADER + "\n\ndef update(self, s, a, r, s2):\n"
            "    target = r + self.gamma * self.net(s2).max(1)[0]\n"
            "    loss = nn.MSELoss()(self.net(s).gather(1, a).squeeze(1), target)\n"
            "    loss.backward()\n",
            "loss = nn.MSELoss()",
            fixed=HEADER + "\n\ndef update(self, s, a, r, s2):\n"
            "    target = r + self.gamma * self.net(s2).max(1)[0]\n"
            "    loss = nn.MSELoss()(self.net(s).gather(1, a).squeeze(1), target.detach())\n"
            "    loss.backward()\n",
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._frozen = bool(re.search(r"requires_grad(?:_\(\s*False|\s*=\s*False)",
                                      self.context.source))

    def check(self, scope: Scope) -> None:
        if self._frozen or function_without_grad(self.context, scope.root):
            return
        for site in scope.calls:
            call = site.node
            if not is_loss_call(self.context, scope, call, site.order):
                continue
            for arg in call.args[:2]:
                if arg.keyword is not None or not isinstance(arg.value, cst.Name):
                    continue
                network = self._bootstrapped(scope, arg.value.value, site.order)
                if network is None:
                    continue
                name = arg.value.value
                detached = arg.with_changes(value=cst.Call(func=cst.Attribute(
                    value=arg.value, attr=cst.Name("detach"))))
                self.report_at(
                    site, call,
                    f"`{name}` is a temporal-difference target computed from `{network}(...)` "
                    "with its graph attached: `backward()` also sends gradients through the "
                    "target, so the prediction chases a moving target (or a target network "
                    f"gathers gradients no optimizer uses); pass `{name}.detach()` or compute "
                    "it under `torch.no_grad()`",
                    fix=Fix(((arg, detached),), f"detach `{name}`", safe=False),
                )

    def _bootstrapped(self, scope: Scope, name: str, before: int) -> str | None:
        """The network whose output the TD target `name` is computed from with its graph, or
        None when it is not such a target."""
        assigned = scope.assigned(name, before)
        if len(assigned) != 1 or assigned[0].value is None:
            return None
        value = assigned[0].value
        if not (_DISCOUNT.search(source_of(value)) and any(
                isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)
                for node in code_nodes(value, prune=_NESTED))):
            return None
        if under_no_grad(self.context, assigned[0].site):
            return None
        return self._network_in(scope, value, assigned[0].site.order, 0)

    def _network_in(self, scope: Scope, expr: cst.BaseExpression, before: int, depth: int
                    ) -> str | None:
        network = None
        for node in code_nodes(expr, prune=_NESTED):
            if isinstance(node, cst.Attribute) and node.attr.value in _CUTS_GRAPH:
                return None
            if isinstance(node, cst.Call) and network is None:
                callee = dotted_name(node.func)
                if callee and _VALUE_NETWORK.search(last_segment(callee)) and (
                        self.context.call_name(node) is None):
                    network = callee
            if isinstance(node, cst.Name) and depth < 3 and network is None:
                assigned = scope.assigned(node.value, before)
                if len(assigned) == 1 and assigned[0].value is not None:
                    if under_no_grad(self.context, assigned[0].site):
                        continue
                    found = self._network_in(scope, assigned[0].value,
                                             assigned[0].site.order, depth + 1)
                    if found is not None:
                        network = found
        return network


@hookimpl
def modellint_add_rules():
    return [OptimizerRebuiltPerEpoch, IterationSchedulerSteppedPerEpoch,
            SchedulerGetLr, ZeroGradBeforeStep, GraphCutBeforeLoss,
            TdTargetNotDetached]
