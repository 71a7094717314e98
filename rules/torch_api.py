"""Torch API hygiene: deprecated and removed APIs (ML905; TorchScript is ML909, off by default),
torchvision's legacy `pretrained=`
(ML906), checkpoint's `use_reentrant` (ML907), the `require_grad` typo (ML908), redundant
no-grad blocks (ML316), `zero_grad(set_to_none=False)` (ML317) and private helpers with public
twins (ML318). The data tables live in `deprecated_apis.py`."""

from __future__ import annotations

import re
from typing import ClassVar

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    INFERENCE_MODE,
    NO_GRAD,
    SCHEDULER,
    FileContext,
    Fix,
    Invalid,
    LazyPattern,
    Severity,
    StaticRule,
    Valid,
    argument,
    canonical,
    dotted_name,
    has_star_args,
    positional_args,
    source_of,
    visit,
)
from modellint.rules.deprecated_apis import (
    DEPRECATED_APIS,
    LEGACY_REDUCTION,
    LEGACY_REDUCTION_LOSSES,
    PRIVATE_TWINS,
    SCHEDULER_STEP_EPOCH,
    STEP_TAKES_OTHER_ARGUMENTS,
    TORCHSCRIPT_APIS,
    TORCHVISION_LEGACY_WEIGHTS,
    DeprecatedApi,
)


def version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def target_version(context: FileContext) -> tuple[int, ...]:
    return tuple(context.options.get("target_torch_version") or (2, 6))


def reference(context: FileContext, qualified: str) -> cst.BaseExpression | None:
    """An expression naming `qualified` under this file's imports (`th.linalg.solve` after
    `import torch as th`), or None when nothing imported reaches it."""
    best: tuple[str, str] | None = None
    for local, target in context.imports.aliases.items():
        if (qualified == target or qualified.startswith(target + ".")) and (
            best is None or len(target) > len(best[1])
        ):
            best = (local, target)
    if best is None:
        return None
    local, target = best
    expr: cst.BaseExpression = cst.Name(local)
    for part in qualified[len(target) :].split(".")[1:]:
        expr = cst.Attribute(expr, cst.Name(part))
    return expr


def _parse_arg(text: str) -> cst.Arg:
    if "=" in text:
        key, _, value = text.partition("=")
        return cst.Arg(cst.parse_expression(value), keyword=cst.Name(key),
                       equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    return cst.Arg(cst.parse_expression(text))


def _when(api: DeprecatedApi, target: tuple[int, ...]) -> tuple[Severity, str] | None:
    """(severity, "is deprecated since torch X ...") of a table entry on the target torch, or
    None when the target predates the deprecation."""
    if api.removed is not None and target >= api.removed:
        if api.removed == api.deprecated:
            return Severity.ERROR, f"was removed in torch {version_text(api.removed)}"
        return Severity.ERROR, (f"was removed in torch {version_text(api.removed)} (deprecated "
                                f"since {version_text(api.deprecated)})")
    if target >= api.deprecated:
        when = f"is deprecated since torch {version_text(api.deprecated)}"
        if api.removed is not None:
            when += f" and removed in {version_text(api.removed)}"
        return Severity.WARNING, when
    return None


_LITERAL_FLAGS = {"True": True, "False": False, "None": None}


def _legacy_reduction(size_average: cst.BaseExpression | None,
                      reduce: cst.BaseExpression | None) -> tuple[str, bool]:
    """The `reduction=` value torch derives from `size_average`/`reduce` (torch.nn._reduction.
    legacy_get_string: a missing or None flag counts as True), and whether it is exact: it is
    only when both are absent or literal; otherwise a conditional expression on their truth,
    which differs from torch's mapping when a variable holds None."""
    def flag(expr: cst.BaseExpression | None) -> bool | str:
        if expr is None:
            return True
        if isinstance(expr, cst.Name) and expr.value in _LITERAL_FLAGS:
            value = _LITERAL_FLAGS[expr.value]
            return True if value is None else value
        return source_of(expr)

    average, reduced = flag(size_average), flag(reduce)
    if average is True:
        inner = '"mean"'
    elif average is False:
        inner = '"sum"'
    else:
        inner = f'"mean" if {average} else "sum"'
    if reduced is True:
        value = inner
    elif reduced is False:
        value = '"none"'
    else:
        value = f'({inner}) if {reduced} else "none"' if " if " in inner else (
            f'{inner} if {reduced} else "none"')
    exact = all(isinstance(each, bool) for each in (average, reduced))
    return value, exact


def _reduction_fix(call: cst.Call, legacy: dict[str, cst.Arg]) -> Fix:
    """Replace `size_average=`/`reduce=` (and a `reduction=` they override) by the
    `reduction=` they stand for, where the first legacy argument was."""
    value, exact = _legacy_reduction(
        legacy["size_average"].value if "size_average" in legacy else None,
        legacy["reduce"].value if "reduce" in legacy else None,
    )
    first = next(arg for arg in call.args if any(arg is each for each in legacy.values()))
    dropped = [*legacy.values()]
    existing = argument(call, "reduction")
    if existing is not None:
        dropped.append(existing)
    args = []
    for arg in call.args:
        if arg is first:
            args.append(arg.with_changes(keyword=cst.Name("reduction"),
                                         value=cst.parse_expression(value)))
        elif not any(arg is each for each in dropped):
            args.append(arg)
    if call.args[-1] is not first and any(call.args[-1] is each for each in dropped):
        args[-1] = args[-1].with_changes(comma=call.args[-1].comma)
    return Fix(((call, call.with_changes(args=args)),), f"pass `reduction={value}`", safe=exact)


# an `if` test that asks which torch is installed: `hasattr(torch, "compiler")`,
# `torch.__version__ >= ...`, `is_torch_greater_or_equal(...)`, `_TORCH_GE_2_4`
_COMPAT_TEST = LazyPattern(r"hasattr|getattr|version|is_torch|TORCH_|available", re.IGNORECASE)


class _ApiTableRule(StaticRule):
    """Shared logic of ML905 and ML318: a table of qualified names, reported where a module
    attribute spells one (`torch.solve(...)`, `@torch.cuda.amp.custom_fwd`) and where a
    `from ... import` statement imports one (uses of the imported name are not reported again).

    Compatibility shims are correct code and not reported: a use inside an `except` handler
    (`try: from torch.func import vmap` / `except ImportError: from functorch import vmap`),
    under an `if` that tests what torch provides (`hasattr`, a version), or in a function that
    also uses the replacement (`norm = nn.utils.weight_norm` / `if hasattr(...):
    norm = nn.utils.parametrizations.weight_norm`).
    """

    def describe(self, spelled: str, qualified: str) -> tuple[Severity, str] | None:
        raise NotImplementedError

    def fix_kind(self, qualified: str) -> tuple[str | None, str, str]:
        """(fix kind, replacement, extra argument) of a table entry."""
        raise NotImplementedError

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._handled: set[int] = set()
        self._decorators: set[int] = set()
        self._except_depth = 0

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:  # noqa: ARG002
        self._except_depth += 1

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:  # noqa: ARG002
        self._except_depth -= 1

    def compat_shim(self, qualified: str) -> bool:
        """Whether this use of `qualified` is a fallback for torch versions without its
        replacement."""
        if self._except_depth:
            return True
        for statement in self.context.statement_stack:
            if isinstance(statement, cst.If) and _COMPAT_TEST.search(source_of(statement.test)):
                return True
        replacement = self.fix_kind(qualified)[1]
        scope = self.context.current_function
        if scope is None:
            return False
        found = False
        context = self.context

        class Finder(cst.CSTVisitor):
            def visit_Attribute(self, node: cst.Attribute) -> bool:
                nonlocal found
                if context.qualified_name(node) == replacement:
                    found = True
                return not found

            def visit_Name(self, node: cst.Name) -> None:
                nonlocal found
                if context.qualified_name(node) == replacement:
                    found = True

            def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
                nonlocal found
                if (dotted_name(node.name) or "") == replacement:
                    found = True

            def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
                nonlocal found
                module = dotted_name(node.module) if node.module is not None else None
                if module and not isinstance(node.names, cst.ImportStar) and any(
                    f"{module}.{dotted_name(a.name)}" == replacement for a in node.names
                ):
                    found = True

        visit(scope, Finder())
        return found

    # -- imports --------------------------------------------------------------------------
    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or isinstance(node.names, cst.ImportStar) or node.module is None:
            return
        module = dotted_name(node.module)
        if module is None:
            return
        found = []
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            qualified = canonical(f"{module}.{alias.name.value}")
            described = self.describe(f"{module}.{alias.name.value}", qualified)
            if described is not None and not self.compat_shim(qualified):
                found.append((alias, qualified, described))
        if not found:
            return
        fix = self._import_fix(node, found)
        for alias, _, (severity, message) in found:
            self.report(alias, message, severity=severity, fix=fix)

    def _import_fix(self, node: cst.ImportFrom, found: list) -> Fix | None:
        if isinstance(node.names, cst.ImportStar) or len(found) != len(node.names):
            return None
        modules = set()
        names = []
        for alias, qualified, _ in found:
            kind, replacement, _ = self.fix_kind(qualified)
            if kind != "rename":
                return None
            new_module, _, new_name = replacement.rpartition(".")
            modules.add(new_module)
            local = alias.asname.name.value if alias.asname is not None else alias.name.value
            names.append(cst.ImportAlias(
                cst.Name(new_name),
                asname=None if local == new_name else cst.AsName(cst.Name(local)),
            ))
        if len(modules) != 1:
            return None
        new = node.with_changes(
            module=cst.parse_expression(modules.pop()), names=names, lpar=None, rpar=None
        )
        return Fix(((node, new),), "import the replacement", safe=True)

    # -- uses -----------------------------------------------------------------------------
    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._decorators.add(id(node.decorator))

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Attribute):
            return  # a bare name was reported at its import
        qualified = self.context.qualified_name(node.func)
        if qualified is None:
            return
        described = self.describe(dotted_name(node.func) or qualified, qualified)
        if described is None:
            return
        self._handled.add(id(node.func))
        if self.compat_shim(qualified):
            return
        severity, message = described
        self.report(node, message, severity=severity, fix=self._call_fix(node, qualified))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) in self._handled:
            return
        qualified = self.context.qualified_name(node)
        if qualified is None:
            return
        described = self.describe(dotted_name(node) or qualified, qualified)
        if described is None or self.compat_shim(qualified):
            return
        severity, message = described
        self.report(node, message, severity=severity, fix=self._reference_fix(node, qualified))

    def _call_fix(self, call: cst.Call, qualified: str) -> Fix | None:
        kind, replacement, extra = self.fix_kind(qualified)
        if kind is None:
            return None
        func = reference(self.context, replacement)
        if func is None:
            return None
        positional = positional_args(call)
        if kind == "rename":
            return Fix(((call.func, func),), f"use `{replacement}`", safe=True)
        if kind == "rename-unsafe":
            return Fix(((call.func, func),), f"use `{replacement}`", safe=False)
        if kind == "rename-one-arg":
            if len(call.args) == 1 and len(positional) == 1:
                return Fix(((call.func, func),), f"use `{replacement}`", safe=True)
            return None
        if has_star_args(call):
            return None
        if kind == "add-arg":
            if positional:
                return None
            arg = _parse_arg(extra)
            args = [*call.args, arg] if arg.keyword is not None else [arg, *call.args]
            return Fix(((call, call.with_changes(func=func, args=args)),),
                       f"use `{replacement}({extra}, ...)`", safe=False)
        if kind == "pack-list" and len(positional) == len(call.args) and positional:
            packed = cst.List([cst.Element(a.value) for a in positional])
            return Fix(((call, call.with_changes(func=func, args=[cst.Arg(packed)])),),
                       f"use `{replacement}([...])`", safe=False)
        return None

    def _reference_fix(self, node: cst.Attribute, qualified: str) -> Fix | None:
        kind, replacement, extra = self.fix_kind(qualified)
        func = reference(self.context, replacement) if kind else None
        if func is None:
            return None
        if kind == "rename":
            return Fix(((node, func),), f"use `{replacement}`", safe=True)
        if kind == "add-arg" and id(node) in self._decorators:
            return Fix(((node, cst.Call(func, [_parse_arg(extra)])),),
                       f"use `@{replacement}({extra})`", safe=False)
        return None


class DeprecatedTorchApi(_ApiTableRule):
    """A deprecated or removed torch API, from a table of APIs and their replacements.

    ## What it does
    Finds uses and imports of torch APIs that PyTorch deprecated or removed (`torch.solve`,
    `torch.cuda.amp.autocast`, `functorch.vmap`, `nn.utils.weight_norm`,
    `nn.utils.clip_grad_norm`, `torch.ao.quantization.quantize_dynamic` ...) and the legacy
    `size_average=`/`reduce=` arguments of the losses, judged against the target torch version
    (`target-torch-version`): an API removed in that version is an error, one only deprecated
    is a warning, one deprecated later is not reported. A rename is fixed safely; where the
    arguments change (`torch.amp.autocast("cuda")`), the fix is unsafe, and where the results
    change there is none. `size_average`/`reduce` become the `reduction=` they stand for: a safe
    fix for literal values, an unsafe one (a conditional expression) otherwise. The APIs are
    one table, `modellint/rules/deprecated_apis.py`.

    ## Why is this bad?
    Removed APIs raise at run time on the target torch; deprecated ones warn on every call and
    will be removed. Their replacements are often better behaved (`torch.linalg` functions
    support batches, complex inputs and consistent argument orders).

    ## Example
        with torch.cuda.amp.autocast():
            loss = model(x)
        X, _ = torch.solve(B, A)
        criterion = nn.MSELoss(size_average=False)

    ## Use instead
        with torch.amp.autocast("cuda"):
            loss = model(x)
        X = torch.linalg.solve(A, B)
        criterion = nn.MSELoss(reduction="sum")
    """

    code = "ML905"
    name = "deprecated-torch-api"
    needs = frozenset({"semantic"})
    severity = Severity.WARNING
    fix: ClassVar[str | None] = "safe/unsafe"  # ML909, a subclass, has none
    fix_availability = "sometimes"
    table: ClassVar[dict[str, DeprecatedApi]] = DEPRECATED_APIS
    triggers = (*sorted(
        {f"{sep}{key.rsplit('.', 1)[1]}" for key in DEPRECATED_APIS for sep in (".", " ")}
    ), "size_average", "reduce=", "Loss(", "_loss(", "cross_entropy(", "_with_logits(", "kl_div(")
    valid: ClassVar = [
        "import torch\n\nX = torch.linalg.solve(A, B)\n",
        "import torch\n\nwith torch.amp.autocast('cuda'):\n    pass\n",
        "from torch.func import vmap\n\nf = vmap(g)\n",
        # someone else's `solve`
        "import numpy as np\n\nx = np.linalg.solve(a, b)\nr = np.range(3)\n",
        # deprecated after the target version
        Valid("import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n",
              {"target_torch_version": (2, 3)}),
        # compatibility shims for older torch
        "try:\n    from torch.func import vmap\nexcept ImportError:\n"
        "    from functorch import vmap\n",
        "import torch.nn as nn\n\ndef add_norm(conv):\n    weight_norm = nn.utils.weight_norm\n"
        "    if hasattr(nn.utils.parametrizations, 'weight_norm'):\n"
        "        weight_norm = nn.utils.parametrizations.weight_norm\n    return weight_norm(conv)\n",
        "import torch\n\nif not hasattr(torch, 'amp'):\n    scaler = torch.cuda.amp.GradScaler()\n",
        # step(...) that takes a metric, or documents a fractional epoch
        "import torch\n\ndef train(opt, loss):\n"
        "    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)\n    sched.step(loss)\n"
        "    warm = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 10)\n"
        "    warm.step(1.5)\n",
        # an optimizer's step(closure)
        "import torch\n\ndef train(model, closure):\n"
        "    opt = torch.optim.LBFGS(model.parameters())\n    opt.step(closure)\n",
    ]
    invalid: ClassVar = [
        Invalid("import torch\n\nX, _ = torch.solve(B, A)\n", line=3),
        Invalid("import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n", line=3,
                fixed='import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n'),
        Invalid("from torch.cuda.amp import autocast\n\nwith autocast():\n    pass\n", line=1),
        Invalid("from functorch import vmap, grad\n\nf = vmap(grad(g))\n", line=1,
                fixed="from torch.func import vmap, grad\n\nf = vmap(grad(g))\n"),
        Invalid("import torch\n\no = torch.ger(a, b)\n", line=3,
                fixed="import torch\n\no = torch.outer(a, b)\n"),
        Invalid("import torch\n\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n"
                "    return x\n", line=3,
                fixed='import torch\n\n@torch.amp.custom_fwd(device_type="cuda")\n'
                "def forward(ctx, x):\n    return x\n"),
        Invalid("import torch\nimport torch.nn as nn\n\nup = nn.UpsamplingBilinear2d(scale_factor=2)\n",
                line=4),
        Invalid("import torch\n\ntorch.nn.utils.clip_grad_norm(model.parameters(), 1.0)\n", line=3,
                fixed="import torch\n\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"),
        Invalid("import torch.nn as nn\n\ncriterion = nn.MSELoss(size_average=False)\n", line=3,
                fixed='import torch.nn as nn\n\ncriterion = nn.MSELoss(reduction="sum")\n'),
        Invalid("import torch.nn.functional as F\n\n"
                "loss = F.nll_loss(out, y, size_average=False, reduce=False)\n", line=3,
                fixed='import torch.nn.functional as F\n\nloss = F.nll_loss(out, y, reduction="none")\n'),
        Invalid("import torch\n\nq = torch.quantization.quantize_dynamic(model, {torch.nn.Linear})\n",
                line=3, options={"target_torch_version": (2, 11)}),
        Invalid("import torch.nn.functional as F\n\ny = F.upsample_bilinear(x, scale_factor=2)\n",
                line=3),
        Invalid("import torch\n\ndef train(model, epochs):\n"
                "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    sched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
                "    for epoch in range(epochs):\n        sched.step(epoch)\n", line=7),
        Invalid("from torch._six import string_classes\n", line=1),
    ]

    def describe(self, spelled: str, qualified: str) -> tuple[Severity, str] | None:
        api = self.table.get(qualified)
        if api is None:
            return None
        described = _when(api, target_version(self.context))
        if described is None:
            return None
        severity, when = described
        note = f"; {api.note}" if api.note else ""
        return severity, f"`{spelled}` {when}: use `{api.replacement}` instead{note}"

    def fix_kind(self, qualified: str) -> tuple[str | None, str, str]:
        api: DeprecatedApi = self.table[qualified]
        return api.fix, api.replacement, api.add_arg

    # -- `size_average=` / `reduce=` ------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        qualified = self.context.call_name(node)
        positions = LEGACY_REDUCTION_LOSSES.get(canonical(qualified)) if qualified else None
        if positions is not None:
            self._check_legacy_reduction(node, positions)
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "step" and node.args:
            self._check_step_epoch(node, func.value)

    # -- `scheduler.step(epoch)` ----------------------------------------------------------
    def _check_step_epoch(self, call: cst.Call, receiver: cst.BaseExpression) -> None:
        kind = self.context.semantic.kind_here(receiver, call)
        if kind is None or kind.kind != SCHEDULER or not kind.cls:
            return
        prefix, _, scheduler = kind.cls.rpartition(".")
        if prefix != "torch.optim.lr_scheduler" or scheduler in STEP_TAKES_OTHER_ARGUMENTS:
            return
        if len(call.args) != 1 or call.args[0].star or (
                call.args[0].keyword is not None and call.args[0].keyword.value != "epoch"):
            return
        described = _when(SCHEDULER_STEP_EPOCH, target_version(self.context))
        if described is None:
            return
        severity, when = described
        name = dotted_name(receiver) or "scheduler"
        self.report(
            call,
            f"the `epoch` argument of `{name}.step(...)` ({scheduler}) {when}: call "
            f"`{name}.step()` once per epoch; {SCHEDULER_STEP_EPOCH.note}",
            severity=severity,
        )

    def _check_legacy_reduction(self, call: cst.Call, positions: tuple[int, int]) -> None:
        positional = positional_args(call)
        legacy = {
            name: arg for name, arg in (
                ("size_average", argument(call, "size_average")),
                ("reduce", argument(call, "reduce")),
            ) if arg is not None
        }
        given_positionally = len(positional) > min(positions)
        if not legacy and not given_positionally:
            return
        described = _when(LEGACY_REDUCTION, target_version(self.context))
        if described is None:
            return
        severity, when = described
        name = dotted_name(call.func) or "the loss"
        fix = None
        if legacy and not given_positionally and not has_star_args(call):
            fix = _reduction_fix(call, legacy)
        spelled = " and ".join(f"`{key}=`" for key in legacy) or "`size_average`/`reduce`"
        self.report(
            call,
            f"{spelled} of `{name}` {when}: pass `reduction=` instead; {LEGACY_REDUCTION.note}",
            severity=severity,
            fix=fix,
        )


class DeprecatedTorchScript(DeprecatedTorchApi):
    """TorchScript (`torch.jit.script`, `torch.jit.trace` ...), deprecated in torch 2.11.

    ## What it does
    Finds uses and imports of the TorchScript entry points that torch 2.11 deprecated in favour
    of `torch.export` (`torch.jit.script`, `trace`, `trace_module`, `script_method`, `save`,
    `load`, `freeze`, `optimize_for_inference`, `fork`, `wait`, `interface`) when the target
    torch is 2.11 or later. Markers that only tell TorchScript what to skip
    (`torch.jit.is_scripting`, `torch.jit.unused`, `torch.jit.ignore`) are not reported.
    Off by default and reported at severity info: TorchScript still works, libraries keep it
    for older torch, and moving to `torch.export` is a migration, not a rename, so there is no
    automatic fix.

    ## Why is this bad?
    TorchScript is no longer developed: each of these warns on every call, does not support
    Python 3.14, and new operators and Python features will not reach it. `torch.export`
    captures a graph for deployment (`torch.export.save`/`load`), and `torch.compile` speeds
    up a model that stays in Python.

    ## Example
        scripted = torch.jit.script(model)
        torch.jit.save(scripted, "model.pt")

    ## Use instead
        exported = torch.export.export(model, (example,))
        torch.export.save(exported, "model.pt2")
    """

    code = "ML909"
    name = "deprecated-torchscript"
    needs = frozenset({"semantic"})
    severity = Severity.INFO
    default_enabled = False
    fix = None
    table: ClassVar[dict[str, DeprecatedApi]] = TORCHSCRIPT_APIS
    triggers = ("jit",)
    valid: ClassVar = [
        "import torch\n\nexported = torch.export.export(model, (x,))\n",
        "import torch\n\nif torch.jit.is_scripting():\n    pass\n",
        "import torch\n\n@torch.jit.unused\ndef f(x):\n    return x\n",
        # deprecated after the target version
        Valid("import torch\n\nscripted = torch.jit.script(model)\n",
              {"target_torch_version": (2, 10)}),
        # compatibility shim
        "import torch\n\nif not hasattr(torch, 'export'):\n    m = torch.jit.trace(model, x)\n",
    ]
    invalid: ClassVar = [
        Invalid("import torch\n\nscripted = torch.jit.script(model)\n", line=3,
                options={"target_torch_version": (2, 11)}),
        Invalid("import torch\n\n@torch.jit.script\ndef f(x):\n    return x\n", line=3,
                options={"target_torch_version": (2, 11)}),
        Invalid("from torch.jit import trace\n\ntraced = trace(model, x)\n", line=1,
                options={"target_torch_version": (2, 11)}),
    ]

    def describe(self, spelled: str, qualified: str) -> tuple[Severity, str] | None:
        described = super().describe(spelled, qualified)
        # info: TorchScript still works, and leaving it is a migration, not a rename
        return None if described is None else (Severity.INFO, described[1])

    def visit_Call(self, node: cst.Call) -> None:
        _ApiTableRule.visit_Call(self, node)


class NonPublicTorchApi(_ApiTableRule):
    """A private torch helper used where a public twin exists.

    ## What it does
    Finds imports and uses of private torch helpers that have a public, documented equivalent
    in the target torch version, such as `torch.utils.data._utils.collate.default_collate`
    (public as `torch.utils.data.default_collate`) or `torch._dynamo.disable` (public as
    `torch.compiler.disable`).

    ## Why is this bad?
    Private modules move and change without deprecation: code that imports them breaks on a
    torch upgrade, while the public twin is kept stable.

    The fix uses the public twin: safely where it is the same function, as an unsafe fix
    where it answers a little differently (`torch._C._get_tracing_state()`, which returns the
    tracing state, becomes `torch.jit.is_tracing()`, which returns a bool).

    ## Example
        from torch.utils.data._utils.collate import default_collate

    ## Use instead
        from torch.utils.data import default_collate
    """

    code = "ML318"
    name = "non-public-torch-api"
    needs = frozenset()
    severity = Severity.WARNING
    fix = "safe/unsafe"
    triggers = tuple(sorted(
        {f"{sep}{key.rsplit('.', 1)[1]}" for key in PRIVATE_TWINS for sep in (".", " ")}
    ))
    valid: ClassVar = [
        "from torch.utils.data import default_collate\n\nbatch = default_collate(items)\n",
        "import torch\n\n@torch.compiler.disable\ndef f(x):\n    return x\n",
        # the public twin does not exist yet in the target version
        Valid("import torch\n\nif torch._dynamo.is_compiling():\n    pass\n",
              {"target_torch_version": (2, 1)}),
    ]
    invalid: ClassVar = [
        Invalid("from torch.utils.data._utils.collate import default_collate\n", line=1,
                fixed="from torch.utils.data import default_collate\n"),
        Invalid("import torch\n\n@torch._dynamo.disable\ndef f(x):\n    return x\n", line=3,
                fixed="import torch\n\n@torch.compiler.disable\ndef f(x):\n    return x\n"),
        Invalid("import torch\n\nif torch._C._get_tracing_state():\n    pass\n", line=3,
                fixed="import torch\n\nif torch.jit.is_tracing():\n    pass\n"),
    ]

    def describe(self, spelled: str, qualified: str) -> tuple[Severity, str] | None:
        twin = PRIVATE_TWINS.get(qualified)
        if twin is None or target_version(self.context) < twin[1]:
            return None
        return self.severity, (
            f"`{spelled}` is a private torch helper; use its public twin `{twin[0]}`, which "
            "does not move between releases"
        )

    def fix_kind(self, qualified: str) -> tuple[str | None, str, str]:
        replacement, _, same = PRIVATE_TWINS[qualified]
        return ("rename" if same else "rename-unsafe"), replacement, ""


# -- ML906 ------------------------------------------------------------------------------------

_TV_SUBPACKAGES = frozenset({"detection", "segmentation", "quantization", "video", "optical_flow"})


class TorchvisionPretrainedArgument(StaticRule):
    """`pretrained=` on a torchvision model builder, replaced by `weights=` in torchvision 0.13.

    ## What it does
    Finds `pretrained=` and `pretrained_backbone=` passed to torchvision's model builders
    (`resnet50`, `fasterrcnn_resnet50_fpn`, ...). A literal `True` becomes the weights enum
    that `pretrained=True` loaded (`ResNet50_Weights.IMAGENET1K_V1`), `False` becomes `None`.

    ## Why is this bad?
    The boolean arguments are deprecated since torchvision 0.13 and warn on every call; they
    hide which weights are loaded, and the enums also carry the matching preprocessing
    (`weights.transforms()`) and metadata. `ResNet50_Weights.DEFAULT` picks the best weights.

    ## Example
        model = torchvision.models.resnet50(pretrained=True)

    ## Use instead
        model = torchvision.models.resnet50(weights=torchvision.models.ResNet50_Weights.IMAGENET1K_V1)
    """

    code = "ML906"
    name = "torchvision-pretrained-argument"
    needs = frozenset()
    severity = Severity.WARNING
    fix = "safe"
    fix_availability = "sometimes"
    triggers = ("pretrained",)
    valid: ClassVar = [
        "import torchvision\n\nm = torchvision.models.resnet50(weights=None)\n",
        # other libraries' builders keep `pretrained=`
        "import timm\n\nm = timm.create_model('resnet50', pretrained=True)\n",
        "from transformers import AutoModel\n\nm = AutoModel.from_pretrained('bert')\n",
    ]
    invalid: ClassVar = [
        Invalid(
            "import torchvision\n\nm = torchvision.models.resnet50(pretrained=True)\n", line=3,
            fixed="import torchvision\n\nm = torchvision.models.resnet50("
            "weights=torchvision.models.ResNet50_Weights.IMAGENET1K_V1)\n",
        ),
        Invalid(
            "from torchvision import models\n\nm = models.vgg16(pretrained=False)\n", line=3,
            fixed="from torchvision import models\n\nm = models.vgg16(weights=None)\n",
        ),
        Invalid(
            "from torchvision.models.detection import fasterrcnn_resnet50_fpn\n"
            "from torchvision.models import ResNet50_Weights\n\n"
            "m = fasterrcnn_resnet50_fpn(pretrained_backbone=True, num_classes=3)\n", line=4,
            fixed="from torchvision.models.detection import fasterrcnn_resnet50_fpn\n"
            "from torchvision.models import ResNet50_Weights\n\n"
            "m = fasterrcnn_resnet50_fpn(weights_backbone=ResNet50_Weights.IMAGENET1K_V1, "
            "num_classes=3)\n",
        ),
        Invalid("from torchvision.models import resnet18\n\nm = resnet18(pretrained=flag)\n",
                line=3),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.call_name(node)
        if qualified is None or not qualified.startswith("torchvision.models."):
            return
        parts = qualified.split(".")[2:]
        sub = parts[0] if len(parts) > 1 and parts[0] in _TV_SUBPACKAGES else ""
        key = f"{sub}.{parts[-1]}" if sub else parts[-1]
        if key not in TORCHVISION_LEGACY_WEIGHTS:
            return
        weights, backbone = TORCHVISION_LEGACY_WEIGHTS[key]
        builder = dotted_name(node.func) or parts[-1]
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in ("pretrained", "pretrained_backbone"):
                continue
            new_key = "weights" if arg.keyword.value == "pretrained" else "weights_backbone"
            enum = weights if new_key == "weights" else backbone
            if enum is not None:
                module = "torchvision.models." + (sub + "." if sub and new_key == "weights" else "")
                enum = module + enum
            self.report(
                arg,
                f"`{arg.keyword.value}=` of `{builder}` is deprecated since torchvision 0.13; "
                f"pass `{new_key}=`" + (f" (`{enum.rsplit('.', 2)[1]}.DEFAULT` for the best "
                                          "weights)" if enum else ""),
                fix=self._fix(node, arg, new_key, enum),
            )

    def _fix(self, call: cst.Call, arg: cst.Arg, new_key: str, enum: str | None) -> Fix | None:
        if argument(call, new_key) is not None or not isinstance(arg.value, cst.Name):
            return None
        if arg.value.value == "False":
            value: cst.BaseExpression | None = cst.Name("None")
        elif arg.value.value == "True" and enum is not None:
            value = reference(self.context, enum)
        else:
            return None
        if value is None:
            return None
        new = arg.with_changes(keyword=cst.Name(new_key), value=value)
        return Fix(((arg, new),), f"pass `{new_key}=`", safe=True)


# -- ML907 ------------------------------------------------------------------------------------

CHECKPOINT_FUNCTIONS = frozenset(
    {"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"}
)


class CheckpointUseReentrant(StaticRule):
    """`torch.utils.checkpoint` called without an explicit `use_reentrant`.

    ## What it does
    Finds calls of `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential` that do not
    pass `use_reentrant=`. The unsafe fix adds `use_reentrant=False`.

    ## Why is this bad?
    PyTorch warns on every such call, and the implicit default (`True`, the reentrant variant)
    is the one PyTorch recommends against: it needs an input that requires grad to produce
    gradients at all, ignores `torch.autograd.grad`'s inputs and does not support keyword
    arguments. The default is announced to change, so code that relies on it changes behaviour.

    ## Example
        out = checkpoint(self.block, x)

    ## Use instead
        out = checkpoint(self.block, x, use_reentrant=False)
    """

    code = "ML907"
    name = "checkpoint-use-reentrant"
    needs = frozenset()
    severity = Severity.WARNING
    fix = "unsafe"
    triggers = ("checkpoint",)
    valid: ClassVar = [
        "from torch.utils.checkpoint import checkpoint\n\n"
        "y = checkpoint(block, x, use_reentrant=False)\n",
        "import torch.utils.checkpoint\n\ny = torch.utils.checkpoint.checkpoint(block, x, **kw)\n",
        # someone else's checkpoint
        "from deepspeed import checkpointing\n\ny = checkpointing.checkpoint(block, x)\n",
        "def checkpoint(f, x):\n    return f(x)\n\ny = checkpoint(block, x)\n",
    ]
    invalid: ClassVar = [
        Invalid(
            "from torch.utils.checkpoint import checkpoint\n\ny = checkpoint(block, x)\n",
            line=3,
            fixed="from torch.utils.checkpoint import checkpoint\n\n"
            "y = checkpoint(block, x, use_reentrant=False)\n",
        ),
        Invalid(
            "import torch.utils.checkpoint as cp\n\ny = cp.checkpoint_sequential(blocks, 2, x)\n",
            line=3,
            fixed="import torch.utils.checkpoint as cp\n\n"
            "y = cp.checkpoint_sequential(blocks, 2, x, use_reentrant=False)\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.call_name(node) not in CHECKPOINT_FUNCTIONS:
            return
        if argument(node, "use_reentrant") is not None or any(a.star == "**" for a in node.args):
            return
        name = dotted_name(node.func) or "checkpoint"
        arg = _parse_arg("use_reentrant=False")
        self.report(
            node,
            f"`{name}(...)` relies on the implicit `use_reentrant` default; pass "
            "`use_reentrant=False` (recommended) or `True` explicitly",
            fix=Fix(((node, node.with_changes(args=[*node.args, arg])),),
                    "pass `use_reentrant=False`", safe=False),
        )


# -- ML908 ------------------------------------------------------------------------------------


class RequiresGradTypo(StaticRule):
    """`x.require_grad = ...`: a typo of `requires_grad` that silently does nothing.

    ## What it does
    Finds assignments to an attribute named `require_grad` (outside a class's own `self`
    attributes). The fix renames it to `requires_grad`.

    ## Why is this bad?
    Tensors accept any new Python attribute, so the misspelled assignment raises nothing: the
    tensor (or parameter) keeps its old `requires_grad`, and layers meant to be frozen keep
    training, or the other way round.

    ## Example
        for p in backbone.parameters():
            p.require_grad = False

    ## Use instead
        for p in backbone.parameters():
            p.requires_grad = False
    """

    code = "ML908"
    name = "requires-grad-typo"
    needs = frozenset()
    severity = Severity.ERROR
    fix = "safe"
    triggers = ("require_grad",)
    valid: ClassVar = [
        "for p in model.parameters():\n    p.requires_grad = False\n",
        "class Config:\n    def __init__(self, require_grad):\n"
        "        self.require_grad = require_grad\n",
        "flag = opts.require_grad\n",
    ]
    invalid: ClassVar = [
        Invalid("for p in model.parameters():\n    p.require_grad = False\n", line=2,
                fixed="for p in model.parameters():\n    p.requires_grad = False\n"),
        Invalid("import torch\n\nw = torch.zeros(3)\nw.require_grad = True\n", line=4,
                fixed="import torch\n\nw = torch.zeros(3)\nw.requires_grad = True\n"),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check(target.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check(node.target)

    def _check(self, target: cst.BaseExpression) -> None:
        if not (isinstance(target, cst.Attribute) and target.attr.value == "require_grad"):
            return
        if isinstance(target.value, cst.Name) and target.value.value in ("self", "cls"):
            return  # the class's own attribute (a config flag), not a tensor's
        owner = dotted_name(target.value) or "the tensor"
        self.report(
            target,
            f"`{owner}.require_grad` is a typo: the attribute is `requires_grad`, so this "
            "assignment changes nothing",
            fix=Fix(((target.attr, cst.Name("requires_grad")),), "use `requires_grad`"),
        )


# -- ML316 ------------------------------------------------------------------------------------


def grad_mode(context: FileContext, expr: cst.BaseExpression, bare: bool) -> str | None:
    """"no_grad" / "inference_mode" for `torch.no_grad()` / `torch.inference_mode()` (or the
    bare names as decorators when `bare`), None for anything else (arguments included, except
    a literal `True` for inference_mode)."""
    if isinstance(expr, cst.Call):
        name = context.call_name(expr)
        if expr.args:
            if name not in INFERENCE_MODE or len(expr.args) != 1:
                return None
            arg = expr.args[0]
            if not (isinstance(arg.value, cst.Name) and arg.value.value == "True") or (
                arg.keyword is not None and arg.keyword.value != "mode"
            ):
                return None
    elif bare:
        name = context.qualified_name(expr)
    else:
        return None
    if name in NO_GRAD:
        return "no_grad"
    if name in INFERENCE_MODE:
        return "inference_mode"
    return None


class RedundantNoGrad(StaticRule):
    """A `no_grad` / `inference_mode` block inside a function already decorated with one.

    ## What it does
    Finds `with torch.no_grad():` (or `torch.inference_mode()`) directly in a function that is
    decorated with `@torch.no_grad()` or `@torch.inference_mode()` and therefore already runs
    with gradients off. (`inference_mode` inside a `no_grad` function is not redundant: it
    is stricter.) The fix removes the `with` line and dedents its body.

    ## Why is this bad?
    The inner block does nothing, adds a level of indentation, and suggests to a reader that
    the code outside it records gradients, which it does not.

    ## Example
        @torch.no_grad()
        def evaluate(model, x):
            with torch.no_grad():
                return model(x)

    ## Use instead
        @torch.no_grad()
        def evaluate(model, x):
            return model(x)
    """

    code = "ML316"
    name = "redundant-no-grad"
    needs = frozenset()
    severity = Severity.WARNING
    fix = "safe"
    triggers = ("no_grad", "inference_mode")
    valid: ClassVar = [
        "import torch\n\ndef evaluate(model, x):\n    with torch.no_grad():\n"
        "        return model(x)\n",
        "import torch\n\n@torch.no_grad()\ndef evaluate(model, x):\n"
        "    with torch.inference_mode():\n        return model(x)\n",
        "import torch\n\n@torch.no_grad()\ndef outer(model):\n    def inner(x):\n"
        "        with torch.no_grad():\n            return model(x)\n    return inner\n",
        "import torch\n\n@torch.inference_mode(False)\ndef f(model, x):\n"
        "    with torch.inference_mode():\n        return model(x)\n",
    ]
    invalid: ClassVar = [
        Invalid(
            "import torch\n\n@torch.no_grad()\ndef evaluate(model, x):\n"
            "    with torch.no_grad():\n        y = model(x)\n    return y\n",
            line=5,
            fixed="import torch\n\n@torch.no_grad()\ndef evaluate(model, x):\n"
            "    y = model(x)\n    return y\n",
        ),
        Invalid(
            "import torch\n\n@torch.inference_mode()\ndef predict(model, x):\n"
            "    if x is not None:\n        with torch.no_grad():\n            return model(x)\n",
            line=6,
            fixed="import torch\n\n@torch.inference_mode()\ndef predict(model, x):\n"
            "    if x is not None:\n        return model(x)\n",
        ),
    ]

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._modes: list[str | None] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        mode = None
        for decorator in node.decorators:
            mode = grad_mode(self.context, decorator.decorator, bare=True) or mode
        self._modes.append(mode)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:  # noqa: ARG002
        self._modes.pop()

    def visit_With(self, node: cst.With) -> None:
        outer = self._modes[-1] if self._modes else None
        if outer is None:
            return
        for item in node.items:
            inner = grad_mode(self.context, item.item, bare=False)
            if inner is None or (inner == "inference_mode" and outer == "no_grad"):
                continue
            function = self.context.current_function
            name = function.name.value if function is not None else "the function"
            fix = None
            if len(node.items) == 1 and item.asname is None and isinstance(
                node.body, cst.IndentedBlock
            ) and not node.leading_lines:
                fix = Fix(((node, cst.FlattenSentinel(node.body.body)),),
                          "remove the redundant block")
            self.report(
                node,
                f"`{name}` is already decorated with `{outer}`, so this `{inner}` block is "
                "redundant; remove it",
                fix=fix,
            )
            return


# -- ML317 ------------------------------------------------------------------------------------


class ZeroGradKeepsMemory(StaticRule):
    """`zero_grad(set_to_none=False)` keeps every gradient tensor allocated.

    ## What it does
    Finds `.zero_grad(set_to_none=False)` on an optimizer or a module. The unsafe fix drops the
    argument (torch 2.0 made `set_to_none=True` the default). Off by default: code may read
    `.grad` expecting zeros.

    ## Why is this bad?
    Writing zeros into every gradient costs a kernel launch and memory traffic per parameter,
    and keeps the gradients' memory allocated between steps; setting them to `None` frees it
    and lets the next backward pass write fresh gradients.

    ## Example
        optimizer.zero_grad(set_to_none=False)

    ## Use instead
        optimizer.zero_grad()
    """

    code = "ML317"
    name = "zero-grad-keeps-memory"
    needs = frozenset()
    severity = Severity.INFO
    default_enabled = False
    fix = "unsafe"
    fix_availability = "sometimes"
    triggers = ("zero_grad",)
    valid: ClassVar = [
        "import torch\n\noptimizer.zero_grad()\n",
        "import torch\n\noptimizer.zero_grad(set_to_none=True)\n",
    ]
    invalid: ClassVar = [
        Invalid("import torch\n\noptimizer.zero_grad(set_to_none=False)\n", line=3,
                fixed="import torch\n\noptimizer.zero_grad()\n"),
        Invalid("import torch\n\nmodel.zero_grad(False)\n", line=3),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad"):
            return
        if len(node.args) != 1:
            return
        arg = node.args[0]
        if arg.keyword is not None and arg.keyword.value != "set_to_none":
            return
        if not (isinstance(arg.value, cst.Name) and arg.value.value == "False"):
            return
        if "torch" not in self.context.source:
            return
        owner = dotted_name(func.value) or "zero_grad"
        fix = None
        if arg.keyword is not None:
            fix = Fix(((node, node.with_changes(args=[])),), "drop `set_to_none=False`",
                      safe=False)
        self.report(
            node,
            f"`{owner}.zero_grad(set_to_none=False)` writes zeros into every gradient and keeps "
            "them allocated; call `zero_grad()` to set them to None",
            fix=fix,
        )


# -- ML912 ------------------------------------------------------------------------------------

AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})


def _is_static(func: cst.FunctionDef) -> bool:
    return any(dotted_name(d.decorator) in ("staticmethod", "classmethod") for d in func.decorators)


class LegacyAutogradFunction(StaticRule):
    """A legacy `autograd.Function`: a non-static `forward`, or an instance called.

    ## What it does
    Finds subclasses of `torch.autograd.Function` whose `forward` is an instance method (no
    `@staticmethod`), and calls of an instance of such a class defined in the same
    file (`MyFn()(x)`, `MyFn(alpha)(x)`) instead of `MyFn.apply(x)`. Where the instance is
    built without arguments, the unsafe fix calls `MyFn.apply(...)` (unsafe: the class's
    methods must be static for it to work).

    ## Why is this bad?
    The old style of `autograd.Function` was removed in torch 1.5: calling an instance raises
    `RuntimeError: Legacy autograd function with non-static forward method is deprecated.
    Please use new-style autograd function with static forward method.`, and a non-static
    `forward` is never called by `apply`. Old research code (custom ROI pooling, gradient
    reversal layers, straight-through estimators) still carries them and fails on the first
    forward.

    ## Example
        class GradReverse(torch.autograd.Function):
            def forward(self, x):
                return x.view_as(x)

            def backward(self, grad_output):
                return -grad_output

        y = GradReverse()(features)

    ## Use instead
        class GradReverse(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, grad_output):
                return -grad_output

        y = GradReverse.apply(features)
    """

    code = "ML912"
    name = "legacy-autograd-function"
    needs = frozenset()
    fix = "unsafe"
    fix_availability = "sometimes"
    triggers = ("Function",)
    valid: ClassVar = [
        "import torch\n\nclass Clamp(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x.clamp(0, 1)\n\n    @staticmethod\n"
        "    def backward(ctx, g):\n        return g\n\ny = Clamp.apply(x)\n",
        # a helper method that is not forward/backward
        "from torch.autograd import Function\n\nclass F(Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x\n\n    def helper(self):\n        return 1\n",
        # a backward without @staticmethod beside a static forward: apply still calls it
        "import torch\n\nclass Rope(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, q):\n        return q\n\n    def backward(ctx, dq):\n"
        "        return dq\n",
        # someone else's Function
        "from sympy import Function\n\nclass f(Function):\n    def fdiff(self, i=1):\n"
        "        return 1\n\ny = f()(x)\n",
        # a module, not a Function
        "import torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, x):\n"
        "        return x\n\ny = M()(x)\n",
    ]
    invalid: ClassVar = [
        Invalid("import torch\n\nclass GradReverse(torch.autograd.Function):\n"
                "    def forward(self, x):\n        return x.view_as(x)\n", line=4),
        Invalid("from torch.autograd import Function\n\nclass Sign(Function):\n"
                "    @staticmethod\n    def forward(ctx, x):\n        return x.sign()\n\n"
                "y = Sign()(x)\n", line=8,
                fixed="from torch.autograd import Function\n\nclass Sign(Function):\n"
                "    @staticmethod\n    def forward(ctx, x):\n        return x.sign()\n\n"
                "y = Sign.apply(x)\n"),
        Invalid("import torch\n\nclass Round(torch.autograd.Function):\n"
                "    @staticmethod\n    def forward(ctx, x, k):\n        return x.round()\n\n"
                "def f(x):\n    return Round(3)(x)\n", line=9),
    ]

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._functions: set[str] = set()
        self._calls: list[tuple[cst.Call, str, cst.CSTNode | None]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if not any(canonical(self.context.qualified_name(base.value) or "") in AUTOGRAD_FUNCTIONS
                   for base in node.bases):
            return
        self._functions.add(node.name.value)
        # only `forward` decides: `apply` calls `backward` through the class, so a `backward`
        # without `@staticmethod` beside a static `forward` works (Liger-Kernel's RoPE)
        for statement in node.body.body:
            if (isinstance(statement, cst.FunctionDef) and statement.name.value == "forward"
                    and not _is_static(statement)):
                self.report(
                    statement,
                    f"`{node.name.value}.forward` is an instance method: legacy "
                    "`autograd.Function`s fail since torch 1.5; make `forward` and `backward` "
                    "`@staticmethod`s taking `ctx`, and call `"
                    f"{node.name.value}.apply(...)`",
                    statement=statement,
                )

    def visit_Call(self, node: cst.Call) -> None:
        inner = node.func
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name):
            self._calls.append((node, inner.func.value, self.context.current_statement))

    def leave_Module(self, original_node: cst.Module) -> None:
        for call, name, statement in self._calls:
            if name not in self._functions:
                continue
            inner = call.func
            assert isinstance(inner, cst.Call)
            fix = None
            if not inner.args:
                fix = Fix(((call, call.with_changes(
                    func=cst.Attribute(cst.Name(name), cst.Name("apply")))),),
                    f"call `{name}.apply(...)`", safe=False)
            self.report(
                call,
                f"`{name}(...)(...)` calls an instance of an `autograd.Function`, which raises "
                f"RuntimeError since torch 1.5; call `{name}.apply(...)`",
                fix=fix,
                statement=statement,
            )


@hookimpl
def modellint_add_rules():
    return [
        DeprecatedTorchApi,
        DeprecatedTorchScript,
        TorchvisionPretrainedArgument,
        CheckpointUseReentrant,
        RequiresGradTypo,
        RedundantNoGrad,
        ZeroGradKeepsMemory,
        NonPublicTorchApi,
        LegacyAutogradFunction,
    ]
