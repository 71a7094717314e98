"""The public rule API: everything a rule module imports from modellint.

Built-in rules and third-party plugins import only this module (and `modellint.hookspecs` for
`hookimpl`); a test holds the built-in rules to it. Besides the rule classes it exports:

- torch's knowledge, the static pass's one copy of it (defined in `modellint.static.kinds`,
  which the semantic model reads too): the kinds of values (`MODULE`, `TENSOR`, `OPTIMIZER`,
  `SCHEDULER`, ..., `Kind`) and the tables of torch's classes and functions
  (`SCHEDULERS`: how often each scheduler steps, `MODE_LAYERS`, `STATEFUL_LAYERS`,
  `TENSOR_FACTORIES`, `TENSOR_METHODS`, `RETURNS_SELF`, `MODULE_ATTRIBUTES`, ...);
- the syntax helpers: `dotted_name`, `canonical` (a qualified name's public spelling),
  `first_param_name`, `argument`, `positional_args`, `visit`, `code_nodes`, ...;
- one function's `Scope` (`scope_of(context, node)`: its `Site`s, `CallSite`s, loops) and
  the semantic model's answers (`Effect`, `ProjectFunction`, `PassedArgument`, `Stepped`);
- for runtime rules, the phases of a model run (`FORWARD`, `TRAIN`, ...) and their helpers
  (`describe`, `first_line`, `shape_text`, `source_line`, ...), imported on first use
  (`BASE_ATTRS` and `size_text` import torch);
- for `modellint run` rules, `source_tree(filename)`: the parsed source of a file the run
  executes (imported on first use too).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from modellint.codes import INTERNAL_ERROR, NOT_CHECKED, SCRIPT_FAILED, SYNTAX_ERROR
from modellint.finding import Fix, Severity
from modellint.patterns import LazyPattern
from modellint.records import record
from modellint.static.classes import REGISTERING_METHODS, first_param_name
from modellint.static.context import FileContext
from modellint.static.imports import canonical, dotted_name
from modellint.static.kinds import (
    ACTIVATION_FUNCTIONS,
    ACTIVATION_METHODS,
    ACTIVATION_MODULES,
    CONTAINERS,
    DATALOADER,
    DATALOADERS,
    DICT,
    DROPOUT_ARGUMENT,
    EPOCH_SCHEDULERS,
    FUNCTION,
    INFERENCE_MODE,
    INSTANCE_NORMS,
    LAYER_ATTRIBUTES,
    LOSS_FUNCTIONS,
    LOSS_MODULES,
    MODE_LAYERS,
    MODULE,
    MODULE_ATTRIBUTES,
    MODULE_CALLS,
    MODULES,
    MUTATORS,
    NN_BASES,
    NN_NON_MODULES,
    NO_GRAD,
    OPTIMIZER,
    OPTIMIZER_NOT,
    PARAM_GROUP,
    PARAM_GROUPS,
    PARAMETER,
    PARAMETER_NAMES,
    PARAMETERS,
    PERIOD_ARGUMENT,
    RETURNS_SELF,
    SCHEDULER,
    SCHEDULERS,
    SOFTMAX_MODULES,
    SOME_MODULE,
    STATEFUL_LAYERS,
    TENSOR,
    TENSOR_ATTRIBUTES,
    TENSOR_FACTORIES,
    TENSOR_FUNCTIONS,
    TENSOR_METHODS,
    TUPLE,
    VALUE_METHODS,
    VARIABLES,
    WRAPPER_ATTRIBUTES,
    WRAPPERS,
    Kind,
    combine_modes,
)
from modellint.static.needs import NEEDS
from modellint.static.nodes import (
    NESTED_SCOPES,
    argument,
    has_star_args,
    name_nodes,
    positional_args,
    source_of,
)
from modellint.static.scope import LOOPS, Assignment, CallSite, Scope, Site, scope_of
from modellint.static.semantic import Effect, PassedArgument, ProjectFunction, Stepped
from modellint.static.walk import child_nodes, code_nodes, visit, visitor_names

if TYPE_CHECKING:
    from modellint.runtime.phases import (
        FORWARD,
        MEMORY,
        OOM,
        PHASES,
        REPEAT,
        TRAIN,
        TWIN,
        attribute_location,
        describe,
        fingerprints_differ,
        first_line,
        shape_text,
        short_path,
    )
    from modellint.runtime.sources import source_line
    from modellint.watching.loops import source_tree

__all__ = [
    "INTERNAL_ERROR",
    "NOT_CHECKED",
    "SCRIPT_FAILED",
    "SYNTAX_ERROR",
    "Effect",
    "FileContext",
    "Fix",
    "Invalid",
    "PassedArgument",
    "ProjectFunction",
    "Rule",
    "RuntimeCheck",
    "RunCheck",
    "RunRule",
    "RuntimeRule",
    "Severity",
    "StaticRule",
    "Stepped",
    "Valid",
    "argument",
    "canonical",
    "child_nodes",
    "code_nodes",
    "dotted_name",
    "first_param_name",
    "has_star_args",
    "name_nodes",
    "positional_args",
    "snippet",
    "source_of",
    "visit",
    "REGISTERING_METHODS",
    # one function's scope
    "LOOPS",
    "NESTED_SCOPES",
    "Assignment",
    "CallSite",
    "Scope",
    "Site",
    "scope_of",
    # torch's knowledge
    "ACTIVATION_FUNCTIONS",
    "ACTIVATION_METHODS",
    "ACTIVATION_MODULES",
    "CONTAINERS",
    "DATALOADER",
    "DATALOADERS",
    "DICT",
    "DROPOUT_ARGUMENT",
    "EPOCH_SCHEDULERS",
    "FUNCTION",
    "INFERENCE_MODE",
    "INSTANCE_NORMS",
    "LAYER_ATTRIBUTES",
    "LOSS_FUNCTIONS",
    "LOSS_MODULES",
    "MODE_LAYERS",
    "MODULE",
    "MODULE_ATTRIBUTES",
    "MODULE_CALLS",
    "MODULES",
    "MUTATORS",
    "NN_BASES",
    "NN_NON_MODULES",
    "NO_GRAD",
    "OPTIMIZER",
    "OPTIMIZER_NOT",
    "PARAM_GROUP",
    "PARAM_GROUPS",
    "PARAMETER",
    "PARAMETER_NAMES",
    "PARAMETERS",
    "PERIOD_ARGUMENT",
    "RETURNS_SELF",
    "SCHEDULER",
    "SCHEDULERS",
    "SOFTMAX_MODULES",
    "SOME_MODULE",
    "STATEFUL_LAYERS",
    "TENSOR",
    "TENSOR_ATTRIBUTES",
    "TENSOR_FACTORIES",
    "TENSOR_FUNCTIONS",
    "TENSOR_METHODS",
    "TUPLE",
    "VALUE_METHODS",
    "VARIABLES",
    "WRAPPER_ATTRIBUTES",
    "WRAPPERS",
    "Kind",
    "combine_modes",
    "LazyPattern",
    # runtime rules: the phases of a model run and their helpers
    "FORWARD",
    "MEMORY",
    "OOM",
    "PHASES",
    "REPEAT",
    "TRAIN",
    "TWIN",
    "attribute_location",
    "describe",
    "fingerprints_differ",
    "first_line",
    "shape_text",
    "short_path",
    "source_line",
    # `modellint run` rules
    "source_tree",
]

# the helpers of runtime rules and `modellint run` rules, imported when one of those rules asks:
# a static run does not need them (and some modules import torch)
_LAZY = {
    **dict.fromkeys(("FORWARD", "MEMORY", "OOM", "PHASES", "REPEAT", "TRAIN", "TWIN",
                     "attribute_location", "describe", "fingerprints_differ", "first_line",
                     "shape_text", "short_path"), "modellint.runtime.phases"),
    "source_line": "modellint.runtime.sources",
    "source_tree": "modellint.watching.loops",
    "BASE_ATTRS": "modellint.runtime.run",
    "size_text": "modellint.runtime.memory",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def snippet(expr: cst.BaseExpression, limit: int = 40) -> str:
    """Short text of an expression for a message (`self.fc`, `params[0]`), `...` if long."""
    name = dotted_name(expr)
    if name is not None:
        return name
    text = source_of(expr)
    return text if len(text) <= limit and "\n" not in text else "..."


DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")


@record(frozen=True)
class Valid:
    """Code on which the rule must report nothing."""

    code: str
    options: Mapping[str, Any] = field(default_factory=dict)


@record(frozen=True)
class Invalid:
    """Code on which the rule must report at `line` (1-based); `fixed` is the expected source
    after the rule's fixes (safe and unsafe) are applied, when the rule can fix it."""

    code: str
    line: int
    fixed: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


class Rule:
    """Common attributes of static and runtime rules."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    default_enabled: ClassVar[bool] = True
    passes: ClassVar[tuple[str, ...]] = ("static",)
    # the fixes its findings carry (as its invalid examples show: see
    # `modellint.testing.check_fix_declaration`): None, "safe" (applied by `--fix`), "unsafe"
    # (only with `--unsafe-fixes`) or "safe/unsafe" (some of each)
    fix: ClassVar[str | None] = None
    # with a fix: "always" (every finding carries one) or "sometimes", as ruff's docs say
    fix_availability: ClassVar[str] = "always"
    valid: ClassVar[list[Valid | str]] = []
    invalid: ClassVar[list[Invalid]] = []

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def fix_label(cls) -> str:
        """The rule's fix in a table: `safe`, `unsafe (sometimes)`, or "" without one."""
        if cls.fix is None:
            return ""
        return cls.fix if cls.fix_availability == "always" else f"{cls.fix} (sometimes)"

    @classmethod
    def fix_description(cls) -> str:
        """`safe, always available` (as ruff's rule pages say whether a fix is always or
        sometimes available), or `none`."""
        if cls.fix is None:
            return "none"
        return f"{cls.fix}, {cls.fix_availability} available"

    @classmethod
    def summary(cls) -> str:
        return cls.documentation().split("\n", 1)[0].strip()

    @classmethod
    def doc_section(cls, title: str) -> str:
        text = cls.documentation()
        marker = f"## {title}"
        start = text.find(marker)
        if start < 0:
            return ""
        rest = text[start + len(marker) :]
        end = rest.find("\n## ")
        return inspect.cleandoc(rest if end < 0 else rest[:end])


class StaticRule(Rule, cst.BatchableCSTVisitor):
    """A rule run by the static pass: a LibCST visitor batched with every other enabled rule.

    Declare `METADATA_DEPENDENCIES` for the LibCST metadata the rule reads (the engine resolves
    only what enabled rules declare), `triggers`, words of which at least one must occur in a
    file's text for the rule to run on it, and `needs`, what it reads beyond its file's tree
    and imports (`modellint.static.needs`): "scope" (`scope_of`), "project" (which
    classes are module classes, through the project's other files) and "semantic"
    (`context.semantic`, which reads both). The engine builds the project index only for a run
    whose enabled rules need "project"; a rule that reads what it did not declare fails
    (ML001). A rule that declares nothing gets all of it.
    """

    triggers: ClassVar[tuple[str, ...]] = ()
    needs: ClassVar[frozenset[str]] = NEEDS
    # its own visit_/leave_ method names (set for each subclass by __init_subclass__)
    _visitor_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self.error: BaseException | None = None

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        fix: Fix | None = None,
        severity: Severity | None = None,
        statement: cst.CSTNode | None = None,
    ) -> None:
        """Report `node`. The finding belongs to a statement (a noqa comment on any of its
        lines hides it): by default the one the walk is in. A rule that reports after the walk
        left it (from `leave_Module`, or a site collected earlier) passes that `statement`;
        reported after the walk without one, it is the innermost statement around `node`."""
        held = (statement,) if statement is not None else self.context.statement_stack[-1:]
        self.context.reports.append((self, node, message, fix, severity or self.severity, held))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # computed once per class at import, before worker processes fork
        cls._visitor_names = visitor_names(cls, StaticRule)
        if not isinstance(cls.needs, frozenset) or not cls.needs <= NEEDS:
            raise TypeError(f"{cls.__qualname__}.needs must be a frozenset of {sorted(NEEDS)}, "
                            f"not {cls.needs!r}")

    def get_visitors(self) -> Mapping[str, Callable[[cst.CSTNode], None]]:
        return {name: self._modellint_guarded(getattr(self, name)) for name in self._visitor_names}

    def _modellint_guarded(self, method: Callable[[cst.CSTNode], Any]) -> Callable[[cst.CSTNode], None]:
        # one failing rule must not stop the others sharing the pass
        context = self.context

        def call(node: cst.CSTNode) -> None:
            if self.error is not None:
                return
            # what it reads of the context is checked against its `needs`
            context.running_rule = self
            try:
                method(node)
            except Exception as exc:  # noqa: BLE001 - becomes an ML001 finding
                self.error = exc
            context.running_rule = None

        return call


class RuntimeCheck:
    """What the runtime pass checks for one rule code, on the record of one model run.

    `check(run)` reads a `modellint.runtime.run.ModelRun` (the built model, the traces of its
    forwards, gradients, the outcome of each phase) and reports through `run.report(code,
    message, location)`. `needs` names the phases it reads (`PHASES`):
    the runner skips phases no enabled check needs. A `numeric` check reads tensor values and
    is skipped (and said to be) on the `meta` device. `explains(run, failure)` tells whether
    this check reports a failed phase itself, so that ML701 does not report it again.

    A class of this kind that is not a `Rule` is the runtime half of a rule documented by a
    static rule (one whose `passes` include "runtime"): it is registered through
    `modellint_add_rules` beside it, under the same code.
    """

    code: ClassVar[str]
    needs: ClassVar[frozenset[str]] = frozenset()
    numeric: ClassVar[bool] = False
    valid: ClassVar[list[Valid | str]] = []
    invalid: ClassVar[list[Invalid]] = []

    def check(self, run: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} defines no check(run)")

    def explains(self, run: Any, failure: Any) -> bool:
        return False


class RuntimeRule(Rule, RuntimeCheck):
    """A rule found only by the runtime pass: its documentation and its `check(run)`."""

    passes: ClassVar[tuple[str, ...]] = ("runtime",)


class RunCheck:
    """What `modellint run` (and `modellint.watching()`) checks for one rule code, on the record
    of a watched training run (`modellint.watching.record.Recorder`: optimizers and their steps,
    schedulers, model forwards and modes, backward passes, DataLoader epochs).

    `check(record)` reports through `record.report(code, message, site)`, where `site` is a
    `(file, line, function)` of the user's code. A class of this kind that is not a `Rule` is
    the run half of a rule documented elsewhere (one whose `passes` include "run"), registered
    through `modellint_add_rules` beside it, under the same code.
    """

    code: ClassVar[str]

    def check(self, record: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} defines no check(record)")


class RunRule(Rule, RunCheck):
    """A rule found only by watching a training run: its documentation and its
    `check(record)`."""

    passes: ClassVar[tuple[str, ...]] = ("run",)
