"""Runtime checks of the train-mode forward and backward: ML703 unused parameters, ML706
gradients at initialisation."""

from __future__ import annotations

import math
from collections import defaultdict

from modellint.rule import FORWARD, TRAIN, Invalid, RuntimeRule, Severity, describe

HEADER = "import torch\nimport torch.nn as nn\n\n\n"


def human(n: float) -> str:
    for unit in ("", "K", "M", "B", "T"):
        if abs(n) < 1000:
            return f"{n:.3g}{unit}"
        n /= 1000
    return f"{n:.3g}P"



def _norm(grad) -> float:
    """The L2 norm of a gradient, as a float: computed in its own precision (float32 for
    half-precision ones), and again in float64 where float32 could not hold it (a norm that
    underflowed to exactly zero from non-zero values, or overflowed)."""
    import torch

    if grad.dtype != torch.float64:
        norm = float(torch.linalg.vector_norm(grad, dtype=torch.float32)
                     if grad.is_floating_point() and grad.element_size() < 4
                     else torch.linalg.vector_norm(grad))
        if (norm != 0.0 or not bool(grad.any())) and math.isfinite(norm):
            return norm
    return float(torch.linalg.vector_norm(grad.double()))

class UnusedParameters(RuntimeRule):
    """Parameters that got no gradient in a forward and backward pass.

    ## What it does
    Runs a train-mode forward and a backward over all floating outputs and reports parameters
    that require a gradient but got none, at the line that created the owning module (a module
    never called is named as such). Tied weights count as used.

    ## Why is this bad?
    The optimizer never updates those parameters; under `DistributedDataParallel` the run
    fails with "Expected to have finished reduction in the prior iteration". Usually a layer
    was built but forgotten in `forward`.

    ## Example
        self.aux = nn.Linear(8, 8)  # never used in forward

    ## Use instead
        # remove the layer, use it in forward, or freeze it with requires_grad_(False)
    """

    code = "ML703"
    name = "unused-parameters"
    severity = Severity.WARNING
    needs = frozenset({TRAIN})
    numeric = True
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(8, 8)\n        self.frozen = nn.Linear(8, 8)\n"
        "        self.frozen.requires_grad_(False)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n",
    ]
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(8, 8)\n"
                "        self.aux = nn.Linear(8, 8)\n\n"
                "    def forward(self, x):\n        return self.fc(x)\n", line=9),
    ]

    def check(self, run) -> None:
        if run.stand_in_error is not None:
            run.note(f"`{run.display_name}`'s forward returns no tensor and a backward "
                     f"from the outputs of the modules it calls failed ({run.stand_in_error}): "
                     f"unused parameters ({self.code}) were not looked for")
            return
        if run.train is None:
            return
        if run.stand_in is not None:
            # gradients of intermediate outputs say nothing of their scale at the output:
            # only the unused parameters are looked for
            run.note(f"`{run.display_name}`'s forward returns no tensor: unused parameters "
                     f"({self.code}) were found from the outputs of the modules it calls, and "
                     f"gradient scales ({GradientAtInit.code}) were not checked")
        self._check_unused(run, run.stand_in or run.train)

    def _check_unused(self, run, tracer) -> None:
        model = run.model
        unused: dict[str, list[str]] = defaultdict(list)
        for name, param in model.named_parameters():
            if param.requires_grad and param.grad is None:
                owner = name.rpartition(".")[0]
                unused[owner].append(name)
        if not unused:
            return
        # collapse to the highest module whose trainable parameters all got no gradient
        all_unused = {}
        unused_names = {n for ns in unused.values() for n in ns}
        for path, module in model.named_modules():
            names = [f"{path}.{n}" if path else n for n, p in module.named_parameters()
                     if p.requires_grad]
            if names:
                all_unused[path] = all(n in unused_names for n in names)
        reported: list[str] = []
        for owner in sorted(unused):
            top = owner
            parts = owner.split(".") if owner else []
            for depth in range(len(parts) - 1, 0, -1):
                candidate = ".".join(parts[:depth])
                if all_unused.get(candidate):
                    top = candidate
            if not top and parts:
                top = owner
            if any(top == r or top.startswith(r + ".") for r in reported if r):
                continue
            reported.append(top)
        for top in reported:
            module = run.submodule(top)
            loc, note = run.report_location(top)
            count = sum(p.numel() for p in module.parameters() if p.requires_grad)
            if top and top not in tracer.called:
                run.report(self.code, f"`{top}` ({describe(module)}) is never called in a "
                           f"forward on input {run.inputs}: its {human(count)} "
                           f"parameters get no gradient; remove it or use it{note}", loc)
            else:
                names = [n.rpartition(".")[2] for n in unused[top]] if top in unused else []
                which = ", ".join(f"`{n}`" for n in names) or "its parameters"
                run.report(self.code, f"{which} of `{top or run.name}` ({describe(module)}) "
                           f"got no gradient in a forward+backward on input "
                           f"{run.inputs}; freeze them or use them{note}", loc)


class GradientAtInit(RuntimeRule):
    """Per-module gradient norms that vanish or explode at initialisation.

    ## What it does
    After one forward and backward at initialisation, reports modules that were used but got
    an exactly zero gradient, and a module whose gradient norm is orders of magnitude (10⁴×)
    above the median over modules. Information only: it does not change the exit code.

    ## Why is this bad?
    A zero gradient at the start (a dead activation, layers zeroed so that nothing flows
    back) means those layers cannot learn; an exploding one means training will diverge
    unless the initialisation or scale is fixed. A layer zero-initialised on purpose that
    learns from the first step (timm's `zero_init_last`, a zero-initialised head or "zero
    convolution") stalls the layers before it for one step only: that is not reported.

    ## Example
        def forward(self, x):
            return self.c(torch.relu(self.a(x) - 1e3))  # every unit dead

    ## Use instead
        def forward(self, x):
            return self.c(torch.relu(self.a(x)))
    """

    code = "ML706"
    name = "gradient-at-init"
    severity = Severity.INFO
    needs = frozenset({FORWARD, TRAIN})
    numeric = True
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.a = nn.Linear(6, 6)\n        self.b = nn.Linear(6, 6)\n"
        "        self.c = nn.Linear(6, 2)\n\n"
        "    def forward(self, x):\n        return self.c(torch.tanh(self.b(torch.tanh(self.a(x)))))\n",
        # a zero-initialised layer that learns at once (its own gradient is not zero)
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.a = nn.Linear(6, 6)\n"
        "        self.gate = nn.Linear(6, 6)\n        nn.init.zeros_(self.gate.weight)\n"
        "        nn.init.zeros_(self.gate.bias)\n        self.c = nn.Linear(6, 2)\n\n"
        "    def forward(self, x):\n"
        "        return self.c(self.gate(self.a(x)))\n",
    ]
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.a = nn.Linear(6, 6)\n"
                "        self.c = nn.Linear(6, 2)\n\n"
                "    def forward(self, x):\n"
                "        return self.c(torch.relu(self.a(x) - 1e3))\n", line=8),
    ]

    def check(self, run) -> None:
        if run.train is None or run.stand_in is not None:
            return
        model, called = run.model, run.train.called
        norms: list[tuple[str, float]] = []
        for path, module in model.named_modules():
            grads = [p.grad for p in module.parameters(recurse=False)
                     if p.requires_grad and p.grad is not None]
            if not grads or path not in called:
                continue
            norm = math.sqrt(sum(_norm(g) ** 2 for g in grads))
            norms.append((path, norm))
        if len(norms) < 2:
            return
        zero = [p for p, n in norms if n == 0.0]
        if zero and any(_zeroed_and_learning(module) for path, module in model.named_modules()
                        if path in called):
            zero = []  # a deliberate zero-init: the layers before it stall for one step only
        finite = sorted(n for _, n in norms if n > 0 and math.isfinite(n))
        if zero and len(zero) < len(norms):
            path = zero[0]
            module = run.submodule(path)
            loc, note = run.report_location(path)
            more = f" (and {len(zero) - 1} more modules)" if len(zero) > 1 else ""
            run.report(self.code, f"the gradient of `{path or run.name}` ({describe(module)}) "
                       f"is exactly zero at initialisation{more}: nothing reaches it from the "
                       f"output; check its initialisation and activations{note}", loc)
        if len(finite) >= 3:
            median = finite[len(finite) // 2]
            # the module nearest the output (last to run) sets the scale gradients start
            # from; a median alone is fooled by layers scaled down on purpose at
            # initialisation (ConvNeXt's layer scale of 1e-6, zero-initialised residual ends)
            first = run.first
            order = {row.path: row.index for row in first.rows} if first is not None else {}
            ran = [(order[p], n) for p, n in norms if p in order and n > 0 and math.isfinite(n)]
            reference = max(median, max(ran)[1] if ran else 0.0)
            path, worst = max(norms, key=lambda pn: pn[1] if math.isfinite(pn[1]) else 0.0)
            if worst > 1e4 * reference and worst > 1.0:
                module = run.submodule(path)
                loc, note = run.report_location(path)
                run.report(self.code, f"the gradient norm of `{path or run.name}` "
                           f"({describe(module)}) is "
                           f"{worst:.3g} at initialisation, {worst / reference:.0f}× the "
                           f"norm near the output ({reference:.3g}): it explodes; check its "
                           f"initialisation and scale{note}", loc)


def _zeroed_and_learning(module) -> bool:
    """Whether `module` has a weight that is exactly zero and a gradient that is not: a layer
    zero-initialised on purpose, which moves off zero at the first step."""
    weight = getattr(module, "weight", None)
    if weight is None or not getattr(weight, "requires_grad", False) or weight.grad is None:
        return False
    return bool(weight.count_nonzero() == 0) and bool(weight.grad.count_nonzero() > 0)
