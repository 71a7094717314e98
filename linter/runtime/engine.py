"""Check one model: build it, inspect its registration, trace eval and train passes.

`ModelCheck(...).run()` returns an `Outcome`: raw findings (code, message, file, line), the
trace rows of the first forward, and notes. It runs in a worker subprocess for `check
--runtime` and in-process for the Python API, `trace` and the pytest plugin.
"""

from __future__ import annotations

import inspect
import math
import re
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from modellint.runtime import inputs as inputs_mod
from modellint.runtime.build import (
    CreationRecorder,
    available_memory,
    build,
    parameter_count_on_meta,
    required_arguments,
)
from modellint.runtime.sources import UserCode, attribute_line, class_location
from modellint.runtime.tracer import Tracer, describe, fingerprints_differ, shape_text, tensors_in

_BASE_ATTRS = frozenset(vars(nn.Module()).keys()) | {"training"}
_OOM = re.compile(r"out of memory|can't allocate memory|CUDA error: out of memory", re.I)
_NO_ATTR = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
RUNTIME_CODES = ("ML101", "ML102", "ML103", "ML104", "ML106", "ML107", "ML108", "ML505",
                 "ML701", "ML702", "ML703", "ML704", "ML705", "ML706", "ML707")


@dataclass
class Raw:
    code: str
    message: str
    file: str | None
    line: int

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "file": self.file, "line": self.line}


@dataclass
class Outcome:
    findings: list[Raw] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    inputs: str = ""
    parameters: int = 0
    built: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [f.to_json() for f in self.findings],
            "notes": self.notes, "inputs": self.inputs, "parameters": self.parameters,
            "built": self.built,
        }


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def human(n: float) -> str:
    for unit in ("", "K", "M", "B", "T"):
        if abs(n) < 1000:
            return f"{n:.3g}{unit}"
        n /= 1000
    return f"{n:.3g}P"


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


class ModelCheck:
    """One model through the runtime checks.

    `factory` builds the model (a class or function; called with `kwargs` under the device);
    `instance` is an already-built model (the Python API), for which checks that need a second
    instance (ML505) are skipped. `specs` are input specs, or None to infer them; `given`
    are ready-made (args, kwargs) inputs (the Python API).
    """

    def __init__(
        self,
        *,
        factory: Callable[..., nn.Module] | None = None,
        instance: nn.Module | None = None,
        kwargs: dict[str, Any] | None = None,
        specs: list[dict[str, Any]] | None = None,
        given: tuple[tuple, dict] | None = None,
        device: str = "cpu",
        enabled: set[str] | frozenset[str] | None = None,
        user_roots: list[str] | None = None,
        label: str = "",
        where: Callable[[str, str], None] | None = None,
        train: bool = True,
        memory_target: int | None = None,
    ) -> None:
        self.factory = factory
        self.instance = instance
        self.kwargs = kwargs or {}
        self.specs = specs
        self.given = given
        self.device = device
        self.enabled = set(RUNTIME_CODES) | {"ML002"} if enabled is None else set(enabled)
        self.user_code = UserCode(user_roots or [])
        self.label = label
        self._where = where
        self.numeric = device != "meta"
        self.train = train
        # ML707: bytes of device memory a training step must fit in (None: not checked)
        self.memory_target = memory_target if "ML707" in self.enabled else None
        self.meter = None
        self.outcome = Outcome()
        self.lines: dict[str, tuple[str, int]] = {}
        self.model: nn.Module | None = None
        self.root_location: tuple[str, int] | None = None
        self.inferred: str | None = None
        self.contained: set[int] = set()  # modules found in plain container attributes

    # -- helpers ----------------------------------------------------------------------------
    def where(self, phase: str, path: str = "") -> None:
        if self._where is not None:
            self._where(phase, path)

    def report(self, code: str, message: str, location: tuple[str, int] | None) -> None:
        if code not in self.enabled:
            return
        if location is None:
            location = self.root_location
        file, line = location if location else (None, 1)
        key = (code, file, line, message)
        if any((f.code, f.file, f.line, f.message) == key for f in self.outcome.findings):
            return
        self.outcome.findings.append(Raw(code, message, file, line))

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
                        note = f" (built at {_short(own[0])}:{own[1]})"
                    return loc, note
        return own, ""

    def _found(self, *codes: str) -> bool:
        return any(f.code in codes for f in self.outcome.findings)

    @property
    def name(self) -> str:
        return getattr(self.factory or type(self.instance), "__name__", self.label)

    def inferred_note(self) -> str:
        return f" (input inferred from {self.inferred})" if self.inferred else ""

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> Outcome:
        if self.instance is not None:
            self.model = self.instance
            self._locate_root(type(self.instance))
        else:
            self._locate_root(self.factory)
            if not self._build():
                return self.outcome
        model = self.model
        assert model is not None
        self.outcome.built = True
        self.outcome.parameters = sum(p.numel() for p in model.parameters())
        self._record_lines()
        self.check_registration()
        args_kwargs = self._first_forward()
        if args_kwargs is None:
            return self.outcome
        args, kwargs = args_kwargs
        if not self.numeric:
            self.outcome.notes.append(
                "numeric checks (ML505, ML703-ML706) were skipped on the meta device")
            if self.first_tracer.unregistered:  # ML101 or ML107: a second call tells which
                self._second_forward(args, kwargs)
            if self.memory_target is not None and self.train:
                self.check_memory_on_meta(args, kwargs)
            return self.outcome
        twin_run = None
        if self._state_check_applies() and not self.first_tracer.unregistered:
            # the reloaded twin's forward first: when it agrees with the first forward
            # everywhere, the model is both deterministic in eval mode (ML705) and described
            # by its state_dict (ML505), and the second forward is not needed
            twin_run = self._twin_forward(args, kwargs)
            if twin_run is not None:
                _, tracer, output = twin_run
                if tracer.first_difference is None and _outputs_match(self.first_output,
                                                                     output):
                    if self.train:
                        self.check_training(args, kwargs)
                    return self.outcome
        reference = self._second_forward(args, kwargs)
        if reference is not None and self._state_check_applies():
            self.check_state_dict(args, kwargs, reference, twin_run)
        if self.train:
            self.check_training(args, kwargs)
        return self.outcome

    def _locate_root(self, factory) -> None:
        target = factory
        self.root_range = None
        if inspect.isclass(target):
            loc = class_location(target)
            try:
                lines, start = inspect.getsourcelines(target)
                path = inspect.getsourcefile(target)
                if path:
                    self.root_range = (path, start, start + len(lines))
            except (OSError, TypeError):
                pass
        else:
            try:
                target = inspect.unwrap(target)  # a decorated builder: its own definition
                loc = (inspect.getsourcefile(target), inspect.getsourcelines(target)[1])
            except (OSError, TypeError):
                loc = None
        self.root_location = loc if loc and loc[0] else None

    def _build(self) -> bool:
        self.where("build")
        missing = required_arguments(self.factory)
        if missing and not self.kwargs:
            self.report("ML002", f"`{self.label}` was not built: its constructor needs "
                        f"{', '.join(f'`{m}`' for m in missing)}; configure it as "
                        f"[[tool.modellint.runtime.models]] target = \"{self.label}\", "
                        f"kwargs = {{ {', '.join(f'{m} = ...' for m in missing)} }}", None)
            return False
        if self.device != "meta":
            needed = parameter_count_on_meta(self.factory, self.kwargs)
            available = available_memory(self.device)
            if needed and available and needed > available * 0.6:
                self.report("ML002", f"`{self.label}` was not built: its parameters need "
                            f"{gib(needed)}, more than the {gib(available)} available on "
                            f"{self.device}; check it with --device meta", None)
                return False
        recorder = CreationRecorder(self.user_code)
        self.recorder = recorder
        try:
            self.model = build(self.factory, self.kwargs, self.device, recorder)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - user code may raise anything
            self._build_failed(exc)
            return False
        return True

    def _build_failed(self, exc: BaseException) -> None:
        site = self.user_code.innermost_traceback(exc.__traceback__)
        loc = (site[0], site[1]) if site else None
        text = first_line(exc)
        if "before Module.__init__() call" in str(exc):
            self.report("ML104", f"`{self.label}` assigns a module or parameter before calling "
                        f"`super().__init__()` ({text}); call `super().__init__()` first", loc)
            return
        if isinstance(exc, SystemExit):
            text = f"it called sys.exit({exc.code!r})"
        elif isinstance(exc, MemoryError) or _OOM.search(str(exc)):
            text = f"it ran out of memory ({text})"
        at = f" at {_short(loc[0])}:{loc[1]}" if loc else ""
        self.report("ML002", f"`{self.label}` could not be built: {text}{at}", None)

    def _record_lines(self) -> None:
        assert self.model is not None
        lines = getattr(getattr(self, "recorder", None), "lines", {})
        for path, module in self.model.named_modules(remove_duplicate=False):
            if path and id(module) in lines and path not in self.lines:
                self.lines[path] = lines[id(module)]

    # -- registration -----------------------------------------------------------------------
    def check_registration(self) -> None:
        model = self.model
        assert model is not None
        registered = {id(m) for m in model.modules()}
        params = {id(p) for p in model.parameters()}
        for path, module in model.named_modules():
            for attr, value in vars(module).items():
                if attr in _BASE_ATTRS:
                    continue
                self._check_attribute(path, module, attr, value, registered, params)
        self._check_repeated()

    def _check_attribute(self, path, module, attr, value, registered, params) -> None:
        owner = f"`{type(module).__name__}`" + (f" (at `{path}`)" if path else "")
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
            if value.__class__.__name__ == "FunctionalTensor":
                return
            loc = attribute_line(type(module), attr) or self.location_of(path)
            self.report("ML103", f"`self.{attr}` of {owner} is a plain tensor "
                        f"{shape_text(value.shape)}, neither a parameter nor a buffer: "
                        f"`.to()`, `state_dict()` and the optimizer do not see it; use "
                        f"`self.register_buffer(\"{attr}\", ...)` or `nn.Parameter`", loc)
            return
        if not isinstance(value, (list, tuple, dict, set, frozenset)):
            return
        items = list(value.values() if isinstance(value, dict) else value)
        nested = []
        for item in items[:1000]:
            if isinstance(item, (list, tuple)):
                nested.extend(item[:100])
        items = items[:1000] + nested
        modules = [m for m in items if isinstance(m, nn.Module) and id(m) not in registered]
        self.contained.update(id(m) for m in modules)
        loose = [p for p in items if isinstance(p, nn.Parameter) and id(p) not in params]
        kind = type(value).__name__
        if modules:
            loc = attribute_line(type(module), attr) or self.location_of(path)
            wrapper = "nn.ModuleDict" if isinstance(value, dict) else "nn.ModuleList"
            self.report("ML101", f"`self.{attr}` of {owner} is a plain {kind} holding "
                        f"{len(modules)} module(s) ({type(modules[0]).__name__}) that "
                        f"`parameters()`, `.to()` and `state_dict()` never see; wrap it in "
                        f"`{wrapper}`", loc)
        if loose:
            loc = attribute_line(type(module), attr) or self.location_of(path)
            wrapper = "nn.ParameterDict" if isinstance(value, dict) else "nn.ParameterList"
            self.report("ML102", f"`self.{attr}` of {owner} is a plain {kind} holding "
                        f"{len(loose)} parameter(s) that `parameters()` and the optimizer "
                        f"never see; wrap it in `{wrapper}`", loc)

    def _check_repeated(self) -> None:
        model = self.model
        assert model is not None
        places: dict[int, list[str]] = defaultdict(list)
        objects: dict[int, nn.Module] = {}
        for path, module in model.named_modules(remove_duplicate=False):
            places[id(module)].append(path)
            objects[id(module)] = module
        for key, paths in places.items():
            if len(paths) < 2 or not any(True for _ in objects[key].parameters()):
                continue
            by_parent: dict[str, list[str]] = defaultdict(list)
            for path in paths:
                parent, _, name = path.rpartition(".")
                by_parent[parent].append(name)
            for parent, names in by_parent.items():
                if len(names) < 2:
                    continue
                container = model.get_submodule(parent) if parent else model
                where = f"`{parent}`" if parent else "the model"
                loc, _ = self.report_location(parent) if parent else (self.root_location, "")
                self.report("ML108", f"{where} ({type(container).__name__}) holds one "
                            f"`{type(objects[key]).__name__}` object at {len(names)} places "
                            f"({', '.join(names[:6])}): they share one set of weights; "
                            f"build a new instance for each place", loc)

    # -- forward passes ---------------------------------------------------------------------
    def _inputs_for(self, specs):
        return inputs_mod.make_all(specs, self.device)

    def _forward(self, tracer: Tracer, args, kwargs, *, grad: bool):
        model = self.model
        assert model is not None
        tracer.user_code = self.user_code
        self.where("forward")
        with tracer, torch.set_grad_enabled(grad):
            return model(*args, **kwargs)

    def _first_forward(self):
        model = self.model
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
                self.report("ML002", f"`{self.label}` was not run: no example input could be "
                            f"inferred (no Conv, Linear, Embedding, RNN or Transformer layer "
                            f"takes the input); configure one: {self._config_hint()}", None)
                return None
            if count > len(inference.candidates[0]):
                self.report("ML002", f"`{self.label}` was not run: its forward takes "
                            f"{count} inputs ({', '.join(names)}); configure them: "
                            f"{self._config_hint()}", None)
                return None
            candidates = inference.candidates
            self.inferred = inference.source
        failures = []
        for specs in candidates:
            if specs is None:
                args, kwargs = self.given
                args = tuple(_to_device(a, self.device) for a in args)
                kwargs = {k: _to_device(v, self.device) for k, v in kwargs.items()}
            else:
                args, kwargs = self._inputs_for(specs)
            tracer = Tracer(model, numeric=self.numeric, fingerprints=self.numeric,
                            where=lambda p: self.where("forward", p))
            try:
                output = self._forward(tracer, args, kwargs, grad=False)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001
                failure = (exc, tracer, specs)
                failures.append(failure)
                if self.inferred is None or not self._size_may_cure(failures, len(candidates)):
                    self._forward_failed(*failures[0])
                    return None
                continue
            self.used_specs = specs
            if specs is not None:
                self.inferred_input = inputs_mod.spec_text(specs)
                if self.inferred:
                    self.inferred += f": {self.inferred_input}"
            self.outcome.inputs = inputs_mod.spec_text(specs) if specs else _given_text(args)
            self.outcome.rows = tracer.rows
            self.first_tracer = tracer
            self.first_output = output
            self._after_forward(tracer, "an eval forward")
            return args, kwargs
        self.report("ML002", f"`{self.label}` was not run: no input size fits the inferred "
                    f"{self.inferred} (tried {len(candidates)} sizes; the last failure: "
                    f"{first_line(failures[-1][0])}); configure one: {self._config_hint()}",
                    None)
        return None

    def _size_may_cure(self, failures, total: int) -> bool:
        """Whether trying another input size may help: the failure moves or changes with the
        size (a Flatten→Linear width), rather than staying put (a channel mismatch)."""
        exc = failures[-1][0]
        if not isinstance(exc, RuntimeError) or _OOM.search(str(exc)):
            return False
        if len(failures) < 2:
            return total > 1
        keys = {self._failure_key(t, e) for e, t, _ in failures}
        if len(keys) > 1:
            return True
        return len(failures) < 3 and total > len(failures)

    def _failure_key(self, tracer: Tracer, exc: BaseException):
        path = tracer.innermost()
        shapes = tracer.innermost_shapes()
        module = self.model.get_submodule(path) if path else self.model
        shape = shapes[0] if shapes else []
        if isinstance(module, nn.Linear) or not shape:
            return path, tuple(shape[-1:])
        return path, tuple(shape[1:2])

    def _forward_failed(self, exc: BaseException, tracer: Tracer, specs) -> None:
        path = tracer.innermost()
        module = self.model.get_submodule(path) if path else self.model
        site = self.user_code.innermost_traceback(exc.__traceback__)
        site_loc = (site[0], site[1]) if site else None
        mismatch = next((m for m in tracer.mismatches if m.path == path), None)
        if mismatch is not None and "ML702" in self.enabled:
            self._report_mismatch(mismatch, failed=exc)
            return
        match = _NO_ATTR.search(str(exc))
        if isinstance(exc, AttributeError) and match and site and site[2] == "forward":
            self.report("ML106", f"`{match.group(1)}.forward` reads `self.{match.group(2)}`, "
                        f"which is never assigned ({first_line(exc)}); define it in "
                        f"`__init__` or fix the name", site_loc)
            return
        label = f"`{path}` ({describe(module)})" if path else f"`{self.label}`"
        shapes = tracer.innermost_shapes()
        given = (" given " + ", ".join(shape_text(s) for s in shapes)) if shapes else ""
        if isinstance(exc, SystemExit):
            what = f"called sys.exit({exc.code!r})"
        elif isinstance(exc, MemoryError) or _OOM.search(str(exc)):
            what = f"ran out of memory: {first_line(exc)}"
        else:
            what = first_line(exc)
        if path:
            loc, note = self.report_location(path)
        else:
            loc, note = site_loc or self.root_location, ""
        at = ""
        if site_loc and site_loc != loc:
            at = f", raised at {_short(site_loc[0])}:{site_loc[1]}"
        self.report("ML701", f"forward failed in {label}{given}: {what}{note}{at}"
                    f"{self.inferred_note()}", loc)

    def _report_mismatch(self, mismatch, failed: BaseException | None = None) -> None:
        module = self.model.get_submodule(mismatch.path) if mismatch.path else self.model
        loc, note = self.report_location(mismatch.path)
        what = "on device" if mismatch.what == "device" else "of dtype"
        tail = f" and failed ({first_line(failed)})" if failed is not None else ""
        self.report("ML702", f"`{mismatch.path or self.name}` ({describe(module)}) got input "
                    f"{what} {mismatch.got} while its parameters are {what} "
                    f"{mismatch.expected}{tail}; move or cast the module or the input"
                    f"{note}", loc)

    def _after_forward(self, tracer: Tracer, kind: str) -> None:
        if tracer.mismatches:
            self._report_mismatch(tracer.mismatches[0])
        if tracer.non_finite is not None and "ML704" in self.enabled:
            path, what = tracer.non_finite
            module = self.model.get_submodule(path) if path else self.model
            loc, note = self.report_location(path)
            self.report("ML704", f"`{path or self.name}` ({describe(module)}) is the first "
                        f"module whose output holds {what} in {kind} on input "
                        f"{self.outcome.inputs}{note}", loc)

    def _second_forward(self, args, kwargs):
        """A second eval forward: ML705 (outputs differ), ML101/ML107 (unregistered modules)."""
        first = self.first_tracer
        tracer = Tracer(self.model, rows=False, fingerprints=self.numeric,
                        where=lambda p: self.where("forward", p))
        tracer.reference = first.fingerprints
        try:
            output = self._forward(tracer, args, kwargs, grad=False)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001
            self._forward_failed(exc, tracer, None)
            return None
        self._check_unregistered(first, tracer)
        if not self.numeric:
            return output
        if self._found("ML107"):
            return None  # a module built in forward explains differing outputs
        if tracer.first_difference is not None:
            kind, path, site = tracer.first_difference
            module = self.model.get_submodule(path) if path else self.model
            if kind == "out":
                loc, note = self.report_location(path)
                where = f"first at the output of `{path or self.name}` ({describe(module)})"
            else:
                loc, note = ((site[0], site[1]), "") if site else self.report_location(path)
                where = (f"first at the input of `{path}` ({describe(module)}), computed in "
                         f"`{site[2] if site else 'forward'}`")
            self.report("ML705", f"two eval-mode forwards on one input disagree, {where}: "
                        f"something random (dropout without `training=self.training`, "
                        f"sampling) stays on in eval mode{note}", loc)
            return None
        return output

    def _check_unregistered(self, first: Tracer, second: Tracer) -> None:
        for key, (module, parent, site) in first.unregistered.items():
            if key in self.contained:
                continue  # already reported where the plain container is assigned
            loc = (site[0], site[1]) if site else self.location_of(parent)
            name = type(module).__name__
            if key in second.unregistered:
                self.report("ML101", f"a `{name}` called inside `{parent or self.name}` is not "
                            f"registered: `named_modules()`, `parameters()` and `.to()` never "
                            f"see it; assign it to `self` or keep it in an nn.ModuleList", loc)
            else:
                if site:
                    loc = _construction_line(site[0], site[1], name) or loc
                self.report("ML107", f"a new `{name}` is built on every call inside "
                            f"`{parent or self.name}`: its weights are re-initialised each "
                            f"forward and never trained; build it in `__init__`", loc)

    # -- ML505 ------------------------------------------------------------------------------
    def _state_check_applies(self) -> bool:
        return ("ML505" in self.enabled and self.factory is not None
                and not self._found("ML101", "ML102", "ML103", "ML107"))

    def _twin_forward(self, args, kwargs):
        """A fresh instance loaded with this one's state_dict, run on the same input:
        (twin, its tracer, output), or None when it could not be built, loaded or run."""
        self._twin_tried = True
        self.where("build")
        try:
            # its parameters are overwritten by the load: their initialisation is skipped
            # (unless the constructor itself needs initialised values)
            try:
                twin = build(self.factory, self.kwargs, self.device, None, seed=1,
                             skip_parameter_init=True)
            except Exception:  # noqa: BLE001
                twin = build(self.factory, self.kwargs, self.device, None, seed=1)
            twin.load_state_dict(self.model.state_dict(), strict=True)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001
            self.report("ML505", f"a fresh `{self.label}` cannot load this one's "
                        f"`state_dict()` ({first_line(exc)}): the saved state does not "
                        f"describe the model", None)
            return None
        twin.eval()
        tracer = Tracer(twin, rows=False, fingerprints=True)
        tracer.reference = self.first_tracer.fingerprints
        saved, self.model = self.model, twin
        try:
            output = self._forward(tracer, args, kwargs, grad=False)
        except Exception:  # noqa: BLE001 - a failure here is reported by other checks
            return None
        finally:
            self.model = saved
        return twin, tracer, output

    def check_state_dict(self, args, kwargs, reference, twin_run=None) -> None:
        if twin_run is None:
            if getattr(self, "_twin_tried", False):
                return
            twin_run = self._twin_forward(args, kwargs)
            if twin_run is None:
                return
        twin, tracer, output = twin_run
        if _outputs_match(reference, output):
            return
        differing = _differing_attribute(self.model, twin)
        if differing is not None:
            path, attr = differing
            owner = self.model.get_submodule(path) if path else self.model
            loc = attribute_line(type(owner), attr) or self.location_of(path)
            self.report("ML505", f"a fresh `{self.name}` loaded with this one's `state_dict()` "
                        f"computes different outputs: `self.{attr}` of `{type(owner).__name__}` "
                        f"differs between instances and is not saved; register it with "
                        f"`register_buffer` (or make it an `nn.Parameter`)", loc)
            return
        path = ""
        for (kind, p, a), (_, _, b) in zip(self.first_tracer.fingerprints, tracer.fingerprints,
                                           strict=False):
            if fingerprints_differ(a, b):
                path = p if kind == "out" else p.rpartition(".")[0]
                break
        loc, note = self.report_location(path) if path else (None, "")
        first = f", first at `{path}`" if path else ""
        self.report("ML505", f"a fresh `{self.name}` loaded with this one's `state_dict()` "
                    f"computes different outputs{first}: some state lives outside the "
                    f"parameters and buffers; register it with `register_buffer` or make it "
                    f"an `nn.Parameter`{note}", loc)

    # -- training pass: ML703, ML704, ML706 -------------------------------------------------
    def check_training(self, args, kwargs) -> None:
        model = self.model
        model.train()
        model.zero_grad(set_to_none=True)
        # NaN/Inf were looked for in the eval pass; look again only if none was found there
        tracer = Tracer(model, rows=False, numeric=not self._found("ML704"),
                        where=lambda p: self.where("forward", p))
        meter = self._meter(tracer)
        stand_in = None
        try:
            with meter:
                output = self._forward(tracer, args, kwargs, grad=True)
            self.check_memory(meter)
            outputs = [t for t in tensors_in(output)
                       if t.is_floating_point() and t.requires_grad]
            if not outputs:
                del output
                stand_in = self._called_outputs(args, kwargs)
                if stand_in is None:
                    return
                outputs = stand_in.outputs
            self.where("backward")
            with torch.enable_grad():  # whatever grad mode the model's code left set
                loss = sum(t.float().sum() for t in outputs)
                loss.backward()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001
            if stand_in is not None:
                self.outcome.notes.append(
                    f"`{self.label or self.name}`'s forward returns no tensor and a backward "
                    f"from the outputs of the modules it calls failed ({first_line(exc)}): "
                    f"unused parameters (ML703) were not looked for")
            else:
                self._forward_failed(exc, tracer, None)
            return
        finally:
            model.eval()
        if not any(f.code == "ML704" for f in self.outcome.findings):
            self._after_forward(tracer, "a train-mode forward")
        if stand_in is not None:
            # gradients of intermediate outputs say nothing of their scale at the output:
            # only the unused parameters are looked for
            self.outcome.notes.append(
                f"`{self.label or self.name}`'s forward returns no tensor: unused parameters "
                f"(ML703) were found from the outputs of the modules it calls, and gradient "
                f"scales (ML706) were not checked")
            self._check_unused(stand_in)
            return
        self._check_unused(tracer)
        self._check_gradients(tracer)

    def _called_outputs(self, args, kwargs) -> Tracer | None:
        """A train-mode forward of a model whose forward returns no tensor (it stores or
        logs its result), keeping the outputs of the modules it calls: the backward of their
        sum reaches every parameter a called module uses. None when there are none."""
        self.model.zero_grad(set_to_none=True)
        tracer = Tracer(self.model, rows=False, keep_outputs=True,
                        where=lambda p: self.where("forward", p))
        self._forward(tracer, args, kwargs, grad=True)
        return tracer if tracer.outputs else None

    # -- ML707 ------------------------------------------------------------------------------
    def _meter(self, tracer: Tracer):
        import contextlib

        if self.memory_target is None:
            return contextlib.nullcontext()
        from modellint.runtime.memory import ActivationMeter

        return ActivationMeter(self.model, tracer.innermost)

    def check_memory_on_meta(self, args, kwargs) -> None:
        """On meta the train pass is skipped; one train-mode forward with gradients (nothing
        is allocated) measures the activations."""
        model = self.model
        model.train()
        tracer = Tracer(model, rows=False, where=lambda p: self.where("forward", p))
        meter = self._meter(tracer)
        try:
            with meter:
                output = self._forward(tracer, args, kwargs, grad=True)
            del output
        except Exception:  # noqa: BLE001 - the eval forwards reported what fails
            return
        finally:
            model.eval()
        self.check_memory(meter)

    def check_memory(self, meter) -> None:
        if self.memory_target is None or meter is None or not hasattr(meter, "saved"):
            return
        from modellint.runtime.memory import estimate, size_text

        found = estimate(self.model, meter, optimizer="adamw", batch=self._batch())
        if found.total <= self.memory_target:
            return
        batch = f" at batch {found.batch}" if found.batch is not None else ""
        top = [(p, b) for p, b in found.by_module if p and b > 0][:1]
        largest = (f"; the largest activations are `{top[0][0]}`'s ({size_text(top[0][1])})"
                   if top else "")
        self.report("ML707", f"training `{self.label or self.name}`{batch} (input "
                    f"{self.outcome.inputs}) needs about {size_text(found.total)} "
                    f"({found.parts_text()}, the activations traced), more than "
                    f"target-gpu-memory {size_text(self.memory_target)}{largest}; lower the "
                    f"batch size, train in bfloat16, checkpoint activations or shard the "
                    f"optimizer state", self.root_location)

    def _batch(self) -> int | None:
        """The batch size of the traced input (its first input's first dimension)."""
        for spec in getattr(self, "used_specs", None) or []:
            if spec.get("shape"):
                return int(spec["shape"][0])
        if self.given is not None:
            for tensor in tensors_in(self.given):
                if tensor.dim():
                    return int(tensor.shape[0])
        return None

    def _check_unused(self, tracer: Tracer) -> None:
        model = self.model
        unused: dict[str, list[str]] = defaultdict(list)
        for name, param in model.named_parameters():
            if param.requires_grad and param.grad is None:
                owner = name.rpartition(".")[0]
                unused[owner].append(name)
        if not unused:
            return
        # collapse to the highest module whose trainable parameters all got no gradient
        all_unused = {}
        for path, module in model.named_modules():
            names = [f"{path}.{n}" if path else n for n, p in module.named_parameters()
                     if p.requires_grad]
            if names:
                unused_names = {n for ns in unused.values() for n in ns}
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
            module = model.get_submodule(top) if top else model
            loc, note = self.report_location(top)
            count = sum(p.numel() for p in module.parameters() if p.requires_grad)
            if top and top not in tracer.called:
                self.report("ML703", f"`{top}` ({describe(module)}) is never called in a "
                            f"forward on input {self.outcome.inputs}: its {human(count)} "
                            f"parameters get no gradient; remove it or use it{note}", loc)
            else:
                names = [n.rpartition(".")[2] for n in unused[top]] if top in unused else []
                which = ", ".join(f"`{n}`" for n in names) or "its parameters"
                self.report("ML703", f"{which} of `{top or self.name}` ({describe(module)}) "
                            f"got no gradient in a forward+backward on input "
                            f"{self.outcome.inputs}; freeze them or use them{note}", loc)

    def _check_gradients(self, tracer: Tracer) -> None:
        model = self.model
        norms: list[tuple[str, float]] = []
        for path, module in model.named_modules():
            grads = [p.grad for p in module.parameters(recurse=False)
                     if p.requires_grad and p.grad is not None]
            if not grads or path not in tracer.called:
                continue
            norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))
            norms.append((path, norm))
        if len(norms) < 2:
            return
        zero = [p for p, n in norms if n == 0.0]
        finite = sorted(n for _, n in norms if n > 0 and math.isfinite(n))
        if zero and len(zero) < len(norms):
            path = zero[0]
            module = model.get_submodule(path) if path else model
            loc, note = self.report_location(path)
            more = f" (and {len(zero) - 1} more modules)" if len(zero) > 1 else ""
            self.report("ML706", f"the gradient of `{path or self.name}` ({describe(module)}) is exactly "
                        f"zero at initialisation{more}: nothing reaches it from the output; "
                        f"check its initialisation and activations{note}", loc)
        if len(finite) >= 3:
            median = finite[len(finite) // 2]
            # the module nearest the output (last to run) sets the scale gradients start
            # from; a median alone is fooled by layers scaled down on purpose at
            # initialisation (ConvNeXt's layer scale of 1e-6, zero-initialised residual ends)
            first = getattr(self, "first_tracer", None)
            order = {row.path: row.index for row in first.rows} if first is not None else {}
            ran = [(order[p], n) for p, n in norms if p in order and n > 0 and math.isfinite(n)]
            reference = max(median, max(ran)[1] if ran else 0.0)
            path, worst = max(norms, key=lambda pn: pn[1] if math.isfinite(pn[1]) else 0.0)
            if worst > 1e4 * reference and worst > 1.0:
                module = model.get_submodule(path) if path else model
                loc, note = self.report_location(path)
                self.report("ML706", f"the gradient norm of `{path or self.name}` "
                            f"({describe(module)}) is "
                            f"{worst:.3g} at initialisation, {worst / reference:.0f}× the "
                            f"norm near the output ({reference:.3g}): it explodes; check its "
                            f"initialisation and scale{note}", loc)

    def _config_hint(self) -> str:
        return (f"[[tool.modellint.runtime.models]] target = \"{self.label}\", "
                f"inputs = [[2, 3, 32, 32]]")


def _short(path: str) -> str:
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _construction_line(path: str, line: int, type_name: str) -> tuple[str, int] | None:
    """The line at or above `line`, in the same function, that calls `TypeName(`."""
    from modellint.runtime.sources import source_line

    pattern = re.compile(rf"\b{re.escape(type_name)}\s*\(")
    for number in range(line, max(line - 40, 0), -1):
        text = source_line(path, number)
        if pattern.search(text):
            return path, number
        if text.lstrip().startswith("def "):
            break
    return None


def _differing_attribute(a: nn.Module, b: nn.Module) -> tuple[str, str] | None:
    """(module path, attribute) of a plain attribute whose value differs between two
    instances: state that `state_dict()` does not carry."""
    others = dict(b.named_modules())
    for path, module in a.named_modules():
        twin = others.get(path)
        if twin is None:
            continue
        theirs = vars(twin)
        for attr, value in vars(module).items():
            if attr in _BASE_ATTRS or attr not in theirs:
                continue
            other = theirs[attr]
            if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
                if value != other:
                    return path, attr
            elif isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                if (not isinstance(other, torch.Tensor) or value.shape != other.shape
                        or not torch.equal(value, other)):
                    return path, attr
    return None


def _to_device(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


def _given_text(args) -> str:
    return ", ".join(shape_text(t.shape) for t in tensors_in(args))


def _outputs_match(a, b) -> bool:
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
