"""One model run: the runner that builds a model and runs the phases the enabled checks need,
and the record it leaves (`ModelRun`), which runtime checks (`modellint.rule.RuntimeCheck`,
one class per rule code in `modellint.rules.runtime`) read and report through.

The runner holds no rule logic and names no rule: which phases run follows from the `needs`
of the enabled checks, what a device cannot do (tensor values on `meta`) is marked in
`ModelRun.skipped`, and a failed phase is kept as a `Failure` for the checks to explain.
The runner itself reports only that a model could not be checked (ML002, `NOT_CHECKED`).
"""

from __future__ import annotations

import contextlib
import inspect
import re
import traceback
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any, cast

import torch
from torch import nn

from modellint.finding import RawFinding
from modellint.records import record
from modellint.runtime import inputs as inputs_mod
from modellint.runtime.build import (
    CreationRecorder,
    available_memory,
    build,
    left_out_binding,
    parameter_count_on_meta,
    required_arguments,
)
from modellint.runtime.phases import (  # noqa: F401 - PHASES, OOM: the runner's vocabulary
    FORWARD,
    INTERNAL,
    MEMORY,
    NOT_CHECKED,
    OOM,
    PHASES,
    REPEAT,
    TRAIN,
    TWIN,
    attribute_location,
    first_line,
    short_path,
)
from modellint.runtime.sources import UserCode, attribute_line, class_location
from modellint.runtime.tracer import Mismatch, Tracer, shape_text, tensors_in

BASE_ATTRS = frozenset(vars(nn.Module()).keys()) | {"training"}


# a finding as the run reports it: code, message and source location (what every pass reports)
Raw = RawFinding


def _probe_weights(output: torch.Tensor) -> torch.Tensor:
    """Fixed random weights of the stand-in loss, the weighted sum of the outputs: their plain
    sum has no gradient through a last LayerNorm or softmax (whose outputs sum to a constant),
    and every layer before one looked dead (ML706 on DINO's ViT)."""
    generator = torch.Generator(device=output.device).manual_seed(0)
    return torch.randn(output.shape, generator=generator, device=output.device)


# torch's words for an input whose spatial size the model's downsampling took to nothing
# (an inferred 32x32 through a U-Net made for 256x256): a larger size may pass
_TOO_SMALL = re.compile(
    r"more than 1 spatial element|Output size is too small|Kernel size can't be greater than "
    r"actual input size|smaller than (the )?kernel|input (image|size) .*too small")


@record
class Failure:
    """A phase that raised: where the model was (`tracer.innermost()`), the exception, the
    innermost frame of the user's code."""

    phase: str  # "build", FORWARD, REPEAT or TRAIN
    exc: BaseException
    tracer: Tracer | None
    site: tuple[str, int, str] | None

    @property
    def path(self) -> str | None:
        return self.tracer.innermost() if self.tracer is not None else None

    @property
    def mismatch(self) -> Mismatch | None:
        """The device/dtype mismatch at the module that failed, if there was one."""
        if self.tracer is None:
            return None
        path = self.path
        return next((m for m in self.tracer.mismatches if m.path == path), None)

    @property
    def site_location(self) -> tuple[str, int] | None:
        return (self.site[0], self.site[1]) if self.site else None


@record
class Twin:
    """The TWIN phase: a fresh instance that loaded the model's state_dict (or the reason it
    could not), its forward's tracer and output."""

    model: nn.Module | None = None
    tracer: Tracer | None = None
    output: Any = None
    load_error: BaseException | None = None
    # whether its output matched the reference forward's; None when not compared
    matches: bool | None = None


@record
class PlainAttribute:
    """A module attribute that holds what registration should own: a plain tensor, or a
    plain container of modules or parameters the model does not register."""

    path: str
    module: nn.Module
    attr: str
    value: Any
    modules: list[nn.Module] = field(default_factory=list)
    parameters: list[nn.Parameter] = field(default_factory=list)

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.value, torch.Tensor)


def outputs_match(a, b) -> bool:
    ta, tb = list(tensors_in(a)), list(tensors_in(b))
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb, strict=True):
        if x.shape != y.shape:
            return False
        if x.is_floating_point():
            if not torch.allclose(x.float(), y.float(), rtol=1e-4, atol=1e-5, equal_nan=True):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def format_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class ModelRun:
    """The record of one model run, read by the runtime checks. Once the runner is done it is
    sealed: its attributes can no longer be assigned (a check reads it and reports through
    `report`, it does not change what another check sees).

    `model` is the built model (after the train phase its parameters hold their gradients);
    `first`, `repeat`, `train` are the tracers of those forwards (None when not run);
    `twin` the TWIN phase; `memory` the estimate of the MEMORY phase; `failures` the phases
    that raised; `skipped` the phases not run, with the reason.
    """

    def __init__(self, *, label: str, name: str, device: str, enabled: Iterable[str]) -> None:
        self.label = label
        self.name = name
        self.device = device
        self.numeric = device != "meta"
        self.enabled = frozenset(enabled)
        self.model: nn.Module | None = None
        self.is_instance = False  # a model given built (no factory: no twin, no build lines)
        self.built = False
        self.parameters = 0
        self.inputs = ""  # text of the input fed (that fitted, or whose failure is reported)
        # the specs of that input (None: given); when the first forward failed, of its input
        self.input_specs: list[dict[str, Any]] | None = None
        # how to give an input where none fits: the configuration, or `trace --input`
        self.input_hint: str | None = None
        self.inferred: str | None = None  # the layer the input was inferred from
        self.batch: int | None = None
        self.first: Tracer | None = None
        self.first_output: Any = None
        self.repeat: Tracer | None = None
        self.twin: Twin | None = None
        self.train: Tracer | None = None
        self.stand_in: Tracer | None = None  # a train forward's called modules' outputs
        self.stand_in_error: str | None = None
        self.memory: Any = None
        self.memory_target: int | None = None
        self.build_failure: Failure | None = None
        self.failures: list[Failure] = []
        self.skipped: dict[str, str] = {}
        self.root_location: tuple[str, int] | None = None
        self.root_range: tuple[str, int, int] | None = None
        self.findings: list[Raw] = []
        self.notes: list[str] = []
        self.lines: dict[str, tuple[str, int] | None] = {}
        self.checks: tuple[Any, ...] = ()  # the checks that read this run
        self._plain: list[PlainAttribute] | None = None
        self._sealed = False

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_sealed", False):
            raise AttributeError(f"the record of a model run is read-only (setting {name!r})")
        super().__setattr__(name, value)

    def seal(self) -> None:
        self._sealed = True

    # -- reporting ---------------------------------------------------------------------------
    def report(self, code: str, message: str, location: tuple[str, int] | None) -> None:
        """A finding of `code` at `location` (None: the model's own definition)."""
        if code not in self.enabled:
            return
        if location is None:
            location = self.root_location
        file, line = location if location else (None, 1)
        # the same finding twice is shown once (by the pipeline: `modellint.pipeline`)
        self.findings.append(Raw(code, message, file, line))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def explained_elsewhere(self, failure: Failure, by: Any) -> bool:
        """Whether a check other than `by` reports `failure` itself."""
        return any(check is not by and check.explains(self, failure) for check in self.checks)

    @property
    def display_name(self) -> str:
        return self.label or self.name

    def inferred_note(self) -> str:
        return f" (input inferred from {self.inferred})" if self.inferred else ""

    def config_hint(self) -> str:
        if self.input_hint is not None:
            return self.input_hint
        return (f"[[tool.modellint.runtime.models]] target = \"{self.label}\", "
                f"inputs = [[2, 3, 32, 32]]")

    def submodule(self, path: str | None) -> nn.Module:
        assert self.model is not None
        return self.model.get_submodule(path) if path else self.model

    # -- where a module was built ------------------------------------------------------------
    def location_of(self, path: str) -> tuple[str, int] | None:
        """The source line that built the sub-module at `path` ('' is the model itself)."""
        if path in self.lines:
            return self.lines[path]
        if not path:
            return self.root_location
        parent, _, attr = path.rpartition(".")
        assert self.model is not None
        try:
            owner = self.model.get_submodule(parent) if parent else self.model
        except AttributeError:
            return self.root_location
        found = attribute_line(type(owner), attr)
        if found is None and not attr.isidentifier():  # an item of a ModuleList/Sequential
            found = self.location_of(parent)
        self.lines[path] = found or self.root_location
        return self.lines[path]

    def report_location(self, path: str) -> tuple[tuple[str, int] | None, str]:
        """Where to report a problem of the module at `path`: the most specific line in the
        checked class's own source (`self.stage2 = Block(32)`), and a note naming the
        module's own creation line when that is elsewhere."""
        own = self.location_of(path)
        root = self.root_range
        parts = path.split(".") if path else []
        if root is not None:
            for depth in range(len(parts), 0, -1):
                loc = self.location_of(".".join(parts[:depth]))
                if loc and loc[0] == root[0] and root[1] <= loc[1] < root[2]:
                    note = ""
                    if own and own != loc:
                        note = f" (built at {short_path(own[0])}:{own[1]})"
                    return loc, note
        return own, ""

    # -- facts of registration ---------------------------------------------------------------
    def plain_attributes(self) -> list[PlainAttribute]:
        """Attributes of the model's modules holding plain tensors, or plain containers of
        modules or parameters that are not registered."""
        if self._plain is not None:
            return self._plain
        model = self.model
        assert model is not None
        registered = {id(m) for m in model.modules()}
        params = {id(p) for p in model.parameters()}
        found: list[PlainAttribute] = []
        for path, module in model.named_modules():
            for attr, value in vars(module).items():
                if attr in BASE_ATTRS:
                    continue
                if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                    if value.__class__.__name__ != "FunctionalTensor":
                        found.append(PlainAttribute(path, module, attr, value))
                    continue
                if not isinstance(value, (list, tuple, dict, set, frozenset)):
                    continue
                items = list(value.values() if isinstance(value, dict) else value)
                nested: list[Any] = []
                for item in items[:1000]:
                    if isinstance(item, (list, tuple)):
                        nested.extend(item[:100])
                items = items[:1000] + nested
                modules = [m for m in items if isinstance(m, nn.Module) and id(m) not in registered]
                loose = [p for p in items if isinstance(p, nn.Parameter) and id(p) not in params]
                if modules or loose:
                    found.append(PlainAttribute(path, module, attr, value, modules, loose))
        object.__setattr__(self, "_plain", found)
        return found

    def contained(self) -> set[int]:
        """Ids of the modules held in plain containers (reported where the container is)."""
        return {id(m) for plain in self.plain_attributes() for m in plain.modules}

    def registration_broken(self) -> bool:
        """Whether some state escapes registration: then what `state_dict()` holds is known
        to be incomplete, and a reloaded twin says nothing new."""
        if self.plain_attributes():
            return True
        return bool(self.first is not None and self.first.unregistered)

    def rebuilt_in_forward(self) -> list[int]:
        """Ids of unregistered modules called in the first forward but not the second: built
        anew on every call."""
        if self.first is None or self.repeat is None:
            return []
        contained = self.contained()
        return [key for key in self.first.unregistered
                if key not in contained and key not in self.repeat.unregistered]


class Runner:
    """Builds one model and runs the phases `checks` need; `run()` returns the sealed record
    after every check has read it.

    `factory` builds the model (a class or function; called with `kwargs` under the device);
    `instance` is an already-built model (the Python API), for which the TWIN phase is not
    possible. `specs` are input specs, or None to infer them; `given` are ready-made (args,
    kwargs) inputs (the Python API). `where(phase, module_path)` is told where the run is.
    `input_hint` replaces the configuration hint of an input that could not be inferred or
    did not fit (`trace` says `--input`).
    """

    def __init__(
        self,
        checks: Iterable[Any],
        *,
        factory: Callable[..., nn.Module] | None = None,
        instance: nn.Module | None = None,
        kwargs: dict[str, Any] | None = None,
        specs: list[dict[str, Any]] | None = None,
        given: tuple[tuple, dict] | None = None,
        device: str = "cpu",
        own_codes: Iterable[str] = (NOT_CHECKED, INTERNAL),
        user_roots: list[str] | None = None,
        label: str = "",
        where: Callable[[str, str], None] | None = None,
        train: bool = True,
        memory_target: int | None = None,
        input_hint: str | None = None,
    ) -> None:
        self.checks = list(checks)
        self.factory = factory
        self.instance = instance
        self.kwargs = kwargs or {}
        self.specs = specs
        self.given = given
        self.device = device
        self.user_code = UserCode(user_roots or [])
        self.train_phases = train
        self._where = where
        name = getattr(factory or type(instance), "__name__", label)
        codes = {c.code for c in self.checks} | set(own_codes)
        self.run_record = ModelRun(label=label, name=name, device=device, enabled=codes)
        self.run_record.memory_target = memory_target
        self.run_record.input_hint = input_hint
        numeric = device != "meta"
        # a check that reads tensor values cannot run on meta: said once, in a note
        self.active = [c for c in self.checks if numeric or not c.numeric]
        self.needs = set().union(*(c.needs for c in self.active)) if self.active else set()
        self.run_record.checks = tuple(self.active)
        self.recorder: CreationRecorder | None = None

    # -- helpers -----------------------------------------------------------------------------
    def where(self, phase: str, path: str = "") -> None:
        if self._where is not None:
            self._where(phase, path)

    def _skip(self, phase: str, reason: str) -> None:
        self.run_record.skipped.setdefault(phase, reason)

    def _tracer(self, model: nn.Module, **options) -> Tracer:
        return Tracer(model, where=lambda p: self.where("forward", p), **options)

    def _forward(self, tracer: Tracer, args, kwargs, *, grad: bool, model=None):
        model = model if model is not None else self.run_record.model
        assert model is not None
        tracer.user_code = self.user_code
        self.where("forward")
        with tracer, torch.set_grad_enabled(grad):
            return model(*args, **kwargs)

    def _failed(self, phase: str, exc: BaseException, tracer: Tracer | None) -> None:
        site = self.user_code.innermost_traceback(exc.__traceback__)
        left_out = self._left_out(exc, site)
        if left_out is not None:
            what = "was not run" if phase == FORWARD else f"was not checked past its {phase}"
            self.run_record.report(NOT_CHECKED, f"`{self.run_record.label}` {what}: {left_out}",
                                   None)
            return
        self.run_record.failures.append(Failure(phase, exc, tracer, site))

    @staticmethod
    def _left_out(exc: BaseException, site: tuple[str, int, str] | None) -> str | None:
        """What to say of a NameError of a name bound only by a line the runtime pass left
        out of a file (it runs definitions only): not a mistake of the model."""
        found = left_out_binding(exc)
        if found is None:
            return None
        name, path, line = found
        at = f" at {short_path(site[0])}:{site[1]}" if site else ""
        return (f"its code reads `{name}`{at}, which {short_path(path)}:{line} binds by running "
                f"code, and of a file the runtime pass runs only the definitions (imports, "
                f"classes, functions, assignments of plain values); bind `{name}` to a "
                f"constant there, or compute it inside the model")

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> ModelRun:
        run = self.run_record
        skipped = [c.code for c in self.checks if c.numeric and not run.numeric]
        if skipped:
            run.note(f"numeric checks ({', '.join(sorted(skipped))}) were skipped on the "
                     f"{self.device} device")
            self._skip(TWIN, f"the {self.device} device holds no values")
            self._skip(TRAIN, f"the {self.device} device holds no values")
        self._phases()
        run.seal()
        for check in self.active:
            try:
                check.check(run)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001 - one check must not stop the others
                run.report(INTERNAL, f"the runtime check {check.code} "
                           f"({type(check).__name__}) failed on `{run.display_name}`: "
                           f"{first_line(exc)}", None)
        if run.build_failure is not None and not self._explained(run.build_failure):
            self._build_not_checked(run.build_failure)
        return run

    def _explained(self, failure: Failure) -> bool:
        return any(check.explains(self.run_record, failure) for check in self.active)

    def _phases(self) -> None:
        run = self.run_record
        self._locate_root(self.factory if self.instance is None else type(self.instance))
        if self.instance is not None:
            run.model = self.instance
            run.is_instance = True
        elif not self._build():
            return
        model = run.model
        assert model is not None
        run.built = True
        run.parameters = sum(p.numel() for p in model.parameters())
        self._record_lines()
        run.plain_attributes()  # as built: what forward later stores on the model is not state
        if not self.needs:
            return
        args_kwargs = self._first_forward()
        if args_kwargs is None:
            return
        args, kwargs = args_kwargs
        wants_train = self.train_phases and bool(self.needs & {TRAIN, MEMORY})
        assert run.first is not None  # set by the first forward that returned the input
        if not run.numeric:
            if REPEAT in self.needs and run.first.unregistered:
                self._second_forward(args, kwargs)  # which modules are built per call
            if MEMORY in self.needs and run.memory_target is not None and self.train_phases:
                self._memory_on_meta(args, kwargs)
            return
        state_applies = TWIN in self.needs and not run.is_instance
        if state_applies and not run.registration_broken():
            # the reloaded twin's forward first: when it agrees with the first forward
            # everywhere, the model is both deterministic in eval mode and described by its
            # state_dict, and the second forward is not needed
            self._twin_forward(args, kwargs)
            twin = run.twin
            if (twin is not None and twin.tracer is not None
                    and twin.tracer.first_difference is None
                    and outputs_match(run.first_output, twin.output)):
                twin.matches = True
                self._skip(REPEAT, "the twin's forward agreed with the first everywhere")
                if wants_train:
                    self._train(args, kwargs)
                return
        reference = run.first_output
        if REPEAT in self.needs:
            reference = self._second_forward(args, kwargs)
        if (reference is not None and state_applies and not run.registration_broken()
                and not run.rebuilt_in_forward()):
            if run.twin is None:
                self._twin_forward(args, kwargs)
            twin = run.twin
            if twin is not None and twin.tracer is not None:
                twin.matches = outputs_match(reference, twin.output)
        if wants_train:
            self._train(args, kwargs)

    def _locate_root(self, target) -> None:
        run = self.run_record
        if inspect.isclass(target):
            loc = class_location(target)
            try:
                lines, start = inspect.getsourcelines(target)
                path = inspect.getsourcefile(target)
                if path:
                    run.root_range = (path, start, start + len(lines))
            except (OSError, TypeError):
                pass
        else:
            try:
                target = inspect.unwrap(target)  # a decorated builder: its own definition
                file = inspect.getsourcefile(target)
                loc = (file, inspect.getsourcelines(target)[1]) if file else None
            except (OSError, TypeError):
                loc = None
        run.root_location = loc if loc and loc[0] else None

    def _build(self) -> bool:
        run = self.run_record
        self.where("build")
        missing = required_arguments(self.factory)
        if missing and not self.kwargs:
            run.report(NOT_CHECKED, f"`{run.label}` was not built: its constructor needs "
                       f"{', '.join(f'`{m}`' for m in missing)}; configure it as "
                       f"[[tool.modellint.runtime.models]] target = \"{run.label}\", "
                       f"kwargs = {{ {', '.join(f'{m} = ...' for m in missing)} }}", None)
            return False
        if self.device != "meta":
            needed = parameter_count_on_meta(self.factory, self.kwargs)
            available = available_memory(self.device)
            if needed and available and needed > available * 0.6:
                run.report(NOT_CHECKED, f"`{run.label}` was not built: its parameters need "
                           f"{gib(needed)}, more than the {gib(available)} available on "
                           f"{self.device}; check it with --device meta", None)
                return False
        self.recorder = CreationRecorder(self.user_code)
        try:
            run.model = build(self.factory, self.kwargs, self.device, self.recorder)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - user code may raise anything
            site = self.user_code.innermost_traceback(exc.__traceback__)
            run.build_failure = Failure("build", exc, None, site)
            return False
        return True

    def _build_not_checked(self, failure: Failure) -> None:
        run = self.run_record
        exc, loc = failure.exc, failure.site_location
        left_out = self._left_out(exc, failure.site)
        if left_out is not None:
            run.report(NOT_CHECKED, f"`{run.label}` was not built: {left_out}", None)
            return
        text = first_line(exc)
        if isinstance(exc, SystemExit):
            text = f"it called sys.exit({exc.code!r})"
        elif isinstance(exc, MemoryError) or OOM.search(str(exc)):
            text = f"it ran out of memory ({text})"
        at = f" at {short_path(loc[0])}:{loc[1]}" if loc else ""
        run.report(NOT_CHECKED, f"`{run.label}` could not be built: {text}{at}", None)

    def _record_lines(self) -> None:
        run = self.run_record
        assert run.model is not None
        lines = self.recorder.lines if self.recorder is not None else {}
        for path, module in run.model.named_modules(remove_duplicate=False):
            if path and id(module) in lines and path not in run.lines:
                run.lines[path] = lines[id(module)]

    # -- FORWARD -----------------------------------------------------------------------------
    def _first_forward(self):
        run = self.run_record
        model = run.model
        assert model is not None
        model.eval()
        if self.given is not None:
            candidates = [None]
        elif self.specs is not None:
            candidates = [self.specs]
        else:
            inference = inputs_mod.infer(model)
            count, names = inputs_mod.forward_arity(model)
            if inference is None:
                run.report(NOT_CHECKED, f"`{run.label}` was not run: no example input could be "
                           f"inferred (no Conv, Linear, Embedding, RNN or Transformer layer "
                           f"takes the input); configure one: {run.config_hint()}", None)
                return None
            if count > len(inference.candidates[0]):
                run.report(NOT_CHECKED, f"`{run.label}` was not run: its forward takes "
                           f"{count} inputs ({', '.join(names)}); configure them: "
                           f"{run.config_hint()}", None)
                return None
            candidates = inference.candidates
            run.inferred = inference.source
        failures = []
        for specs in candidates:
            if specs is None:
                args, kwargs = self.given
                args = tuple(_to_device(a, self.device) for a in args)
                kwargs = {k: _to_device(v, self.device) for k, v in kwargs.items()}
            else:
                args, kwargs = inputs_mod.make_all(specs, self.device)
            # values are looked at only for a check that reads them (`trace` runs none)
            values = run.numeric and any(c.numeric for c in self.active)
            tracer = self._tracer(model, numeric=values, fingerprints=values)
            try:
                output = self._forward(tracer, args, kwargs, grad=False)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001
                failures.append((exc, tracer))
                if run.inferred is None or not self._size_may_cure(failures, len(candidates)):
                    # the failure reported is the first input's
                    first = candidates[0]
                    run.inputs = inputs_mod.spec_text(first) if first else _given_text(args)
                    run.input_specs = first
                    self._first_failed(*failures[0])
                    return None
                continue
            if specs is not None and run.inferred:
                run.inferred += f": {inputs_mod.spec_text(specs)}"
            run.inputs = inputs_mod.spec_text(specs) if specs else _given_text(args)
            run.input_specs = specs
            run.batch = _batch(specs, args if specs is None else None)
            run.first = tracer
            run.first_output = output
            return args, kwargs
        run.report(NOT_CHECKED, f"`{run.label}` was not run: no input size fits the inferred "
                   f"{run.inferred} (tried {len(candidates)} sizes; the last failure: "
                   f"{first_line(failures[-1][0])}); configure one: {run.config_hint()}", None)
        return None

    def _first_failed(self, exc: BaseException, tracer: Tracer) -> None:
        run = self.run_record
        held = [p for p in run.plain_attributes() if p.modules]
        if run.inferred and held:
            # the layers the model calls first may be among those it does not register: the
            # input inferred from the registered ones is a guess, and its failure says nothing
            plain = held[0]
            owner = type(plain.module).__name__
            run.report(NOT_CHECKED, f"`{run.label}` was not run: its input could not be "
                       f"inferred because `self.{plain.attr}` of `{owner}` is a plain "
                       f"{type(plain.value).__name__} of modules the model does not register "
                       f"(the input was guessed from {run.inferred}, and the forward failed: "
                       f"{first_line(exc)}); register them, or configure the input: "
                       f"{run.config_hint()}", None)
            return
        self._failed(FORWARD, exc, tracer)

    def _size_may_cure(self, failures, total: int) -> bool:
        """Whether trying another input size may help: the failure says the input is too small
        for the model's downsampling, or moves or changes with the size (a Flatten→Linear
        width), rather than staying put (a channel mismatch)."""
        exc = failures[-1][0]
        if _TOO_SMALL.search(str(exc)):
            return len(failures) < total
        if isinstance(exc, (AssertionError, ValueError)):
            # the model's own check of the input's size names the size it got: a message that
            # changes with the size says another size may pass (never a mistake of the model)
            if len(failures) < 2:
                return total > 1
            return len({str(e) for e, _ in failures}) > 1
        if not isinstance(exc, RuntimeError) or OOM.search(str(exc)):
            return False
        if len(failures) < 2:
            return total > 1
        keys = {self._failure_key(t) for _, t in failures}
        if len(keys) > 1:
            return True
        return len(failures) < 3 and total > len(failures)

    def _failure_key(self, tracer: Tracer):
        path = tracer.innermost()
        shapes = tracer.innermost_shapes()
        module = self.run_record.submodule(path)
        shape = shapes[0] if shapes else []
        if isinstance(module, nn.Linear) or not shape:
            return path, tuple(shape[-1:])
        return path, tuple(shape[1:2])

    # -- REPEAT ------------------------------------------------------------------------------
    def _second_forward(self, args, kwargs):
        """A second eval forward; its output, or None when it failed or is no reference (it
        disagrees with the first, or modules are built per call)."""
        run = self.run_record
        tracer = self._tracer(run.model, rows=False, fingerprints=run.numeric)
        tracer.reference = run.first.fingerprints
        try:
            output = self._forward(tracer, args, kwargs, grad=False)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001
            self._failed(REPEAT, exc, tracer)
            return None
        run.repeat = tracer
        if not run.numeric:
            return output
        if run.rebuilt_in_forward() or tracer.first_difference is not None:
            return None
        return output

    # -- TWIN --------------------------------------------------------------------------------
    def _twin_forward(self, args, kwargs) -> None:
        """A fresh instance loaded with the model's state_dict, run on the same input."""
        run = self.run_record
        run.twin = twin = Twin()
        self.where("build")
        try:
            # its parameters are overwritten by the load: their initialisation is skipped
            # (unless the constructor itself needs initialised values)
            try:
                model = build(self.factory, self.kwargs, self.device, None, seed=1,
                              skip_parameter_init=True)
            except Exception:  # noqa: BLE001
                model = build(self.factory, self.kwargs, self.device, None, seed=1)
            assert run.model is not None
            model.load_state_dict(run.model.state_dict(), strict=True)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001
            twin.load_error = exc
            return
        model.eval()
        twin.model = model
        tracer = Tracer(model, rows=False, fingerprints=True)
        assert run.first is not None
        tracer.reference = run.first.fingerprints
        try:
            twin.output = self._forward(tracer, args, kwargs, grad=False, model=model)
        except Exception:  # noqa: BLE001 - a failure here is reported by other checks
            return
        twin.tracer = tracer

    # -- TRAIN and MEMORY --------------------------------------------------------------------
    def _meter(self, tracer: Tracer):
        run = self.run_record
        if MEMORY not in self.needs or run.memory_target is None:
            return contextlib.nullcontext()
        from modellint.runtime.memory import ActivationMeter

        assert run.model is not None
        return ActivationMeter(run.model, tracer.innermost)

    def _estimate(self, meter) -> None:
        run = self.run_record
        if not hasattr(meter, "saved"):
            return
        from modellint.runtime.memory import estimate

        assert run.model is not None
        run.memory = estimate(run.model, meter, optimizer="adamw", batch=run.batch)

    def _train(self, args, kwargs) -> None:
        run = self.run_record
        model = run.model
        assert model is not None and run.first is not None
        model.train()
        model.zero_grad(set_to_none=True)
        # NaN/Inf were looked for in the eval pass; look again only if none was found there
        tracer = self._tracer(model, rows=False, numeric=run.first.non_finite is None)
        meter = self._meter(tracer)
        stand_in = None
        try:
            with meter:
                output = self._forward(tracer, args, kwargs, grad=True)
            self._estimate(meter)
            outputs = [t for t in tensors_in(output)
                       if t.is_floating_point() and t.requires_grad]
            if not outputs:
                del output
                stand_in = self._called_outputs(args, kwargs)
                if stand_in is None:
                    self._skip(TRAIN, "the forward returns no tensor and calls no module "
                               "whose output needs a gradient")
                    return
                outputs = stand_in.outputs
            self.where("backward")
            with torch.enable_grad():  # whatever grad mode the model's code left set
                # a tensor, never sum()'s start 0: `outputs` is not empty
                loss = cast(torch.Tensor, sum((t.float() * _probe_weights(t)).sum()
                                              for t in outputs))
                loss.backward()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001
            if stand_in is not None:
                run.stand_in = stand_in
                run.stand_in_error = first_line(exc)
                self._skip(TRAIN, f"a backward from the outputs of the modules the forward "
                           f"calls failed ({first_line(exc)})")
            else:
                self._failed(TRAIN, exc, tracer)
            return
        finally:
            model.eval()
        run.train = tracer
        run.stand_in = stand_in

    def _called_outputs(self, args, kwargs) -> Tracer | None:
        """A train-mode forward of a model whose forward returns no tensor (it stores or
        logs its result), keeping the outputs of the modules it calls: the backward of their
        weighted sum (`_probe_weights`) reaches every parameter a called module uses. None when
        there are none."""
        model = self.run_record.model
        assert model is not None
        model.zero_grad(set_to_none=True)
        tracer = self._tracer(model, rows=False, keep_outputs=True)
        self._forward(tracer, args, kwargs, grad=True)
        return tracer if tracer.outputs else None

    def _memory_on_meta(self, args, kwargs) -> None:
        """On meta the train pass is skipped; one train-mode forward with gradients (nothing
        is allocated) measures the activations."""
        model = self.run_record.model
        assert model is not None
        model.train()
        tracer = self._tracer(model, rows=False)
        meter = self._meter(tracer)
        try:
            with meter:
                output = self._forward(tracer, args, kwargs, grad=True)
            del output
        except Exception:  # noqa: BLE001 - the eval forwards reported what fails
            return
        finally:
            model.eval()
        self._estimate(meter)


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


def _given_text(args) -> str:
    return ", ".join(shape_text(t.shape) for t in tensors_in(args))


def _batch(specs, given) -> int | None:
    """The batch size of the traced input (its first input's first dimension)."""
    for spec in specs or []:
        if spec.get("shape"):
            return int(spec["shape"][0])
    if given is not None:
        for tensor in tensors_in(given):
            if tensor.dim():
                return int(tensor.shape[0])
    return None
