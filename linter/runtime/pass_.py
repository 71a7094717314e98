"""`modellint check --runtime`: the models of the linted files (or the configured ones), each
checked in a worker subprocess, turned into findings beside the static ones."""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import replace
from typing import Any

from modellint.finding import Finding, RawFinding
from modellint.records import record
from modellint.report import printable
from modellint.runtime.phases import short_path
from modellint.runtime.specs import (
    ModelJob,
    SpecError,
    configured_jobs,
)
from modellint.suppress import Suppressions


class RuntimeConfigError(Exception):
    pass


def torch_missing() -> str:
    """Why the runtime pass cannot run here ("" when it can): PyTorch is not installed."""
    import importlib.util

    try:
        if importlib.util.find_spec("torch") is not None:
            return ""
    except (ImportError, ValueError):  # a broken installation reads as a missing one
        pass
    return ("--runtime builds and runs your models, which needs PyTorch; it is not installed "
            "in this environment: install the runtime extra with "
            "pip install 'modellint[runtime]' (or install torch)")


def _jobs(files: list[LintedFile], config) -> list[ModelJob]:
    """The configured models, else the model classes the static pass indexed in the linted
    files (none in a file that a `# modellint: noqa` exempts: the static pass indexes none)."""
    root = str(config.root)
    try:
        jobs = configured_jobs(config.runtime, root)
    except SpecError as exc:
        from modellint.config import ConfigError

        raise ConfigError(f"{config.where()}: {exc}") from None
    if jobs:
        return jobs
    return [ModelJob(label=f"{file.display}:{name}", file=file.real, name=name,
                     display=file.display, line=line)
            for file in files for name, line in file.classes]


def _progress(enabled: bool, index: int, total: int, label: str, seconds: float | None) -> None:
    if not enabled:
        return
    label = printable(label)
    if seconds is None:
        sys.stderr.write(f"\rmodellint: runtime [{index}/{total}] {label} ...\033[K")
    else:
        sys.stderr.write(f"\rmodellint: runtime [{index}/{total}] {label} ({seconds:.1f} s)\033[K")
        if index == total:
            sys.stderr.write("\n")
    sys.stderr.flush()


@record(frozen=True)
class LintedFile:
    """A file the static pass linted: as displayed, its real path, and the model classes it
    indexed there ((name, line), see `modellint.static.outline.model_classes`)."""

    display: str
    real: str
    classes: tuple[tuple[str, int], ...] = ()


@record(frozen=True)
class RuntimeOutcome:
    """What the runtime pass adds to a check: the findings (the static pass's and its own),
    and how many models it tried and could not check (an import, a build or an input that
    failed: each an ML002, or an ML001 of the pass itself)."""

    findings: list[Finding]
    models: int = 0
    unchecked: int = 0


def run_runtime_pass(findings: list[Finding], files: list[LintedFile], config, registry,
                     shown: frozenset[str], settings, tell=None) -> RuntimeOutcome:
    """`findings` (the static pass's) and the runtime findings of the models of `files` (or
    the configured ones) that no suppression hides. `shown`: the codes this run reports;
    `settings`: the device, timeout and progress line (`modellint.session.RuntimeSettings`);
    `tell`: where the notes of the workers go (the standard error by default)."""
    from modellint.runtime.phases import INTERNAL, NOT_CHECKED

    device, timeout = settings.device, settings.timeout
    if timeout <= 0:
        from modellint.config import ConfigError

        raise ConfigError("--timeout must be a positive number of seconds")
    check_device(device)
    displays = {file.real: file.display for file in files}
    jobs = _jobs(files, config)
    runtime_codes = sorted(code for code in shown if "runtime" in registry.rules[code].passes)
    checks = [registry.runtime_checks[code] for code in runtime_codes
              if code in registry.runtime_checks]
    memory_target = None
    if getattr(config, "target_gpu_memory", None):
        from modellint.runtime.memory import parse_size

        memory_target = parse_size(config.target_gpu_memory)
    # the workers always say when a model was not checked (hidden below if not shown), so
    # that the count of unchecked models does not depend on what is selected
    results = run_jobs(jobs, device, timeout, sorted({*runtime_codes, NOT_CHECKED, INTERNAL}),
                       checks,
                       progress=settings.progress,
                       memory_target=memory_target)
    new: list[Finding] = []
    notes: set[str] = set()
    suppressions = Suppressions(config, shown, read=_program_text)
    models = unchecked = 0
    for job, result in results:
        notes.update(result.get("notes", []))
        raws = result_findings(job, result, registry)
        if not result.get("skip"):  # a discovered name that is not a module class
            models += 1
            unchecked += any(raw.code in (NOT_CHECKED, INTERNAL) for raw in raws)
        new.extend(job_findings(raws, job, registry, displays, suppressions))
    for note in sorted(notes):
        if tell is not None:
            tell(note)
        else:
            print(f"modellint: {printable(note)}", file=sys.stderr)
    from modellint.pipeline import merge

    return RuntimeOutcome(merge(findings, new), models, unchecked)


def check_device(device: str) -> None:
    import re

    from modellint.config import ConfigError

    if not re.match(r"^(cpu|meta|mps|cuda(:\d+)?)$", device):
        raise ConfigError(f"unknown device {device!r} (choose cpu, cuda, cuda:N, mps or meta)")
    available = available_devices()
    if device not in available and not (device == "cuda" and "cuda:0" in available):
        # every model would be one "not checked" note: a run that checked nothing must not
        # pass as a clean one
        raise ConfigError(f"device {device!r} is not available on this machine "
                          f"(available: {', '.join(available)})")


def available_devices() -> list[str]:
    """The devices this machine can build models on: cpu and meta, each CUDA device (counted
    through NVML where torch can, which leaves CUDA uninitialised for the forked workers),
    and mps."""
    import torch

    devices = ["cpu", "meta"]
    devices += [f"cuda:{index}" for index in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def run_jobs(jobs: list[ModelJob], device: str, timeout: float, codes: list[str],
             checks: list[type] | None = None, progress: bool = False,
             memory_target: int | None = None) -> list[tuple[ModelJob, dict[str, Any]]]:
    from modellint.runtime.isolate import Worker
    from modellint.runtime.worker import check_reference

    if checks is None:
        from modellint.runtime.engine import default_registry

        registry = default_registry()
        checks = [registry.runtime_checks[c] for c in codes if c in registry.runtime_checks]
    references = [check_reference(cls) for cls in checks]
    named = {"checks": [name for name, _ in references],
             "check_paths": sorted({root for _, root in references if root})}
    worker = Worker(hide_gpus=device in ("cpu", "meta"))
    out = []
    try:
        for index, job in enumerate(jobs, 1):
            _progress(progress, index, len(jobs), job.label, None)
            start = time.monotonic()
            request = {**job.to_request(), **named, "device": device, "enabled": codes,
                       "discovered": not job.configured, "memory_target": memory_target}
            try:
                result = worker.run(request, timeout)
            except RuntimeError as exc:
                result = {"internal": str(exc)}
            out.append((job, result))
            _progress(progress, index, len(jobs), job.label, time.monotonic() - start)
    finally:
        worker.close()
    return out


def stopped_code(registry=None) -> str:
    """The code of the check that reports a model stopped in a forward or backward (the
    `reports_stopped` check: a timeout, a crash, an exit), else the runner's own."""
    from modellint.runtime.engine import default_registry
    from modellint.runtime.phases import NOT_CHECKED

    checks = (registry or default_registry()).runtime_checks
    return next((code for code, check in sorted(checks.items())
                 if getattr(check, "reports_stopped", False)), NOT_CHECKED)


def result_findings(job: ModelJob, result: dict[str, Any],
                    registry=None) -> list[RawFinding]:
    """Raw findings (code, message, file, line) from one worker result."""
    from modellint.runtime.phases import INTERNAL, NOT_CHECKED

    if result.get("skip"):
        return []
    if "findings" in result:
        return [RawFinding.from_json(raw) for raw in result["findings"]]
    if "error" in result:
        site = result.get("site")
        return [_at_site(NOT_CHECKED, result["error"], site)]
    if "internal" in result:
        return [RawFinding(INTERNAL, f"the runtime pass failed on `{job.label}`: "
                           f"{result['internal']}")]
    from modellint.runtime.isolate import describe_failure

    what = describe_failure(result)
    phase, module, site = result.get("phase"), result.get("module"), result.get("site")
    where = f" in `{module}`" if module else ""
    at = f" at {short_path(site[0])}:{site[1]} in `{site[2]}`" if site else ""
    if phase in ("forward", "backward"):
        step = "a forward" if phase == "forward" else "the backward pass"
        message = f"`{job.label}` {what} while running {step}{where}{at}"
        code = stopped_code(registry)
    else:
        step = {"import": "importing it", "build": "building it"}.get(phase or "", "starting")
        message = f"`{job.label}` could not be checked: it {what} while {step}{at}"
        code = NOT_CHECKED
    return [_at_site(code, message, site)]


def _at_site(code: str, message: str, site: list[Any] | None) -> RawFinding:
    """A raw finding at the worker's `site` ([file, line, ...]; None: nowhere known)."""
    return RawFinding(code, message, site[0], site[1] or 1) if site else RawFinding(code, message)


def _job_location(job: ModelJob) -> tuple[str | None, int]:
    if job.file:
        return job.file, job.line or _class_line(job.file, job.name)
    return None, 1


def _class_line(path: str, name: str) -> int:
    """The line of `class name` or `def name` in `path` (a configured target's), else 1."""
    import re

    from modellint.static.discover import read_file_bytes
    from modellint.static.noqa import python_lines

    try:
        lines = python_lines(read_file_bytes(path).decode("utf-8", "replace"))
    except OSError:
        return 1
    for number, line in enumerate(lines, 1):
        if re.match(rf"\s*(class|def)\s+{re.escape(name)}\b", line):
            return number
    return 1


def job_findings(raws: list[RawFinding], job: ModelJob, registry,
                 displays: dict[str, str], suppressions: Suppressions | None = None
                 ) -> list[Finding]:
    """The findings of one model's raw findings (through `modellint.pipeline`): a finding
    the worker placed nowhere is at the model's own line; one of a code no rule documents is
    dropped."""
    from modellint.pipeline import Origin, findings_of

    placed = []
    for raw in raws:
        if not raw.file:
            file, line = _job_location(job)
            raw = replace(raw, file=file, line=line)
        placed.append(raw)
    return findings_of(placed, Origin(
        "runtime", registry.rules, displays, label=job.label.rpartition(":")[0] or job.label,
        suppressions=suppressions, unknown_codes=False,
        target=job.label if job.configured else "", notebook=_notebook))


@functools.lru_cache(maxsize=32)
def _notebook(path: str):
    """The notebook at `path` as the worker built its models (None: no notebook): the
    runtime findings' lines are lines of its joined code cells."""
    from modellint.static.notebook import NotebookError, read_notebook_file

    try:
        return read_notebook_file(path)
    except (OSError, NotebookError):
        return None


def _program_text(path: str) -> str:
    """The text whose lines the runtime findings of `path` name (a notebook's joined cells)."""
    from modellint.suppress import read_text

    book = _notebook(path)
    return read_text(path) if book is None else book.source
