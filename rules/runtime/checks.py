"""Runtime checks (ML505, ML7xx): mistakes only a built, traced model shows.

These rules are found by `modellint check --runtime`, `modellint.check_model()` and the pytest
plugin; the engine that builds and traces models is `modellint.runtime`. A rule class here is
the mistake's documentation and its place in the catalog (code, name, severity).
"""

from __future__ import annotations

from modellint.hookspecs import hookimpl
from modellint.rule import RuntimeRule, Severity


class StateNotInStateDict(RuntimeRule):
    """A fresh instance loaded from `state_dict()` computes something else.

    ## What it does
    Builds a second instance of the model, loads the first one's `state_dict()` with
    `strict=True`, and compares eval-mode outputs on the same input. When they differ it names
    the attribute that differs between the instances (or the first module whose output does).

    ## Why is this bad?
    State kept in plain Python attributes or unregistered tensors is not saved by
    `torch.save(model.state_dict())`: a reloaded checkpoint silently computes something else.

    ## Example
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.temperature = 1.0 + float(torch.rand(()))

    ## Use instead
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.register_buffer("temperature", 1.0 + torch.rand(()))
    """

    code = "ML505"
    name = "state-not-in-state-dict"


class ForwardFailed(RuntimeRule):
    """The forward pass raised, hung or crashed.

    ## What it does
    Runs the model on its configured (or inferred) input and, when the forward fails, names the
    innermost module that was running, its constructor arguments and input shapes, the
    exception's first line, and reports it at the source line that created that sub-module.
    A model that hangs past the timeout, calls `sys.exit`/`os._exit`, segfaults or runs out of
    memory is reported the same way, with the module running when it was stopped.

    ## Why is this bad?
    The model cannot run as written. A shape traceback from deep inside `torch.nn.functional`
    rarely says which of your layers was built with the wrong size.

    ## Example
        self.stage1 = Block(16)
        self.stage2 = Block(32)  # gets 16 channels from stage1

    ## Use instead
        self.stage1 = Block(16)
        self.stage2 = Block(16)
    """

    code = "ML701"
    name = "forward-failed"


class DeviceMismatch(RuntimeRule):
    """A module got input on another device, or of another floating dtype, than its parameters.

    ## What it does
    A forward pre-hook compares every module's input tensors with the module's own parameters
    and reports the first module whose input lives on another device or has another floating
    dtype.

    ## Why is this bad?
    The forward fails ("expected all tensors to be on the same device", "mat1 and mat2 must
    have the same dtype"), or silently runs a layer at the wrong precision.

    ## Example
        self.head = nn.Linear(8, 2).double()

    ## Use instead
        self.head = nn.Linear(8, 2)
    """

    code = "ML702"
    name = "device-mismatch"


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


class NonFiniteOutput(RuntimeRule):
    """The first module, in execution order, whose output holds NaN or Inf.

    ## What it does
    Checks every module's output during the traced forward passes and reports the first one
    whose output is not finite, at the line that created it.

    ## Why is this bad?
    NaN spreads through everything after it; the loss becomes NaN and training is lost. The
    first module that produced it is where to look (a `log` of negative values, a division by
    zero, an overflow in half precision).

    ## Example
        return torch.log(x)  # x may be negative

    ## Use instead
        return torch.log(x.clamp_min(1e-6))
    """

    code = "ML704"
    name = "non-finite-output"


class EvalNondeterministic(RuntimeRule):
    """Two eval-mode forwards on one input disagree.

    ## What it does
    Runs the model twice in eval mode on the same input and reports the first module whose
    output (or input, when the randomness is in the parent's `forward`) differs.

    ## Why is this bad?
    Evaluation should be repeatable. The usual cause is dropout that stays on in eval mode:
    `F.dropout(x, p)` without `training=self.training`, so validation numbers are noisy and
    lower than they should be.

    ## Example
        x = F.dropout(self.fc(x), p=0.5)

    ## Use instead
        x = F.dropout(self.fc(x), p=0.5, training=self.training)
    """

    code = "ML705"
    name = "eval-nondeterministic"


class GradientAtInit(RuntimeRule):
    """Per-module gradient norms that vanish or explode at initialisation.

    ## What it does
    After one forward and backward at initialisation, reports modules that were used but got
    an exactly zero gradient, and a module whose gradient norm is orders of magnitude (10⁴×)
    above the median over modules. Information only: it does not change the exit code.

    ## Why is this bad?
    A zero gradient at the start (a zero-initialised layer in the path, a dead activation)
    means those layers cannot learn; an exploding one means training will diverge unless the
    initialisation or scale is fixed.

    ## Example
        self.gate = nn.Linear(6, 6)
        nn.init.zeros_(self.gate.weight)  # nothing flows back through it

    ## Use instead
        self.gate = nn.Linear(6, 6)  # default initialisation
    """

    code = "ML706"
    name = "gradient-at-init"
    severity = Severity.INFO


class MemoryExceedsTarget(RuntimeRule):
    """Training the model would need more device memory than `target-gpu-memory`.

    ## What it does
    When `target-gpu-memory` is configured (for example `"80GB"`), runs one train-mode forward
    on the model's input (on `meta` too, where nothing is allocated) and measures every tensor
    autograd saves for the backward pass. Parameters and buffers, their gradients, AdamW's two
    state tensors per trainable parameter and those traced activations are added up; when the
    sum exceeds the target, it reports the parts and the module with the largest activations.
    `modellint trace TARGET --memory` prints the same breakdown for another optimizer, dtype or
    batch size.

    ## Why is this bad?
    The training run will fail with an out-of-memory error on the target device, usually
    after the data pipeline, the launcher and the first checkpoint have already cost time.
    The sum is a lower bound: temporary buffers and the allocator come on top.

    ## Example
        # pyproject.toml: target-gpu-memory = "80GB"
        [[tool.modellint.runtime.models]]
        target = "model.py:Transformer"
        inputs = [{ shape = [64, 4096], dtype = "int64", low = 0, high = 32000 }]

    ## Use instead
        # a batch that fits (accumulate gradients to keep the effective batch size)
        inputs = [{ shape = [8, 4096], dtype = "int64", low = 0, high = 32000 }]
    """

    code = "ML707"
    name = "memory-exceeds-target"


@hookimpl
def modellint_add_rules():
    return [StateNotInStateDict, ForwardFailed, DeviceMismatch, UnusedParameters,
            NonFiniteOutput, EvalNondeterministic, GradientAtInit, MemoryExceedsTarget]
