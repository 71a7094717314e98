"""Built-in rules: whole training scripts (ML309-ML315, ML321, ML345).

These rules look at how a script feeds, seeds and steps its training loop: the data loaders,
the random generators, device transfers and synchronisations in the loop, the model's mode
across epochs and gradient accumulation. Loop structure comes from `_loops.Scope` (one
function, or a script's top-level code, at a time); the file-level rules (ML309, ML310,
ML313) collect what they need while the file is visited and decide when it has been read.
A name whose origin is unknown is never assumed to be anything.
"""

from __future__ import annotations

import re
from typing import Any, cast

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    DATALOADERS,
    RETURNS_SELF,
    CallSite,
    Fix,
    LazyPattern,
    Severity,
    StaticRule,
    argument,
    child_nodes,
    code_nodes,
    dotted_name,
    has_star_args,
    name_nodes,
    source_of,
)
from modellint.rules._loops import (
    _NESTED,
    Scope,
    ScopeRule,
    Site,
    backward_calls,
    constructor_of,
    function_without_grad,
    invalid_at,
    is_no_grad_item,
    last_segment,
    mode_calls,
    names_in,
    optimizer_steps,
    scope_of,
    under_no_grad,
)

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
LOADER = "from torch.utils.data import DataLoader\n"


class _FileRule(StaticRule):
    """A rule that collects calls while the file is visited and reports when it ends, each
    finding in the statement it was collected in (where a noqa comment applies)."""

    _pending: list[tuple[cst.CSTNode, str, dict[str, Any], cst.CSTNode | None]]  # visit_Module sets

    def flush(self) -> None:
        for node, message, kwargs, statement in self._pending:
            self.report(node, message, statement=statement or node, **kwargs)


# -- shared helpers -----------------------------------------------------------------------------

# positions of DataLoader's arguments when they are given positionally
_LOADER_POSITIONS = {"shuffle": 2, "sampler": 3, "batch_sampler": 4, "num_workers": 5,
                     "pin_memory": 7}


def _is_dataloader(context, call: cst.Call) -> bool:
    return context.call_name(call) in DATALOADERS


def _loader_argument(call: cst.Call, keyword: str) -> cst.Arg | None:
    return argument(call, keyword, _LOADER_POSITIONS.get(keyword))


def _literal(expr: cst.BaseExpression) -> str | None:
    """`True`, `False`, `None` or an integer's text; None for anything computed."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return expr.value
    if isinstance(expr, cst.Integer):
        return expr.value
    return None


_VISITED = LazyPattern(r"\bval|valid|test|eval|dev_|_dev\b|^dev$", re.IGNORECASE)
# functions that evaluate rather than train
_EVALUATING = LazyPattern(r"val|test|eval|infer|predict|benchmark", re.IGNORECASE)


# -- ML309 --------------------------------------------------------------------------------------

_ACCELERATOR_STRINGS = LazyPattern(r"^(?:cuda(?::\d+)?|mps|xpu(?::\d+)?)$")


class DataLoaderStarvesDevice(_FileRule):
    """A `DataLoader` in a GPU training script loads batches in the training process.

    ## What it does
    In a file that calls `backward()` and puts work on an accelerator (`.cuda()`,
    `torch.device("cuda")`, `.to("cuda")`, `torch.cuda.*`), finds `DataLoader(...)` calls
    that leave `num_workers` unset (or `0`) or `pin_memory` unset (or `False`). Computed
    values (`num_workers=args.workers`) and `**kwargs` are trusted. Off by default: small
    in-memory datasets and debugging runs load fine in the main process.

    ## Why is this bad?
    With `num_workers=0` every batch is read, decoded and augmented by the training process
    itself while the GPU waits, so utilisation saws between busy and idle. Without
    `pin_memory=True` the host-to-device copy of each batch cannot run asynchronously
    (`.to(device, non_blocking=True)` only overlaps with compute from page-locked memory).

    ## Example
        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        for x, y in loader:
            x, y = x.cuda(), y.cuda()

    ## Use instead
        loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4,
                            pin_memory=True)
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    """

    code = "ML309"
    name = "dataloader-starves-device"
    needs = frozenset()
    severity = Severity.INFO
    default_enabled = False
    triggers = ("DataLoader",)
    _SCRIPT = (
        HEADER + LOADER + "\n"
        "device = torch.device('cuda')\nmodel = nn.Linear(8, 2).to(device)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "{loader}\n"
        "for x, y in loader:\n"
        "    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
        "    optimizer.zero_grad()\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    optimizer.step()\n"
    )
    valid = [
        _SCRIPT.format(loader="loader = DataLoader(data, batch_size=64, num_workers=4, "
                              "pin_memory=True)"),
        # computed settings are the user's decision
        _SCRIPT.format(loader="loader = DataLoader(data, batch_size=64, "
                              "num_workers=args.workers, pin_memory=args.pin)"),
        _SCRIPT.format(loader="loader = DataLoader(data, **loader_kwargs)"),
        # all positional: dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
        # collate_fn, pin_memory
        _SCRIPT.format(loader="loader = DataLoader(data, 64, True, None, None, 8, None, True)"),
        # no accelerator in sight: a CPU script
        HEADER + LOADER + "model = nn.Linear(8, 2)\nopt = torch.optim.SGD(model.parameters())\n"
        "for x, y in DataLoader(data, batch_size=8):\n"
        "    opt.zero_grad()\n    F.mse_loss(model(x), y).backward()\n    opt.step()\n",
        # not a training script: a dataset preview helper
        LOADER + "def preview(data):\n    batch = next(iter(DataLoader(data, batch_size=4)))\n"
        "    return batch.to('cuda')\n",
    ]
    invalid = [
        invalid_at(_SCRIPT.format(loader="loader = DataLoader(data, batch_size=64, shuffle=True)"),
                 "loader = DataLoader"),
        invalid_at(_SCRIPT.format(loader="loader = DataLoader(data, batch_size=64, num_workers=0, "
                                       "pin_memory=True)"), "loader = DataLoader"),
        invalid_at(_SCRIPT.format(loader="loader = DataLoader(data, batch_size=64, num_workers=8)"),
                 "loader = DataLoader"),
        invalid_at(HEADER + "import torch.utils.data\n\nmodel = nn.Linear(8, 2).cuda()\n"
                 "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                 "loader = torch.utils.data.DataLoader(data, batch_size=8, pin_memory=False,\n"
                 "                                     num_workers=2)\n"
                 "for x, y in loader:\n    opt.zero_grad()\n"
                 "    F.mse_loss(model(x.cuda()), y.cuda()).backward()\n    opt.step()\n",
                 "loader = torch.utils.data.DataLoader"),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._pending = []
        self._loaders: list[tuple[cst.Call, cst.CSTNode | None]] = []
        self._accelerator = False
        self._trains = False

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self._accelerator:
            value = node.evaluated_value
            if isinstance(value, str) and _ACCELERATOR_STRINGS.match(value):
                self._accelerator = True

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        func = node.func
        if _is_dataloader(context, node):
            self._loaders.append((node, context.current_statement))
            return
        if isinstance(func, cst.Attribute) and context.qualified_name(func) is None:
            if func.attr.value == "cuda":
                self._accelerator = True
            elif func.attr.value == "backward":
                self._trains = True
            return
        qualified = context.call_name(node) or ""
        if qualified.startswith("torch.cuda.") or qualified == "torch.autograd.backward":
            self._accelerator = self._accelerator or qualified.startswith("torch.cuda.")
            self._trains = self._trains or qualified == "torch.autograd.backward"

    def leave_Module(self, original_node: cst.Module) -> None:
        if not (self._accelerator and self._trains):
            return
        for call, statement in self._loaders:
            if has_star_args(call):
                continue
            workers = _loader_argument(call, "num_workers")
            pin = _loader_argument(call, "pin_memory")
            no_workers = workers is None or _literal(workers.value) == "0"
            no_pin = pin is None or _literal(pin.value) == "False"
            if not (no_workers or no_pin):
                continue
            wanted = []
            if no_workers:
                wanted.append("`num_workers=` (about 4 per GPU) so batches are loaded in "
                              "worker processes while the GPU computes")
            if no_pin:
                wanted.append("`pin_memory=True` so batches can be copied to the GPU "
                              "asynchronously with `.to(device, non_blocking=True)`")
            problem = (
                "loads every batch in the training process" if no_workers
                else "copies batches from pageable memory"
            )
            self._pending.append((
                call,
                f"this DataLoader {problem}, which leaves the GPU waiting; set "
                + " and ".join(wanted),
                {}, statement,
            ))
        self.flush()


# -- ML310 --------------------------------------------------------------------------------------

_TORCH_DRAWS = frozenset({
    "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.rand_like",
    "torch.randn_like", "torch.randint_like", "torch.normal", "torch.bernoulli",
    "torch.multinomial", "torch.poisson", "torch.utils.data.random_split",
})
_TORCH_INIT_DRAWS = LazyPattern(
    r"^torch\.nn\.init\.(?:uniform_|normal_|trunc_normal_|xavier_\w+|kaiming_\w+|orthogonal_"
    r"|sparse_)$"
)
_NUMPY_NOT_DRAWS = frozenset({
    "seed", "default_rng", "RandomState", "Generator", "SeedSequence", "get_state",
    "set_state", "PCG64", "MT19937", "Philox", "SFC64", "BitGenerator",
})
_RANDOM_NOT_DRAWS = frozenset({"seed", "Random", "SystemRandom", "getstate", "setstate"})
_TORCH_SEEDS = frozenset({
    "torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed",
    "torch.cuda.manual_seed_all",
})
_GENERATOR_NAMES = {"torch": "torch", "numpy": "NumPy", "random": "Python's `random`"}
_SEED_CALLS = {"torch": "torch.manual_seed(seed)", "numpy": "np.random.seed(seed)",
               "random": "random.seed(seed)"}


class UnseededTraining(_FileRule):
    """A training script draws random numbers from a generator it never seeds.

    ## What it does
    In a training entry point (a file that calls `backward()` at the top level or has an
    `if __name__ == "__main__":` block), finds draws from torch's generator (`torch.randn`,
    `torch.randperm`, random `nn.init` functions, `random_split` ...), NumPy's
    (`np.random.*`) or Python's (`random.*`) when nothing seeds that generator:
    `torch.manual_seed`, `np.random.seed`, `random.seed`, or any helper whose name says it
    seeds (`seed_everything`, `set_seed`, `setup_seed` ...), which is trusted to seed all
    three. Draws given an explicit `generator=` are fine. Off by default: reproducibility is
    a choice, and modules that are imported by a seeded script draw correctly unseeded.

    ## Why is this bad?
    Initialisation, noise and augmentation differ on every run, so a run cannot be
    repeated and a change in results cannot be told apart from a change of seed. The three
    generators are independent: seeding torch does nothing for `np.random`.

    ## Example
        model = nn.Linear(8, 2)
        for x, y in loader:
            x = x + 0.1 * torch.randn_like(x)
            F.mse_loss(model(x), y).backward()

    ## Use instead
        torch.manual_seed(0)
        model = nn.Linear(8, 2)
        for x, y in loader:
            x = x + 0.1 * torch.randn_like(x)
            F.mse_loss(model(x), y).backward()
    """

    code = "ML310"
    name = "unseeded-training"
    needs = frozenset()
    severity = Severity.WARNING
    default_enabled = False
    triggers = ("backward",)
    _SCRIPT = (
        "import random\nimport numpy as np\n" + HEADER + "\n{seed}"
        "model = nn.Linear(8, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in loader:\n"
        "    {draw}\n"
        "    opt.zero_grad()\n    F.mse_loss(model(x), y).backward()\n    opt.step()\n"
    )
    valid = [
        _SCRIPT.format(seed="torch.manual_seed(0)\n", draw="x = x + torch.randn_like(x)"),
        _SCRIPT.format(seed="np.random.seed(0)\n", draw="x = x * np.random.uniform(0.9, 1.1)"),
        _SCRIPT.format(seed="random.seed(0)\n", draw="x = x * random.random()"),
        # a helper that seeds every generator
        _SCRIPT.format(seed="from lightning import seed_everything\nseed_everything(42)\n",
                       draw="x = x + torch.randn_like(x) * np.random.rand()"),
        _SCRIPT.format(seed="set_seed(args.seed)\n", draw="x = x + torch.randn_like(x)"),
        # its own seeded generator
        _SCRIPT.format(seed="g = torch.Generator().manual_seed(0)\n",
                       draw="x = x[torch.randperm(len(x), generator=g)]"),
        # nothing random is drawn explicitly
        _SCRIPT.format(seed="", draw="x = x.flip(0)"),
        # a library training function: its caller (the entry point) seeds
        HEADER + "def train_step(model, x, y, opt):\n    x = x + torch.randn_like(x)\n"
        "    F.mse_loss(model(x), y).backward()\n    opt.step()\n",
    ]
    invalid = [
        invalid_at(_SCRIPT.format(seed="", draw="x = x + torch.randn_like(x)"), "randn_like"),
        # torch is seeded, NumPy is not
        invalid_at(_SCRIPT.format(seed="torch.manual_seed(0)\n",
                                draw="x = x * np.random.uniform(0.9, 1.1)"), "np.random"),
        invalid_at(_SCRIPT.format(seed="np.random.seed(0)\n",
                                draw="x = x if random.random() < 0.5 else x.flip(0)"),
                 "random.random()"),
        invalid_at(HEADER + "\n\ndef main():\n    model = nn.Linear(8, 2)\n"
                 "    nn.init.kaiming_normal_(model.weight)\n"
                 "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                 "    for x, y in loader:\n        opt.zero_grad()\n"
                 "        F.mse_loss(model(x), y).backward()\n        opt.step()\n\n\n"
                 "if __name__ == '__main__':\n    main()\n", "kaiming_normal_"),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._pending = []
        self._draws: dict[str, tuple[cst.Call, str, cst.CSTNode | None]] = {}
        self._seeded: set[str] = set()
        self._entry = False
        self._trains = False

    def visit_If(self, node: cst.If) -> None:
        if not self.context.function_stack and re.fullmatch(
            r"__name__\s*==\s*['\"]__main__['\"]|['\"]__main__['\"]\s*==\s*__name__",
            source_of(node.test).strip(),
        ):
            self._entry = True

    def _kind(self, qualified: str) -> str | None:
        if qualified in _TORCH_DRAWS or _TORCH_INIT_DRAWS.match(qualified):
            return "torch"
        if qualified.startswith("numpy.random."):
            rest = qualified[len("numpy.random."):]
            return "numpy" if "." not in rest and rest not in _NUMPY_NOT_DRAWS else None
        if qualified.startswith("random."):
            rest = qualified[len("random."):]
            return "random" if "." not in rest and rest not in _RANDOM_NOT_DRAWS else None
        return None

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            if context.qualified_name(func) is None:
                self._trains = True
                if not context.function_stack:
                    self._entry = True
            return
        qualified = context.call_name(node)
        if qualified is not None:
            if qualified in _TORCH_SEEDS:
                self._seeded.add("torch")
                return
            if qualified == "numpy.random.seed":
                self._seeded.add("numpy")
                return
            if qualified == "random.seed":
                self._seeded.add("random")
                return
            kind = self._kind(qualified)
            if kind is not None:
                if argument(node, "generator") is None and kind not in self._draws:
                    self._draws[kind] = (node, qualified, context.current_statement)
                return
        name = dotted_name(func)
        if name is not None and "seed" in last_segment(name):
            self._seeded.add("all")

    def leave_Module(self, original_node: cst.Module) -> None:
        if not (self._entry and self._trains) or "all" in self._seeded:
            return
        for kind, (call, qualified, statement) in self._draws.items():
            if kind in self._seeded:
                continue
            generator = _GENERATOR_NAMES[kind]
            shown = dotted_name(call.func) or qualified
            if self._seeded:
                others = " and ".join(_GENERATOR_NAMES[k] for k in sorted(self._seeded))
                message = (
                    f"`{shown}` draws from {generator}'s generator, which this training script "
                    f"never seeds ({others} is seeded, but the generators are independent); "
                    f"call `{_SEED_CALLS[kind]}` at startup too"
                )
            else:
                message = (
                    f"this training script draws random numbers (`{shown}`) but never seeds "
                    f"{generator}'s generator, so runs cannot be reproduced; call "
                    f"`{_SEED_CALLS[kind]}` (or one helper that seeds every generator) at "
                    "startup"
                )
            self._pending.append((call, message, {}, statement))
        self.flush()


# -- training loops -----------------------------------------------------------------------------


def _training_loops(context, scope: Scope) -> list[cst.CSTNode]:
    """The innermost loop around each `backward()` call, in source order, without repeats."""
    loops: list[cst.CSTNode] = []
    for site, _ in backward_calls(context, scope):
        if site.loops and not any(site.loops[-1] is loop for loop in loops):
            loops.append(site.loops[-1])
    return loops


# -- ML311 --------------------------------------------------------------------------------------

_SYNC_METHODS = frozenset({"item", "cpu", "tolist"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _periodic(test: cst.BaseExpression) -> bool:
    """A condition that holds every N steps (`step % 100 == 0`)."""
    return _modulo(test) is not None


class SyncInInnerLoop(ScopeRule):
    """A GPU synchronisation runs once per element inside the training step.

    ## What it does
    Inside a training loop (a loop that calls `backward()`), finds `.item()`, `.cpu()` and
    `.tolist()` calls, and `print` of the loss or of a tensor built in the function, that sit
    in a loop (or comprehension) nested in that training loop, so they run many times per
    step. One sync per step (`loss.item()` for logging) is not flagged, nor is work under a
    periodic condition (`if step % 100 == 0:`). Off by default: on the CPU these calls cost
    nothing.

    ## Why is this bad?
    CUDA kernels run asynchronously. Each of these calls needs a value on the host, so it
    waits until every queued kernel has finished and nothing new is queued meanwhile. Per
    element, that stalls the pipeline hundreds of times per step.

    ## Example
        for x, y in loader:
            logits = model(x)
            F.cross_entropy(logits, y).backward()
            optimizer.step()
            for i in range(len(y)):
                correct += int(logits[i].argmax().item() == y[i].item())

    ## Use instead
        for x, y in loader:
            logits = model(x)
            F.cross_entropy(logits, y).backward()
            optimizer.step()
            correct += (logits.argmax(1) == y).sum().item()
    """

    code = "ML311"
    name = "sync-in-inner-loop"
    needs = frozenset({"scope"})
    severity = Severity.WARNING
    default_enabled = False
    triggers = ("item(", "cpu(", "tolist(", "print(")
    _STEP = (
        HEADER + "\n\ndef train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        optimizer.zero_grad()\n"
        "        logits = model(x)\n"
        "        loss = F.cross_entropy(logits, y)\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "{tail}"
    )
    valid = [
        # once per step
        _STEP.format(tail="        total += loss.item()\n"),
        _STEP.format(tail="        correct += (logits.argmax(1) == y).sum().item()\n"),
        # the loop iterates over one synced list
        _STEP.format(tail="        for p in logits.argmax(1).tolist():\n"
                          "            counts[p] += 1\n"),
        # periodic logging
        _STEP.format(tail="        if step % 100 == 0:\n"
                          "            for name, value in metrics.items():\n"
                          "                log(name, value.item())\n"),
        # an inner loop outside the training loop
        HEADER + "def report(model, loader):\n    for x, y in loader:\n"
        "        for p in model(x):\n            print(p.item())\n",
        # print of plain Python values
        _STEP.format(tail="        for name in names:\n            print(name)\n"),
    ]
    invalid = [
        invalid_at(_STEP.format(tail="        for i in range(len(y)):\n"
                                   "            correct += int(logits[i].argmax().item() == "
                                   "y[i])\n"), "argmax().item()"),
        invalid_at(_STEP.format(tail="        preds = [p.cpu() for p in logits]\n"),
                 "p.cpu()"),
        invalid_at(_STEP.format(tail="        for row in logits:\n"
                                   "            rows.append(row.tolist())\n"), "row.tolist()"),
        invalid_at(_STEP.format(tail="        for k in range(3):\n            print(loss)\n"),
                 "print(loss)"),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        loops = _training_loops(context, scope)
        if not loops:
            return
        tensors = self._tensor_names(scope)
        reported: set[int] = set()
        for loop in loops:
            in_comprehension = _comprehension_parts(loop)
            for site in scope.calls:
                if id(site.node) in reported or not site.inside(loop):
                    continue
                between = site.ancestors_below(loop)
                nested = any(isinstance(a, (cst.For, cst.While)) for a in between) or (
                    id(site.node) in in_comprehension)
                if not nested:
                    continue
                if any(isinstance(a, cst.If) and _periodic(a.test) for a in between):
                    continue
                shown = self._sync(site.node, tensors)
                if shown is None:
                    continue
                reported.add(id(site.node))
                self.report_at(
                    site, site.node,
                    f"`{shown}` runs once per element of a loop inside the training step, and "
                    "each call waits for the GPU to finish all queued work; compute on the "
                    "device and synchronise once per step",
                )

    def _sync(self, call: cst.Call, tensors: set[str]) -> str | None:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SYNC_METHODS:
            if not call.args and self.context.qualified_name(func) is None:
                return source_of(call)
            return None
        if isinstance(func, cst.Name) and func.value == "print":
            for arg in call.args:
                value = arg.value
                if isinstance(value, cst.Subscript):
                    value = value.value
                if isinstance(value, cst.Name) and value.value in tensors:
                    return source_of(call)
        return None

    def _tensor_names(self, scope: Scope) -> set[str]:
        """Names holding tensors: backward targets, torch factory results, loss results."""
        context = self.context
        names = {
            expr.value for _, expr in backward_calls(context, scope) if isinstance(expr, cst.Name)
        }
        for assignment in scope.assignments:
            value = assignment.value
            if isinstance(value, cst.Call) and "." not in assignment.target and (
                context.builds_tensor(value)
                or (context.call_name(value) or "").startswith("torch.nn.functional.")
            ):
                names.add(assignment.target)
        return names


def _descendants(node: cst.CSTNode):
    """Every node below `node`, not descending into nested functions, classes or lambdas."""
    for child in child_nodes(node):
        yield from code_nodes(child, stop=_NESTED)


def _comprehension_parts(loop: cst.CSTNode) -> set[int]:
    """Ids of the nodes of `loop` that run once per element of a comprehension."""
    found: set[int] = set()
    for node in _descendants(loop):
        if isinstance(node, _COMPREHENSIONS):
            parts = [node.key, node.value] if isinstance(node, cst.DictComp) else [node.elt]
            parts.extend(_comprehension_fors(node))
            for part in parts:
                found.add(id(part))
                found.update(id(inner) for inner in _descendants(part))
    return found


def _comprehension_fors(node: cst.BaseComp):
    """The `if` conditions and inner iterables of a comprehension (run once per element)."""
    comp_for: cst.CompFor | None = node.for_in
    first = True
    while comp_for is not None:
        if not first:
            yield comp_for.iter
        yield from (c.test for c in comp_for.ifs)
        first = False
        comp_for = comp_for.inner_for_in


# -- ML312 --------------------------------------------------------------------------------------


def _related(a: str, b: str) -> bool:
    """`model` and `model.module` share their mode (one contains the other)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


class EvalNeverReset(ScopeRule):
    """`model.eval()` runs inside the training loop and nothing switches the model back.

    ## What it does
    Finds `model.eval()` (or `model.train(False)`) inside a loop that also trains `model`
    (calls `backward()` and uses `model` outside `no_grad`), when nothing in that loop calls
    `model.train()` (on `model`, or on a module containing it or contained in it). A call of
    a project function (of any file) that calls `eval()` or `train()` on the model it is
    given counts as that call (`eval_net(net, val)` whose body starts with `net.eval()`).
    The usual shape is `model.train()` once before the epoch loop and validation at the end
    of each epoch. A submodule frozen on purpose (`model.backbone.eval()` while `model` is trained),
    a model used only under `no_grad` (a teacher), and an `eval()` followed by `break` or
    `return` are not flagged.

    ## Why is this bad?
    `eval()` is sticky: it turns dropout off and makes batch norm use (and stop updating) its
    running statistics until `train()` is called. Only the first epoch trains as intended;
    every later one trains without dropout and with frozen normalisation statistics, and
    nothing raises.

    ## Example
        model.train()
        for epoch in range(epochs):
            for x, y in train_loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
            model.eval()
            validate(model, val_loader)

    ## Use instead
        for epoch in range(epochs):
            model.train()
            for x, y in train_loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
            model.eval()
            validate(model, val_loader)

    ## What it does not see
    A model trained only through project methods that the training loop calls:
    r-vsepp-validation-leaves-eval-mode trains through a wrapper class
    (`model.train_start()` before the loop, `model.train_emb(...)` doing the backward, and a
    `validate(opt, val_loader, model)` whose `model.val_start()` calls `eval()` on the
    encoders), so the loop holds no `backward()` of its own. It finds 1 of 2 bench/bugs
    cases. The run pass (`modellint run`) sees the model left in eval mode wherever `eval()`
    was called.
    """

    code = "ML312"
    passes = ("static", "run")
    name = "eval-never-reset"
    needs = frozenset({"scope", "semantic"})
    # "backward(": a training loop may put the model in eval mode through a project
    # function (`eval_net(net, val)`)
    triggers = ("eval(", "train(False", "train(mode=False", "backward(")
    _FIT = (
        HEADER + "\n\ndef fit(model, train_loader, val_loader, optimizer, epochs):\n"
        "{before}"
        "    for epoch in range(epochs):\n"
        "{top}"
        "        for x, y in train_loader:\n"
        "            optimizer.zero_grad()\n"
        "            F.cross_entropy(model(x), y).backward()\n"
        "            optimizer.step()\n"
        "{end}"
    )
    _VALIDATE = (
        "        model.eval()\n"
        "        with torch.no_grad():\n"
        "            for x, y in val_loader:\n"
        "                val_loss = F.cross_entropy(model(x), y)\n"
    )
    valid = [
        _FIT.format(before="", top="        model.train()\n", end=_VALIDATE),
        _FIT.format(before="    model.train()\n", top="",
                    end=_VALIDATE + "        model.train()\n"),
        # DDP: the wrapper and the wrapped module share their mode
        _FIT.format(before="", top="        model.module.train()\n", end=_VALIDATE),
        _FIT.format(before="", top="        model.train(True)\n", end=_VALIDATE),
        _FIT.format(before="", top="        model.train(mode=True)\n", end=_VALIDATE),
        # switched back through a chain: `to()` and `cuda()` return the module itself
        _FIT.format(before="", top="        model.to(device).train()\n", end=_VALIDATE),
        _FIT.format(before="", top="        model.cuda().float().train()\n", end=_VALIDATE),
        # validation every N steps that switches back later in the same loop body
        HEADER + "def fit(model, loader, optimizer):\n    model.train()\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        if step % 500 == 0:\n            model.eval()\n            evaluate(model)\n"
        "        optimizer.zero_grad()\n        F.cross_entropy(model(x), y).backward()\n"
        "        optimizer.step()\n        if step % 500 == 0:\n            model.train()\n",
        # a submodule frozen on purpose
        _FIT.format(before="    model.train()\n", top="        model.backbone.eval()\n",
                    end=""),
        # early stopping: no next epoch
        _FIT.format(before="    model.train()\n", top="",
                    end="        if patience_left == 0:\n            model.eval()\n"
                        "            break\n"),
        # evaluation in a helper: restoring the mode is the caller's business, not visible
        _FIT.format(before="    model.train()\n", top="", end="        evaluate(model)\n"),
        # evaluation in a project helper that puts the model back in training mode
        HEADER + "def validate(model, loader):\n    model.eval()\n    with torch.no_grad():\n"
        "        loss = sum(F.cross_entropy(model(x), y) for x, y in loader)\n"
        "    model.train()\n    return loss\n"
        + _FIT.format(before="    model.train()\n", top="",
                      end="        validate(model, val_loader)\n")[len(HEADER):],
        # a teacher put in eval mode, used only under no_grad
        HEADER + "def distill(student, teacher, loader, optimizer, epochs):\n"
        "    student.train()\n    for epoch in range(epochs):\n        teacher.eval()\n"
        "        for x in loader:\n            with torch.no_grad():\n"
        "                target = teacher(x)\n"
        "            F.mse_loss(student(x), target).backward()\n"
        "            optimizer.step()\n            optimizer.zero_grad()\n",
    ]
    invalid = [
        invalid_at(_FIT.format(before="    model.train()\n", top="", end=_VALIDATE),
                 "model.eval()"),
        # evaluation in a project helper that leaves the model in eval mode (milesial's U-Net)
        invalid_at(HEADER + "def eval_net(net, loader):\n    net.eval()\n"
                   "    return sum(F.cross_entropy(net(x), y).item() for x, y in loader)\n"
                   + _FIT.format(before="    model.train()\n", top="",
                                 end="        score = eval_net(model, val_loader)\n"
                                 )[len(HEADER):],
                   "score = eval_net("),
        # validation every N steps inside the batch loop
        invalid_at(HEADER + "def fit(model, loader, optimizer):\n    model.train()\n"
                 "    for step, (x, y) in enumerate(loader):\n"
                 "        optimizer.zero_grad()\n"
                 "        F.cross_entropy(model(x), y).backward()\n"
                 "        optimizer.step()\n"
                 "        if step % 500 == 0:\n"
                 "            model.eval()\n"
                 "            evaluate(model)\n", "model.eval()"),
        invalid_at(_FIT.format(before="", top="", end=_VALIDATE.replace("model.eval()",
                                                                      "model.train(False)")),
                 "model.train(False)"),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        if function_without_grad(context, scope.root):
            return
        evals, trains = mode_calls(scope)
        # project functions that put a name in eval or training mode (`eval_net(net, ...)`,
        # of another file, that calls `net.eval()`)
        helpers: set[int] = set()
        for site in scope.calls:
            for effect in context.semantic.call_effects(site.node, scope):
                if effect.target is not None and effect.effect in ("eval", "train"):
                    found = evals if effect.effect == "eval" else trains
                    found.setdefault(effect.target, []).append(site)
                    helpers.add(id(site.node))
        if not evals:
            return
        backwards = [site for site, _ in backward_calls(context, scope)]
        if not backwards:
            return
        for name, sites in evals.items():
            for site in sites:
                loop = next(
                    (lp for lp in reversed(site.loops) if any(b.inside(lp) for b in backwards)),
                    None,
                )
                if loop is None:
                    continue
                if any(_related(other, name) and any(t.inside(loop) for t in train_sites)
                       for other, train_sites in trains.items()):
                    continue
                if self._leaves_loop(site, loop):
                    continue
                if not self._trained_in(scope, name, loop, site):
                    continue
                through = f" (which calls `{name}.eval()`)" if id(site.node) in helpers else ""
                self.report_at(
                    site, site.node,
                    f"`{source_of(site.node)}`{through} runs inside this training loop but nothing "
                    f"in the loop calls `{name}.train()`, so every later iteration trains with "
                    f"dropout off and batch norm frozen; call `{name}.train()` at the start of "
                    "each epoch",
                )
                break

    @staticmethod
    def _leaves_loop(site: Site, loop: cst.CSTNode) -> bool:
        """The eval() is in a branch that ends the loop (`break`, `return`, `raise`)."""
        for ancestor in site.ancestors_below(loop):
            if isinstance(ancestor, (cst.If, cst.Else)):
                body = ancestor.body
                for statement in getattr(body, "body", ()):
                    if isinstance(statement, cst.SimpleStatementLine) and any(
                        isinstance(s, (cst.Break, cst.Return, cst.Raise))
                        for s in statement.body
                    ):
                        return True
        return False

    def _trained_in(self, scope: Scope, name: str, loop: cst.CSTNode, eval_site: Site) -> bool:
        """`name` is called, or passed to a call, in the loop outside `no_grad`."""
        for site in scope.calls:
            if site is eval_site or not site.inside(loop):
                continue
            call = site.node
            used = dotted_name(call.func) == name or any(
                dotted_name(arg.value) == name for arg in call.args
            )
            if used and not under_no_grad(self.context, site):
                return True
        return False


# -- ML313 --------------------------------------------------------------------------------------

_DDP = frozenset({
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.nn.DistributedDataParallel",
})
_DISTRIBUTED_SAMPLERS = frozenset({
    "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed.DistributedSampler",
})
# frameworks that add a DistributedSampler themselves
_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "transformers.Trainer",
               "ignite", "deepspeed")


class DdpWithoutDistributedSampler(_FileRule):
    """A `DataLoader` in a DistributedDataParallel script has no `DistributedSampler`.

    ## What it does
    In a file that wraps a model in `DistributedDataParallel`, finds training
    `DataLoader(...)` calls with no `sampler=` or `batch_sampler=`, and loaders given a
    `DistributedSampler` together with `shuffle=True`. Evaluation loaders are not flagged
    (evaluating the whole set on every rank only wastes work): loaders whose names say they
    evaluate (`val_loader`, `test_loader`), loaders over a dataset named so or built with
    `train=False` or a `split` other than train, loaders built in a function decorated with
    `no_grad` or named for evaluation (`evaluate`, `test`, `predict`), and loaders iterated
    only under `no_grad`; nor are files that use Accelerate, Lightning, Ignite, DeepSpeed or the
    Hugging Face `Trainer`, which add the sampler themselves.

    ## Why is this bad?
    Without a `DistributedSampler` every rank iterates the whole dataset in the same order:
    all ranks compute the same gradients and averaging them changes nothing, so N GPUs train
    as fast as one on N times the epochs' worth of work. `shuffle=True` next to a sampler
    makes `DataLoader` raise `ValueError`; the sampler shuffles itself.

    ## Example
        model = DistributedDataParallel(model.to(rank), device_ids=[rank])
        loader = DataLoader(train_set, batch_size=64, shuffle=True)

    ## Use instead
        model = DistributedDataParallel(model.to(rank), device_ids=[rank])
        sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, batch_size=64, sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                ...

    ## What it does not see
    Evaluation loaders, by design (above), and files that use DeepSpeed: its one bench/bugs
    case, c-deepspeed-chat-reward-eval-sequential-sampler, overwrites the evaluation
    `DistributedSampler` with a `SequentialSampler` in a DeepSpeed script, so every rank
    scores the whole evaluation set (wasted work and ranks that each report a full-set
    score, rather than a training mistake).
    """

    code = "ML313"
    name = "ddp-without-distributed-sampler"
    needs = frozenset()
    fix = "safe"
    fix_availability = "sometimes"
    triggers = ("DistributedDataParallel",)
    _SCRIPT = (
        HEADER + LOADER
        + "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data.distributed import DistributedSampler\n\n\n"
        "def main(rank, train_set, val_set):\n"
        "    model = DDP(nn.Linear(8, 2).to(rank), device_ids=[rank])\n"
        "{loaders}"
    )
    valid = [
        _SCRIPT.format(loaders="    sampler = DistributedSampler(train_set)\n"
                               "    loader = DataLoader(train_set, batch_size=64, "
                               "sampler=sampler)\n"),
        _SCRIPT.format(loaders="    loader = DataLoader(train_set, batch_size=64,\n"
                               "                        sampler=DistributedSampler(train_set))\n"),
        # evaluation loaders may run the whole set on every rank
        _SCRIPT.format(loaders="    val_loader = DataLoader(val_set, batch_size=64)\n"),
        # evaluation-only loaders, whatever their names
        _SCRIPT.format(loaders="    loader = DataLoader(val_set, batch_size=64)\n"),
        _SCRIPT.format(loaders="    import torchvision\n    loader = DataLoader(torchvision."
                               "datasets.MNIST('.', train=False), batch_size=64)\n"),
        _SCRIPT.format(loaders="    loader = DataLoader(train_set, batch_size=64)\n"
                               "    model.eval()\n    with torch.no_grad():\n"
                               "        for x, y in loader:\n            model(x)\n"),
        _SCRIPT.format(loaders="\n\n@torch.no_grad()\ndef evaluate(model, dataset):\n"
                               "    loader = DataLoader(dataset, batch_size=64)\n"
                               "    return [model(x) for x, _ in loader]\n"),
        _SCRIPT.format(loaders="\n\ndef run_inference(model, dataset):\n"
                               "    loader = DataLoader(dataset, batch_size=64)\n"
                               "    return [model(x) for x, _ in loader]\n"),
        # a sampler that is None off DDP: shuffle only then
        _SCRIPT.format(loaders="    sampler = DistributedSampler(train_set) if rank >= 0 else "
                               "None\n    loader = DataLoader(train_set, batch_size=64, "
                               "sampler=sampler, shuffle=sampler is None)\n"),
        _SCRIPT.format(loaders="    loader = DataLoader(train_set, batch_sampler=batches)\n"),
        # no DDP in this file
        HEADER + LOADER + "loader = DataLoader(train_set, batch_size=64, shuffle=True)\n",
    ]
    invalid = [
        invalid_at(_SCRIPT.format(loaders="    loader = DataLoader(train_set, batch_size=64, "
                                        "shuffle=True)\n"), "loader = DataLoader"),
        invalid_at(_SCRIPT.format(loaders="    train_loader = DataLoader(train_set, "
                                        "batch_size=64)\n"), "train_loader = DataLoader"),
        invalid_at(
            _SCRIPT.format(loaders="    sampler = DistributedSampler(train_set)\n"
                                   "    loader = DataLoader(train_set, batch_size=64, "
                                   "sampler=sampler, shuffle=True)\n"),
            "loader = DataLoader",
            fixed=_SCRIPT.format(loaders="    sampler = DistributedSampler(train_set)\n"
                                         "    loader = DataLoader(train_set, batch_size=64, "
                                         "sampler=sampler)\n"),
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._pending = []
        self._ddp: str | None = None
        self._framework = False
        self._loaders: list[tuple[cst.Call, str | None, cst.CSTNode | None]] = []
        self._samplers: dict[str, int] = {}  # name -> number of assignments, -1: not distributed
        self._target: str | None = None
        self._iterations: dict[str, list[bool]] = {}  # loader -> under no_grad, per loop

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            name = dotted_name(node.targets[0].target)
            self._target = name
            if name is not None:
                value = node.value
                distributed = isinstance(value, cst.Call) and (
                    self.context.call_name(value) in _DISTRIBUTED_SAMPLERS)
                previous = self._samplers.get(name)
                if distributed and previous is None:
                    self._samplers[name] = 1
                elif previous is not None or distributed:
                    self._samplers[name] = -1

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._target = None

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        qualified = context.call_name(node) or ""
        if qualified in _DDP:
            self._ddp = dotted_name(node.func) or "DistributedDataParallel"
        elif qualified.startswith(_FRAMEWORKS):
            self._framework = True
        elif qualified in DATALOADERS:
            target = self._target
            if self._evaluation_loader(node):
                return
            self._loaders.append((node, target, context.current_statement))

    def _evaluation_loader(self, call: cst.Call) -> bool:
        """A loader that is built for evaluation: in a function decorated with `no_grad` or
        named for evaluation (`evaluate`, `test`, `predict` ...), or over a dataset named for
        evaluation (`val_set`, `test_dataset`) or built with `train=False` or a `split` other
        than train."""
        context = self.context
        for func in context.function_stack:
            if function_without_grad(context, func) or _EVALUATING.search(func.name.value):
                return True
        return _evaluation_dataset(call)

    def visit_For(self, node: cst.For) -> None:
        # which loaders are iterated with gradients on: `for x in loader`,
        # `for i, x in enumerate(loader)`, `for x in tqdm(loader)`
        context = self.context
        without_grad = any(function_without_grad(context, f) for f in context.function_stack) or any(
            isinstance(s, cst.With) and any(is_no_grad_item(context, i.item) for i in s.items)
            for s in context.statement_stack[:-1]
        )
        iterated = node.iter
        while isinstance(iterated, cst.Call) and iterated.args:
            iterated = iterated.args[0].value
        name = dotted_name(iterated)
        if name is not None:
            self._iterations.setdefault(name, []).append(without_grad)

    def _is_distributed_sampler(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return self.context.call_name(expr) in _DISTRIBUTED_SAMPLERS
        name = dotted_name(expr)
        return name is not None and self._samplers.get(name) == 1

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._ddp is None or self._framework:
            return
        for call, target, statement in self._loaders:
            if has_star_args(call):
                continue
            sampler = _loader_argument(call, "sampler")
            batch_sampler = _loader_argument(call, "batch_sampler")
            if sampler is None and batch_sampler is None:
                if target is not None and _VISITED.search(last_segment(target)):
                    continue
                loops = self._iterations.get(target or "", [])
                if loops and all(loops):
                    continue  # iterated only under no_grad: an evaluation loader
                shown = f"`{target}`" if target else "this DataLoader"
                self._pending.append((
                    call,
                    f"{shown} feeds a `{self._ddp}` model without a `DistributedSampler`, so "
                    "every rank iterates the whole dataset and computes the same gradients; "
                    "pass `sampler=DistributedSampler(dataset)` (instead of `shuffle=True`) "
                    "and call `sampler.set_epoch(epoch)` each epoch",
                    {}, statement,
                ))
                continue
            shuffle = _loader_argument(call, "shuffle")
            if (
                sampler is not None and shuffle is not None and shuffle.keyword is not None
                and _literal(shuffle.value) == "True"
                and self._is_distributed_sampler(sampler.value)
            ):
                self._pending.append((
                    call,
                    "`shuffle=True` cannot be combined with a `DistributedSampler`: DataLoader "
                    "raises ValueError; remove `shuffle=True` (the sampler shuffles itself)",
                    {"fix": Fix(((call, _without_argument(call, shuffle)),),
                                "remove `shuffle=True`", safe=True)},
                    statement,
                ))
        self.flush()


def _without_argument(call: cst.Call, drop: cst.Arg) -> cst.Call:
    args = [arg for arg in call.args if arg is not drop]
    if args and call.args[-1] is drop:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def _evaluation_dataset(call: cst.Call) -> bool:
    """The loader's dataset is named for evaluation (`val_set`, `test_dataset`) or built with
    `train=False` or a `split` other than train."""
    dataset = argument(call, "dataset", 0)
    if dataset is None:
        return False
    value = dataset.value
    name = dotted_name(value)
    if name is not None and _VISITED.search(last_segment(name)):
        return True
    if isinstance(value, cst.Call):
        for arg in value.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "train" and _literal(arg.value) == "False":
                return True
            if keyword == "split" and isinstance(arg.value, cst.SimpleString) and (
                    isinstance(arg.value.evaluated_value, str)  # not a bytes literal
                    and _VISITED.search(arg.value.evaluated_value)):
                return True
    return False


# -- ML348 --------------------------------------------------------------------------------------

# calls that hand back their first argument's items in the same order
_ORDER_KEEPING = LazyPattern(r"^(?:enumerate|iter|\w*tqdm\w*|trange|track|\w*progress\w*)$",
                            re.IGNORECASE)
# a loader's or dataset's name that says it trains: `train_loader`, `trainloader`, `loader_train`
_TRAINING_NAME = LazyPattern(r"(?:^|_)train(?:ing)?(?:$|_|loader|set|data|dl|_?ds)",
                            re.IGNORECASE)
# a loop that carries a recurrent state from batch to batch (truncated backpropagation through
# time), which needs the batches in order
_CARRIED_STATE = LazyPattern(
    r"repackage|\b(?:hidden|hid|mems?|hx|h0|hc|h)\b[^\n]*\.detach\(|"
    r"\b(?:\w+_)?(?:hidden|states?|memory|h)\d*\s*=\s*[^\n]*\.detach\(")
# the project's functions that train on the loader they are given: `train`,
# `train_one_epoch` (not a framework's `trainer.fit`, which may rebuild the loader)
_TRAINS = LazyPattern(r"^_?train(?:_|$)|_train$")
# functions that go over the training set without training on it
_NOT_TRAINING = LazyPattern(r"val|test|eval|infer|predict|extract|feature|stat|mean|std|calib|"
                           r"embed|cache|precompute|visuali[sz]e|plot", re.IGNORECASE)
_RANDOM_TENSOR = LazyPattern(r"^torch\.(?:rand|randn|randint|normal|bernoulli|poisson)$")
# datasets that cannot be shuffled by the loader (it raises on `shuffle=True`), or stream
_STREAMING = LazyPattern(r"IterableDataset|IterDataPipe|IterableWrapper|webdataset|"
                        r"streaming\s*=\s*True")


class TrainingLoaderNotShuffled(ScopeRule):
    """The `DataLoader` that the training loop iterates is built without `shuffle=True`.

    ## What it does
    Finds a `DataLoader(...)` with no `shuffle=`, `sampler=` or `batch_sampler=` argument
    (and no `**kwargs`) that a training loop iterates: a `for` loop around `backward()`
    that goes over the loader (`for x, y in loader`, through `enumerate`, `tqdm`, `iter`,
    or a name assigned one of them), or `next(it)` of an iterator of it inside that loop.
    The loader is followed through the function's assignments (`loader = DataLoader(...)`,
    `pbar = tqdm(loader) if is_train else loader`) and through `self.train_loader` set once
    in the class. A loader that no loop with `backward()` iterates is reported only when its
    name or its dataset's says it trains (`train_loader`, `DataLoader(train_set)`) and the
    same function iterates it or hands it to a function of its own named for training
    (`train_one_epoch(model, train_loader)`; not a framework's `trainer.fit`, which may
    rebuild the loader), outside functions that only read the data (statistics, features).
    Left alone: any explicit `shuffle=` (`shuffle=False` is a decision,
    `shuffle=args.shuffle` an option), a sampler of any kind (`DistributedSampler`, a
    weighted or custom sampler), loaders named for or over evaluation data (`val_loader`,
    `DataLoader(test_set)`, `train=False`), `batch_size=None`, datasets the file shuffles
    itself (`random.shuffle(train_data)`, `train_set.shuffle()`), a `TensorDataset` of random
    tensors, loops that carry a recurrent state from batch to batch (`hidden.detach()`,
    `repackage_hidden`: truncated backpropagation through time needs the order), and files
    that use an `IterableDataset`, a datapipe, WebDataset or a streaming dataset (their order
    is the dataset's own). The fix (unsafe: the order of batches changes) passes
    `shuffle=True`.

    ## Why is this bad?
    `DataLoader` does not shuffle by default: every epoch presents the same batches in the
    same order. Data is usually stored sorted (by class, by source, by length), so each
    batch holds one class or one kind of sample, and the gradient steps swing between them
    instead of averaging over the data; the model fits the last part of the epoch best and
    stochastic gradient descent loses the randomness its convergence rests on. Training loss
    is noisier and accuracy lower, with no error anywhere.

    ## Example
        loader = DataLoader(train_set, batch_size=64, num_workers=4)
        for epoch in range(epochs):
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

    ## Use instead
        loader = DataLoader(train_set, shuffle=True, batch_size=64, num_workers=4)
        for epoch in range(epochs):
            for x, y in loader:
                ...
    """

    code = "ML348"
    name = "training-loader-not-shuffled"
    needs = frozenset({"scope"})
    severity = Severity.WARNING
    fix = "unsafe"
    triggers = ("DataLoader",)
    _TRAIN = (
        HEADER + LOADER + "\n\ndef train(model, train_set, val_set, optimizer, epochs):\n"
        "    {loader}\n"
        "    for epoch in range(epochs):\n"
        "        for x, y in {loop}:\n"
        "            loss = F.cross_entropy(model(x), y)\n"
        "            optimizer.zero_grad()\n"
        "            loss.backward()\n"
        "            optimizer.step()\n"
    )
    _RUN_EPOCH = (
        HEADER + LOADER + "\n\ndef run_epoch(model, optimizer, split, train_set, test_set):\n"
        "    is_train = split == 'train'\n"
        "    data = train_set if is_train else test_set\n"
        "    loader = {loader}\n"
        "    batches = tqdm(enumerate(loader)) if is_train else enumerate(loader)\n"
        "    for i, (x, y) in batches:\n"
        "        loss = F.cross_entropy(model(x), y)\n"
        "        if is_train:\n"
        "            optimizer.zero_grad()\n"
        "            loss.backward()\n"
        "            optimizer.step()\n"
    )
    _TRAINER = (
        HEADER + LOADER + "\n\nclass Trainer:\n"
        "    def __init__(self, model, dataset):\n"
        "        self.model = model\n"
        "        self.loader = {loader}\n\n"
        "    def fit(self, optimizer):\n"
        "        for x, y in self.loader:\n"
        "            optimizer.zero_grad()\n"
        "            F.mse_loss(self.model(x), y).backward()\n"
        "            optimizer.step()\n"
    )
    valid = [
        _TRAIN.format(loader="loader = DataLoader(train_set, batch_size=64, shuffle=True)",
                      loop="loader"),
        _TRAIN.format(loader="loader = DataLoader(train_set, 64, True)", loop="loader"),
        # an option, or a deliberate decision
        _TRAIN.format(loader="loader = DataLoader(train_set, batch_size=64, "
                             "shuffle=args.shuffle)", loop="loader"),
        _TRAIN.format(loader="loader = DataLoader(train_set, batch_size=64, shuffle=False)",
                      loop="loader"),
        # samplers order the data themselves
        _TRAIN.format(loader="loader = DataLoader(train_set, batch_size=64, "
                             "sampler=DistributedSampler(train_set))", loop="loader"),
        _TRAIN.format(loader="loader = DataLoader(train_set, batch_sampler=buckets)",
                      loop="loader"),
        _TRAIN.format(loader="loader = DataLoader(train_set, **loader_options)", loop="loader"),
        # evaluation data
        _TRAIN.format(loader="val_loader = DataLoader(val_set, batch_size=64)",
                      loop="val_loader"),
        # an iterable dataset cannot be shuffled by the loader
        "from torch.utils.data import IterableDataset\n" + _TRAIN.format(
            loader="loader = DataLoader(Stream(train_set), batch_size=None)", loop="loader"),
        # a loader that no training loop iterates
        HEADER + LOADER + "\n\ndef predict(model, dataset):\n"
        "    loader = DataLoader(dataset, batch_size=64)\n"
        "    return [model(x) for x in loader]\n",
        # wrapped by a framework before the loop
        _TRAIN.format(loader="loader = accelerator.prepare(DataLoader(train_set))",
                      loop="loader"),
        # random samples have no order
        _TRAIN.format(loader="loader = DataLoader(TensorDataset(torch.randn(64, 8), "
                             "torch.randint(0, 2, (64,))), batch_size=8)", loop="loader"),
        # the dataset is shuffled by hand
        _TRAIN.format(loader="random.shuffle(train_set)\n"
                             "    loader = DataLoader(train_set, batch_size=64)", loop="loader"),
        # a recurrent state carried from batch to batch needs the batches in order
        HEADER + LOADER + "\n\ndef train(model, train_set, optimizer, hidden):\n"
        "    loader = DataLoader(train_set, batch_size=20)\n"
        "    for x, y in loader:\n"
        "        hidden = hidden.detach()\n"
        "        output, hidden = model(x, hidden)\n"
        "        F.cross_entropy(output, y).backward()\n"
        "        optimizer.step()\n",
        # statistics of the training set: the order does not matter
        HEADER + LOADER + "\n\ndef compute_mean_std(train_set):\n"
        "    train_loader = DataLoader(train_set, batch_size=256)\n"
        "    total = 0\n"
        "    for x, _ in train_loader:\n"
        "        total += x.sum()\n"
        "    return total\n",
    ]
    invalid = [
        invalid_at(
            _TRAIN.format(loader="loader = DataLoader(train_set, batch_size=64)",
                          loop="loader"),
            "loader = DataLoader",
            fixed=_TRAIN.format(
                loader="loader = DataLoader(train_set, shuffle=True, batch_size=64)",
                loop="loader"),
        ),
        invalid_at(
            _TRAIN.format(loader="loader = DataLoader(train_set, batch_size=64)",
                          loop="tqdm(enumerate(loader), total=len(loader))"),
            "loader = DataLoader",
            fixed=_TRAIN.format(
                loader="loader = DataLoader(train_set, shuffle=True, batch_size=64)",
                loop="tqdm(enumerate(loader), total=len(loader))"),
        ),
        # the same function trains and evaluates (minGPT's run_epoch)
        invalid_at(
            _RUN_EPOCH.format(loader="DataLoader(data, batch_size=64)"),
            "loader = DataLoader",
            fixed=_RUN_EPOCH.format(loader="DataLoader(data, shuffle=True, batch_size=64)"),
        ),
        # an attribute set once in the class
        invalid_at(
            _TRAINER.format(loader="DataLoader(dataset, batch_size=32)"),
            "self.loader = DataLoader",
            fixed=_TRAINER.format(loader="DataLoader(dataset, shuffle=True, batch_size=32)"),
        ),
        # named for training, handed to the function that trains
        invalid_at(
            HEADER + LOADER + "\n\ndef main(model, train_set, optimizer):\n"
            "    train_loader = DataLoader(train_set, batch_size=64)\n"
            "    for epoch in range(10):\n"
            "        train_one_epoch(model, train_loader, optimizer)\n",
            "train_loader = DataLoader",
            fixed=HEADER + LOADER + "\n\ndef main(model, train_set, optimizer):\n"
            "    train_loader = DataLoader(train_set, shuffle=True, batch_size=64)\n"
            "    for epoch in range(10):\n"
            "        train_one_epoch(model, train_loader, optimizer)\n",
        ),
        # named for training, iterated here
        invalid_at(
            HEADER + LOADER + "\ntrain_loader = DataLoader(\n    dataset,\n"
            "    batch_size=64,\n)\nfor x, y in train_loader:\n    step(x, y)\n",
            "DataLoader(",
            fixed=HEADER + LOADER + "\ntrain_loader = DataLoader(\n    dataset, shuffle=True,\n"
            "    batch_size=64,\n)\nfor x, y in train_loader:\n    step(x, y)\n",
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._reported: set[int] = set()
        self._streaming = bool(_STREAMING.search(self.context.source))

    def check(self, scope: Scope) -> None:
        if self._streaming:
            return
        context = self.context
        # (loop, order of its backward call)
        loops: list[tuple[cst.For | cst.While, int]] = []
        for site, _ in backward_calls(context, scope):
            if under_no_grad(context, site):
                continue
            for enclosing in site.loops:
                if not any(enclosing is seen for seen, _ in loops):
                    loops.append((enclosing, site.order))
        for loop, order in loops:
            if _CARRIED_STATE.search(source_of(loop)):
                continue
            loop_site = scope.site(loop)
            before = loop_site.order if loop_site is not None else order
            iterated: list[cst.BaseExpression] = []
            if isinstance(loop, cst.For):
                iterated.append(loop.iter)
            for call_site in scope.calls:
                call = call_site.node
                if (call_site.inside(loop) and isinstance(call.func, cst.Name)
                        and call.func.value == "next" and call.args):
                    iterated.append(call.args[0].value)
            for expr in iterated:
                for name, call in self._loaders(scope, expr, before):
                    self._check_loader(scope, name, call, trained=True)
        self._check_named(scope)

    def _check_named(self, scope: Scope) -> None:
        """Loaders named for training (or over a dataset named so) that a loop of this scope
        iterates, with or without a visible `backward()`."""
        root = scope.root
        if isinstance(root, cst.FunctionDef) and _NOT_TRAINING.search(root.name.value):
            return
        iterated: list[tuple[cst.BaseExpression, int]] = []
        for loop_site in scope.loops:
            loop = loop_site.node
            if not isinstance(loop, cst.For) or self._without_grad(scope, loop_site) or (
                    _CARRIED_STATE.search(source_of(loop))):
                continue
            iterated.append((loop.iter, loop_site.order))
        # handed to a function that trains: `train(model, train_loader, optimizer)`
        for site in scope.calls:
            callee = last_segment(dotted_name(site.node.func))
            if _TRAINS.search(callee) and not _NOT_TRAINING.search(callee) and (
                    isinstance(site.node.func, cst.Name)):
                iterated.extend((arg.value, site.order) for arg in site.node.args
                                if isinstance(arg.value, (cst.Name, cst.Attribute)))
        for expr, order in iterated:
            for name, call in self._loaders(scope, expr, order):
                dataset = argument(call, "dataset", 0)
                dataset_name = dotted_name(dataset.value) if dataset is not None else None
                if any(text and _TRAINING_NAME.search(last_segment(text))
                       for text in (name, dataset_name)):
                    self._check_loader(scope, name, call, trained=False)

    def _without_grad(self, scope: Scope, site: Site) -> bool:
        return under_no_grad(self.context, site) or function_without_grad(self.context, scope.root)

    def _loaders(self, scope: Scope, expr: cst.BaseExpression, before: int, depth: int = 0
                 ) -> list[tuple[str | None, cst.Call]]:
        """The `DataLoader(...)` calls whose batches `expr` yields, in order: (the name that
        holds the loader, the call)."""
        if depth > 4:
            return []
        if isinstance(expr, cst.IfExp):
            return (self._loaders(scope, expr.body, before, depth + 1)
                    + self._loaders(scope, expr.orelse, before, depth + 1))
        if isinstance(expr, cst.Call):
            if _is_dataloader(self.context, expr):
                return [(None, expr)]
            callee = last_segment(dotted_name(expr.func))
            if (_ORDER_KEEPING.match(callee) and expr.args and expr.args[0].keyword is None
                    and not expr.args[0].star):
                return self._loaders(scope, expr.args[0].value, before, depth + 1)
            return []
        name = dotted_name(expr)
        if name is None:
            return []
        assigned = scope.assigned(name, before)
        if assigned:
            value = assigned[-1].value
        else:
            value = constructor_of(self.context, scope, name, before)
        if value is None:
            return []
        return [(held or name, call)
                for held, call in self._loaders(scope, value, before, depth + 1)]

    def _check_loader(self, scope: Scope, name: str | None, call: cst.Call, trained: bool
                      ) -> None:
        if id(call) in self._reported or has_star_args(call):
            return
        if any(_loader_argument(call, keyword) is not None
               for keyword in ("shuffle", "sampler", "batch_sampler")):
            return
        batch_size = argument(call, "batch_size", 1)
        if batch_size is not None and _literal(batch_size.value) == "None":
            return
        if (name and _VISITED.search(last_segment(name))) or _evaluation_dataset(call):
            return
        if self._shuffled_by_hand(call) or self._random_data(scope, call):
            return
        self._reported.add(id(call))
        shown = f"`{name}`" if name else "this DataLoader"
        which = ("feeds the training loop (the loop that calls `backward()`)" if trained
                 else "is, by its name, the training loader")
        self.report(
            call,
            f"{shown} {which} but is built without `shuffle=True` or a sampler: DataLoader "
            "does not shuffle by default, so every epoch sees the same batches in the same "
            "(often sorted) order; pass `shuffle=True`",
            fix=Fix(((call, _with_shuffle(call)),), "pass `shuffle=True`", safe=False),
            statement=self._statement_of(scope, call),
        )

    def _random_data(self, scope: Scope, call: cst.Call) -> bool:
        """The loader's dataset is a `TensorDataset` of random tensors (`torch.randn(...)`), a
        smoke test or a benchmark: its samples have no order to break."""
        dataset = argument(call, "dataset", 0)
        value = dataset.value if dataset is not None else None
        name = dotted_name(value) if value is not None else None
        if name is not None:
            assigned = scope.assigned(name)
            value = assigned[-1].value if len(assigned) == 1 else None
        if not (isinstance(value, cst.Call) and value.args
                and last_segment(dotted_name(value.func)) == "tensordataset"):
            return False
        return all(isinstance(arg.value, cst.Call)
                   and _RANDOM_TENSOR.match(self.context.call_name(arg.value) or "")
                   for arg in value.args)

    def _shuffled_by_hand(self, call: cst.Call) -> bool:
        """The file shuffles the loader's dataset itself: `random.shuffle(train_data)`,
        `train_set = train_set.shuffle(seed=0)` (a Hugging Face dataset)."""
        dataset = argument(call, "dataset", 0)
        name = dotted_name(dataset.value) if dataset is not None else None
        if name is None:
            return False
        word = re.escape(name.rsplit(".", 1)[-1])
        return bool(re.search(rf"shuffle\(\s*(?:\w+\.)*{word}\b|\b{word}\s*\.\s*shuffle\(",
                              self.context.source))

    def _statement_of(self, scope: Scope, call: cst.Call) -> cst.CSTNode | None:
        """The statement of `call`, in this scope or in a method of the class (where
        `self.loader = DataLoader(...)` was found)."""
        site = scope.site(call)
        if site is not None:
            return site.statement
        cls = self.context.current_class
        if cls is not None:
            for statement in cls.body.body:
                if isinstance(statement, cst.FunctionDef):
                    site = scope_of(self.context, statement).site(call)
                    if site is not None:
                        return site.statement
        return None


def _with_shuffle(call: cst.Call) -> cst.Call:
    """`call` with `shuffle=True` after its positional arguments."""
    args = list(call.args)
    last = max((i for i, arg in enumerate(args) if arg.keyword is None), default=-1)
    shuffle = cst.Arg(
        keyword=cst.Name("shuffle"), value=cst.Name("True"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                              whitespace_after=cst.SimpleWhitespace("")),
        comma=args[last].comma if last >= 0 else cst.MaybeSentinel.DEFAULT,
    )
    if last >= 0:
        args[last] = args[last].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elif args:
        shuffle = shuffle.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.insert(last + 1, shuffle)
    return call.with_changes(args=args)


# -- ML349 --------------------------------------------------------------------------------------

_DATA_PARALLEL = _DDP | frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel",
})
# a condition that tells the wrapper from the bare model (the fix of the YOLOv4 case)
_WRAPPER_TEST = LazyPattern(r"DataParallel|DDP|module|isinstance|hasattr|device_count|"
                           r"distributed|world_size|local_rank|n_?gpu|multi_?gpu")
_SAVES = frozenset({"torch.save", "torch.serialization.save"})


class DataParallelStateDictPrefix(ScopeRule):
    """A state dict is saved or loaded through a model wrapped in `DataParallel` in some runs.

    ## What it does
    Finds `model = nn.DataParallel(model)` (or `DistributedDataParallel`) under an `if`
    (`if torch.cuda.device_count() > 1:`, `if args.cuda:`), followed in the same function by
    `torch.save(...)` of `model.state_dict()`, `other.load_state_dict(model.state_dict())`
    or `model.load_state_dict(...)`, outside that `if` and without `.module`; for
    `self.model` wrapped so in one method (`__init__`), the same uses in the class's other
    methods; and for a wrapped name passed after the `if` to a function of the same file
    (`train(model=model)` under `__main__`), that function's
    `other.load_state_dict(model.state_dict())` of its parameter. Left alone:
    sites under a condition that tells the wrapper apart (`isinstance(model, DataParallel)`,
    `hasattr(model, "module")`, `device_count()`, `distributed`), a name assigned again in
    between (`model = model.module`), wrappers built unconditionally (their keys are always
    prefixed), and files that handle the prefix themselves (a `"module."` string).

    ## Why is this bad?
    The wrapper keeps the model as its `module` attribute, so its `state_dict()` names every
    tensor `module.conv1.weight` instead of `conv1.weight`. When the wrapping depends on the
    machine, a checkpoint saved on several GPUs does not load into the bare model (on one GPU,
    in an evaluation script, or `eval_model.load_state_dict(model.state_dict())`), and a
    checkpoint of the bare model does not load into the wrapper: `load_state_dict` raises
    "Missing key(s) ... Unexpected key(s)", or with `strict=False` silently loads nothing.

    ## Example
        if torch.cuda.device_count() > 1:
            model = nn.DataParallel(model)
        train(model)
        torch.save(model.state_dict(), "model.pth")

    ## Use instead
        if torch.cuda.device_count() > 1:
            model = nn.DataParallel(model)
        train(model)
        bare = model.module if isinstance(model, nn.DataParallel) else model
        torch.save(bare.state_dict(), "model.pth")

    ## What it does not see
    A model wrapped in another file than the one that saves or copies its state dict, or
    passed on through more than one call; in a function the wrapped model is passed to, only
    the copy into another model is checked, not `torch.save` (a checkpoint saved and loaded
    by the same training function keeps one configuration's keys). It finds 3 of 3
    bench/bugs cases.
    """

    code = "ML349"
    name = "data-parallel-state-dict-prefix"
    needs = frozenset({"scope"})
    severity = Severity.WARNING
    triggers = ("DataParallel",)
    _SCRIPT = (
        HEADER + "\n\ndef main(args, model, checkpoint):\n"
        "    {wrap}\n"
        "    {use}\n"
    )
    valid = [
        _SCRIPT.format(wrap="if torch.cuda.device_count() > 1:\n"
                            "        model = nn.DataParallel(model)",
                       use="torch.save(model.module.state_dict(), 'model.pth')"),
        _SCRIPT.format(wrap="if torch.cuda.device_count() > 1:\n"
                            "        model = nn.DataParallel(model)",
                       use="if isinstance(model, nn.DataParallel):\n"
                           "        torch.save(model.module.state_dict(), 'model.pth')\n"
                           "    else:\n"
                           "        torch.save(model.state_dict(), 'model.pth')"),
        # loaded before the wrapping
        _SCRIPT.format(wrap="model.load_state_dict(torch.load(checkpoint))",
                       use="if args.cuda:\n        model = nn.DataParallel(model).cuda()"),
        # always wrapped: the keys are always prefixed
        _SCRIPT.format(wrap="model = nn.DataParallel(model)",
                       use="torch.save(model.state_dict(), 'model.pth')"),
        _SCRIPT.format(wrap="if args.cuda:\n        model = nn.DataParallel(model)\n"
                            "    model = model.module if args.cuda else model",
                       use="torch.save(model.state_dict(), 'model.pth')"),
        # unwrapped before saving (minGPT's trainer)
        HEADER + "\n\nclass Trainer:\n"
        "    def __init__(self, model):\n"
        "        self.model = model\n"
        "        if torch.cuda.is_available():\n"
        "            self.model = nn.DataParallel(self.model).cuda()\n\n"
        "    def save(self, path):\n"
        "        raw = self.model.module if hasattr(self.model, 'module') else self.model\n"
        "        torch.save(raw.state_dict(), path)\n",
        # given to a function that unwraps it first
        HEADER + "\n\ndef train(model, epochs):\n"
        "    bare = model.module if isinstance(model, nn.DataParallel) else model\n"
        "    eval_model = Net()\n"
        "    eval_model.load_state_dict(bare.state_dict())\n\n\n"
        "if __name__ == '__main__':\n"
        "    model = Net()\n"
        "    if torch.cuda.device_count() > 1:\n"
        "        model = nn.DataParallel(model)\n"
        "    train(model, 5)\n",
        # resumed from what the same wrapper saved (kuangliu/pytorch-cifar)
        _SCRIPT.format(wrap="if args.cuda:\n        model = nn.DataParallel(model)",
                       use="model.load_state_dict(torch.load(checkpoint)['net'])\n"
                           "    torch.save({'net': model.state_dict()}, checkpoint)"),
    ]
    invalid = [
        invalid_at(_SCRIPT.format(wrap="if torch.cuda.device_count() > 1:\n"
                                       "        model = nn.DataParallel(model)",
                                  use="torch.save(model.state_dict(), 'model.pth')"),
                   "torch.save"),
        # loaded into the wrapper (deepspeech.pytorch)
        invalid_at(_SCRIPT.format(wrap="if args.cuda:\n"
                                       "        model = torch.nn.DataParallel(model).cuda()",
                                  use="if args.continue_from:\n"
                                      "        package = torch.load(args.continue_from)\n"
                                      "        model.load_state_dict(package['state_dict'])"),
                   "model.load_state_dict"),
        # wrapped in __init__, saved in another method
        invalid_at(HEADER + "\n\nclass Trainer:\n"
                   "    def __init__(self, model):\n"
                   "        self.model = model\n"
                   "        if torch.cuda.device_count() > 1:\n"
                   "            self.model = nn.DataParallel(self.model)\n\n"
                   "    def save(self, path):\n"
                   "        torch.save(self.model.state_dict(), path)\n",
                   "torch.save(self.model"),
        # wrapped under __main__, copied into a bare model in the function it is given to
        # (pytorch-YOLOv4)
        invalid_at(HEADER + "\n\ndef train(model, epochs):\n"
                   "    for epoch in range(epochs):\n"
                   "        eval_model = Net()\n"
                   "        eval_model.load_state_dict(model.state_dict())\n\n\n"
                   "if __name__ == '__main__':\n"
                   "    model = Net()\n"
                   "    if torch.cuda.device_count() > 1:\n"
                   "        model = nn.DataParallel(model)\n"
                   "    train(model, 5)\n",
                   "eval_model.load_state_dict"),
        invalid_at(_SCRIPT.format(wrap="if args.distributed:\n"
                                       "        model = nn.parallel.DistributedDataParallel("
                                       "model)",
                                  use="best = Net()\n    best.load_state_dict(model.state_dict())"),
                   "best.load_state_dict"),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._text = self.context.source
        self._handles_prefix = "'module.'" in self._text or '"module."' in self._text

    def check(self, scope: Scope) -> None:
        if self._handles_prefix:
            return
        for assignment in scope.assignments:
            self._check_wrap(scope, assignment, here=True)
        # `self.model = DataParallel(self.model)` in another method of the class (`__init__`)
        cls = self.context.current_class
        if cls is None or not isinstance(scope.root, cst.FunctionDef):
            return
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement is not scope.root:
                for assignment in scope_of(self.context, statement).assignments:
                    if assignment.target.startswith("self."):
                        self._check_wrap(scope, assignment, here=False)

    def _check_wrap(self, scope: Scope, assignment, here: bool) -> None:
        """Report the state-dict uses in `scope` of the name the assignment may wrap (`here`:
        the assignment is in `scope`; else in another method of the class)."""
        wrapper = self._wrapper(assignment)
        if wrapper is None:
            return
        branch = next((a for a in reversed(assignment.site.ancestors)
                       if isinstance(a, cst.If)), None)
        if branch is None:
            return
        target = assignment.target
        if here:
            self._check_callees(scope, assignment, branch, wrapper)
        # the same name saved and loaded back: its keys match within one configuration
        # (`eval_model.load_state_dict(` loads another model: the name must stand alone)
        resumes = f"{target}.state_dict()" in self._text and re.search(
            rf"(?<![\w.]){re.escape(target)}\.load_state_dict\(", self._text) is not None
        for site, receiver, shown, use in self._state_dict_uses(scope, target):
            if resumes and use != "transfer":
                continue
            last = scope.assigned(target, site.order)
            if here:
                if site.order <= assignment.site.order or site.inside(branch):
                    continue
                if not last or last[-1] is not assignment:
                    continue
            elif last:
                continue  # assigned anew in this method
            if any(_WRAPPER_TEST.search(source_of(test)) for test in _conditions(scope, site)):
                continue
            condition = source_of(branch.test)
            self.report_at(
                site, receiver,
                f"`{target}` holds a `{wrapper}` only when `{condition}`, and the wrapper's "
                f"state dict names every key `module.<name>`: {shown} "
                f"{'saves' if use == 'save' else 'loads'} keys that differ from run to run, "
                "and the checkpoint does not load into the bare model (or the bare model's "
                f"into the wrapper); use `{target}.module` when wrapped, or save and load "
                "before wrapping",
            )

    def _check_callees(self, scope: Scope, assignment, branch: cst.If, wrapper: str) -> None:
        """The wrapped name passed, after the `if` and outside it, to a function of this file
        (`train(model=model, ...)`): report that function's state-dict transfers of its
        parameter (`eval_model.load_state_dict(model.state_dict())`)."""
        target = assignment.target
        module = self.context.module_node
        if "." in target or module is None:
            return
        functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
        for site in scope.calls:
            call = site.node
            function = functions.get(dotted_name(call.func) or "")
            if (function is None or function is scope.root
                    or site.order <= assignment.site.order or site.inside(branch)):
                continue
            last = scope.assigned(target, site.order)
            if not last or last[-1] is not assignment:
                continue
            params = [p.name.value for p in (*function.params.posonly_params,
                                             *function.params.params)]
            param = next((name for i, name in enumerate(params)
                          if (given := argument(call, name, i)) is not None
                          and dotted_name(given.value) == target), None)
            if param is None:
                continue
            callee = scope_of(self.context, function)
            for use_site, receiver, shown, use in self._state_dict_uses(callee, param):
                if use != "transfer" or callee.assigned(param, use_site.order):
                    continue
                if any(_WRAPPER_TEST.search(source_of(test))
                       for test in _conditions(callee, use_site)):
                    continue
                named = (f"`{param}`" if param == target
                         else f"`{param}` (the caller's `{target}`)")
                self.report_at(
                    use_site, receiver,
                    f"{named}, given to `{function.name.value}(...)`, holds a `{wrapper}` only "
                    f"when `{source_of(branch.test)}`, and the "
                    f"wrapper's state dict names every key `module.<name>`: {shown} loads "
                    "keys that differ from run to run into the bare model; use "
                    f"`{param}.module` when wrapped",
                )

    def _wrapper(self, assignment) -> str | None:
        """`DataParallel` when the assignment wraps the name it is assigned to."""
        value = assignment.value
        while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
               and value.func.attr.value in RETURNS_SELF):
            value = value.func.value
        if not isinstance(value, cst.Call):
            return None
        qualified = self.context.call_name(value)
        if qualified not in _DATA_PARALLEL or not value.args:
            return None
        wrapped = value.args[0].value
        while (isinstance(wrapped, cst.Call) and isinstance(wrapped.func, cst.Attribute)
               and wrapped.func.attr.value in RETURNS_SELF):
            wrapped = wrapped.func.value
        if dotted_name(wrapped) != assignment.target:
            return None
        return qualified.rsplit(".", 1)[-1]

    def _state_dict_uses(self, scope: Scope, name: str
                         ) -> list[tuple[CallSite, cst.Call, str, str]]:
        """(site, call, its text, `save`, `load` or `transfer`) for
        `torch.save(name.state_dict())`, `x.load_state_dict(name.state_dict())` and
        `name.load_state_dict(...)`."""
        found = []
        for site in scope.calls:
            call = site.node
            func = call.func
            loads = isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict"
            if isinstance(func, cst.Attribute) and loads and dotted_name(func.value) == name:
                found.append((site, call, f"`{name}.load_state_dict(...)`", "load"))
                continue
            if not loads and self.context.call_name(call) not in _SAVES:
                continue
            for arg in call.args:
                for node in code_nodes(arg.value, prune=_NESTED):
                    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                            and node.func.attr.value == "state_dict"
                            and dotted_name(node.func.value) == name):
                        shown = (f"`{dotted_name(func) or 'load_state_dict'}"
                                 f"({name}.state_dict())`")
                        found.append((site, call, shown, "transfer" if loads else "save"))
        return found


def _conditions(scope: Scope, site: Site) -> list[cst.BaseExpression]:
    """The tests of the `if`/`elif`/`else` branches the site runs in (an `else` or `elif`
    branch runs under its `if`'s test too)."""
    owner: dict[int, cst.If] = {}
    body = scope.root.body if isinstance(scope.root, cst.FunctionDef) else scope.root
    for node in code_nodes(body, prune=_NESTED):
        if isinstance(node, cst.If) and node.orelse is not None:
            owner[id(node.orelse)] = node
    tests = []
    for ancestor in site.ancestors:
        branch: cst.CSTNode | None = ancestor
        while branch is not None:
            if isinstance(branch, cst.If):
                tests.append(branch.test)
            branch = owner.get(id(branch))
    return tests


# -- ML314 --------------------------------------------------------------------------------------

_RANDOM_FACTORY = LazyPattern(r"\.(?:rand\w*|normal|bernoulli|multinomial|poisson)$|_like$")
_DATA_WORDS = LazyPattern(r"loader|batches|dataset|\bdata\b", re.IGNORECASE)
_DEVICE_WORDS = LazyPattern(r"device|dev\b|gpu|cuda|rank", re.IGNORECASE)


class TransferRepeatedEveryStep(ScopeRule):
    """The same host tensor is copied to the device on every iteration of a loop.

    ## What it does
    Finds `t.to(device)` / `t.cuda()` inside a loop over batches (one that calls
    `backward()` or iterates over a loader) where `t` was built on the host in the
    same function before the loop (a torch factory such as `torch.tensor([...])` without
    `device=`) and is neither reassigned nor changed in place inside the loop; and
    `torch.tensor(<constants>).to(device)` inside a loop. `x = x.to(device)`, which moves
    the tensor once and is a no-op afterwards, and batches that come from the loop are
    fine.

    ## Why is this bad?
    Every iteration pays the same host-to-device copy (and, from pageable memory, a
    synchronisation) for data that never changes. Moving it once before the loop costs
    nothing per step.

    ## Example
        class_weights = torch.tensor([1.0, 5.0])
        for x, y in loader:
            loss = F.cross_entropy(model(x.to(device)), y.to(device),
                                   weight=class_weights.to(device))

    ## Use instead
        class_weights = torch.tensor([1.0, 5.0], device=device)
        for x, y in loader:
            loss = F.cross_entropy(model(x.to(device)), y.to(device), weight=class_weights)
    """

    code = "ML314"
    name = "transfer-repeated-every-step"
    needs = frozenset({"scope"})
    severity = Severity.WARNING
    triggers = (".to(", ".cuda(")
    _LOOP = (
        HEADER + "\n\ndef train(model, loader, optimizer, device):\n"
        "{setup}"
        "    for x, y in loader:\n"
        "        x, y = x.to(device), y.to(device)\n"
        "{body}"
        "        optimizer.zero_grad()\n"
        "        F.cross_entropy(model(x), y, weight=w).backward()\n"
        "        optimizer.step()\n"
    )
    valid = [
        _LOOP.format(setup="    w = torch.tensor([1.0, 5.0]).to(device)\n", body=""),
        _LOOP.format(setup="    w = torch.tensor([1.0, 5.0], device=device)\n", body=""),
        # moved once: later iterations find it on the device already
        _LOOP.format(setup="    w = torch.tensor([1.0, 5.0])\n",
                     body="        w = w.to(device)\n"),
        # changes every iteration
        _LOOP.format(setup="    w = torch.ones(2)\n",
                     body="        w.mul_(0.99)\n        weight = w.to(device)\n"),
        _LOOP.format(setup="    w = torch.ones(2)\n",
                     body="        w[y.cpu()] += 1\n        weight = w.to(device)\n"),
        # a dtype conversion, not a transfer
        _LOOP.format(setup="    w = torch.ones(2)\n", body="        weight = w.to(torch.half)\n"),
        # unknown origin: may already be on the device
        _LOOP.format(setup="", body="        weight = class_weights.to(device)\n"),
        # built from the loop's data
        _LOOP.format(setup="", body="        weight = torch.tensor([len(x), 1.0]).to(device)\n"),
    ]
    invalid = [
        invalid_at(_LOOP.format(setup="    class_weights = torch.tensor([1.0, 5.0])\n",
                              body="        w = class_weights.to(device)\n"),
                 "class_weights.to(device)"),
        invalid_at(_LOOP.format(setup="    mask = torch.ones(8, 8).tril()\n    m = torch.ones(2)\n",
                              body="        w = m.cuda()\n"), "m.cuda()"),
        invalid_at(_LOOP.format(setup="",
                              body="        w = torch.tensor([1.0, 5.0]).to(device)\n"),
                 "torch.tensor([1.0, 5.0]).to(device)"),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        step_loops: list[cst.CSTNode] | None = None
        for site in scope.calls:
            call = site.node
            func = call.func
            if not site.loops or not isinstance(func, cst.Attribute):
                continue
            method = func.attr.value
            if method not in ("to", "cuda") or context.qualified_name(func) is not None:
                continue
            if method == "to" and not self._to_device(call):
                continue
            receiver = func.value
            loop = site.loops[-1]
            if step_loops is None:
                step_loops = _training_loops(context, scope)
            if not any(loop is s for s in step_loops) and not (
                isinstance(loop, cst.For) and _DATA_WORDS.search(source_of(loop.iter))
            ):
                continue  # not a loop over batches: a loop over settings, layers, ...
            if isinstance(receiver, cst.Name):
                if not self._invariant_host_tensor(scope, receiver.value, loop, site):
                    continue
                shown = receiver.value
                message = (
                    f"`{shown}` does not change inside this loop, but `{source_of(call)}` copies it "
                    f"to the device on every iteration; move it once before the loop"
                )
            elif isinstance(receiver, cst.Call) and context.builds_tensor(receiver) and (
                _constant_args(receiver)
            ) and not _RANDOM_FACTORY.search(context.call_name(receiver) or ""):
                message = (
                    f"`{source_of(receiver)}` is built on the host and copied to the device on "
                    "every iteration; build it once before the loop (with `device=`)"
                )
            else:
                continue
            self.report_at(site, call, message)

    def _to_device(self, call: cst.Call) -> bool:
        arg = argument(call, "device", 0)
        if arg is None:
            return False
        value = arg.value
        if isinstance(value, cst.SimpleString):
            return bool(_ACCELERATOR_STRINGS.match(str(value.evaluated_value)))
        if isinstance(value, cst.Call):
            return self.context.call_name(value) == "torch.device"
        qualified = self.context.qualified_name(value)
        if qualified is not None:
            return False  # torch.float16 and the like
        name = dotted_name(value)
        return name is not None and bool(_DEVICE_WORDS.search(last_segment(name)))

    def _invariant_host_tensor(self, scope: Scope, name: str, loop: cst.For | cst.While,
                               site: Site) -> bool:
        context = self.context
        statement = site.statement
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and any(
                    dotted_name(t.target) == name for t in small.targets
                ):
                    return False  # x = x.to(device)
        loop_site = scope.site_of[id(loop)]
        assignments = [a for a in scope.assignments
                       if a.target == name or a.target.startswith(name + ".")]
        if any(a.site.inside(loop) or a.site is loop_site for a in assignments):
            return False
        earlier = [a for a in assignments if a.site.order < loop_site.order]
        if not earlier or not isinstance(earlier[-1].value, cst.Call):
            return False
        built = earlier[-1].value
        while (
            isinstance(built.func, cst.Attribute) and isinstance(built.func.value, cst.Call)
            and built.func.attr.value not in ("to", "cuda")
            and context.qualified_name(built.func) is None
        ):
            built = built.func.value  # torch.ones(8, 8).tril()
        if not context.builds_tensor(built) or context.call_name(built) in (
            "torch.stack", "torch.cat"
        ):
            return False
        device = argument(built, "device")
        if device is not None and not (
            isinstance(device.value, cst.SimpleString) and device.value.evaluated_value == "cpu"
        ):
            return False
        # changed inside the loop: in place (`w.mul_()`, `w[i] = ...`, `w += ...`) or by
        # any loop of an outer scope we cannot see
        for node in _descendants(loop.body):
            if isinstance(node, cst.AugAssign):
                base = node.target.value if isinstance(node.target, cst.Subscript) else (
                    node.target)
                if dotted_name(base) == name:
                    return False
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Subscript) and dotted_name(
                        target.target.value
                    ) == name:
                        return False
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                attr = node.func.attr.value
                if attr.endswith("_") and not attr.startswith("_") and dotted_name(
                    node.func.value
                ) == name:
                    return False
                if any(dotted_name(a.value) == name and a.keyword is not None
                       and a.keyword.value == "out" for a in node.args):
                    return False
        return True


def _constant_args(call: cst.Call) -> bool:
    if not call.args:
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return False
        if name_nodes(arg.value) and not all(
            n.value in ("True", "False", "None") for n in name_nodes(arg.value)
        ):
            if arg.keyword is None or arg.keyword.value != "dtype":
                return False
    return True


# -- ML315 --------------------------------------------------------------------------------------

_LOSS_CALLEES = LazyPattern(r"criterion|loss_fn|loss_func|lossfn|^loss$|^crit$", re.IGNORECASE)
_GRAD_SCALING = LazyPattern(r"\.grad\b[^\n]*(?:/=|\*=|\.div_\(|\.mul_\()")


def _modulo(test: cst.BaseExpression) -> cst.BinaryOperation | None:
    """The `%` operation of `test` (of several, the rightmost outermost one)."""
    found: cst.BinaryOperation | None = None
    for node in code_nodes(test):
        if (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)
                and (found is None or not any(each is node for each in code_nodes(found)))):
            found = node
    return found


def _scaled(expr: cst.BaseExpression) -> bool:
    """A division or multiplication at the top of an expression (`(a + b) / n`, `a * w`)."""
    return isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, (cst.Divide, cst.Multiply, cst.FloorDivide))


def _terms(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, (cst.Add, cst.Subtract)
    ):
        return _terms(expr.left) + _terms(expr.right)
    return [expr]


class AccumulationWithoutLossScaling(ScopeRule):
    """Gradient accumulation sums the gradients of several batches without scaling the loss.

    ## What it does
    Finds gradient accumulation: in a loop, `backward()` every iteration and
    `optimizer.step()` with `zero_grad()` under a modulo condition (`if (i + 1) % accum ==
    0:`), where the backpropagated loss comes straight from a loss function
    (`F.cross_entropy`, `criterion(...)`, `outputs.loss`) and is never divided or multiplied
    (`loss / accum`, `loss /= accum`), nor are the gradients rescaled; a framework's
    `fabric.backward(loss)` counts as `loss.backward()` (Lightning Fabric accumulates "the
    same way as in PyTorch"). Accelerate (`accelerator.accumulate`), DeepSpeed and the
    Lightning Trainer, which scale internally, are not checked.

    ## Why is this bad?
    `backward()` adds into `.grad`, so N accumulated micro-batches produce the sum of N mean
    gradients: N times the gradient of one batch of N times the size. That is the same as
    multiplying the learning rate by N, so a learning rate tuned without accumulation now
    diverges or settles worse.

    ## Example
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

    ## Use instead
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

    ## What it does not see
    Accumulation written as an inner loop of `backward()` calls followed by one
    `optimizer.step()` (`for _ in range(accumulate_every): loss = model(x); loss.backward()`:
    c-ddpm-accumulation-loss-not-scaled): the loss of each backward there is a mean over a
    micro-batch like any other, and only the loop's shape says they are summed. It finds 2
    of 3 bench/bugs cases.
    """

    code = "ML315"
    name = "accumulation-without-loss-scaling"
    needs = frozenset({"scope"})
    fix = "unsafe"
    triggers = ("%",)
    _ACCUM = (
        HEADER + "\n\ndef train(model, loader, optimizer, criterion, accum_steps):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "{loss}"
        "        {backward}\n"
        "        if (i + 1) % accum_steps == 0:\n"
        "            optimizer.step()\n"
        "            optimizer.zero_grad()\n"
    )
    valid = [
        _ACCUM.format(loss="        loss = criterion(model(x), y) / accum_steps\n",
                      backward="loss.backward()"),
        _ACCUM.format(loss="        loss = criterion(model(x), y)\n",
                      backward="(loss / accum_steps).backward()"),
        _ACCUM.format(loss="        loss = criterion(model(x), y)\n"
                           "        loss /= accum_steps\n", backward="loss.backward()"),
        _ACCUM.format(loss="        loss = criterion(model(x), y)\n",
                      backward="scaler.scale(loss / accum_steps).backward()"),
        # the loss comes from a helper that may scale it
        _ACCUM.format(loss="        loss = training_step(model, x, y)\n",
                      backward="loss.backward()"),
        # the gradients are averaged before the step
        _ACCUM.format(loss="        loss = criterion(model(x), y)\n",
                      backward="loss.backward()").replace(
            "optimizer.step()", "for p in model.parameters():\n"
            "                p.grad /= accum_steps\n            optimizer.step()"),
        # not accumulation: zero_grad every iteration, step every few (alternating updates)
        HEADER + "def train(model, loader, opt_d, opt_g, n_critic):\n"
        "    for i, (x, z) in enumerate(loader):\n        opt_d.zero_grad()\n"
        "        loss_d = F.softplus(model.d(x)).mean()\n        loss_d.backward()\n"
        "        opt_d.step()\n        if i % n_critic == 0:\n"
        "            opt_g.zero_grad()\n"
        "            loss_g = F.softplus(-model.d(model.g(z))).mean()\n"
        "            loss_g.backward()\n            opt_g.step()\n",
    ]
    invalid = [
        invalid_at(_ACCUM.format(loss="        loss = criterion(model(x), y)\n",
                               backward="loss.backward()"), "loss.backward()",
                 fixed=_ACCUM.format(loss="        loss = criterion(model(x), y)\n",
                                     backward="(loss / accum_steps).backward()")),
        invalid_at(_ACCUM.format(loss="        loss = model(**x).loss\n",
                               backward="scaler.scale(loss).backward()"), "scaler.scale",
                 fixed=_ACCUM.format(loss="        loss = model(**x).loss\n",
                                     backward="scaler.scale(loss / accum_steps).backward()")),
        # Lightning Fabric's backward does not divide the loss (lit-llama's LoRA script)
        invalid_at(_ACCUM.format(loss="        loss = criterion(model(x), y)\n",
                               backward="fabric.backward(loss)"), "fabric.backward(loss)",
                 fixed=_ACCUM.format(loss="        loss = criterion(model(x), y)\n",
                                     backward="fabric.backward(loss / accum_steps)")),
        invalid_at(_ACCUM.format(loss="", backward="F.cross_entropy(model(x), y).backward()"),
                 "F.cross_entropy",
                 fixed=_ACCUM.format(loss="",
                                     backward="(F.cross_entropy(model(x), y) / accum_steps)"
                                     ".backward()")),
        invalid_at(HEADER + "model = nn.Linear(8, 2)\nopt = torch.optim.AdamW(model.parameters())\n"
                 "loss_fn = nn.MSELoss()\nfor step, (x, y) in enumerate(data):\n"
                 "    loss = loss_fn(model(x), y) + 0.01 * model.weight.norm()\n"
                 "    loss.backward()\n    if step % 8 == 7:\n"
                 "        opt.step()\n        model.zero_grad()\n", "loss.backward()",
                 fixed=HEADER + "model = nn.Linear(8, 2)\n"
                 "opt = torch.optim.AdamW(model.parameters())\n"
                 "loss_fn = nn.MSELoss()\nfor step, (x, y) in enumerate(data):\n"
                 "    loss = loss_fn(model(x), y) + 0.01 * model.weight.norm()\n"
                 "    (loss / 8).backward()\n    if step % 8 == 7:\n"
                 "        opt.step()\n        model.zero_grad()\n"),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        backwards = backward_calls(context, scope)
        if not backwards:
            return
        # generating the function's text is costly: only for functions that train
        code = scope.code()
        # Accelerate's `accumulate()` and DeepSpeed's engine divide the loss themselves;
        # Lightning Fabric's `backward` does not ("works the same way as in PyTorch")
        if re.search(r"accelerator|deepspeed|\baccumulate\(", code) or (
            _GRAD_SCALING.search(code)
        ):
            return
        zero_grads = [site for site, _ in scope.method_calls("zero_grad")]
        for step in optimizer_steps(context, scope):
            condition = modulo = None
            for ancestor in reversed(step.ancestors):
                if isinstance(ancestor, (cst.For, cst.While)):
                    break
                if isinstance(ancestor, cst.If):
                    modulo = _modulo(ancestor.test)
                    if modulo is not None:
                        condition = ancestor
                        break
            if condition is None or modulo is None or not step.loops:  # found together
                continue
            loop = step.loops[-1]
            if not any(z.inside(condition) for z in zero_grads) or any(
                z.inside(loop) and not z.inside(condition) for z in zero_grads
            ):
                continue
            steps = source_of(modulo.right).strip()
            for site, expr in backwards:
                if not site.inside(loop) or site.inside(condition) or site.order > step.order:
                    continue
                target = self._unscaled_loss(scope, site, expr)
                if target is None:
                    continue
                fix = None
                if isinstance(modulo.right, (cst.Name, cst.Integer, cst.Attribute)):
                    fix = Fix(((target, _divided(target, modulo.right, site)),),
                              f"divide the loss by `{steps}`", safe=False)
                shown = source_of(target).strip()
                self.report_at(
                    site, target,
                    f"gradients of `{steps}` backward passes are summed before "
                    f"`{source_of(cast(cst.Attribute, step.node.func).value)}.step()`, but `{shown}` is not divided by "
                    f"`{steps}`, so each update is `{steps}` times too large; backpropagate "
                    f"`{shown} / {steps}`",
                    fix=fix,
                )
                return

    def _unscaled_loss(self, scope: Scope, site: Site,
                       expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The loss expression in `expr` when it is unscaled and comes from a loss."""
        if (
            isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and "scale" in expr.func.attr.value and len(expr.args) == 1
        ):
            expr = expr.args[0].value
        if _scaled(expr):
            return None
        if isinstance(expr, cst.Name):
            if any(isinstance(s.node, cst.AugAssign) and dotted_name(s.node.target) == expr.value
                   for s in scope.sites):
                return None
            found = scope.assigned(expr.value, site.order)
            if not found or found[-1].value is None:
                return None
            value = found[-1].value
            if _scaled(value) or not self._from_loss(scope, value, found[-1].site.order):
                return None
            return expr
        return expr if self._from_loss(scope, expr, site.order) else None

    def _from_loss(self, scope: Scope, value: cst.BaseExpression, order: int) -> bool:
        """Some term of `value` is a loss function's result and no term is scaled."""
        terms = _terms(value)
        if any(_scaled(t) and not (
            isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply)
        ) for t in terms):
            return False
        return any(self._is_loss(scope, t, order) for t in terms)

    def _is_loss(self, scope: Scope, expr: cst.BaseExpression, order: int) -> bool:
        context = self.context
        if isinstance(expr, cst.Attribute) and expr.attr.value == "loss":
            return True
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
            index = expr.slice[0].slice
            return isinstance(index, cst.Index) and isinstance(
                index.value, cst.SimpleString) and index.value.evaluated_value == "loss"
        if not isinstance(expr, cst.Call):
            return False
        qualified = context.call_name(expr) or ""
        if qualified.startswith("torch.nn.functional.") and qualified.endswith("loss") or (
            qualified in ("torch.nn.functional.cross_entropy", "torch.nn.functional.kl_div")
        ):
            return True
        func = expr.func
        if isinstance(func, cst.Call):
            return (context.call_name(func) or "").endswith("Loss")
        name = dotted_name(func)
        if name is None:
            return False
        constructor = constructor_of(context, scope, name, order)
        if constructor is not None:
            built = context.call_name(constructor) or ""
            return built.startswith("torch.nn.") and built.endswith("Loss")
        return bool(_LOSS_CALLEES.search(last_segment(name)))


def _divided(target: cst.BaseExpression, steps: cst.BaseExpression, site: CallSite) -> cst.CSTNode:
    func = site.node.func
    receiver = func.value if isinstance(func, cst.Attribute) else None
    parenthesize = receiver is target
    return cst.BinaryOperation(
        left=target, operator=cst.Divide(), right=steps.deep_clone(),
        lpar=[cst.LeftParen()] if parenthesize else [],
        rpar=[cst.RightParen()] if parenthesize else [],
    )


# -- ML345 --------------------------------------------------------------------------------------


class _StepTest:
    """What an accumulation step's condition tests: `counter % steps` compared with a
    residue, and whether the step runs when the residue matches (`== 0`) or on every other
    iteration (`!= 0`, a bare `counter % steps`)."""

    def __init__(self, modulo: cst.BinaryOperation, residue: cst.BaseExpression | None,
                 on_match: bool, node: cst.BaseExpression, where: Site | None) -> None:
        self.modulo, self.residue, self.on_match = modulo, residue, on_match
        # the comparison (or modulo) to report, and the assignment holding it when the `if`
        # reads it through a name (`is_accumulating = (i + 1) % n == 0`)
        self.node, self.where = node, where


def _residue_test(expr: cst.BaseExpression, negated: bool, where: Site | None
                  ) -> _StepTest | None:
    """`counter % steps == residue` / `!= residue` / `> 0` / a bare `counter % steps`."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo):
        return _StepTest(expr, cst.Integer("0"), negated, expr, where)
    if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
        return None
    target = expr.comparisons[0]
    left, right, operator = expr.left, target.comparator, target.operator
    if isinstance(right, cst.BinaryOperation) and isinstance(right.operator, cst.Modulo):
        left, right = right, left  # `0 == i % n`
        if isinstance(operator, (cst.GreaterThan, cst.LessThan)):
            return None
    if not (isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo)):
        return None
    if isinstance(operator, cst.Equal):
        return _StepTest(left, right, not negated, expr, where)
    if isinstance(operator, cst.NotEqual):
        return _StepTest(left, right, negated, expr, where)
    if isinstance(operator, cst.GreaterThan) and _is_zero(right):
        return _StepTest(left, cst.Integer("0"), negated, expr, where)
    return None


def _is_zero(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Integer) and expr.evaluated_value == 0


class AccumulationStepCondition(ScopeRule):
    """Gradient accumulation steps the optimizer on the wrong iterations.

    ## What it does
    Finds gradient accumulation (in a loop, `backward()` every iteration, and
    `optimizer.step()` with its `zero_grad()` under a modulo condition, no other
    `zero_grad()` in the loop) whose condition does not step once every `n` micro-batches:

    - the condition is inverted: the step runs when `counter % n != 0` (or on a bare
      `if counter % n:`, or `if not is_accumulating:` where `is_accumulating = counter % n
      == 0`), so the optimizer steps on every iteration but one in `n`;
    - the counter is the loop's own index counting from 0 (`for i, batch in
      enumerate(loader)`, `for i in range(steps)`) and the step runs on `i % n == 0`: the
      first update uses one micro-batch, and every window after it is shifted by one;
    - `n` is reassigned inside the loop from values that change each iteration (a warm-up
      that ramps the accumulation up): `counter % n` then jumps between residues, and the
      windows have irregular lengths, some of one batch.

    A step condition with `or`/`and` (`(i + 1) % n == 0 or last_batch`), a counter computed
    from the index (`global_step = epoch * len(loader) + i`) or a counter incremented before
    the test is not reported.

    ## Why is this bad?
    Accumulation is meant to sum the gradients of `n` micro-batches (each loss divided by
    `n`) and step once on them. Stepping on the wrong iterations trains with an effective
    batch other than the one configured: with an inverted condition almost every update sees
    one micro-batch, with a loss divided by `n` (a learning rate `n` times too small), and
    with a changing `n` the windows come out anywhere from one batch to nearly twice `n`.
    Nothing fails; the model just trains worse than the configuration says.

    ## Example
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            if i % accum_steps:
                optimizer.step()
                optimizer.zero_grad()

    ## Use instead
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """

    code = "ML345"
    name = "accumulation-step-condition-wrong"
    needs = frozenset({"scope"})
    triggers = ("%",)
    _ACCUM = (
        HEADER + "\n\ndef train(model, loader, optimizer, criterion, accum_steps):\n"
        "    for i, (x, y) in enumerate(loader{start}):\n"
        "        loss = criterion(model(x), y) / accum_steps\n"
        "        loss.backward()\n"
        "        if {test}:\n"
        "            optimizer.step()\n"
        "            optimizer.zero_grad()\n"
    )
    valid = [
        _ACCUM.format(start="", test="(i + 1) % accum_steps == 0"),
        _ACCUM.format(start="", test="i % accum_steps == accum_steps - 1"),
        _ACCUM.format(start="", test="not (i + 1) % accum_steps"),
        _ACCUM.format(start=", 1", test="i % accum_steps == 0"),
        _ACCUM.format(start="", test="(i + 1) % accum_steps == 0 or i + 1 == len(loader)"),
        # a counter computed from the index (PyTorch-YOLOv3's fix): not known to start at 0
        HEADER + "def train(model, loader, optimizer, epochs, n):\n"
        "    for epoch in range(epochs):\n"
        "        for batch_i, (x, y) in enumerate(loader):\n"
        "            batches_done = len(loader) * epoch + batch_i\n"
        "            model(x, y).backward()\n"
        "            if batches_done % n == 0:\n"
        "                optimizer.step()\n                optimizer.zero_grad()\n",
        # the step comes first in the iteration: at i == 0 it steps on no gradients
        HEADER + "def train(model, loader, optimizer, accum):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        if i % accum == 0:\n"
        "            optimizer.step()\n            optimizer.zero_grad()\n"
        "        (F.mse_loss(model(x), y) / accum).backward()\n",
        # not accumulation: the gradients are cleared every iteration (a GAN's generator
        # trained every few discriminator steps)
        HEADER + "def train(G, D, loader, opt_g, opt_d, n_critic):\n"
        "    for i, (x, z) in enumerate(loader):\n        opt_d.zero_grad()\n"
        "        F.softplus(D(x)).mean().backward()\n        opt_d.step()\n"
        "        opt_g.zero_grad()\n        F.softplus(-D(G(z))).mean().backward()\n"
        "        if i % n_critic:\n            opt_g.step()\n",
        # the leftover gradients of an epoch flushed after its batch loop
        HEADER + "def train(model, loader, optimizer, epochs, n):\n"
        "    for epoch in range(epochs):\n"
        "        for i, (x, y) in enumerate(loader):\n"
        "            (F.mse_loss(model(x), y) / n).backward()\n"
        "            if (i + 1) % n == 0:\n"
        "                optimizer.step()\n                optimizer.zero_grad()\n"
        "        if (i + 1) % n != 0:\n"
        "            optimizer.step()\n            optimizer.zero_grad()\n",
        # `accum` recomputed each iteration from values that do not change
        HEADER + "def train(model, loader, optimizer, nbs, bs):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        accum = max(round(nbs / bs), 1)\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        if (i + 1) % accum == 0:\n"
        "            optimizer.step()\n            optimizer.zero_grad()\n",
    ]
    invalid = [
        invalid_at(_ACCUM.format(start="", test="i % accum_steps"), "if i % accum_steps"),
        invalid_at(_ACCUM.format(start="", test="(i + 1) % accum_steps != 0"),
                   "if (i + 1) % accum_steps"),
        invalid_at(_ACCUM.format(start="", test="i % accum_steps == 0"),
                   "if i % accum_steps"),
        # through a name (lit-llama)
        invalid_at(
            HEADER + "def train(model, fabric, data, optimizer, max_iters, accum):\n"
            "    for iter_num in range(max_iters):\n"
            "        is_accumulating = (iter_num + 1) % accum == 0\n"
            "        with fabric.no_backward_sync(model, enabled=is_accumulating):\n"
            "            loss = F.cross_entropy(*model(data))\n"
            "            fabric.backward(loss)\n"
            "        if not is_accumulating:\n"
            "            optimizer.step()\n            optimizer.zero_grad()\n",
            "is_accumulating = ",
        ),
        # the accumulation ramps up during warm-up (YOLOv5)
        invalid_at(
            HEADER + "import numpy as np\n\n"
            "def train(model, loader, optimizer, scaler, nb, nw, nbs, bs, epochs):\n"
            "    optimizer.zero_grad()\n"
            "    for epoch in range(epochs):\n"
            "        for i, (imgs, targets) in enumerate(loader):\n"
            "            ni = i + nb * epoch\n"
            "            if ni <= nw:\n"
            "                accumulate = max(1, np.interp(ni, [0, nw], [1, nbs / bs]).round())\n"
            "            scaler.scale(model(imgs, targets)).backward()\n"
            "            if ni % accumulate == 0:\n"
            "                scaler.step(optimizer)\n                scaler.update()\n"
            "                optimizer.zero_grad()\n",
            "if ni % accumulate",
        ),
    ]

    def check(self, scope: Scope) -> None:
        context = self.context
        steps = optimizer_steps(context, scope)
        if not steps:
            return
        backwards = [site for site, _ in backward_calls(context, scope)]
        zero_grads = [site for site, _ in scope.method_calls("zero_grad")]
        reported: set[int] = set()
        for step in steps:
            if not step.loops:
                continue
            loop = step.loops[-1]
            found = self._step_test(scope, step, loop)
            if found is None:
                continue
            condition, test = found
            if id(test.node) in reported:
                continue
            # accumulation: backward() each iteration of this loop (not of a loop inside it)
            # before the step, the gradients cleared only where the step is
            if not any(b.loops and b.loops[-1] is loop and not b.inside(condition)
                       and b.order < step.order for b in backwards):
                continue
            if not any(z.inside(condition) for z in zero_grads) or any(
                z.inside(loop) and not z.inside(condition) for z in zero_grads
            ):
                continue
            message = self._mistake(scope, step, loop, test)
            if message is None:
                continue
            reported.add(id(test.node))
            if test.where is not None:
                self.report_at(test.where, test.node, message)
            else:
                self.report(test.node, message, statement=condition)

    def _step_test(self, scope: Scope, step: CallSite, loop: cst.CSTNode
                   ) -> tuple[cst.If, _StepTest] | None:
        """The `if` between the loop and the step whose test is a modulo condition, read
        through `not` and a name assigned in the loop."""
        for ancestor in reversed(step.ancestors_below(loop)):
            if not isinstance(ancestor, cst.If):
                continue
            expr, negated, where = ancestor.test, False, None
            for _ in range(3):
                if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
                    expr, negated = expr.expression, not negated
                elif isinstance(expr, cst.Name) and where is None:
                    assigned = scope.assigned(expr.value, step.order)
                    if not assigned or assigned[-1].value is None or not (
                            assigned[-1].site.inside(loop)):
                        break
                    expr, where = assigned[-1].value, assigned[-1].site
                else:
                    break
            test = _residue_test(expr, negated, where)
            if test is not None:
                return ancestor, test
        return None

    def _mistake(self, scope: Scope, step: CallSite, loop: cst.CSTNode,
                 test: _StepTest) -> str | None:
        counter = source_of(test.modulo.left).strip()
        steps = source_of(test.modulo.right).strip()
        optimizer = source_of(cast(cst.Attribute, step.node.func).value)
        optimizer = f"{optimizer}.step({source_of(step.node.args[0].value)})" if (
            step.node.args and "scaler" in last_segment(optimizer)) else f"{optimizer}.step()"
        zero_based = _is_zero(test.residue) and isinstance(test.modulo.left, cst.Name) and (
            self._counts_from_zero(scope, test.modulo.left.value, loop, step.order))
        if not test.on_match:
            residue = source_of(test.residue).strip() if test.residue is not None else "0"
            instead = (f"({counter} + 1) % {steps} == 0" if zero_based
                       else f"{counter} % {steps} == {residue}")
            return (f"`{optimizer}` runs when `{counter} % {steps}` is not {residue}: on "
                    f"every iteration but one in `{steps}`, so almost every update sees a "
                    f"single micro-batch instead of `{steps}` accumulated ones; the condition "
                    f"is inverted, step when `{instead}`")
        changed = self._changing(scope, test.modulo.right, loop)
        if changed is not None:
            return (f"`{steps}` is recomputed in this loop from {changed}, so "
                    f"`{counter} % {steps} == 0` jumps between residues and the windows come "
                    f"out of irregular lengths, some of a single micro-batch; step when "
                    f"`{steps}` batches have passed since the last step (`{counter} - "
                    f"last_step >= {steps}`)")
        if zero_based:
            return (f"`{counter}` counts from 0, so `{counter} % {steps} == 0` runs "
                    f"`{optimizer}` after the first micro-batch alone, and every window after "
                    f"it is shifted by one; step when `({counter} + 1) % {steps} == 0`")
        return None

    def _changing(self, scope: Scope, divisor: cst.BaseExpression,
                  loop: cst.CSTNode) -> str | None:
        """The names that change each iteration (assigned in the loop) from which `divisor`
        is reassigned in the loop, for a message."""
        name = dotted_name(divisor)
        if name is None:
            return None
        in_loop = [a for a in scope.assignments if a.site.inside(loop)]
        changing = {a.target for a in in_loop} | {
            a.target for a in scope.assignments if a.site.node is loop}
        for assignment in in_loop:
            if assignment.target != name or assignment.value is None:
                continue
            sources = sorted(names_in(assignment.value) & (changing - {name}))
            if sources:
                return ", ".join(f"`{source}`" for source in sources)
        return None

    def _counts_from_zero(self, scope: Scope, name: str, loop: cst.CSTNode,
                          before: int) -> bool:
        """`name` is the loop's index counting from 0 (`for i, b in enumerate(loader)`,
        `for i in range(n)`), not reassigned in the loop before `before`."""
        if not isinstance(loop, cst.For) or any(
                a.target == name and a.site.inside(loop) and a.site.order < before
                for a in scope.assignments) or any(
                isinstance(s.node, cst.AugAssign) and dotted_name(s.node.target) == name
                and s.inside(loop) and s.order < before for s in scope.sites):
            return False
        iterator = loop.iter
        if not isinstance(iterator, cst.Call) or not isinstance(iterator.func, cst.Name):
            return False
        args = iterator.args
        if iterator.func.value == "enumerate" and isinstance(loop.target, cst.Tuple):
            first = loop.target.elements[0].value
            start = argument(iterator, "start", 1)
            return (isinstance(first, cst.Name) and first.value == name
                    and (start is None or _is_zero(start.value)))
        if iterator.func.value == "range" and isinstance(loop.target, cst.Name):
            return loop.target.value == name and (
                len(args) == 1 or len(args) >= 2 and _is_zero(args[0].value))
        return False


# -- ML321 --------------------------------------------------------------------------------------

# callees that iterate or measure a loader without taking over its epochs
_LOADER_READERS = frozenset({"enumerate", "iter", "next", "len", "zip", "print", "isinstance"})
# calls that iterate what they are given (`len(loader)` given to a function is not the loader)
_ITERATING = frozenset({"enumerate", "iter", "zip", "tqdm", "islice", "cycle"})


class SamplerEpochNeverSet(_FileRule):
    """A shuffling `DistributedSampler` gives the same order every epoch.

    ## What it does
    Statically, finds a `DistributedSampler` (not given `shuffle=False`) handed to a
    `DataLoader` that a loop over epochs iterates, in a file that never calls `set_epoch`
    on it (nor on `loader.sampler`), unless the loader's name says it evaluates (`val_loader`,
    `eval_dataloader`): reported where the epoch loop iterates the loader (or
    gives it to a function of the file that does), where `set_epoch` belongs. A sampler or
    loader passed to a function of another module (which may set the epoch) and a file that
    calls `set_epoch` on anything that may be the sampler are not flagged. Watching a
    training run (`modellint run`), reports a shuffling `DistributedSampler` iterated in two
    or more epochs with the same epoch number, at the epoch loop.

    ## Why is this bad?
    The sampler seeds its shuffle with the epoch number. Without `sampler.set_epoch(epoch)`
    every epoch sees the batches in the same order on every rank, which weakens the shuffle
    and often costs accuracy.

    ## Example
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=64, sampler=sampler)
        for epoch in range(epochs):
            for x, y in loader:
                ...

    ## Use instead
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=64, sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                ...

    ## What it does not see
    Statically, a loader given to code of another module, which may set the epoch itself: a
    training loop in an `engine.py` (`train_one_epoch(model, data_loader, ...)`, as MAE and DeiT
    write it) or an unknown wrapper (`metric_logger.log_every(data_loader)`). The run pass
    sees those, when the script can run.
    """

    code = "ML321"
    passes = ("static", "run")
    name = "sampler-epoch-never-set"
    needs = frozenset()
    triggers = ("DistributedSampler",)
    _SCRIPT = (
        HEADER + LOADER
        + "from torch.utils.data.distributed import DistributedSampler as DS\n\n\n"
        "def main(dataset, model, optimizer, epochs):\n"
        "{sampler}"
        "    for epoch in range(epochs):\n"
        "{top}"
        "        for x, y in loader:\n"
        "            optimizer.zero_grad()\n"
        "            F.cross_entropy(model(x), y).backward()\n"
        "            optimizer.step()\n"
    )
    _NAMED = ("    sampler = DS(dataset)\n"
              "    loader = DataLoader(dataset, batch_size=64, sampler=sampler)\n")
    _INLINE = "    loader = DataLoader(dataset, batch_size=64, sampler=DS(dataset))\n"
    valid = [
        _SCRIPT.format(sampler=_NAMED, top="        sampler.set_epoch(epoch)\n"),
        _SCRIPT.format(sampler=_INLINE, top="        loader.sampler.set_epoch(epoch)\n"),
        # not shuffling: the order does not depend on the epoch
        _SCRIPT.format(sampler=_NAMED.replace("DS(dataset)", "DS(dataset, shuffle=False)"),
                       top=""),
        # handed to another module's code, which may set the epoch
        _SCRIPT.format(sampler=_NAMED, top="        hooks.before_epoch(loader, epoch)\n"),
        # set through a name that may be it
        _SCRIPT.format(sampler=_NAMED, top="        samplers[0].set_epoch(epoch)\n"),
        # an evaluation loader: the order of its batches does not matter
        _SCRIPT.format(sampler=_NAMED.replace("loader", "val_loader"), top="").replace(
            "in loader", "in val_loader"),
    ]
    invalid = [
        invalid_at(_SCRIPT.format(sampler=_NAMED, top=""), "for x, y in loader"),
        invalid_at(_SCRIPT.format(sampler=_INLINE, top=""), "for x, y in loader"),
        # a sampler class chosen at run time (FixMatch)
        invalid_at(_SCRIPT.format(
            sampler="    make = RandomSampler if rank == -1 else DS\n"
                    "    loader = DataLoader(dataset, batch_size=64, sampler=make(dataset))\n",
            top=""), "for x, y in loader"),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        self._pending = []
        self._factories: set[str] = set()  # names bound to the DistributedSampler class
        # names of shuffling DistributedSamplers; loader name -> its sampler's name (None:
        # built in the loader's call)
        self._samplers: set[str] = set()
        self._loaders: dict[str, str | None] = {}
        self._set_on: list[str | None] = []  # receivers of `set_epoch` calls
        self._passed: list[tuple[str | None, set[str]]] = []  # callee, names given to it
        # name -> where a loop inside another loop first iterates it (or gives it to this
        # file's function): where a new epoch starts, and `set_epoch` belongs
        self._iterated: dict[str, tuple[cst.CSTNode, cst.CSTNode | None]] = {}
        self._given: list[tuple[str, set[str], cst.CSTNode, cst.CSTNode | None]] = []
        self._functions: set[str] = set()
        self._qualified: dict[str, str | None] = {}
        self._headers: set[int] = set()  # the calls of `for` headers around a loader
        self._loops = 0

    def _distributed(self, expr: cst.BaseExpression) -> cst.Call | None:
        """The shuffling `DistributedSampler(...)` call `expr` is (or a branch of it is)."""
        if isinstance(expr, cst.IfExp):
            return self._distributed(expr.body) or self._distributed(expr.orelse)
        if not isinstance(expr, cst.Call):
            return None
        if not (self.context.call_name(expr) in _DISTRIBUTED_SAMPLERS
                or dotted_name(expr.func) in self._factories):
            return None
        shuffle = argument(expr, "shuffle", 3)
        if shuffle is not None and _literal(shuffle.value) == "False":
            return None
        return expr

    def _is_sampler_class(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.IfExp):
            return self._is_sampler_class(expr.body) or self._is_sampler_class(expr.orelse)
        return self.context.qualified_name(expr) in _DISTRIBUTED_SAMPLERS

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.add(node.name.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        name = dotted_name(node.targets[0].target)
        if name is None:
            return
        value = node.value
        if self._is_sampler_class(value):
            self._factories.add(name)
            return
        if self._distributed(value) is not None:
            self._samplers.add(name)
            return
        loader = value.body if isinstance(value, cst.IfExp) else value
        if isinstance(loader, cst.Call) and _is_dataloader(self.context, loader):
            given = _loader_argument(loader, "sampler")
            if given is None:
                return
            if self._distributed(given.value) is not None:
                self._loaders[name] = None
            elif dotted_name(given.value) in self._samplers:
                self._loaders[name] = dotted_name(given.value)

    def visit_For(self, node: cst.For) -> None:
        if self._loops:
            for name in _iterated_names(node.iter):
                self._iterated.setdefault(name, (node.iter, node))
        # the loop's own header runs once, outside the loop
        self._headers.update(id(call) for call in _wrapping_calls(node.iter))
        self._loops += 1

    def leave_For(self, original_node: cst.For) -> None:
        self._loops -= 1

    def visit_While(self, node: cst.While) -> None:
        self._loops += 1

    def leave_While(self, original_node: cst.While) -> None:
        self._loops -= 1

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "set_epoch":
            self._set_on.append(dotted_name(func.value))
            return
        callee = dotted_name(func)
        names = {name for arg in node.args for name in _iterated_names(arg.value)}
        if self._loops and callee is not None and id(node) not in self._headers:
            site = (node, self.context.current_statement)
            if callee in ("iter", "enumerate"):
                for name in names:
                    self._iterated.setdefault(name, site)
            else:
                self._given.append((callee, names, *site))
        self._passed.append((callee, names))
        if callee is not None:
            self._qualified[callee] = self.context.qualified_name(func)

    def leave_Module(self, original_node: cst.Module) -> None:
        for loader, sampler in self._loaders.items():
            if _VISITED.search(last_segment(loader)):
                continue  # evaluation: its order does not matter
            names = {loader} if sampler is None else {loader, sampler}
            site = self._epoch_site(loader)
            if site is None or self._may_set_epoch(loader, sampler) or self._escapes(names):
                continue
            self.report(site[0], f"`{loader}` is iterated epoch after epoch, and nothing calls "
                        f"`set_epoch` on its shuffling `DistributedSampler`: "
                        f"every epoch sees the same order; call "
                        f"`{sampler or loader + '.sampler'}.set_epoch(epoch)` at the start of "
                        f"each epoch", statement=site[1] or site[0])

    def _epoch_site(self, loader: str) -> tuple[cst.CSTNode, cst.CSTNode | None] | None:
        """Where a loop iterates `loader` inside another loop, or gives it to this file's
        function inside a loop."""
        if loader in self._iterated:
            return self._iterated[loader]
        return next(((node, statement) for callee, names, node, statement in self._given
                     if callee in self._functions and loader in names), None)

    def _may_set_epoch(self, loader: str, sampler: str | None) -> bool:
        others = {name for name in self._samplers if name != sampler} | {
            f"{name}.sampler" for name in self._loaders if name != loader}
        return any(receiver not in others for receiver in self._set_on)

    def _escapes(self, names: set[str]) -> bool:
        """Given to code of another module (which may set the epoch)."""
        for callee, given in self._passed:
            if not names & given or callee is None:
                continue
            if callee in _LOADER_READERS or callee in self._functions \
                    or callee in self._factories:
                continue
            qualified = self._qualified.get(callee) or ""
            if qualified in DATALOADERS or qualified.startswith("tqdm"):
                continue
            return True
        return False


def _wrapping_calls(expr: cst.BaseExpression) -> list[cst.Call]:
    """The calls `_iterated_names` looks through (`enumerate(tqdm(loader))`)."""
    if not isinstance(expr, cst.Call) or last_segment(dotted_name(expr.func)) not in _ITERATING:
        return []
    return [expr, *(call for arg in expr.args for call in _wrapping_calls(arg.value))]


def _iterated_names(expr: cst.BaseExpression) -> set[str]:
    """The name or dotted name `expr` is, or the ones an `enumerate(...)`/`zip(...)`/`tqdm(...)`
    around it iterates."""
    name = dotted_name(expr)
    if name is not None:
        return {name}
    if isinstance(expr, cst.Call) and last_segment(dotted_name(expr.func)) in _ITERATING:
        return {n for arg in expr.args for n in _iterated_names(arg.value)}
    return set()


@hookimpl
def modellint_add_rules():
    return [
        DataLoaderStarvesDevice,
        UnseededTraining,
        SyncInInnerLoop,
        EvalNeverReset,
        DdpWithoutDistributedSampler,
        TrainingLoaderNotShuffled,
        DataParallelStateDictPrefix,
        TransferRepeatedEveryStep,
        AccumulationWithoutLossScaling,
        AccumulationStepCondition,
        SamplerEpochNeverSet,
    ]
