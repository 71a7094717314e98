"""What the runtime pass will build and feed, decided without importing torch.

A model is either a configured target (`package.module:name` or `path/to/file.py:Name`) or a
module class found in a linted file. Inputs are shapes or tables (`shape`, `dtype`, `low`,
`high`, `name` for a keyword input).
"""

from __future__ import annotations

import ast
import os
from dataclasses import field
from typing import Any

from modellint.records import record

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8",
          "uint8", "bool")
DEFAULT_TIMEOUT = 60.0


class SpecError(ValueError):
    """A bad target or input spec; the message says which and how to write it."""


@record
class ModelJob:
    """One model for a worker: where it comes from, how to build it, what to feed it."""

    label: str  # "file.py:Net" or the configured target
    module: str | None = None  # importable module name (package targets)
    file: str | None = None  # absolute path (file targets and discovered classes)
    name: str = ""  # class or factory name
    kwargs: dict[str, Any] = field(default_factory=dict)
    inputs: list[dict[str, Any]] | None = None  # normalised specs, or None to infer
    configured: bool = False
    display: str | None = None  # display path of `file` (as the static pass prints it)
    line: int = 0  # the line of the class in `file`, when the static pass indexed it

    def to_request(self) -> dict[str, Any]:
        return {
            "label": self.label, "module": self.module, "file": self.file, "name": self.name,
            "kwargs": self.kwargs, "inputs": self.inputs, "configured": self.configured,
        }


def parse_target(target: str, root: str = ".") -> ModelJob:
    if not isinstance(target, str) or ":" not in target:
        raise SpecError(
            f"model target {target!r} must be `package.module:name` or `path/file.py:Name`"
        )
    where, _, name = target.rpartition(":")
    if not name.isidentifier() or not where:
        raise SpecError(
            f"model target {target!r} must be `package.module:name` or `path/file.py:Name`"
        )
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = where if os.path.isabs(where) else os.path.join(root, where)
        return ModelJob(label=target, file=os.path.abspath(path), name=name, configured=True)
    if not all(part.isidentifier() for part in where.split(".")):
        raise SpecError(f"model target {target!r}: `{where}` is not a module name")
    return ModelJob(label=target, module=where, name=name, configured=True)


def _shape(value: Any, where: str) -> list[int]:
    if (
        not isinstance(value, list)
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        raise SpecError(f"{where}: a shape is a list of non-negative integers, got {value!r}")
    return list(value)


def normalise_input(value: Any, where: str) -> dict[str, Any]:
    """A shape or a spec table -> {"shape", "dtype", "low", "high", "name"}."""
    if isinstance(value, list):
        return {"shape": _shape(value, where), "dtype": "float32", "low": 0, "high": 2,
                "name": None}
    if not isinstance(value, dict) or "shape" not in value:
        raise SpecError(f"{where}: an input is a shape such as [2, 3, 32, 32] or a table with "
                        f"`shape` (and `dtype`, `low`, `high`, `name`), got {value!r}")
    unknown = set(value) - {"shape", "dtype", "low", "high", "name"}
    if unknown:
        raise SpecError(f"{where}: unknown input key `{sorted(unknown)[0]}`")
    dtype = value.get("dtype", "float32")
    if dtype not in DTYPES:
        raise SpecError(f"{where}: unknown dtype {dtype!r} (choose from {', '.join(DTYPES)})")
    low, high = value.get("low", 0), value.get("high", 2)
    if not isinstance(low, int) or not isinstance(high, int) or high <= low:
        raise SpecError(f"{where}: `low` and `high` must be integers with low < high")
    name = value.get("name")
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise SpecError(f"{where}: `name` must be a keyword argument name")
    return {"shape": _shape(value["shape"], where), "dtype": dtype, "low": low, "high": high,
            "name": name}


def normalise_inputs(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}: `inputs` must be a list of shapes or input tables")
    if all(isinstance(v, int) for v in value):  # one bare shape: inputs = [2, 3, 32, 32]
        value = [value]
    return [normalise_input(v, f"{where}[{i}]") for i, v in enumerate(value)]


def parse_cli_input(text: str) -> dict[str, Any]:
    """`1,3,224,224` or `2,16:int64:0:1000` (shape, dtype, low, high) or `mask=2,16:bool`."""
    name = None
    if "=" in text:
        name, _, text = text.partition("=")
    parts = text.split(":")
    try:
        shape = [int(p) for p in parts[0].replace("x", ",").split(",") if p.strip()]
    except ValueError:
        raise SpecError(f"--input {text!r}: expected a shape such as 1,3,224,224") from None
    spec: dict[str, Any] = {"shape": shape}
    if len(parts) > 1:
        spec["dtype"] = parts[1]
    if len(parts) > 3:
        try:
            spec["low"], spec["high"] = int(parts[2]), int(parts[3])
        except ValueError:
            raise SpecError(f"--input {text!r}: low and high must be integers") from None
    if name:
        spec["name"] = name
    return normalise_input(spec, f"--input {text!r}")


def configured_jobs(runtime: dict[str, Any], root: str) -> list[ModelJob]:
    jobs = []
    for index, entry in enumerate(runtime.get("models", [])):
        where = f"runtime.models[{index}]"
        job = parse_target(entry["target"], root)
        kwargs = entry.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise SpecError(f"{where}.kwargs must be a table")
        job.kwargs = dict(kwargs)
        if "inputs" in entry:
            job.inputs = normalise_inputs(entry["inputs"], f"{where}.inputs")
        jobs.append(job)
    return jobs


# --- discovery of module classes in files, statically (no import) ------------------------

def candidate_classes(source: str) -> list[str]:
    """The module classes of `source` worth building (see `model_classes`, which the static
    pass computes for every linted file)."""
    from modellint.static.outline import model_classes

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [name for name, _ in model_classes(tree)]


def display_path(path: str, displays: dict[str, str]) -> str:
    real = os.path.realpath(path)
    if real in displays:
        return displays[real]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
