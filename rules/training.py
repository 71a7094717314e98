"""Built-in rules: the training loop and optimizers (ML3xx).

Most of these rules look at a whole function at once (see `_loops.Scope`): they run when the
function (or, for a script's top-level code, the module) has been visited, and track names only
within that function. A name whose origin is unknown is never assumed to be anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    ACTIVATION_FUNCTIONS,
    ACTIVATION_MODULES,
    CONTAINERS,
    DROPOUT_ARGUMENT,
    EPOCH_SCHEDULERS,
    INSTANCE_NORMS,
    LOSS_FUNCTIONS,
    LOSS_MODULES,
    MODE_LAYERS,
    OPTIMIZER,
    PERIOD_ARGUMENT,
    SCHEDULER,
    TENSOR_METHODS,
    VALUE_METHODS,
    Fix,
    Invalid,
    LazyPattern,
    ProjectFunction,
    Severity,
    StaticRule,
    child_nodes,
    dotted_name,
    first_param_name,
    source_of,
    visit,
)
from modellint.rules._loops import (
    IGNITE_ENGINES,
    CallSite,
    Scope,
    ScopeRule,
    Site,
    backward_calls,
    callback_of,
    callback_steps,
    callee_of,
    constructor_of,
    function_without_grad,
    invalid_at,
    is_loss_call,
    is_no_grad_item,
    is_optimizer,
    is_optimizer_name,
    is_scheduler,
    lightning_schedulers,
    line_of,
    mode_calls,
    mode_receiver,
    names_in,
    optimizer_steps,
    receiver_name,
    scheduler_class,
    scheduler_steps,
    scope_of,
    stepped_optimizer,
    under_no_grad,
)

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

# a training script used by several examples: {body} is the inner loop body
_TRAIN = HEADER + """\
def train(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
{setup}
    for epoch in range(epochs):
{epoch_top}
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
{batch_end}
{epoch_end}
"""


# a trainer class holding its model, optimizer and an epoch scheduler; and `_TRAIN_STEP`, its
# training step: the examples put the method they are about between the two
_TRAINER = (HEADER + "class Trainer:\n"
            "    def __init__(self, model):\n"
            "        self.model = model\n"
            "        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, 30)\n\n")
_TRAIN_STEP = ("    def train_step(self, x, y):\n        self.optimizer.zero_grad()\n"
               "        F.cross_entropy(self.model(x), y).backward()\n"
               "        self.optimizer.step()\n")


def _train(setup="", epoch_top="", batch_end="", epoch_end=""):
    """`_TRAIN` with lines added at the four places (blank places are dropped)."""

    def block(text, indent):
        return "\n".join(" " * indent + line for line in text.splitlines())

    source = _TRAIN.format(
        setup=block(setup, 4), epoch_top=block(epoch_top, 8), batch_end=block(batch_end, 12),
        epoch_end=block(epoch_end, 8),
    )
    head, _, body = source.partition("def train")
    return head + "def train" + "\n".join(
        line for line in body.splitlines() if line.strip()) + "\n"


# -- ML301 ------------------------------------------------------------------------------------

# constructor arguments that count iterations rather than epochs
_ITERATION_WORDS = LazyPattern(r"iter|batch|loader|len\(|steps|Steps", re.IGNORECASE)
_EPOCH_WORD = LazyPattern(r"epoch", re.IGNORECASE)


def counts_iterations(call: cst.Call) -> bool:
    """A scheduler's constructor whose arguments after the optimizer count iterations (a
    loader's length, `steps`, `iters`): it is meant to step per batch. Also read by the
    run-time half of ML302 (`rules.run`)."""
    code = cst.Module(body=[]).code_for_node
    return any(_ITERATION_WORDS.search(code(arg.value)) for arg in call.args[1:])


def period_counts_epochs(kind: str, call: cst.Call) -> bool:
    """For a scheduler whose period is often given in iterations (`CosineAnnealingLR`'s
    `T_max`): the period argument names epochs (`args.epochs`, `num_epochs`). Others: yes."""
    if kind not in PERIOD_ARGUMENT:
        return True
    position, keyword = PERIOD_ARGUMENT[kind]
    period = None
    for index, arg in enumerate(call.args):
        if (arg.keyword is not None and arg.keyword.value == keyword) or (
            arg.keyword is None and not arg.star and index == position
        ):
            period = arg.value
    return period is not None and bool(
        _EPOCH_WORD.search(cst.Module(body=[]).code_for_node(period)))


class SchedulerStepInBatchLoop(ScopeRule):
    """An epoch-based learning-rate scheduler is stepped once per batch.

    ## What it does
    Finds `scheduler.step()` inside the batch loop (the loop that calls `optimizer.step()`,
    nested in an epoch loop) when `scheduler` was built in the same function (or is a `self`
    attribute assigned once in the class) as a scheduler whose arguments count epochs: every
    such class of `torch.optim.lr_scheduler`, from one table checked against the installed
    torch (`StepLR`, `MultiStepLR`, `ExponentialLR`, `MultiplicativeLR`,
    `ReduceLROnPlateau`, `PolynomialLR`, and `CosineAnnealingLR` when its `T_max` names
    epochs, as in `CosineAnnealingLR(optimizer, num_epochs)`). Schedulers meant to step per batch
    (`OneCycleLR`, `CyclicLR`, `LambdaLR` warm-ups, `CosineAnnealingWarmRestarts.step(epoch +
    i / n)`), schedulers whose arguments are computed from iteration counts
    (`len(loader)`, `total_steps`), and schedulers of unknown kind are never flagged.

    What a training framework runs once per batch counts as the batch loop: an Ignite
    handler of `Events.ITERATION_STARTED`/`ITERATION_COMPLETED` (not a filtered event such as
    `ITERATION_COMPLETED(every=100)`), Lightning's `training_step` and `on_train_batch_*`
    hooks, a `TrainerCallback`'s `on_step_begin`/`on_step_end`; so does a scheduler that
    Lightning's `configure_optimizers` returns with `"interval": "step"`.

    ## Why is this bad?
    `StepLR(optimizer, step_size=30)` decays the learning rate every 30 calls of `step()`.
    Called per batch, that is every 30 batches instead of every 30 epochs: the learning rate
    collapses to nothing within the first epoch and the model stops learning.

    ## Example
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
        for epoch in range(epochs):
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()

    ## Use instead
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
        for epoch in range(epochs):
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            scheduler.step()
    """

    code = "ML301"
    passes = ("static", "run")
    name = "scheduler-step-in-batch-loop"
    needs = frozenset({"scope"})
    triggers = ("lr_scheduler",)
    valid = [
        _train("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)",
               epoch_end="scheduler.step()"),
        _train("scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, "
               "total_steps=epochs * len(loader))", batch_end="scheduler.step()"),
        _train("scheduler = torch.optim.lr_scheduler.CyclicLR(optimizer, 0.01, 0.1)",
               batch_end="scheduler.step()"),
        _train("scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, "
               "(s + 1) / 500))", batch_end="scheduler.step()"),
        _train("from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts\n"
               "scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=10)",
               batch_end="scheduler.step(epoch + i / len(loader))"),
        # unknown kind: built elsewhere
        _train("scheduler = build_scheduler(optimizer)", batch_end="scheduler.step()"),
        # a cosine period counted in iterations (or not known to count epochs)
        _train("scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, "
               "T_max=epochs * len(loader))", batch_end="scheduler.step()"),
        _train("scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 1000)",
               batch_end="scheduler.step()"),
        # step_size counted in iterations
        _train("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, "
               "step_size=10 * len(loader))", batch_end="scheduler.step()"),
        # a single loop: it cannot be told apart from an epoch loop
        HEADER + "def fit(model, loader, optimizer):\n"
        "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)\n"
        "    for x, y in loader:\n"
        "        model(x).sum().backward()\n        optimizer.step()\n"
        "        optimizer.zero_grad()\n        scheduler.step()\n",
        # stepped once per epoch under a condition of its own
        _train("scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)",
               batch_end="if is_last_batch:\n    scheduler.step()"),
    ]
    invalid = [
        invalid_at(
            _train("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)",
                   batch_end="scheduler.step()"),
            "scheduler.step()",
        ),
        invalid_at(
            _train("from torch.optim.lr_scheduler import MultiStepLR\n"
                   "scheduler = MultiStepLR(optimizer, milestones=[10, 20], gamma=0.1)",
                   batch_end="scheduler.step()"),
            "scheduler.step()",
        ),
        invalid_at(
            _train("from torch.optim import lr_scheduler\n"
                   "sched = lr_scheduler.ReduceLROnPlateau(optimizer)",
                   batch_end="sched.step(loss)"),
            "sched.step(loss)",
        ),
        invalid_at(
            _train("scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)",
                   batch_end="scheduler.step()"),
            "scheduler.step()",
        ),
        invalid_at(
            _train("scheduler = torch.optim.lr_scheduler.PolynomialLR(optimizer, "
                   "total_iters=epochs)", batch_end="scheduler.step()"),
            "scheduler.step()",
        ),
        # an Ignite handler runs once per iteration
        invalid_at(
            HEADER + "from ignite.engine import Events, create_supervised_trainer\n\n\n"
            "def run(model, loader, epochs):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)\n"
            "    trainer = create_supervised_trainer(model, optimizer, F.cross_entropy)\n\n"
            "    @trainer.on(Events.ITERATION_COMPLETED)\n"
            "    def adjust_lr(engine):\n"
            "        scheduler.step()\n\n"
            "    trainer.run(loader, max_epochs=epochs)\n",
            "        scheduler.step()",
        ),
        # Lightning steps it once per batch
        invalid_at(
            HEADER + "import lightning as L\n\n\nclass Classifier(L.LightningModule):\n"
            "    def configure_optimizers(self):\n"
            "        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)\n"
            "        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)\n"
            "        return [optimizer], [{\"scheduler\": scheduler, \"interval\": \"step\"}]\n",
            "return [optimizer]",
        ),
    ]

    def check(self, scope: Scope) -> None:
        self._check_callback(scope)
        self._check_lightning(scope)
        steps = optimizer_steps(self.context, scope)
        if not steps:
            return
        for site, name in scheduler_steps(self.context, scope):
            found = scheduler_class(self.context, scope, name)
            if found is None:
                continue
            kind, constructor = found
            if kind not in EPOCH_SCHEDULERS:
                continue
            if site.node.args and kind != "ReduceLROnPlateau":
                continue  # an explicit epoch
            if counts_iterations(constructor) or not period_counts_epochs(kind, constructor):
                continue
            for step in steps:
                if not step.loops:
                    continue
                batch_loop = step.loops[-1]
                if len(step.loops) < 2 or not site.inside(batch_loop):
                    continue
                conditions = [a for a in site.ancestors_below(batch_loop)
                              if isinstance(a, (cst.If, cst.Else))]
                if any(not step.inside(c) for c in conditions):
                    continue
                self.report_at(
                    site, site.node,
                    f"`{name}` is a {kind}, whose arguments count epochs, but `{name}.step()` "
                    f"runs once per batch; call it after the batch loop, once per epoch",
                )
                break

    def _check_callback(self, scope: Scope) -> None:
        """An epoch scheduler stepped, unconditionally, in a function a framework runs once
        per batch (an Ignite `ITERATION_COMPLETED` handler, Lightning's `training_step`, a
        `TrainerCallback.on_step_end`)."""
        found_steps = callback_steps(self.context, scope, "batch")
        if found_steps is None:
            return
        callback, steps = found_steps
        for site, name in steps:
            found = _epoch_scheduler(self.context, scope, name, site.node)
            if found is None and callback.outer is not None and not scope.assigned(
                    name.split(".")[0]):
                found = _epoch_scheduler(self.context, callback.outer, name, site.node)
            if found is None:
                continue
            self.report_at(
                site, site.node,
                f"`{name}` is a {found}, whose arguments count epochs, but `{name}.step()` "
                f"runs in `{callback.function}()`, {callback.hook}, once per batch; "
                "step it "
                "once per epoch",
            )

    def _check_lightning(self, scope: Scope) -> None:
        """An epoch scheduler that Lightning's `configure_optimizers` asks to step per batch
        (`"interval": "step"`)."""
        for scheduler, interval, said, statement in lightning_schedulers(self.context, scope):
            if interval != "step":
                continue
            found = None
            if isinstance(scheduler, cst.Call):
                found = _epoch_scheduler_call(self.context, scheduler, None)
            elif isinstance(scheduler, cst.Name):
                found = _epoch_scheduler(self.context, scope, scheduler.value, None)
            if found is None:
                continue
            self.report(
                said,
                f"`{source_of(scheduler) if len(source_of(scheduler)) < 40 else 'the scheduler'}"
                f"` is a {found}, whose arguments count epochs, but `\"interval\": \"step\"` "
                "makes Lightning step it once per batch; use `\"interval\": \"epoch\"`",
                statement=statement,
            )


def _epoch_scheduler(context, scope: Scope, name: str, call: cst.Call | None) -> str | None:
    """The class of the epoch scheduler `name` holds (`StepLR`), built in `scope` (or a
    `self` attribute assigned once in the class) with arguments that count epochs, when
    `call` (its `step(...)`, if any) does not give an epoch itself; else None."""
    found = scheduler_class(context, scope, name)
    if found is None:
        return None
    return _epoch_scheduler_call(context, found[1], call)


def _epoch_scheduler_call(context, constructor: cst.Call, call: cst.Call | None) -> str | None:
    qualified = context.call_name(constructor) or ""
    if not qualified.startswith("torch.optim.lr_scheduler."):
        return None
    kind = qualified.rsplit(".", 1)[1]
    if kind not in EPOCH_SCHEDULERS:
        return None
    if call is not None and call.args and kind != "ReduceLROnPlateau":
        return None  # an explicit epoch
    if counts_iterations(constructor) or not period_counts_epochs(kind, constructor):
        return None
    return kind


# -- ML302 ------------------------------------------------------------------------------------

# methods that a training framework (or a hand-written trainer) runs at the start of each
# training epoch: Lightning's `on_train_epoch_start`, mmengine's `before_train_epoch`,
# fairseq's `begin_epoch`, Keras-style `on_epoch_begin`. Epoch ends, validation and test
# epochs are not these.
_EPOCH_START = LazyPattern(
    r"^(?:on_)?(?:train(?:ing)?_)?epoch_(?:start|begin)$"
    r"|^(?:on_)?(?:before|begin|start)_(?:train(?:ing)?_)?epoch$"
)
# how deep calls of the project's own functions and methods are followed
_CALL_DEPTH = 3
# Ignite events that fire before the first iteration of an epoch (or of the run)
_IGNITE_START_EVENTS = frozenset({
    f"ignite.engine.{module}Events.{event}"
    for module in ("", "events.") for event in ("EPOCH_STARTED", "STARTED")
})
_IGNITE_TRAINERS = frozenset({"ignite.engine.create_supervised_trainer",
                              "ignite.engine.engine.create_supervised_trainer"})


def _is_lr_scheduler(context, scope: Scope, name: str, order: int) -> bool:
    """`name` holds a learning-rate scheduler: the semantic model knows it is one of
    `torch.optim.lr_scheduler` (also when a factory of another file builds it), or, when it
    does not know what `name` holds, its name says so and no class of the project built it."""
    kind = context.semantic.kind_of_name(name, scope, order)
    if kind is not None:
        return kind.kind == SCHEDULER
    return is_scheduler(context, scope, name)


def _optimizer_events(context, scope: Scope, depth: int = 0, seen: frozenset = frozenset()
                      ) -> list[tuple[Site, str]]:
    """Where this scope steps an optimizer: `optimizer.step()` (a name that says so, or a
    value the semantic model knows is a torch optimizer), and calls of the project's own
    functions and methods of this file that do (followed `_CALL_DEPTH` deep): (site, what is
    stepped, as the message names it)."""
    found = {id(site): (site, f"`{receiver_name(site)}.step()`")
             for site in optimizer_steps(context, scope)}
    for site, receiver in scope.method_calls("step"):
        if id(site) not in found:
            kind = context.semantic.kind(receiver, scope, site.order)
            if kind is not None and kind.kind == OPTIMIZER:
                found[id(site)] = (site, f"`{receiver_name(site)}.step()`")
    if depth < _CALL_DEPTH:
        for site in scope.calls:
            if id(site) in found:
                continue
            callee = callee_of(context, scope, site.node)
            if callee is None:
                elsewhere = _stepping_elsewhere(context, scope, site.node)
                if elsewhere is not None:
                    name = dotted_name(site.node.func)
                    found[id(site)] = (site, f"`{name}()` ({elsewhere}), which steps the "
                                       "optimizer,")
                continue
            if id(callee) in seen:
                continue
            if _optimizer_events(context, scope_of(context, callee), depth + 1,
                                 seen | {id(callee)}):
                name = dotted_name(site.node.func) or callee.name.value
                found[id(site)] = (site, f"`{name}()`, which steps the optimizer,")
    return sorted(found.values(), key=lambda event: event[0].order)


def _steps_optimizer(context, function: ProjectFunction) -> bool:
    """A function or method of the project (of another file) calls `optimizer.step()`:
    a value the semantic model knows is a torch optimizer, or, when nothing is known of it,
    one whose name says so."""
    for stepped in context.semantic.steps_in(function):
        if stepped.kind is not None:
            if stepped.kind.kind == OPTIMIZER:
                return True
            continue
        if is_optimizer_name(stepped.name):
            return True
    return False


def _stepping_elsewhere(context, scope: Scope, call: cst.Call) -> str | None:
    """For a call of a function of another file of the project (`train_one_epoch(...)`
    imported from `engine.py`), or of a method that the class inherits from a project base
    of another file (`self.train_step(...)`), that steps the optimizer: where it is defined
    (`engine.py`); else None."""
    func = call.func
    root = scope.root
    semantic = context.semantic
    if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and isinstance(root, cst.FunctionDef)):
        owner = context.method_owners.get(id(root))
        if owner is not None and func.value.value == first_param_name(root):
            for method in semantic.inherited_methods(owner.name.value):
                if method.name == func.attr.value:
                    return f"{method.cls} in {method.path}" if _steps_optimizer(
                        context, method) else None
            return None
    dotted = dotted_name(func)
    if dotted is None or context.module_node is None:
        return None
    head = dotted.split(".", 1)[0]
    if scope.assigned(head) or (isinstance(root, cst.FunctionDef) and head in {
            p.name.value for p in (*root.params.params, *root.params.kwonly_params)}):
        return None
    found = semantic.function_named(dotted)
    if found is None or found.path == context.path or not _steps_optimizer(context, found):
        return None
    return found.path


def _first_in_loop(site: Site, events: list[tuple[Site, str]]) -> tuple[Site, str] | None:
    """For a site in a loop: the first optimizer event of that loop's body when `site` runs
    before it in every iteration (not in an `else`, nor under a test of the loop's variable,
    such as `if i > 0:`); else None."""
    if not site.loops:
        return None
    loop = site.loops[-1]
    inside = [event for event in events if event[0].inside(loop)]
    if not inside or site.order > inside[0][0].order:
        return None
    between = site.ancestors_below(loop)
    if any(isinstance(a, cst.Else) for a in between):
        return None
    loop_names = names_in(loop.target) if isinstance(loop, cst.For) else set()
    if any(isinstance(a, cst.If) and names_in(a.test) & loop_names for a in between):
        return None
    return inside[0]


class SchedulerBeforeOptimizer(ScopeRule):
    """`scheduler.step()` runs before `optimizer.step()` in the same iteration.

    ## What it does
    Finds a learning-rate scheduler stepped before the optimizer it drives:

    - within one iteration of a loop: earlier in the batch loop's body, or at the top of the
      epoch loop before the batch loop (the advice of tutorials written for PyTorch before
      1.1), also when the optimizer is stepped by a function or method of the project that
      the loop calls afterwards (`scheduler.step()` then `train(model, loader, optimizer)`,
      or `train_one_epoch(...)` imported from the project's `engine.py`);
    - in a function's own body, outside any loop and condition, before the function steps
      the optimizer (`def train_epoch(...): scheduler.step()` then the batch loop);
    - in a method run at the start of each training epoch (`on_epoch_start`,
      `on_train_epoch_start`, `before_train_epoch`, `on_epoch_begin`, `begin_epoch`...) of a
      class whose other methods, or those it inherits from a project base class in any file,
      step the optimizer (`train_step`, `fit`). When the class
      calls that method itself, its call sites decide: each must come, in its loop, before
      the optimizer is stepped. Methods named for the end of an epoch, or for validation and
      test epochs, are never reported;
    - in an Ignite handler of `Events.EPOCH_STARTED` or `Events.STARTED` (`@trainer.on(...)`
      or `trainer.add_event_handler(...)`) of an engine that steps the optimizer
      (`create_supervised_trainer(...)`, or `Engine(update)` whose `update` function of the
      file does).

    A scheduler is a value the semantic model knows is one of `torch.optim.lr_scheduler`
    (built in the function, set on `self` anywhere in the class, or returned by a factory of
    another file), or, when nothing is known of it, whose name says so (`scheduler`,
    `lr_sched`) and that no class of the project built. Calls with arguments (`step(epoch)`,
    `step(metric)`) and steps under a condition in a callback (`if self.epoch > 0:`) are not
    reported, nor anything whose order is not known (a step in another file, a callback
    never called in a loop).

    ## Why is this bad?
    Since PyTorch 1.1 `scheduler.step()` is meant to follow `optimizer.step()`. Stepped first,
    the first value of the schedule is skipped (PyTorch warns "Detected call of
    `lr_scheduler.step()` before `optimizer.step()`"), so every epoch trains with the
    learning rate meant for the next one.

    ## Example
        for epoch in range(epochs):
            scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()

    ## Use instead
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
            scheduler.step()

    ## What it does not see
    An optimizer stepped by a function of a module that is not in the checked tree: the
    benchmark's deformable-protopnet cases call `scheduler.step()` before
    `tnt.train(optimizer=...)` of a `train_and_test.py` the case does not include, so nothing
    says `tnt.train` steps the optimizer (r-deformable-protopnet-scheduler-before-train). On
    bench/bugs it finds 2 of 3 cases.
    """

    code = "ML302"
    passes = ("static", "run")
    name = "scheduler-before-optimizer"
    needs = frozenset({"scope", "semantic"})
    severity = Severity.WARNING
    triggers = ("sched",)
    valid = [
        _train("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)",
               epoch_end="scheduler.step()"),
        _train("scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, 1000)",
               batch_end="scheduler.step()"),
        # skipped on the first epoch: steps after the previous epoch's optimizer steps
        _train("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)",
               epoch_top="if epoch > 0:\n    scheduler.step()"),
        # an explicit epoch sets the closed-form learning rate
        _train("scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)",
               epoch_top="scheduler.step(epoch)"),
        # diffusion samplers are not learning-rate schedulers
        HEADER + "def sample(unet, noise_scheduler, latents):\n"
        "    for t in noise_scheduler.timesteps:\n"
        "        latents = noise_scheduler.step(unet(latents, t), t, latents)\n"
        "    return latents\n",
        # the optimizer step may be in a function of a file that is not in the run (a
        # package): what it does is not known
        HEADER + "from engine import train_one_epoch\n\n"
        "def fit(model, scheduler, epochs):\n    for epoch in range(epochs):\n"
        "        scheduler.step()\n        train_one_epoch(model)\n",
        # stepped at the end of each epoch, after the training steps
        _TRAINER + "    def on_epoch_end(self):\n        self.scheduler.step()\n\n"
        + _TRAIN_STEP,
        # an epoch-start callback that skips the first epoch
        _TRAINER + "    def on_train_epoch_start(self, epoch):\n"
        "        if epoch > 0:\n            self.scheduler.step()\n\n"
        + _TRAIN_STEP,
        # the class calls its epoch-start method after the epoch's training steps
        _TRAINER + "    def on_epoch_start(self):\n        self.scheduler.step()\n\n"
        "    def fit(self, loader, epochs):\n"
        "        for epoch in range(epochs):\n"
        "            for x, y in loader:\n"
        "                self.optimizer.zero_grad()\n"
        "                F.cross_entropy(self.model(x), y).backward()\n"
        "                self.optimizer.step()\n"
        "            self.on_epoch_start()\n",
        # a per-epoch function that steps the scheduler from the second epoch on
        HEADER + "def train_epoch(model, loader, optimizer, scheduler, epoch):\n"
        "    if epoch > 0:\n"
        "        scheduler.step()\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        F.cross_entropy(model(x), y).backward()\n"
        "        optimizer.step()\n",
        # Ignite: stepped when each epoch completes
        HEADER + "from ignite.engine import Events, create_supervised_trainer\n\n"
        "def run(model, loader, epochs):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)\n"
        "    trainer = create_supervised_trainer(model, optimizer, F.nll_loss)\n\n"
        "    @trainer.on(Events.EPOCH_COMPLETED)\n"
        "    def lr_step(engine):\n"
        "        scheduler.step()\n\n"
        "    trainer.run(loader, max_epochs=epochs)\n",
    ]
    invalid = [
        invalid_at(
            _train("scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [10, 20])",
                   epoch_top="scheduler.step()"),
            "scheduler.step()",
        ),
        Invalid(
            HEADER + "def train(model, loader, optimizer, lr_scheduler):\n"
            "    for x, y in loader:\n"
            "        lr_scheduler.step()\n"
            "        optimizer.zero_grad()\n"
            "        F.cross_entropy(model(x), y).backward()\n"
            "        optimizer.step()\n",
            line=7,
        ),
        # the optimizer is stepped by a function of the file that the epoch loop calls
        invalid_at(
            HEADER + "def train(model, loader, optimizer):\n"
            "    for x, y in loader:\n"
            "        optimizer.zero_grad()\n"
            "        F.cross_entropy(model(x), y).backward()\n"
            "        optimizer.step()\n\n"
            "def main(model, loader, epochs):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)\n"
            "    for epoch in range(epochs):\n"
            "        scheduler.step()\n"
            "        train(model, loader, optimizer)\n",
            "scheduler.step()",
        ),
        # an epoch-start callback of a trainer whose training step steps the optimizer
        invalid_at(
            _TRAINER + "    def on_epoch_start(self):\n        self.scheduler.step()\n\n"
            + _TRAIN_STEP,
            "self.scheduler.step()",
        ),
        # a function run once per epoch that steps the scheduler before its batch loop
        invalid_at(
            HEADER + "def train_epoch(model, loader, optimizer, scheduler):\n"
            "    scheduler.step()\n"
            "    model.train()\n"
            "    for x, y in loader:\n"
            "        optimizer.zero_grad()\n"
            "        F.cross_entropy(model(x), y).backward()\n"
            "        optimizer.step()\n",
            "scheduler.step()",
        ),
        # an Ignite handler run when each epoch starts, before the trainer's iterations
        invalid_at(
            HEADER + "from ignite.engine import Events, create_supervised_trainer\n\n"
            "def run(model, loader, epochs):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)\n"
            "    trainer = create_supervised_trainer(model, optimizer, F.nll_loss)\n\n"
            "    @trainer.on(Events.EPOCH_STARTED)\n"
            "    def lr_step(engine):\n"
            "        scheduler.step()\n\n"
            "    trainer.run(loader, max_epochs=epochs)\n",
            "scheduler.step()",
        ),
    ]

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self.context.method_owners.get(id(original_node)) is None:
            super().leave_FunctionDef(original_node)
        # a method is checked with its class, once every method of the class is known (a
        # callback calls methods defined after it, and is called from them)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        for statement in original_node.body.body:
            if isinstance(statement, cst.FunctionDef):
                self.check(scope_of(self.context, statement))

    def check(self, scope: Scope) -> None:
        context = self.context
        events: list[tuple[Site, str]] | None = None
        for site, name in self._scheduler_steps(scope):
            if events is None:
                events = _optimizer_events(context, scope)
            if not site.loops:
                self._check_function_top(scope, site, name, events)
                continue
            first = _first_in_loop(site, events)
            if first is None:
                continue
            self.report_at(
                site, site.node,
                f"`{name}.step()` runs before {first[1]} in this loop, so the first "
                "learning rate of the schedule is skipped; step the scheduler after the "
                "optimizer",
            )
        self._check_epoch_start(scope)
        self._check_ignite_handler(scope)

    def _check_function_top(self, scope: Scope, site: Site, name: str,
                            events: list[tuple[Site, str]]) -> None:
        """A function that steps the scheduler unconditionally, outside any loop, and then
        the optimizer (`def train_epoch(...): scheduler.step(); for batch in loader: ...`):
        on its first call the scheduler steps first."""
        root = scope.root
        if not isinstance(root, cst.FunctionDef) or not any(
                statement is site.statement for statement in root.body.body):
            return  # not a statement of the function's own body (under an if, a try...)
        if any(event[0].order < site.order for event in events):
            return
        later = [event for event in events if event[0].order > site.order]
        if not later:
            return
        self.report_at(
            site, site.node,
            f"`{name}.step()` runs before {later[0][1]} in this function, so the first "
            "learning rate of the schedule is skipped; step the scheduler after the "
            "optimizer",
        )

    def _scheduler_steps(self, scope: Scope) -> list[tuple[CallSite, str]]:
        """`scheduler.step()` calls without arguments on a learning-rate scheduler."""
        found = []
        for site, receiver in scope.method_calls("step"):
            name = dotted_name(receiver)
            if name is None or site.node.args:
                continue
            if _is_lr_scheduler(self.context, scope, name, site.order):
                found.append((site, name))
        return found

    def _check_ignite_handler(self, scope: Scope) -> None:
        """A scheduler stepped in an Ignite handler of `Events.EPOCH_STARTED` (or `STARTED`)
        of an engine that steps the optimizer: `create_supervised_trainer(...)`, or
        `Engine(update)` for an `update` function of the file that steps it."""
        context = self.context
        root = scope.root
        if not isinstance(root, cst.FunctionDef) or context.method_owners.get(id(root)):
            return
        stack = context.function_stack
        outer_root = stack[-2] if len(stack) > 1 and stack[-1] is root else (
            context.module_node if stack and stack[-1] is root else None)
        if outer_root is None:
            return
        outer = scope_of(context, outer_root)
        engines = [self._event_engine(d.decorator) for d in root.decorators]
        for site, receiver in outer.method_calls("add_event_handler"):
            args = site.node.args
            if len(args) >= 2 and isinstance(args[1].value, cst.Name) and (
                    args[1].value.value == root.name.value):
                engines.append(self._event_engine(site.node, receiver))
        found = [e for e in engines if e is not None]
        if not found:
            return
        engine, event = found[0]
        if not self._engine_steps_optimizer(outer, engine):
            return
        for site, receiver in scope.method_calls("step"):
            name = dotted_name(receiver)
            if name is None or site.node.args or not any(
                    statement is site.statement for statement in root.body.body):
                continue  # with arguments, or not unconditional (an if, a loop, a try)
            known = scope.assigned(name.split(".")[0])
            if not (_is_lr_scheduler(context, scope, name, site.order) if known
                    else _is_lr_scheduler(context, outer, name, 10**9)):
                continue
            self.report_at(
                site, site.node,
                f"`{name}.step()` runs in `{root.name.value}()`, a handler of "
                f"`Events.{event}` of `{engine}`, before the engine's first optimizer step, "
                "so the first learning rate of the schedule is skipped; attach it to "
                "`Events.EPOCH_COMPLETED` instead",
            )

    def _event_engine(self, expr: cst.BaseExpression,
                      receiver: cst.BaseExpression | None = None) -> tuple[str, str] | None:
        """(engine, event) for `@engine.on(Events.EPOCH_STARTED)` (or `engine.
        add_event_handler(Events.EPOCH_STARTED, ...)` with its receiver), when the event
        fires before the first iteration."""
        if not isinstance(expr, cst.Call) or not expr.args:
            return None
        if receiver is None:
            if not (isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "on"):
                return None
            receiver = expr.func.value
        event = expr.args[0].value
        if isinstance(event, cst.Call):
            return None  # a filtered event (`EPOCH_STARTED(every=2)`): not the first one
        qualified = self.context.qualified_name(event) or ""
        engine = dotted_name(receiver)
        if qualified not in _IGNITE_START_EVENTS or engine is None:
            return None
        return engine, qualified.rsplit(".", 1)[1]

    def _engine_steps_optimizer(self, outer: Scope, engine: str) -> bool:
        call = constructor_of(self.context, outer, engine)
        if call is None:
            return False
        qualified = self.context.call_name(call)
        if qualified in _IGNITE_TRAINERS:
            return True
        if qualified not in IGNITE_ENGINES or not call.args:
            return False
        update = call.args[0].value
        if not isinstance(update, cst.Name):
            return False
        root = outer.root
        body: Sequence[cst.CSTNode] = (
            root.body.body if isinstance(root, cst.FunctionDef)
            else root.body if isinstance(root, cst.Module) else ())
        found = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == update.value]
        return len(found) == 1 and bool(
            _optimizer_events(self.context, scope_of(self.context, found[0])))

    def _inherited_step(self, owner: cst.ClassDef, hook: str) -> tuple[str, str] | None:
        """A method that the class inherits from a project base (of any file), that it does
        not override, and that steps the optimizer: ("the optimizer step", where)."""
        own = {s.name.value for s in owner.body.body if isinstance(s, cst.FunctionDef)}
        for method in self.context.semantic.inherited_methods(owner.name.value):
            name = method.name
            if name in own or name == hook:
                continue
            if _steps_optimizer(self.context, method):
                return "the optimizer step", f"`{method.cls}.{name}` ({method.path})"
            own.add(name)
        return None

    def _check_epoch_start(self, scope: Scope) -> None:
        """A scheduler stepped in a method run at the start of each training epoch, in a class
        whose other methods step the optimizer."""
        context = self.context
        root = scope.root
        if not isinstance(root, cst.FunctionDef) or not _EPOCH_START.match(root.name.value):
            return
        owner = context.method_owners.get(id(root))
        self_name = first_param_name(root)
        if owner is None or self_name is None:
            return
        # unconditional: statements of the method's own body (not under an if, a loop, a try)
        body = root.body.body
        steps = [(site, name) for site, name in self._scheduler_steps(scope)
                 if name.startswith(self_name + ".")
                 and any(statement is site.statement for statement in body)]
        if not steps or _optimizer_events(context, scope):
            return  # this method steps the optimizer too: its own order decides
        methods = [s for s in owner.body.body
                   if isinstance(s, cst.FunctionDef) and s is not root]
        callers: list[tuple[Site, str]] = []
        stepped: tuple[str, str] | None = None
        for method in methods:
            method_scope = scope_of(context, method)
            events = _optimizer_events(context, method_scope)
            for site in method_scope.calls:
                if callee_of(context, method_scope, site.node) is root:
                    # the class runs the callback itself: each call must come first in its loop
                    first = _first_in_loop(site, events)
                    if first is None:
                        return
                    callers.append((site, method.name.value))
            if events and stepped is None:
                stepped = (events[0][1], f"`{method.name.value}`")
        if stepped is None:
            stepped = self._inherited_step(owner, root.name.value)
        if stepped is None:
            return
        when = root.name.value
        if callers:
            where = ", ".join(sorted({f"`{m}`" for _, m in callers}))
            reason = f"`{when}()`, which {where} calls before stepping the optimizer"
        else:
            reason = f"`{when}()`, which runs at the start of each epoch, before {stepped[0]} " \
                f"in {stepped[1]}"
        for site, name in steps:
            self.report_at(
                site, site.node,
                f"`{name}.step()` runs in {reason}, so the first learning rate of the "
                "schedule is skipped; step the scheduler at the end of the epoch instead",
            )


# -- ML303 ------------------------------------------------------------------------------------

_ZEROING = LazyPattern(
    r"zero_grad|set_to_none|\.grad\s*=|\.grad(?:\.data)?\.(?:zero_|detach_|fill_|mul_|copy_)"
    r"|grad\.zero_|clear_grad"
)


class MissingZeroGrad(ScopeRule):
    """A training loop never clears the gradients.

    ## What it does
    Finds a loop that calls `backward()` and `optimizer.step()` in a function that never
    clears gradients: no `optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None` or
    `set_to_none` anywhere in the function. Gradient accumulation, which zeroes under a
    condition, is fine.

    A project function or method that the function calls clears what it clears where it is
    called (`self.reset_grad()` that calls `self.opt.zero_grad()`), and steps what it steps
    (`self.update()` that calls `self.optimizer.step()`), a few calls deep. A function that a
    training framework runs once per batch (the process function of an Ignite `Engine`,
    Lightning's `training_step` with manual optimization and `self.manual_backward(loss)`)
    is the loop's body.

    Per optimizer: when the function clears gradients only through `<optimizer>.zero_grad()`
    calls, an optimizer stepped in the loop (known to be one: built by `torch.optim`, or named
    so) that is never zeroed is reported, as in a GAN that zeroes `opt_d` but not `opt_g`. A
    `model.zero_grad()`, `p.grad = None` or a helper that clears gradients keeps it silent: which
    optimizers those cover is not known.

    ## Why is this bad?
    `backward()` adds to `.grad`; it does not overwrite it. Without zeroing, every step uses
    the sum of all gradients since the start of training, so updates grow without bound and
    training diverges.

    ## Example
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()

    ## Use instead
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    """

    code = "ML303"
    passes = ("static", "run")
    name = "missing-zero-grad"
    needs = frozenset({"scope", "semantic"})
    triggers = ("backward",)
    valid = [
        _train(),
        # gradient accumulation
        HEADER + "def train(model, loader, optimizer, accum=4):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        loss = F.cross_entropy(model(x), y) / accum\n"
        "        loss.backward()\n"
        "        if (i + 1) % accum == 0:\n"
        "            optimizer.step()\n"
        "            optimizer.zero_grad(set_to_none=True)\n",
        HEADER + "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        for p in model.parameters():\n            p.grad = None\n"
        "        F.mse_loss(model(x), y).backward()\n        optimizer.step()\n",
        HEADER + "def train(model, loader, optimizer):\n    model.zero_grad()\n"
        "    for x, y in loader:\n"
        "        F.mse_loss(model(x), y).backward()\n        optimizer.step()\n"
        "        model.zero_grad()\n",
        # LBFGS: the closure zeroes
        HEADER + "def train(model, x, y, optimizer):\n    for _ in range(20):\n"
        "        def closure():\n            optimizer.zero_grad()\n"
        "            loss = F.mse_loss(model(x), y)\n            loss.backward()\n"
        "            return loss\n        optimizer.step(closure)\n",
        # DeepSpeed's engine zeroes in its own step()
        HEADER + "def train(engine, loader):\n    for x, y in loader:\n"
        "        loss = engine(x, y)\n        engine.backward(loss)\n        engine.step()\n",
        # a GAN that zeroes both optimizers
        HEADER + "def train(G, D, loader, opt_g, opt_d):\n    for real in loader:\n"
        "        opt_d.zero_grad()\n        D(G(real).detach()).mean().backward()\n"
        "        opt_d.step()\n        opt_g.zero_grad()\n"
        "        (-D(G(real)).mean()).backward()\n        opt_g.step()\n",
        # the models are zeroed: which optimizer each covers is not known
        HEADER + "def train(G, D, loader, opt_g, opt_d):\n    for real in loader:\n"
        "        D.zero_grad()\n        D(G(real).detach()).mean().backward()\n"
        "        opt_d.step()\n        G.zero_grad()\n"
        "        (-D(G(real)).mean()).backward()\n        opt_g.step()\n",
        # a method of the project clears the gradients (StarGAN's `reset_grad`)
        HEADER + "class Solver:\n    def __init__(self, G, D):\n        self.G, self.D = G, D\n"
        "        self.g_opt = torch.optim.Adam(G.parameters())\n"
        "        self.d_opt = torch.optim.Adam(D.parameters())\n\n"
        "    def reset_grad(self):\n        self.g_opt.zero_grad()\n"
        "        self.d_opt.zero_grad()\n\n"
        "    def train(self, loader):\n        for real in loader:\n"
        "            self.reset_grad()\n            self.D(real).mean().backward()\n"
        "            self.d_opt.step()\n            self.reset_grad()\n"
        "            (-self.D(self.G(real)).mean()).backward()\n            self.g_opt.step()\n",
    ]
    invalid = [
        Invalid(
            HEADER + "def train(model, loader, optimizer):\n"
            "    for x, y in loader:\n"
            "        loss = F.cross_entropy(model(x), y)\n"
            "        loss.backward()\n"
            "        optimizer.step()\n",
            line=9,
        ),
        # Ignite runs the process function once per batch
        invalid_at(
            HEADER + "from ignite.engine import Engine\n\n\n"
            "def run(model, loader, optimizer):\n"
            "    def train_step(engine, batch):\n"
            "        x, y = batch\n"
            "        F.cross_entropy(model(x), y).backward()\n"
            "        optimizer.step()\n\n"
            "    Engine(train_step).run(loader, max_epochs=10)\n",
            "        optimizer.step()",
        ),
        invalid_at(
            HEADER + "model = nn.Linear(4, 1)\nopt = torch.optim.Adam(model.parameters())\n"
            "scaler = torch.amp.GradScaler()\n"
            "for epoch in range(10):\n"
            "    for x, y in data:\n"
            "        scaler.scale(F.mse_loss(model(x), y)).backward()\n"
            "        scaler.step(opt)\n"
            "        scaler.update()\n",
            "scaler.step(opt)",
        ),
        # a GAN: only the discriminator's optimizer is zeroed
        invalid_at(
            HEADER + "def train(G, D, loader, z_dim):\n"
            "    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)\n"
            "    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)\n"
            "    for real in loader:\n"
            "        fake = G(torch.randn(real.size(0), z_dim))\n"
            "        opt_d.zero_grad()\n"
            "        d_loss = D(fake.detach()).mean() - D(real).mean()\n"
            "        d_loss.backward()\n"
            "        opt_d.step()\n"
            "        g_loss = -D(fake).mean()\n"
            "        g_loss.backward()\n"
            "        opt_g.step()\n",
            "opt_g.step()",
        ),
    ]

    def check(self, scope: Scope) -> None:
        steps = optimizer_steps(self.context, scope)
        stepped = {id(step): stepped_optimizer(step) for step in steps}
        for site, optimizer in _stepped_in_helpers(self.context, scope):
            if id(site) not in stepped:
                steps.append(site)
                stepped[id(site)] = optimizer
        if not steps:
            return
        backwards = [site for site, _ in backward_calls(self.context, scope)]
        candidates = [
            step for step in steps
            if any(any(b.inside(loop) for b in backwards) for loop in step.loops)
        ]
        callback = callback_of(self.context, scope)
        per_batch: set[int] = set()
        if callback is not None and callback.period == "batch":
            # the framework's batch loop runs the function: its own body is the loop's
            backwards += [site for site, _ in scope.method_calls("manual_backward")]
            per_batch = {id(step) for step in steps if not step.loops and any(
                not b.loops and b.order < step.order for b in backwards)}
            candidates += [step for step in steps if id(step) in per_batch]
        if not candidates:
            return
        helpers = _cleared_in_helpers(self.context, scope)
        if _ZEROING.search(scope.code()) or helpers:
            self._per_optimizer(scope, candidates, helpers, stepped)
            return
        for step in candidates:
            optimizer = stepped[id(step)]
            where = f"`{callback.function}()` ({callback.hook}, run once per batch)" if (
                callback is not None and id(step) in per_batch) else "this loop"
            self.report_at(
                step, step.node,
                f"{where} calls `backward()` and steps `{optimizer}`{_through(step)} but "
                "never clears the "
                f"gradients, so they accumulate across steps; call `{optimizer}.zero_grad()` "
                "each iteration",
            )

    def _per_optimizer(self, scope: Scope, candidates: list[CallSite],
                       helpers: list[str | None], stepped: dict[int, str]) -> None:
        """Gradients are cleared, but maybe not for every optimizer: when every clearing in
        the function is `<optimizer>.zero_grad()` (here or in a project function it calls),
        an optimizer stepped in the loop that is never zeroed (a GAN whose discriminator's
        optimizer alone is) accumulates."""
        code = scope.code()
        zeroed: set[str] = set()
        for name in helpers:
            if name is None or not is_optimizer(self.context, scope, name):
                return  # a helper clears gradients not known to be one optimizer's
            zeroed.add(name)
        for site, receiver in scope.method_calls("zero_grad"):
            name = dotted_name(receiver)
            if name is None or not is_optimizer(self.context, scope, name):
                return  # a model's zero_grad(): which optimizers it covers is not known
            zeroed.add(name)
            code = code.replace(cst.Module(body=[]).code_for_node(site.node), "")
        if not zeroed or _ZEROING.search(code):
            return  # cleared some other way (p.grad = None, a helper, a closure)
        aliases = {
            dotted_name(a.value) for a in scope.assignments if a.value is not None
        } | {a.target for a in scope.assignments
             if a.value is not None and dotted_name(a.value) in zeroed}
        for step in candidates:
            optimizer = stepped[id(step)]
            if optimizer in zeroed or optimizer in aliases:
                continue
            kind = self.context.semantic.kind_of_name(optimizer, scope, step.order)
            if kind is not None and kind.kind != "optimizer":
                continue
            self.report_at(
                step, step.node,
                f"`{optimizer}` is stepped{_through(step)} after `backward()` in this loop "
                "but never zeroed "
                f"(only {', '.join(f'`{z}`' for z in sorted(zeroed))} is), so its gradients "
                f"accumulate across steps; call `{optimizer}.zero_grad()` each iteration",
            )


def _modes_with_helpers(context, scope: Scope
                        ) -> tuple[dict[str, list[CallSite]], dict[str, list[CallSite]]]:
    """`mode_calls`, with the calls of project functions and methods that put one of this
    function's names in eval or training mode (`set_eval(model)` that calls `model.eval()`,
    `self.eval_mode()`): (names put in eval mode, in train mode) -> their call sites."""
    evals, trains = mode_calls(scope)
    for site in scope.calls:
        for effect in context.semantic.call_effects(site.node, scope):
            if effect.target is None or effect.effect not in ("eval", "train"):
                continue
            found = evals if effect.effect == "eval" else trains
            sites = found.setdefault(effect.target, [])
            sites.append(site)
            sites.sort(key=lambda s: s.order)
    return evals, trains


def _stepped_in_helpers(context, scope: Scope) -> list[tuple[CallSite, str]]:
    """The calls of project functions and methods that step one of this function's
    optimizers (`self.update()` that calls `self.opt.step()`): (site, the optimizer's dotted
    name in the caller's terms)."""
    found = []
    for site in scope.calls:
        for effect in context.semantic.call_effects(site.node, scope):
            if effect.effect == "step" and effect.target is not None and is_optimizer(
                    context, scope, effect.target):
                found.append((site, effect.target))
                break
    return found


def _through(site: CallSite) -> str:
    """` (in `helper()`)` for a step made by a project function the site calls."""
    func = site.node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "step":
        return ""
    return f" (in `{dotted_name(func) or '...'}()`)"


def _cleared_in_helpers(context, scope: Scope) -> list[str | None]:
    """What the project functions and methods that `scope` calls clear the gradients of
    (`self.reset_grad()` that calls `self.opt.zero_grad()`): the caller's dotted names, None
    for one not known."""
    cleared: list[str | None] = []
    for site in scope.calls:
        for effect in context.semantic.call_effects(site.node, scope):
            if effect.effect == "zero_grad" and effect.target not in cleared:
                cleared.append(effect.target)
    return cleared


# -- ML304 ------------------------------------------------------------------------------------

_DETACHED = LazyPattern(r"\.(item|detach|tolist|numpy)\(|^float\(|^int\(")


class LossKeptWithGraph(ScopeRule):
    """A loss tensor is accumulated for logging without `.item()`, keeping its graph alive.

    ## What it does
    Finds `total += loss` and `losses.append(loss)` inside a loop, where `loss` had
    `.backward()` called on it or came from a loss function (`F.cross_entropy`,
    `nn.MSELoss()` ...), and is added without `.item()`, `.detach()` or `float()`. Sums that
    are themselves backpropagated later (`total.backward()`) are not flagged, nor are
    additions under `torch.no_grad()`.

    ## Why is this bad?
    The loss is a tensor that references the whole autograd graph of its iteration. Adding it
    to a running total links every iteration's graph together, so activations are never freed
    and memory grows each step until the GPU runs out.

    ## Example
        total_loss = 0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total_loss += loss

    ## Use instead
        total_loss = 0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
    """

    code = "ML304"
    passes = ("static", "run")
    name = "loss-kept-with-graph"
    needs = frozenset({"scope", "semantic"})
    fix = "unsafe"
    triggers = ("loss", "Loss", "backward")
    valid = [
        _train(setup="total = 0.0", batch_end="total += loss.item()"),
        _train(setup="losses = []", batch_end="losses.append(loss.detach())"),
        _train(setup="total = 0.0", batch_end="total += float(loss)"),
        # the sum is what gets backpropagated
        HEADER + "def step(model, heads, x, y, optimizer):\n    loss = 0\n"
        "    for head in heads:\n        part = F.cross_entropy(head(model(x)), y)\n"
        "        loss += part\n    loss.backward()\n    optimizer.step()\n",
        HEADER + "def step(model, chunks, optimizer):\n    losses = []\n"
        "    for x, y in chunks:\n        loss = F.mse_loss(model(x), y)\n"
        "        losses.append(loss)\n    torch.stack(losses).mean().backward()\n",
        # the loss comes from outputs computed under no_grad (Accelerate's Megatron-LM example)
        HEADER + "def fit(model, loader, eval_loader, optimizer):\n    for batch in loader:\n"
        "        loss = model(**batch).loss\n        loss.backward()\n        optimizer.step()\n"
        "    model.eval()\n    losses = []\n"
        "    for batch in eval_loader:\n        with torch.no_grad():\n"
        "            outputs = model(**batch)\n        loss = outputs.loss\n"
        "        losses.append(loss)\n",
        # evaluation under no_grad keeps no graph
        HEADER + "def evaluate(model, loader):\n    total = 0\n    with torch.no_grad():\n"
        "        for x, y in loader:\n            loss = F.cross_entropy(model(x), y)\n"
        "            total += loss\n    return total\n",
        # converted before it is added
        _train(setup="total = 0.0", batch_end="loss = loss.item()\ntotal += loss"),
    ]
    invalid = [
        Invalid(
            _train(setup="total_loss = 0", batch_end="total_loss += loss"),
            line=line_of(_train(setup="total_loss = 0", batch_end="total_loss += loss"),
                          "total_loss += loss"),
            fixed=_train(setup="total_loss = 0", batch_end="total_loss += loss.item()"),
        ),
        Invalid(
            _train(setup="history = []", batch_end="history.append(loss)"),
            line=line_of(_train(setup="history = []", batch_end="history.append(loss)"),
                          "history.append(loss)"),
            fixed=_train(setup="history = []", batch_end="history.append(loss.item())"),
        ),
        invalid_at(
            HEADER + "def train(model, loader, optimizer):\n    running = 0.0\n"
            "    for x, y in loader:\n        optimizer.zero_grad()\n"
            "        loss = F.mse_loss(model(x), y)\n        running += loss * x.size(0)\n"
            "        loss.backward()\n        optimizer.step()\n",
            "running +=",
            fixed=HEADER + "def train(model, loader, optimizer):\n    running = 0.0\n"
            "    for x, y in loader:\n        optimizer.zero_grad()\n"
            "        loss = F.mse_loss(model(x), y)\n        running += loss.item() * x.size(0)\n"
            "        loss.backward()\n        optimizer.step()\n",
        ),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        if function_without_grad(context, scope.root):
            return
        backwards = backward_calls(context, scope)
        backpropagated: set[str] = set()  # names that flow into a backward() call
        backward_targets: set[str] = set()  # names backward() was called on
        for _, expr in backwards:
            backpropagated |= names_in(expr)
            inner = expr
            while isinstance(inner, (cst.BinaryOperation, cst.Call)):
                if isinstance(inner, cst.BinaryOperation):
                    inner = inner.left
                elif inner.args and isinstance(inner.func, cst.Attribute) and (
                    "scale" in inner.func.attr.value
                ):
                    inner = inner.args[0].value
                else:
                    break
            if isinstance(inner, cst.Name):
                backward_targets.add(inner.value)
        changed = True
        while changed:
            changed = False
            for assignment in scope.assignments:
                head = assignment.target.split(".", 1)[0]
                if head in backpropagated and assignment.value is not None:
                    new = names_in(assignment.value) - backpropagated
                    if new:
                        backpropagated |= new
                        changed = True
        code = cst.Module(body=[]).code_for_node
        for site in scope.sites:
            node = site.node
            loss: cst.Name | None = None
            target: cst.BaseExpression | None = None
            if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
                target, loss = node.target, _loss_operand(node.value)
            elif (
                isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "append" and len(node.args) == 1
            ):
                target, loss = node.func.value, _loss_operand(node.args[0].value)
            if loss is None or target is None or not site.loops:
                continue
            base = target.value if isinstance(target, cst.Subscript) else target
            target_name = dotted_name(base)
            if target_name is None or target_name.split(".", 1)[0] in backpropagated:
                continue
            if target_name == loss.value or under_no_grad(context, site):
                continue
            assignments = scope.assigned(loss.value)
            if any(a.value is not None and _DETACHED.search(code(a.value).strip())
                   for a in assignments):
                continue
            earlier = [a for a in assignments if a.site.order < site.order]
            if earlier and _computed_without_grad(context, scope, earlier[-1], site.order):
                continue
            from_loss = bool(earlier) and is_loss_call(
                context, scope, earlier[-1].value, site.order)
            if loss.value not in backward_targets and not from_loss:
                continue
            if any(a.target == target_name and a.site.inside(site.loops[-1])
                   for a in scope.assignments):
                continue  # reset every iteration
            replacement = cst.Call(func=cst.Attribute(value=loss, attr=cst.Name("item")))
            self.report_at(
                site, loss,
                f"`{loss.value}` is added to `{target_name}` with its autograd graph, which "
                f"keeps every iteration's graph alive; use `{loss.value}.item()` (or "
                "`.detach()`)",
                fix=Fix(((loss, replacement),), f"use `{loss.value}.item()`", safe=False),
            )


def _computed_without_grad(context, scope: Scope, assignment, before: int) -> bool:
    """The value was computed under `no_grad`, or only from names last assigned under it
    (`loss = outputs.loss` after `with torch.no_grad(): outputs = model(**batch)`), or
    returned by a project function whose body runs under no_grad (`loss = self.evaluate(x)`)."""
    if under_no_grad(context, assignment.site) or _returned_without_grad(
            context, scope, assignment.value):
        return True
    names = names_in(assignment.value) if assignment.value is not None else set()
    assigned = [scope.assigned(name, assignment.site.order) for name in names]
    sources = [found[-1] for found in assigned if found]
    return bool(sources) and all(under_no_grad(context, a.site) or _returned_without_grad(
        context, scope, a.value) for a in sources)


def _returned_without_grad(context, scope: Scope, value: cst.BaseExpression | None) -> bool:
    """`value` is what a call of a project function whose whole body runs under no_grad
    returns (or an attribute or item of it): a tensor without a graph."""
    while isinstance(value, (cst.Attribute, cst.Subscript)):
        value = value.value
    return isinstance(value, cst.Call) and any(
        effect.effect == "no_grad" for effect in context.semantic.call_effects(value, scope))


def _loss_operand(expr: cst.BaseExpression) -> cst.Name | None:
    """`loss` in `loss`, `loss * n`, `n * loss` or `loss / n`."""
    if isinstance(expr, cst.Name):
        return expr
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, (cst.Multiply, cst.Divide)
    ):
        if isinstance(expr.left, cst.Name):
            return expr.left
        if isinstance(expr.operator, cst.Multiply) and isinstance(expr.right, cst.Name):
            return expr.right
    return None


# -- ML305 ------------------------------------------------------------------------------------


def _params_source(expr: cst.BaseExpression) -> str | None:
    """`model.fc` for `model.fc.parameters()` (also inside `list(...)`)."""
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "list" and len(expr.args) == 1:
        expr = expr.args[0].value
    if (
        isinstance(expr, cst.Call) and not expr.args
        and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "parameters"
    ):
        return dotted_name(expr.func.value)
    return None


class ParamGroupOverlap(StaticRule):
    """Two parameter groups of one optimizer hold the same parameters.

    ## What it does
    Finds a list of parameter groups (`[{"params": ...}, {"params": ...}]`) in which one
    group takes `X.parameters()` and another `X.parameters()` again or `X.Y.parameters()`,
    a part of `X`.

    ## Why is this bad?
    A parameter may belong to only one group: the optimizer raises "some parameters appear
    in more than one parameter group". The usual intent, a different learning rate for a
    part of the model, needs the other group to exclude that part.

    ## Example
        optimizer = torch.optim.SGD([
            {"params": model.parameters()},
            {"params": model.head.parameters(), "lr": 1e-2},
        ], lr=1e-3)

    ## Use instead
        optimizer = torch.optim.SGD([
            {"params": model.backbone.parameters()},
            {"params": model.head.parameters(), "lr": 1e-2},
        ], lr=1e-3)
    """

    code = "ML305"
    passes = ("static", "run")
    name = "param-group-overlap"
    needs = frozenset()
    triggers = ('"params"', "'params'")
    valid = [
        HEADER + "opt = torch.optim.SGD([{'params': net.fc1.parameters(), 'lr': 1e-3},\n"
        "                       {'params': net.fc2.parameters()}], lr=0.01)\n",
        HEADER + "opt = torch.optim.SGD([{'params': net.fc1.parameters()},\n"
        "                       {'params': net.fc10.parameters()}], lr=0.01)\n",
        # recurse=False: only the module's own parameters
        HEADER + "opt = torch.optim.SGD([{'params': net.parameters(recurse=False)},\n"
        "                       {'params': net.fc.parameters()}], lr=0.01)\n",
        HEADER + "opt = torch.optim.SGD([{'params': decay}, {'params': no_decay, "
        "'weight_decay': 0.0}], lr=0.01)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "opt = torch.optim.SGD([{'params': net.parameters()},\n"
            "                       {'params': net.fc.parameters(), 'lr': 1e-2}], lr=0.01)\n",
            line=6,
        ),
        Invalid(
            HEADER + "groups = [\n    {\"params\": self.backbone.parameters(), \"lr\": 1e-4},\n"
            "    {\"params\": self.backbone.parameters()},\n]\n",
            line=7,
        ),
    ]

    def visit_List(self, node: cst.List) -> None:
        seen: list[str] = []
        for element in node.elements:
            if not isinstance(element.value, cst.Dict):
                return
            params = None
            for item in element.value.elements:
                key = getattr(item, "key", None)
                if isinstance(key, cst.SimpleString) and key.evaluated_value == "params":
                    params = item.value
            if params is None:
                return
            source = _params_source(params)
            if source is None:
                continue
            for other in seen:
                if source == other or source.startswith(other + ".") or other.startswith(
                    source + "."
                ):
                    self.report(
                        params,
                        f"`{source}.parameters()` overlaps the group of `{other}.parameters()`;"
                        " a parameter may be in only one group, so exclude the part from the "
                        "other group",
                    )
                    break
            seen.append(source)


# -- ML306 ------------------------------------------------------------------------------------

def _number(expr: cst.BaseExpression) -> float | None:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    return None


def has_mode_behaviour(context, call: cst.Call, seen: frozenset[str] = frozenset()) -> bool:
    """Whether the module `call` builds may behave differently in train() and eval() mode.
    Unknown is yes: only `torch.nn` layers and module classes of this file known to hold no
    dropout, batch norm or other mode-dependent layer are no (a loss, `nn.Softmax`,
    `nn.Linear`, an `nn.LSTM` without dropout)."""
    func = call.func
    if isinstance(func, cst.Name) and func.value in context.module_classes:
        return _class_has_mode_behaviour(context, func.value, seen)
    qualified = context.call_name(call) or ""
    if not qualified.startswith("torch.nn.") or qualified.count(".") > 3:
        return True
    layer = qualified.rsplit(".", 1)[1]
    if layer in MODE_LAYERS:
        return True
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    if any(arg.star for arg in call.args):
        return True
    if layer in DROPOUT_ARGUMENT:
        dropout = keywords.get("dropout")
        if dropout is None:
            return DROPOUT_ARGUMENT[layer] != 0
        return _number(dropout) != 0
    if layer in INSTANCE_NORMS:
        tracked = keywords.get("track_running_stats")
        return tracked is not None and not (
            isinstance(tracked, cst.Name) and tracked.value == "False")
    if layer in CONTAINERS:
        return any(_expression_has_mode_behaviour(context, arg.value, seen) for arg in call.args)
    # TransformerEncoder/Decoder take a layer built elsewhere; other torch.nn classes
    # (losses, activations, Linear, convolutions, LayerNorm ...) have no mode
    return layer in ("TransformerEncoder", "TransformerDecoder") or not context.builds_module(call)


def _expression_has_mode_behaviour(context, expr: cst.BaseExpression, seen) -> bool:
    if isinstance(expr, cst.Call):
        return has_mode_behaviour(context, expr, seen)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(_expression_has_mode_behaviour(context, el.value, seen) for el in expr.elements)
    if isinstance(expr, cst.Dict):
        return any(_expression_has_mode_behaviour(context, el.value, seen)
                   for el in expr.elements if isinstance(el, cst.DictElement))
    return True


_MODE_TEXT = LazyPattern(r"\btraining\b|dropout|\.train\(|\.eval\(")


def _class_has_mode_behaviour(context, name: str, seen: frozenset[str]) -> bool:
    """A module class of this file: no only when its bases and every layer it builds are known
    to have no mode and its code never reads `training` nor calls dropout."""
    if name in seen:
        return False
    seen = seen | {name}
    cls = context.module_classes[name]
    if _MODE_TEXT.search(cst.Module(body=[cls]).code):
        return True
    for base in cls.bases:
        base_name = dotted_name(base.value)
        if base_name is not None and base_name in context.module_classes:
            if _class_has_mode_behaviour(context, base_name, seen):
                return True
        elif context.qualified_name(base.value) != "torch.nn.Module":
            return True
    found = False

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            if found:
                return
            callee = dotted_name(node.func) or ""
            qualified = context.call_name(node) or ""
            if qualified.startswith("torch.") and not context.builds_module(node):
                return  # nn.Parameter, torch.Size ...: no module
            builds = context.builds_module(node) or callee.rsplit(".", 1)[-1][:1].isupper()
            if builds and has_mode_behaviour(context, node, seen):
                found = True

    visit(cls, Calls())
    return found


# the name of held-out data: `val_loader`, `testloader`, `eval_dataset`, `loader_val`
_HELD_OUT = LazyPattern(r"(?:^|_)(?:val|valid|validation|test|eval|dev)(?:_|data|loader|set|$)",
                       re.IGNORECASE)


def _held_out_loop(context, scope: Scope, site: Site) -> cst.For | None:
    """The innermost `for` loop around `site` over held-out data (an iterable that names
    validation or test data, and no training data) whose body neither calls `backward()` nor
    steps an optimizer: an evaluation, with or without `no_grad`."""
    for loop in reversed(site.loops):
        if not isinstance(loop, cst.For):
            continue
        names = [segment for name in _iterable_names(loop.iter) for segment in name.split(".")]
        if not any(_HELD_OUT.search(n) for n in names) or any("train" in n.lower()
                                                             for n in names):
            continue
        steps = [b for b, _ in backward_calls(context, scope)] + optimizer_steps(context, scope)
        if any(step.inside(loop) for step in steps):
            return None
        return loop
    return None


def _held_out_batch(context, scope: Scope, site: Site) -> CallSite | None:
    """The `next(...)` before `site` that draws a batch of held-out data
    (`next(iter(val_loader))`, `next(enumerate(testdataloader, 0))`) in a block (the `if` of
    a test every N iterations, a loop body, the function) that also holds `site` and
    neither calls `backward()` nor steps an optimizer: the model is evaluated on it."""
    steps = None
    for draw in scope.calls:
        if draw.order >= site.order:
            break
        call = draw.node
        if not (type(call.func) is cst.Name and call.func.value == "next" and call.args):
            continue
        names = [segment for name in _iterable_names(call.args[0].value)
                 for segment in name.split(".")]
        if not any(_HELD_OUT.search(n) for n in names) or any("train" in n.lower()
                                                             for n in names):
            continue
        block = next((a for a in reversed(draw.ancestors)
                      if isinstance(a, (cst.If, cst.For, cst.While))), None)
        if block is not None and not site.inside(block):
            continue
        if steps is None:
            steps = [b for b, _ in backward_calls(context, scope)] + optimizer_steps(
                context, scope)
        if any(block is None or step.inside(block) for step in steps):
            continue
        return draw
    return None


def _iterable_names(expr: cst.BaseExpression) -> list[str]:
    """The dotted names an iterable reads (`enumerate(self.val_loader, 0)`: `enumerate`,
    `self.val_loader`), in source order, not looking into lambdas."""
    found: list[str] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.append(node.value)
            continue
        if isinstance(node, cst.Lambda):
            continue
        if isinstance(node, cst.Attribute):
            name = dotted_name(node)
            if name is not None:
                found.append(name)
                continue
        stack.extend(reversed(child_nodes(node)))
    return found


def _in_training_step(context, scope: Scope, site: Site) -> bool:
    """The `no_grad` block of `site` sits directly in the loop body that also calls
    `backward()` or `optimizer.step()` (not in a nested loop of it): part of a training step,
    such as a GAN's generator sampling for the discriminator's step or a sample logged every
    N steps, not an evaluation after training."""
    loop = None
    for ancestor in site.ancestors:
        if isinstance(ancestor, cst.With) and any(
            is_no_grad_item(context, item.item) for item in ancestor.items
        ):
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            loop = ancestor
    if loop is None or _held_out_loop(context, scope, site) is not None or _held_out_batch(
            context, scope, site) is not None:
        return False  # a validation loop (or batch) inside the step evaluates, it does not train
    steps = [b for b, _ in backward_calls(context, scope)] + optimizer_steps(context, scope)
    return any(step.loops and step.loops[-1] is loop for step in steps)


class EvalWithoutEvalMode(ScopeRule):
    """A model is run for evaluation under `no_grad` while still in training mode.

    ## What it does
    Finds a model called under `torch.no_grad()` or `torch.inference_mode()` (a `with` block
    or a decorator) in a function that never calls `model.eval()` or `model.train(False)`,
    when the function itself built the model (a `torch.nn` layer, a module class of the file,
    a `torchvision.models` builder) or put it in training mode (`model.train()`) to train it.
    A model received as an argument may have been put in eval mode by the caller and is not
    flagged, unless the project's call sites say otherwise: every call of the (top-level)
    function passes a model that its caller put in training mode (or built with dropout or
    batch norm) and never in eval mode, itself or through another project function that takes
    it. Code inside module classes is not checked.

    Only modules whose behaviour depends on the mode are reported: losses, activations such as
    `nn.Softmax`, `nn.Linear`, an `nn.LSTM` without `dropout=` and module classes of the
    project (of any file) built only from such layers behave the same in both modes. From the
    semantic model it also knows a model built here from a project class or factory of
    another file, when that class holds dropout or batch norm, and what a `self` attribute
    or a module-level model is. A model built here by a class or factory of a package that is
    not in the tree counts as built when this code loads trained weights into it
    (`model.load_state_dict(...)`). Nor is a `no_grad` block that
    sits in the loop body calling `backward()` or `optimizer.step()`: it is part of a training
    step (a GAN's generator sampling for the discriminator's step, a sample logged every N
    steps), and `eval()` there would train the next steps in eval mode.

    A loop over validation or test data (`for x, y in val_loader`, `enumerate(testloader)`:
    an iterable that names held-out data and no training data) whose body neither calls
    `backward()` nor steps an optimizer is an evaluation too, with or without `no_grad`; it
    is reported at the loop, before which `eval()` belongs. Such a loop inside the training
    step (validation every N steps) is an evaluation, not part of the step. So is a call on
    a batch drawn from held-out data (`next(iter(val_loader))`) in a block that neither calls
    `backward()` nor steps an optimizer (the test batch of every tenth iteration), reported
    where the batch is drawn.

    ## Why is this bad?
    `no_grad` only stops gradient tracking; it does not change layer behaviour. In training
    mode dropout still drops activations and batch norm normalises with the statistics of
    the current batch (and updates its running statistics), so evaluation results are noisy,
    wrong for small batches, and change the model.

    ## Example
        model.train()
        for x, y in train_loader:
            ...
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum()

    ## Use instead
        model.train()
        for x, y in train_loader:
            ...
        model.eval()
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum()

    ## What it does not see
    On the benchmark of real bugs (bench/bugs) it finds 5 of 13 cases (test loops and test
    batches without `no_grad`, and models built by a class of another package and given
    trained weights);
    it misses the others for these reasons:

    - the model is a parameter of the evaluating function and no call site in the checked tree
      says how it was built (r-pysi-113423-validate-without-eval), the caller builds it from
      a class of a package outside the tree and loads weights into it, which the call-site
      summaries do not record (`net = UNet(...)`, `net.load_state_dict(...)`,
      `predict_img(net=net)`: c-unet-predict-train-mode), the case holds only the evaluating
      function (c-unet-eval-net-train-mode; its caller in train.py trains the net it is given
      without a `train()` call, which it would not see either), or the
      call site passes it on through another function
      (c-simclr-linear-eval-encoder-train-mode);
    - a call in a method of a class that is not a module (c-ddpm-fid-inception-train-mode);
    - snippets that never define the model nor train it in the snippet
      (r-pysi-43349-test-without-eval, r-pysi-100222-validation-without-eval);
    - a model whose layers behave the same in both modes (an `nn.LSTM` without `dropout=` and
      an `nn.Linear`: c-yunjey-tutorial-rnn-test-without-eval), by design.

    The run pass (`modellint run`) sees a forward under `no_grad` in training mode wherever it
    happens.
    """

    code = "ML306"
    passes = ("static", "run")
    name = "eval-without-eval-mode"
    needs = frozenset({"project", "scope", "semantic"})
    # "val", "test", "dev": a loop over held-out data evaluates without no_grad too
    triggers = ("no_grad", "inference_mode", "set_grad_enabled", "val", "test", "dev")
    valid = [
        HEADER + "model = nn.Sequential(nn.Linear(4, 4), nn.Dropout())\nmodel.eval()\n"
        "with torch.no_grad():\n    out = model(x)\n",
        HEADER + "model = nn.Sequential(nn.Linear(4, 4), nn.Dropout())\n"
        "model.train(False)\nwith torch.inference_mode():\n    out = model(x)\n",
        # the caller decides the mode
        HEADER + "@torch.no_grad()\ndef evaluate(model, loader):\n"
        "    return [model(x) for x, _ in loader]\n",
        HEADER + "def evaluate(model, loader):\n    with torch.no_grad():\n"
        "        return [model(x) for x, _ in loader]\n",
        # batch-norm recalibration: train mode on purpose, nothing trained
        HEADER + "@torch.no_grad()\ndef update_bn(model, loader):\n    model.train()\n"
        "    for x in loader:\n        model(x)\n",
        # a frozen teacher that the function does not train
        HEADER + "def train(student, teacher, loader, optimizer):\n    student.train()\n"
        "    for x in loader:\n        with torch.no_grad():\n            target = teacher(x)\n"
        "        F.mse_loss(student(x), target).backward()\n        optimizer.step()\n"
        "        optimizer.zero_grad()\n",
        # a loss and a softmax have no train/eval behaviour (DeiT's and MAE's evaluate())
        HEADER + "@torch.no_grad()\ndef evaluate(model, loader):\n"
        "    criterion = torch.nn.CrossEntropyLoss()\n    softmax = nn.Softmax(dim=1)\n"
        "    model.eval()\n    for x, y in loader:\n"
        "        loss = criterion(model(x), y)\n        probs = softmax(model(x))\n",
        # a linear model and an LSTM without dropout behave the same in both modes
        HEADER + "model = nn.Linear(784, 10)\nwith torch.no_grad():\n    out = model(x)\n",
        HEADER + "rnn = nn.LSTM(8, 16, num_layers=2)\nwith torch.no_grad():\n"
        "    out, _ = rnn(x)\n",
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 2)\n\n    def forward(self, x):\n"
        "        return F.relu(self.fc(x))\n\n\nmodel = Net()\nwith torch.no_grad():\n"
        "    out = model(x)\n",
        # the caller puts the model in eval mode before calling
        HEADER + "@torch.no_grad()\ndef evaluate(model, loader):\n"
        "    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)\n\n\n"
        "def fit(model, loader, val_loader, optimizer):\n    model.train()\n"
        "    for x, y in loader:\n        optimizer.zero_grad()\n"
        "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
        "    model.eval()\n    print(evaluate(model, val_loader))\n",
        # a batch of held-out data drawn, but the model put in eval mode first
        HEADER + "def fit(model, loader, test_loader, optimizer):\n"
        "    for i, (x, y) in enumerate(loader):\n        model.train()\n"
        "        optimizer.zero_grad()\n"
        "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
        "        if i % 10 == 0:\n            model.eval()\n"
        "            x_test, y_test = next(iter(test_loader))\n"
        "            print(F.cross_entropy(model(x_test), y_test).item())\n",
        # a GAN's discriminator step: the generator samples under no_grad inside the step
        HEADER + "def train(generator, discriminator, loader, opt_d):\n"
        "    generator.train()\n    for real in loader:\n        with torch.no_grad():\n"
        "            fake = generator(torch.randn(64, 100))\n"
        "        loss = discriminator(fake).mean() - discriminator(real).mean()\n"
        "        opt_d.zero_grad()\n        loss.backward()\n        opt_d.step()\n",
        HEADER + "from models import vgg19\n\nmodel = vgg19()\n"
        "model.load_state_dict(torch.load('best.pth'))\nmodel.eval()\n"
        "with torch.set_grad_enabled(False):\n    outputs = model(inputs)\n",
        # a loop over validation data that trains (fine-tuning on it) is no evaluation
        HEADER + "def adapt(model, val_loader, optimizer):\n    model.train()\n"
        "    for x, y in val_loader:\n        optimizer.zero_grad()\n"
        "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n",
        # the test loop after training puts the model in eval mode first
        HEADER + "def fit(model, loader, test_loader, optimizer):\n    model.train()\n"
        "    for x, y in loader:\n        optimizer.zero_grad()\n"
        "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
        "    model.eval()\n    for x, y in test_loader:\n        print(model(x).argmax(1))\n",
    ]
    invalid = [
        # built by a class of a package not in the tree, then given trained weights
        invalid_at(
            HEADER + "from models import vgg19\n\nmodel = vgg19()\n"
            "model.load_state_dict(torch.load('best.pth'))\n"
            "with torch.set_grad_enabled(False):\n    outputs = model(inputs)\n",
            "outputs =",
        ),
        # a test batch drawn every N iterations of the training loop (PointNet)
        invalid_at(
            HEADER + "def fit(model, loader, test_loader, optimizer):\n    model.train()\n"
            "    for i, (x, y) in enumerate(loader):\n        optimizer.zero_grad()\n"
            "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
            "        if i % 10 == 0:\n"
            "            x_test, y_test = next(iter(test_loader))\n"
            "            print(F.cross_entropy(model(x_test), y_test).item())\n",
            "x_test, y_test = next(",
        ),
        # a test loop after training, without no_grad, reported at the loop
        invalid_at(
            HEADER + "def fit(model, loader, test_loader, optimizer):\n    model.train()\n"
            "    for x, y in loader:\n        optimizer.zero_grad()\n"
            "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
            "    for x, y in test_loader:\n        print(model(x).argmax(1))\n",
            "for x, y in test_loader",
        ),
        # validation every N steps: a loop over validation data inside the training step
        invalid_at(
            HEADER + "def fit(model, loader, valloader, optimizer):\n    model.train()\n"
            "    for i, (x, y) in enumerate(loader):\n        optimizer.zero_grad()\n"
            "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
            "        if i % 2000 == 1999:\n            with torch.no_grad():\n"
            "                for xv, yv in valloader:\n"
            "                    val_loss = F.cross_entropy(model(xv), yv)\n",
            "val_loss =",
        ),
        Invalid(
            HEADER + "import torchvision\n\nmodel = torchvision.models.resnet18()\n"
            "model.load_state_dict(torch.load('weights.pt'))\nwith torch.no_grad():\n"
            "    prediction = model(image).argmax(1)\n",
            line=10,
        ),
        invalid_at(
            HEADER + "def fit(model, train_loader, val_loader, optimizer, epochs):\n"
            "    for epoch in range(epochs):\n"
            "        model.train()\n"
            "        for x, y in train_loader:\n"
            "            optimizer.zero_grad()\n"
            "            F.cross_entropy(model(x), y).backward()\n"
            "            optimizer.step()\n"
            "        with torch.no_grad():\n"
            "            for x, y in val_loader:\n"
            "                val_loss = F.cross_entropy(model(x), y)\n",
            "val_loss =",
        ),
        # the only caller trains the model and never puts it in eval mode
        invalid_at(
            HEADER + "@torch.no_grad()\ndef evaluate(model, loader):\n"
            "    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)\n\n\n"
            "def fit(model, loader, val_loader, optimizer):\n    model.train()\n"
            "    for x, y in loader:\n        optimizer.zero_grad()\n"
            "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n"
            "    print(evaluate(model, val_loader))\n",
            "return sum(",
        ),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        if context.in_module_class:
            return
        decorated = function_without_grad(context, scope.root)
        # what the function and its helpers put in eval or train mode: asked only for a call
        # that evaluates (most functions have none)
        modes: tuple[dict[str, list[CallSite]], dict[str, list[CallSite]]] | None = None
        trains_here = None
        reported: set[str] = set()
        for site in scope.calls:
            name = dotted_name(site.node.func)
            if name is None or name in reported:
                continue
            held_out = None
            batch = None
            if not (decorated or under_no_grad(context, site)):
                # without no_grad, a loop over validation or test data is an evaluation too,
                # and so is a call on a batch drawn from them (`next(iter(val_loader))`)
                held_out = _held_out_loop(context, scope, site)
                if held_out is None:
                    batch = _held_out_batch(context, scope, site)
                    if batch is None:
                        continue
            if modes is None:
                modes = _modes_with_helpers(context, scope)
            evals, trains = modes
            if name in evals:
                continue
            # the semantic model knows it has no train/eval behaviour (a loss, a softmax, an
            # upsampling layer, a project model without dropout or batch norm)
            kind = context.semantic.kind_of_name(name, scope, site.order)
            if kind is not None and kind.kind == "module" and kind.mode is False:
                continue
            # a model this function built (attributes of classes are set up elsewhere)
            constructor = constructor_of(context, scope, name, site.order) if (
                "." not in name) else None
            built = constructor is not None and context.builds_module(constructor)
            if built and constructor is not None and not has_mode_behaviour(context, constructor):
                continue  # a loss, an activation, a layer without dropout or batch norm
            if constructor is not None and not built and kind is not None and (
                kind.kind == "module" and kind.mode is True
            ):
                # built from a project class or factory of another file that has dropout or
                # batch norm
                built = True
            if constructor is not None and not built and kind is None and _weights_loaded(
                    scope, name, site.order):
                # built here by a class or factory of a package not in the tree, then given
                # trained weights: a model, whose mode is not known to be the same in both
                built = True
            if not decorated and held_out is None and batch is None and _in_training_step(
                    context, scope, site):
                continue
            callers = None
            if not built:
                if name not in trains:
                    callers = _callers_in_training(context, scope, name)
                    if callers is None:
                        continue
                else:
                    if trains_here is None:
                        trains_here = bool(backward_calls(context, scope)) and bool(
                            optimizer_steps(context, scope))
                    if not trains_here:
                        continue
            reported.add(name)
            how = "under no_grad for evaluation"
            node: cst.CSTNode = site.node
            statement = site.statement
            if held_out is not None:
                # at the loop, before which `eval()` belongs
                how = f"for evaluation over `{source_of(held_out.iter).strip()}`"
                node, statement = held_out.iter, held_out
            elif batch is not None:
                # at the batch drawn, before which `eval()` belongs
                how = f"for evaluation on `{source_of(batch.node).strip()}`"
                node, statement = batch.node, batch.statement
            if callers is not None:
                self.report(
                    node,
                    f"`{name}` is run {how}, but {callers} (dropout "
                    f"and batch norm behave as in training); call `{name}.eval()` here or "
                    "before the call", statement=statement or node,
                )
                continue
            self.report(
                node,
                f"`{name}` is run {how} but is still in training mode "
                f"(dropout and batch norm behave as in training); call `{name}.eval()` first",
                statement=statement or node,
            )


def _weights_loaded(scope: Scope, name: str, before: int) -> bool:
    """`name.load_state_dict(...)` runs after `name` was built and before the site at
    `before`; `name = name.to(device)` and the like keep the model it was built as."""
    assignments = scope.assigned(name, before)
    while assignments and assignments[-1].value is not None and mode_receiver(
            assignments[-1].value) == name:
        assignments = scope.assigned(name, assignments[-1].site.order)
    if not assignments:
        return False
    built = assignments[-1].site.order
    return any(dotted_name(receiver) == name and built < site.order < before
               for site, receiver in scope.method_calls("load_state_dict"))


def _callers_in_training(context, scope: Scope, name: str) -> str | None:
    """For a parameter `name` of a top-level function: a description of its callers when
    every call of the function in the project passes a model that the caller put in training
    mode (or built with dropout or batch norm) and never in eval mode, itself or through
    another project function; else None (unknown)."""
    root = scope.root
    if not isinstance(root, cst.FunctionDef) or "." in name or len(context.function_stack) > 1:
        return None
    if context.method_owners.get(id(root)) is not None:
        return None
    params = [p.name.value for p in root.params.params]
    if name not in params:
        return None
    passed = context.semantic.arguments_passed(root.name.value, params.index(name))
    if not passed:
        return None
    names = []
    for argument in passed:
        if argument.name is None or argument.evals:
            return None
        kind = argument.kind
        if kind is not None and kind.kind == "module" and kind.mode is False:
            return None
        if not argument.trains and not (
            kind is not None and kind.kind == "module" and kind.mode is True
        ):
            return None
        if argument.put_in_eval is not False:
            return None  # passed to a function that puts it in eval mode, or may
        names.append(argument.path)
    if len(passed) == 1:
        where = "" if passed[0].path == context.path else f" in {passed[0].path}"
        return f"its caller{where} never puts it in eval mode"
    return f"none of its {len(passed)} callers ({', '.join(sorted(set(names)))}) puts it in " \
        "eval mode"


# -- ML307 ------------------------------------------------------------------------------------

_WANTS_GRAD = LazyPattern(r"backward|autograd\.grad|requires_grad|enable_grad|\.step\(")


class EvalWithoutNoGrad(ScopeRule):
    """An evaluation loop after `model.eval()` builds autograd graphs it never uses.

    ## What it does
    Finds a loop, after `model.eval()` in the same function (or, in a method, after the
    class's `__init__` put `self.model` in eval mode for good: no method calls
    `self.model.train(`), that calls `model(...)` outside
    any `torch.no_grad()` / `torch.inference_mode()` block (or decorator, or
    `torch.set_grad_enabled(False)`) and never calls `backward()` or asks for gradients.

    ## Why is this bad?
    `eval()` changes dropout and batch norm; it does not turn off gradient tracking. Every
    forward pass records its graph and keeps the activations, which costs memory and time,
    and outputs stored across iterations keep their graphs alive until memory runs out.

    ## Example
        model.eval()
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()

    ## Use instead
        model.eval()
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum().item()

    ## What it does not see
    On bench/bugs it finds 6 of 10 cases. It misses:

    - a single call after `model.eval()` that is not in a loop (`logits = model(x)`:
      r-pysi-17183-eval-without-no-grad; `output = model(img)` in yolov4's `do_detect`:
      c-pytorch-yolov4-do-detect-without-no-grad): one graph, freed with its output, is not
      reported, as `model.eval(); traced = torch.jit.trace(model, x)` and one-off calls are
      common and cost little;
    - models kept in a dict, put in eval mode by a loop over its keys
      (`self.model[key].eval()`) and run by a helper method (`self._eval_step(batch)`:
      c-parallel-wavegan-eval-step-without-no-grad);
    - a model whose eval mode comes from a loader (`attempt_load(...)`) rather than an
      `eval()` call, in a function its only caller already runs under `torch.no_grad()`
      (yolov7's `detect()`: c-yolov7-detect-without-no-grad; the fix adds a second
      `no_grad` for other callers).
    """

    code = "ML307"
    passes = ("static", "run")
    name = "eval-without-no-grad"
    needs = frozenset({"project", "scope", "semantic"})
    severity = Severity.WARNING
    triggers = ("eval(", "train(False", "train(mode=False")
    valid = [
        HEADER + "def evaluate(model, loader):\n    model.eval()\n    with torch.no_grad():\n"
        "        for x, y in loader:\n            out = model(x)\n",
        HEADER + "@torch.inference_mode()\ndef evaluate(model, loader):\n    model.eval()\n"
        "    for x, y in loader:\n        out = model(x)\n",
        HEADER + "def evaluate(model, loader):\n    model.eval()\n"
        "    for x, y in loader:\n        with torch.no_grad():\n            out = model(x)\n",
        # adversarial examples need gradients with the model in eval mode
        HEADER + "def attack(model, loader):\n    model.eval()\n    for x, y in loader:\n"
        "        x.requires_grad_(True)\n        F.cross_entropy(model(x), y).backward()\n",
        # back in training mode before the loop
        HEADER + "def fit(model, loader, optimizer):\n    model.eval()\n    model.train()\n"
        "    for x, y in loader:\n        out = model(x)\n",
        HEADER + "def evaluate(model, loader):\n    torch.set_grad_enabled(False)\n"
        "    model.eval()\n    for x, y in loader:\n        out = model(x)\n",
        # a computed mode (DeiT's `model.train(set_training_mode)`) is no eval()
        HEADER + "def train_one_epoch(model, loader, loss_scaler, set_training_mode=True):\n"
        "    model.train(set_training_mode)\n    for x, y in loader:\n"
        "        loss = F.cross_entropy(model(x), y)\n        loss_scaler(loss)\n",
        # a project's own inference_mode decorator (YOLOv5's `smart_inference_mode`)
        HEADER + "from utils.torch_utils import smart_inference_mode\n\n"
        "@smart_inference_mode()\ndef run(model, loader):\n    model.eval()\n"
        "    for x, y in loader:\n        out = model(x)\n",
        # __init__ sets eval mode, but another method trains
        HEADER + "class Runner:\n    def __init__(self, model):\n"
        "        self.model = model\n        self.model.eval()\n\n"
        "    def fit(self, loader):\n        self.model.train()\n\n"
        "    def predict_all(self, loader):\n"
        "        return [self.model(x) for x in loader]\n\n"
        "    def scores(self, loader):\n        out = []\n        for x in loader:\n"
        "            out.append(self.model(x))\n        return out\n",
    ]
    invalid = [
        Invalid(
            HEADER + "def evaluate(model, loader):\n    model.eval()\n    correct = 0\n"
            "    for x, y in loader:\n        correct += (model(x).argmax(1) == y).sum().item()\n"
            "    return correct\n",
            line=9,
        ),
        invalid_at(
            HEADER + "def fit(model, train_loader, val_loader, optimizer, epochs):\n"
            "    for epoch in range(epochs):\n"
            "        model.train()\n"
            "        for x, y in train_loader:\n"
            "            optimizer.zero_grad()\n"
            "            F.cross_entropy(model(x), y).backward()\n"
            "            optimizer.step()\n"
            "        model.eval()\n"
            "        for x, y in val_loader:\n"
            "            val_loss = F.cross_entropy(model(x), y).item()\n",
            "val_loss =",
        ),
        # the forward called by name (a forum post's validation loop)
        invalid_at(
            HEADER + "def validate(model, loader, loss):\n    model.eval()\n    total = 0.0\n"
            "    for x, y in loader:\n        out = model.forward(x)\n"
            "        total += loss(out, y).item()\n    return total\n",
            "out = model.forward(x)",
        ),
        # eval mode set once, in __init__, of a predictor class
        invalid_at(
            HEADER + "class Predictor:\n    def __init__(self, model):\n"
            "        self.model = model\n        self.model.eval()\n\n"
            "    def predict_all(self, loader):\n        outputs = []\n"
            "        for x in loader:\n            outputs.append(self.model(x))\n"
            "        return outputs\n",
            "outputs.append(self.model(x))",
        ),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        if function_without_grad(context, scope.root):
            return
        evals, trains = _modes_with_helpers(context, scope)
        for name, site in _evaluated_in_init(context, scope).items():
            evals.setdefault(name, []).insert(0, site)
        if not evals:
            return
        for site in scope.calls:
            if context.call_name(site.node) in (
                "torch.set_grad_enabled", "torch.autograd.set_grad_enabled"
            ) and not any(isinstance(a, cst.With) for a in site.ancestors):
                return
        code = cst.Module(body=[]).code_for_node
        reported: set[int] = set()
        for name, eval_sites in evals.items():
            # `model.train(mode)` with a computed mode is no known eval()
            computed = {id(t.node) for t in trains.get(name, [])}
            eval_sites = [e for e in eval_sites if id(e.node) not in computed]
            # `model.forward(x)` runs the same forward as `model(x)`, hooks aside
            calls = [s for s in scope.calls
                     if dotted_name(s.node.func) in (name, f"{name}.forward")]
            for call in calls:
                if id(call.node) in reported or under_no_grad(context, call):
                    continue
                if any(isinstance(a, cst.With) and any(
                    context.call_name(i.item) == "torch.enable_grad" for i in a.items
                ) for a in call.ancestors):
                    continue
                before = [e for e in eval_sites if e.order < call.order]
                if not before:
                    continue
                last_eval = before[-1]
                if any(last_eval.order < t.order < call.order for t in trains.get(name, [])):
                    continue
                # the outermost loop around the call that starts after the eval() call
                loops = [loop for loop in call.loops
                         if scope.site_of[id(loop)].order > last_eval.order]
                if not loops or _WANTS_GRAD.search(code(loops[0])):
                    continue
                reported.add(id(call.node))
                self.report_at(
                    call, call.node,
                    f"`{name}` is evaluated after `{name}.eval()` without `torch.no_grad()`, so "
                    "every call records an autograd graph; wrap the loop in `with "
                    "torch.no_grad():` (or `torch.inference_mode()`)",
                )
                break


def _evaluated_in_init(context, scope: Scope) -> dict[str, CallSite]:
    """For a method: the `self.X` that the class's `__init__` puts in eval mode and that no
    method of the class puts back in training mode -> a site standing for that eval() call,
    ordered before everything in this method."""
    root = scope.root
    if not isinstance(root, cst.FunctionDef) or root.name.value == "__init__":
        return {}
    owner = context.method_owners.get(id(root))
    if owner is None or context.is_module_class(owner):
        return {}  # a module's own mode is its caller's to set
    init = next((s for s in owner.body.body if isinstance(s, cst.FunctionDef)
                 and s.name.value == "__init__"), None)
    self_name = first_param_name(root)
    if init is None or self_name is None or first_param_name(init) != self_name:
        return {}
    evals, _ = mode_calls(scope_of(context, init))
    found = {}
    code = None
    for name, sites in evals.items():
        if not name.startswith(self_name + ".") or name.count(".") != 1:
            continue
        if code is None:
            code = cst.Module(body=[]).code_for_node(owner)
        if f"{name}.train(" in code or f"{name[len(self_name) + 1:]}.train(" in code:
            continue
        found[name] = CallSite(sites[-1].node, 0, (), None)
    return found


# -- ML308 ------------------------------------------------------------------------------------

_ACTIVATION_MODULES = {f"torch.nn.{name}": output for name, output in ACTIVATION_MODULES.items()}
_LOSSES = {**LOSS_FUNCTIONS, **{f"torch.nn.{name}": loss for name, loss in LOSS_MODULES.items()}}
# the deprecated reshapes of old code (`y_pred.resize(1, n)`): the same values, another shape
_RESIZES = frozenset({"resize", "resize_as"})
# loss -> activations it must not be given
_BAD_INPUTS = {
    "cross_entropy": ("softmax", "log_softmax"),
    "nll_loss": ("softmax",),
    "binary_cross_entropy_with_logits": ("sigmoid",),
}


class SoftmaxBeforeCrossEntropy(ScopeRule):
    """A loss that applies its own (log-)softmax or sigmoid is given probabilities.

    ## What it does
    Finds `F.cross_entropy` / `nn.CrossEntropyLoss` applied to the output of `softmax` or
    `log_softmax`, `F.nll_loss` / `nn.NLLLoss` applied to `softmax` (not `log_softmax`)
    output, and `binary_cross_entropy_with_logits` / `nn.BCEWithLogitsLoss` applied to
    `sigmoid` output, directly or through a variable assigned in the same function, also
    moved, cast or reshaped on the way (`probs.view(-1, n)`, `probs.to(device)`,
    `probs.resize(1, n)`). Only the
    prediction (first argument) is checked: soft targets from a softmax are fine, and so is
    `nll_loss(F.log_softmax(x))`.

    It also knows, from the semantic model, where the probabilities come from the model: a
    model (of any file of the project) whose last layer is `nn.Softmax`/`nn.LogSoftmax`/
    `nn.Sigmoid` (an `nn.Sequential` ending in one, a head attribute built so) or whose
    `forward` returns `F.softmax(...)`/`torch.sigmoid(...)` (directly, or as the name whose
    last assignment before the `return`, outside any branch, is one; not when it reads
    `self.training`: such models return logits while training); and which losses expect
    logits: a criterion kept on `self` or at module level, and a project's own loss class or
    function that passes its first argument to `F.cross_entropy`/`F.nll_loss`/
    `binary_cross_entropy_with_logits` (or to such a loss module).

    ## Why is this bad?
    `cross_entropy` computes `log_softmax` itself and `BCEWithLogitsLoss` a sigmoid: applied
    to probabilities, the loss squashes them a second time, its gradients shrink and
    training stalls. `nll_loss` expects log-probabilities; given probabilities, it optimises
    the wrong quantity. (`cross_entropy` of `log_softmax` output is only redundant.)

    ## Example
        probs = F.softmax(model(x), dim=1)
        loss = F.cross_entropy(probs, y)

    ## Use instead
        logits = model(x)
        loss = F.cross_entropy(logits, y)

    ## What it does not see
    On bench/bugs it finds 8 of 12 cases. It reports the loss call that is given the
    probabilities, not the activation; a case whose source names only the activation counts
    it as missed (c-pytorch-gan-acgan-aux-softmax: its fix commit says "remove softmax for
    aux_layer", and the finding is at `auxiliary_loss(real_aux, labels)`, far from the
    `nn.Softmax()` it marks). It misses:

    - a model of a file imported under another name whose `forward` returns a tuple
      (`output, hidden = decoder(...)`: c-zerotoall-seq2seq-logsoftmax-cross-entropy);
    - `sigmoid` before `nn.CrossEntropyLoss` (r-pysi-101895), which it does not check, and a
      snippet that never calls its loss (r-pysi-27298).
    """

    code = "ML308"
    name = "softmax-before-cross-entropy"
    needs = frozenset({"scope", "semantic"})
    # the probabilities may come from a model of another file: a file that computes a loss
    triggers = ("softmax", "sigmoid", "Softmax", "Sigmoid", "expit", "loss", "Loss",
                "criterion", "cross_entropy")
    valid = [
        HEADER + "def step(model, x, y):\n    return F.cross_entropy(model(x), y)\n",
        HEADER + "def step(model, x, y):\n"
        "    return F.nll_loss(F.log_softmax(model(x), dim=1), y)\n",
        HEADER + "def step(model, x, y):\n    log_probs = model(x).log_softmax(dim=-1)\n"
        "    criterion = nn.NLLLoss()\n    return criterion(log_probs, y)\n",
        # soft targets
        HEADER + "def distill(student, teacher, x):\n"
        "    return F.cross_entropy(student(x), F.softmax(teacher(x) / 2.0, dim=1))\n",
        HEADER + "def step(model, x, y):\n    return nn.BCELoss()(torch.sigmoid(model(x)), y)\n",
        # reassigned to the logits before the loss
        HEADER + "def step(model, x, y):\n    out = F.softmax(model(x), 1)\n    show(out)\n"
        "    out = model(x)\n    return F.cross_entropy(out, y)\n",
        # softmax only in eval mode: the loss sees logits while training
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(784, 10)\n\n    def forward(self, x):\n"
        "        x = self.fc(x)\n        if self.training:\n            return x\n"
        "        return F.softmax(x, dim=1)\n\n\n"
        "def step(x, y):\n    model = Net()\n    return F.cross_entropy(model(x), y)\n",
        # a model ending in LogSoftmax, with nll_loss
        HEADER + "model = nn.Sequential(nn.Linear(784, 10), nn.LogSoftmax(dim=1))\n\n\n"
        "def step(x, y):\n    return F.nll_loss(model(x), y)\n",
        # a loss that takes probabilities and applies the log itself
        HEADER + "class ProbLoss(nn.Module):\n    def forward(self, probs, target):\n"
        "        return F.nll_loss(torch.log(probs), target)\n\n\n"
        "def step(model, x, y):\n    return ProbLoss()(F.softmax(model(x), dim=1), y)\n",
        # forward applies the softmax only on a branch: the returned name may be the logits
        HEADER + "class Net(nn.Module):\n    def __init__(self, probs):\n"
        "        super().__init__()\n        self.fc = nn.Linear(784, 10)\n"
        "        self.probs = probs\n\n    def forward(self, x):\n        x = self.fc(x)\n"
        "        if self.probs:\n            x = F.softmax(x, dim=1)\n        return x\n\n\n"
        "model = Net(False)\n\n\ndef step(x, y):\n"
        "    return F.cross_entropy(model(x).view(-1, 10), y)\n",
    ]
    invalid = [
        Invalid(
            HEADER + "def step(model, x, y):\n    probs = F.softmax(model(x), dim=1)\n"
            "    return F.cross_entropy(probs, y)\n",
            line=7,
        ),
        Invalid(
            HEADER + "criterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(torch.softmax(logits, dim=-1), labels)\n",
            line=6,
        ),
        Invalid(
            HEADER + "def step(model, x, y):\n    return F.nll_loss(model(x).softmax(1), y)\n",
            line=6,
        ),
        Invalid(
            HEADER + "def step(model, x, y):\n    loss_fn = nn.BCEWithLogitsLoss()\n"
            "    out = torch.sigmoid(model(x))\n    return loss_fn(out, y)\n",
            line=8,
        ),
        Invalid(
            HEADER + "def step(model, x, y):\n"
            "    return F.cross_entropy(F.log_softmax(model(x), dim=1), y)\n",
            line=6,
        ),
        # the model ends in a softmax
        invalid_at(
            HEADER + "model = nn.Sequential(nn.Linear(784, 10), nn.Softmax(dim=1))\n"
            "criterion = nn.CrossEntropyLoss()\n\n\ndef step(x, y):\n"
            "    out = model(x)\n    return criterion(out, y)\n",
            "return criterion(out, y)",
        ),
        # forward returns probabilities
        invalid_at(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(784, 10)\n\n"
            "    def forward(self, x):\n        return F.softmax(self.fc(x), dim=1)\n\n\n"
            "def step(x, y):\n    model = Net()\n    return F.cross_entropy(model(x), y)\n",
            "return F.cross_entropy(model(x), y)",
        ),
        # a project's own loss that wraps cross_entropy
        invalid_at(
            HEADER + "class LabelLoss(nn.Module):\n    def forward(self, pred, target):\n"
            "        return F.cross_entropy(pred, target)\n\n\n"
            "def step(model, x, y):\n    criterion = LabelLoss()\n"
            "    return criterion(F.softmax(model(x), dim=1), y)\n",
            "return criterion(",
        ),
        # an auxiliary head ending in a softmax, one element of the tuple forward returns
        # (PyTorch-GAN's ACGAN)
        invalid_at(
            HEADER + "class Discriminator(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.adv = nn.Sequential(nn.Linear(16, 1), nn.Sigmoid())\n"
            "        self.aux = nn.Sequential(nn.Linear(16, 10), nn.Softmax())\n\n"
            "    def forward(self, x):\n        return self.adv(x), self.aux(x)\n\n\n"
            "discriminator = Discriminator()\nauxiliary_loss = nn.CrossEntropyLoss()\n\n\n"
            "def step(x, labels):\n    real_pred, real_aux = discriminator(x)\n"
            "    return auxiliary_loss(real_aux, labels)\n",
            "return auxiliary_loss(real_aux, labels)",
        ),
        # forward returns a name whose last assignment is the softmax, and the output is
        # reshaped before the loss
        invalid_at(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(784, 10)\n\n"
            "    def forward(self, x):\n        x = self.fc(x)\n"
            "        x = F.softmax(x, dim=1)\n        return x\n\n\n"
            "model = Net()\ncriterion = nn.CrossEntropyLoss()\n\n\n"
            "def step(x, y):\n    return criterion(model(x).view(-1, 10), y)\n",
            "return criterion(",
        ),
        # resized with the deprecated `resize` before the loss (a CDSSM model)
        invalid_at(
            HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(784, 10)\n\n"
            "    def forward(self, x):\n        return F.softmax(self.fc(x))\n\n\n"
            "model = Net()\ncriterion = nn.CrossEntropyLoss()\n\n\n"
            "def step(x, y):\n    y_pred = model(x)\n"
            "    return criterion(y_pred.resize(1, 10), y)\n",
            "return criterion(",
        ),
        # sigmoid before BCEWithLogitsLoss, from the model's head
        invalid_at(
            HEADER + "class Detector(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.head = nn.Sequential(nn.Linear(16, 1), nn.Sigmoid())\n"
            "        self.loss = nn.BCEWithLogitsLoss()\n\n"
            "    def forward(self, x):\n        return self.head(x)\n\n"
            "    def training_step(self, x, y):\n        return self.loss(self(x), y)\n",
            "return self.loss(self(x), y)",
        ),
    ]

    def _loss_kind(self, scope: Scope, call: cst.Call, order: int) -> str | None:
        qualified = self.context.call_name(call)
        if qualified in _LOSSES:
            return _LOSSES[qualified]
        func = call.func
        if isinstance(func, cst.Call):
            return _LOSSES.get(self.context.call_name(func) or "")
        name = dotted_name(func)
        if name is not None:
            constructor = constructor_of(self.context, scope, name, order)
            found = _LOSSES.get(self.context.call_name(constructor) or "") if (
                constructor is not None) else None
            if found is not None:
                return found
        if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_METHODS:
            return None  # a tensor's method (`x.view(n, -1)`, `x.mean(1)`) is no loss
        # the semantic model: a loss kept on self, at module level, or a project's own loss
        # class or function that wraps one
        kind = self.context.semantic.kind(func, scope, order)
        if kind is not None and kind.loss in _BAD_INPUTS:
            return kind.loss
        return None

    def _activation(self, scope: Scope, expr: cst.BaseExpression, order: int) -> str | None:
        """`softmax`, `log_softmax` or `sigmoid` when `expr` (or the value last assigned to
        the name `expr`) is the output of one."""
        original, assigned_at = expr, order
        if isinstance(expr, cst.Name):
            found = scope.assigned(expr.value, order)
            if found and found[-1].value is not None:
                expr, assigned_at = found[-1].value, found[-1].site.order
        if not isinstance(expr, cst.Call):
            return self._model_output(scope, original, order)
        qualified = self.context.call_name(expr)
        if qualified in ACTIVATION_FUNCTIONS:
            return ACTIVATION_FUNCTIONS[qualified]
        func = expr.func
        if (
            qualified is None and isinstance(func, cst.Attribute)
            and (func.attr.value in VALUE_METHODS or func.attr.value in _RESIZES)
            and self.context.qualified_name(func.value) is None
        ):
            # `probs.view(-1, n)`, `probs.to(device)`: the same values
            through = self._activation(scope, func.value, assigned_at)
            if through is not None:
                return through
        if (
            qualified is None and isinstance(func, cst.Attribute)
            and func.attr.value in ("softmax", "log_softmax", "sigmoid")
            and self.context.qualified_name(func.value) is None
        ):
            return func.attr.value  # a tensor method: logits.softmax(-1)
        if isinstance(func, cst.Call):
            # nn.Softmax(dim=1)(x)
            return _ACTIVATION_MODULES.get(self.context.call_name(func) or "")
        name = dotted_name(func)
        if name is not None:
            constructor = constructor_of(self.context, scope, name, order)
            if constructor is not None:
                activation = _ACTIVATION_MODULES.get(self.context.call_name(constructor) or "")
                if activation is not None:
                    return activation
        return self._model_output(scope, original, order)

    def _model_output(self, scope: Scope, expr: cst.BaseExpression, order: int) -> str | None:
        """The activation a model's output already went through (its last layer is
        `nn.Softmax`, its `forward` returns `F.softmax(...)`), from the semantic model."""
        kind = self.context.semantic.kind(expr, scope, order)
        if kind is not None and kind.kind == "tensor" and kind.outputs:
            self._from_model = True
            return kind.outputs
        return None

    def check(self, scope: Scope) -> None:
        for site in scope.calls:
            call = site.node
            # the prediction first: finding the loss asks the semantic model, and most calls
            # without one (`super().__init__()`, `nn.ReLU()`, `x.size()`) are no loss anyway
            prediction = None
            for arg in call.args:
                if arg.keyword is None or arg.keyword.value == "input":
                    prediction = arg.value
                    break
            if prediction is None:
                continue
            kind = self._loss_kind(scope, call, site.order)
            if kind is None:
                continue
            self._from_model = False
            activation = self._activation(scope, prediction, site.order)
            if activation not in _BAD_INPUTS[kind]:
                continue
            given = (f"the model's output, which its last layer (or `forward`) already put "
                     f"through `{activation}`") if self._from_model else f"`{activation}` output"
            if kind == "cross_entropy" and activation == "log_softmax":
                message = ("`cross_entropy` already applies `log_softmax`; pass the logits "
                           f"instead of {given} (or use `nll_loss`)")
                severity = Severity.WARNING
            elif kind == "nll_loss":
                message = (f"`nll_loss` expects log-probabilities but is given {given}; use "
                           "`log_softmax` (or `cross_entropy` on the logits)")
                severity = None
            elif kind == "cross_entropy":
                message = (f"`cross_entropy` applies `log_softmax` itself but is given {given}"
                           "; pass the logits")
                severity = None
            else:
                message = (f"`BCEWithLogitsLoss` applies a sigmoid itself but is given {given}"
                           "; pass the logits (or use `BCELoss`)")
                severity = None
            self.report_at(site, prediction, message, severity=severity)


@hookimpl
def modellint_add_rules():
    return [
        SchedulerStepInBatchLoop,
        SchedulerBeforeOptimizer,
        MissingZeroGrad,
        LossKeptWithGraph,
        ParamGroupOverlap,
        EvalWithoutEvalMode,
        EvalWithoutNoGrad,
        SoftmaxBeforeCrossEntropy,
    ]
