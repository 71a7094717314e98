"""Runtime checks of the forward passes: ML701 forward failed, ML702 device or dtype
mismatch, ML704 non-finite output, ML705 eval-mode nondeterminism."""

from __future__ import annotations

from modellint.rule import (
    FORWARD,
    OOM,
    REPEAT,
    TRAIN,
    Invalid,
    RuntimeRule,
    describe,
    first_line,
    shape_text,
    short_path,
)

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


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
    needs = frozenset({FORWARD})
    # a model whose worker timed out, crashed or exited in a forward or backward is reported
    # under this code
    reports_stopped = True
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.a = nn.Linear(8, 16)\n        self.b = nn.Linear(16, 2)\n\n"
        "    def forward(self, x):\n        return self.b(self.a(x))\n",
    ]
    invalid = [
        # the second layer expects 32 features and gets 16: reported where it is built
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.a = nn.Linear(8, 16)\n"
                "        self.b = nn.Linear(32, 2)\n\n"
                "    def forward(self, x):\n        return self.b(self.a(x))\n", line=10),
    ]

    def check(self, run) -> None:
        for failure in run.failures:
            if run.explained_elsewhere(failure, self):
                continue
            path, tracer, exc = failure.path, failure.tracer, failure.exc
            module = run.submodule(path)
            site_loc = failure.site_location
            label = f"`{path}` ({describe(module)})" if path else f"`{run.label}`"
            shapes = tracer.innermost_shapes() if tracer is not None else []
            given = (" given " + ", ".join(shape_text(s) for s in shapes)) if shapes else ""
            if isinstance(exc, SystemExit):
                what = f"called sys.exit({exc.code!r})"
            elif isinstance(exc, MemoryError) or OOM.search(str(exc)):
                what = f"ran out of memory: {first_line(exc)}"
            else:
                what = first_line(exc)
            if path:
                loc, note = run.report_location(path)
            else:
                loc, note = site_loc or run.root_location, ""
            at = ""
            if site_loc and site_loc != loc:
                at = f", raised at {short_path(site_loc[0])}:{site_loc[1]}"
            run.report(self.code, f"forward failed in {label}{given}: {what}{note}{at}"
                       f"{run.inferred_note()}", loc)


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
    needs = frozenset({FORWARD})
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.body = nn.Linear(8, 8)\n        self.head = nn.Linear(8, 2)\n\n"
        "    def forward(self, x):\n        return self.head(self.body(x))\n",
    ]
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.body = nn.Linear(8, 8)\n"
                "        self.head = nn.Linear(8, 2).double()\n\n"
                "    def forward(self, x):\n        return self.head(self.body(x))\n",
                line=10),
    ]

    def explains(self, run, failure) -> bool:
        return failure.mismatch is not None

    def check(self, run) -> None:
        for failure in run.failures:
            if failure.mismatch is not None:
                self._report(run, failure.mismatch, failure.exc)
        for tracer in (run.first, run.train):
            if tracer is not None and tracer.mismatches:
                self._report(run, tracer.mismatches[0])

    def _report(self, run, mismatch, failed=None) -> None:
        module = run.submodule(mismatch.path)
        loc, note = run.report_location(mismatch.path)
        what = "on device" if mismatch.what == "device" else "of dtype"
        tail = f" and failed ({first_line(failed)})" if failed is not None else ""
        run.report(self.code, f"`{mismatch.path or run.name}` ({describe(module)}) got input "
                   f"{what} {mismatch.got} while its parameters are {what} "
                   f"{mismatch.expected}{tail}; move or cast the module or the input"
                   f"{note}", loc)


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
    passes = ("runtime", "run")  # `modellint run`: the first non-finite loss or gradient
    needs = frozenset({FORWARD, TRAIN})
    numeric = True
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        return torch.log(self.fc(x).abs() + 1)\n",
    ]
    invalid = [
        Invalid(HEADER + "class Log(nn.Module):\n    def forward(self, x):\n"
                "        return torch.log(x - 10)\n\n\n"
                "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.fc = nn.Linear(4, 4)\n        self.log = Log()\n\n"
                "    def forward(self, x):\n        return self.log(self.fc(x))\n", line=15),
    ]

    def check(self, run) -> None:
        for tracer, kind in ((run.first, "an eval forward"), (run.train, "a train-mode forward")):
            if tracer is None or tracer.non_finite is None:
                continue
            path, what = tracer.non_finite
            module = run.submodule(path)
            loc, note = run.report_location(path)
            run.report(self.code, f"`{path or run.name}` ({describe(module)}) is the first "
                       f"module whose output holds {what} in {kind} on input "
                       f"{run.inputs}{note}", loc)
            return


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
    needs = frozenset({FORWARD, REPEAT})
    numeric = True
    valid = [
        HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(8, 8)\n\n    def forward(self, x):\n"
        "        return F.dropout(self.fc(x), p=0.5, training=self.training)\n",
    ]
    invalid = [
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.fc = nn.Linear(8, 8)\n"
                "        self.out = nn.Linear(8, 2)\n\n    def forward(self, x):\n"
                "        x = F.dropout(self.fc(x), p=0.5)\n        return self.out(x)\n",
                # the first module whose input differs, where forward calls it
                line=14),
    ]

    def check(self, run) -> None:
        if run.repeat is None or run.rebuilt_in_forward():
            return  # a module built in forward explains differing outputs
        if run.repeat.first_difference is None:
            return
        kind, path, site = run.repeat.first_difference
        module = run.submodule(path)
        if kind == "out":
            loc, note = run.report_location(path)
            where = f"first at the output of `{path or run.name}` ({describe(module)})"
        else:
            loc, note = ((site[0], site[1]), "") if site else run.report_location(path)
            where = (f"first at the input of `{path}` ({describe(module)}), computed in "
                     f"`{site[2] if site else 'forward'}`")
        run.report(self.code, f"two eval-mode forwards on one input disagree, {where}: "
                   f"something random (dropout without `training=self.training`, "
                   f"sampling) stays on in eval mode{note}", loc)
