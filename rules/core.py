"""Findings the engine itself produces: files that do not parse, internal errors, skipped models.

These are plain rules, not visitors: the engine reports them (`modellint.static.engine`, the
runtime pass) and the registry gives them their documentation, selection and examples. A file
that no enabled visitor would look at is never parsed by LibCST just to find ML000: CPython's
own parse, which the engine runs on every file, tells whether it is Python.
"""

from __future__ import annotations

from modellint.hookspecs import hookimpl
from modellint.rule import INTERNAL_ERROR, NOT_CHECKED, SYNTAX_ERROR, Invalid, Rule, Severity


class SyntaxError_(Rule):
    """A statement that could not be parsed.

    ## What it does
    Reports each statement that is not valid Python on the Python that runs modellint at
    CPython's line and column, with its message (and a file that cannot be decoded). The rest
    of the file is still linted: the failing statement is blanked with text of the same line
    count, so every other statement keeps its position (`modellint.static.recover`; up to 20
    per file, then one last finding for the rest). `async=` given to `.cuda`, `.to`, `.copy_`
    or `.type` (PyTorch 0.3's spelling; `async` is a keyword since Python 3.7) has a safe fix:
    `non_blocking=`, the same argument renamed in PyTorch 0.4. A Python 2 `print "x"` has none:
    the file's other Python 2 meanings (integer `/`, `print x,`) need a port, not a rename.

    ## Why is this bad?
    Python cannot import the file, and the failing statement cannot be checked.

    ## Example
        def forward(self, x:
            return x

        x = x.cuda(async=True)

    ## Use instead
        def forward(self, x):
            return x

        x = x.cuda(non_blocking=True)
    """

    code = SYNTAX_ERROR
    name = "syntax-error"
    passes = ("static",)
    fix = "safe"
    fix_availability = "sometimes"
    valid = ["def forward(self, x):\n    return x\n",
             "x = x.cuda(non_blocking=True)\n"]
    invalid = [Invalid("x = 1\ndef forward(self, x:\n    return x\n", line=2),
               Invalid("import torch\nx = torch.ones(2).cuda(async=True)\n", line=2,
                       fixed="import torch\nx = torch.ones(2).cuda(non_blocking=True)\n")]


class InternalError(Rule):
    """modellint failed on this file.

    ## What it does
    Reports that a rule, or the engine, raised an exception on this file. The finding names the
    rule; `--debug` prints the traceback. The other rules and files are still checked.

    ## Why is this bad?
    Part of the file went unchecked. It is a bug in modellint or a plugin: please report it
    with the file (or a reduced copy).

    ## Example
        (any file on which a rule crashes)

    ## Use instead
        Report the bug; meanwhile `--ignore` the failing rule for that file.
    """

    code = INTERNAL_ERROR
    name = "internal-error"
    passes = ("static", "runtime")


class RuntimeSkipped(Rule):
    """A model could not be built or fed, so the runtime pass skipped it.

    ## What it does
    Says why a model found by the runtime pass was not checked (its constructor needs
    arguments, no example input could be inferred, ...) and shows the
    `[[tool.modellint.runtime.models]]` entry that would let it run.

    ## Why is this bad?
    It is not a mistake in the model (info severity: the exit code does not change), but the
    model went unchecked.

    ## Example
        class Net(nn.Module):
            def __init__(self, width): ...

    ## Use instead
        [[tool.modellint.runtime.models]]
        target = "models.py:Net"
        kwargs = { width = 64 }
        inputs = [[2, 3, 32, 32]]
    """

    code = NOT_CHECKED
    name = "runtime-skipped"
    severity = Severity.INFO
    passes = ("runtime",)


@hookimpl
def modellint_add_rules():
    return [SyntaxError_, InternalError, RuntimeSkipped]
