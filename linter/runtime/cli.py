"""`modellint trace TARGET --input 1,3,224,224 [--device D] [--depth N] [--format text|json]`:
one row per module call (path, type, input and output shapes, parameters, device, dtype) and
totals; `--memory` adds the training memory (parameters, gradients, optimizer state, traced
activations), `--feature-maps DIR` writes the output channels of chosen layers as PNG grids."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from modellint.report import printable
from modellint.runtime.specs import SpecError, parse_cli_input, parse_target


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise SpecError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="modellint trace", description="print the per-module shape table")
    parser.add_argument("target", help="package.module:name or path/file.py:Class")
    parser.add_argument("--input", action="append", default=[], metavar="SHAPE",
                        help="1,3,224,224 or 2,16:int64:0:1000 (repeatable); inferred if absent")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda, cuda:N, mps or meta (no memory used; default cpu)")
    parser.add_argument("--depth", type=int, default=None, help="deepest row level to show")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text (a table) or json")
    parser.add_argument("--kwargs", default=None, help="constructor arguments as JSON")
    parser.add_argument("--memory", action="store_true",
                        help="print the memory of a training step (traced activations)")
    parser.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="adamw",
                        help="optimizer whose state --memory counts (default adamw)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                        help="count floating tensors as this dtype (default: the model's)")
    parser.add_argument("--batch", type=int, default=None,
                        help="batch size for --memory (replaces the inputs' first dimension)")
    parser.add_argument("--target-gpu-memory", default=None, metavar="SIZE",
                        help="compare --memory with this size, e.g. 80GB")
    parser.add_argument("--feature-maps", default=None, metavar="DIR",
                        help="write each matching layer's output channels as a PNG grid")
    parser.add_argument("--layers", action="append", default=[], metavar="GLOB",
                        help="module paths for --feature-maps, e.g. 'layer1.*' (repeatable; "
                             "default: every Conv2d)")
    parser.add_argument("--image", default=None, metavar="FILE",
                        help="feed this picture (resized and normalised) instead of noise")
    return parser


def trace_main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
        specs = [parse_cli_input(text) for text in args.input] or None
        kwargs = json.loads(args.kwargs) if args.kwargs else {}
        if not isinstance(kwargs, dict):
            raise SpecError("--kwargs must be a JSON object")
        job = parse_target(args.target)
        options = _options(args)
    except (SpecError, json.JSONDecodeError) as exc:
        print(f"modellint: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    try:
        result = trace(job.to_request(), kwargs, specs, args.device, **options)
    except TraceError as exc:
        print(f"modellint: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except ForwardFailed as failed:
        _print_failure(failed, args)
        return 1
    except KeyboardInterrupt:
        print("modellint: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - never a traceback
        print(f"modellint: error: tracing {printable(args.target)} failed: "
              f"{type(exc).__name__}: {printable(str(exc))}",
              file=sys.stderr)
        return 2
    rows = [r for r in result["rows"] if args.depth is None or r["depth"] <= args.depth]
    if args.format == "json":
        result.pop("memory_text", None)
        result.pop("unit", None)
        print(json.dumps({**result, "rows": rows}, indent=1))
    else:
        print(render(rows, result))
        if result.get("memory"):
            print(result["memory_text"])
        if result.get("feature_maps") is not None:
            print(f"{len(result['feature_maps'])} feature-map grid(s) written to "
                  f"{args.feature_maps}")
        for note in result.get("notes", []):
            print(f"modellint: note: {printable(note)}", file=sys.stderr)
    return 0


def _print_failure(failed: ForwardFailed, args) -> None:
    """The layers that ran up to the failure, as torchinfo prints them, and the finding as
    `check --runtime` prints it."""
    rows = [r for r in failed.result["rows"] if args.depth is None or r["depth"] <= args.depth]
    if args.format == "json":
        print(json.dumps({**failed.result, "rows": rows,
                          "findings": [failed.finding.to_json()]}, indent=1))
        return
    from modellint.report import Summary
    from modellint.report.text import TextReporter

    print(render(rows, failed.result, failed=True))
    TextReporter(sys.stdout).report([failed.finding], Summary(quiet=True))


def _options(args) -> dict:
    if args.batch is not None and args.batch < 1:
        raise SpecError("--batch must be a positive number")
    if not args.memory and (args.batch is not None or args.dtype or args.target_gpu_memory):
        raise SpecError("--batch, --dtype and --target-gpu-memory go with --memory")
    if args.feature_maps is None and (args.layers or args.image):
        raise SpecError("--layers and --image go with --feature-maps DIR")
    target = None
    if args.target_gpu_memory:
        from modellint.runtime.memory import parse_size

        try:
            target = parse_size(args.target_gpu_memory)
        except ValueError as exc:
            raise SpecError(f"--target-gpu-memory: {exc}") from None
    from modellint.config import ConfigError
    from modellint.runtime.pass_ import check_device

    try:
        check_device(args.device)
    except ConfigError as exc:
        raise SpecError(str(exc)) from None
    if args.feature_maps is not None and args.device == "meta":
        raise SpecError("--feature-maps needs real tensors; use --device cpu or cuda")
    return {"memory": args.memory, "optimizer": args.optimizer, "dtype": args.dtype,
            "batch": args.batch, "target": target, "feature_maps": args.feature_maps,
            "layers": args.layers or None, "image": args.image}


class TraceError(Exception):
    pass


class ForwardFailed(Exception):
    """The model's forward failed, as the runtime pass reports it (ML701): `finding`, and
    `result` (the trace of the layers that ran, each one that raised marked)."""

    def __init__(self, finding, result: dict) -> None:
        super().__init__(finding.message)
        self.finding = finding
        self.result = result


def trace(request: dict, kwargs: dict, specs, device: str, *, memory: bool = False,
          optimizer: str = "adamw", dtype: str | None = None, batch: int | None = None,
          target: int | None = None, feature_maps: str | None = None,
          layers: list[str] | None = None, image: str | None = None) -> dict:
    from modellint.runtime.api import runtime_findings
    from modellint.runtime.build import required_arguments, resolve
    from modellint.runtime.engine import checks_for, first_line
    from modellint.runtime.pass_ import stopped_code
    from modellint.runtime.run import Runner

    start = time.perf_counter()
    try:
        factory, roots = resolve(request)
    except Exception as exc:  # noqa: BLE001
        raise TraceError(f"cannot import {request['label']}: {first_line(exc)}") from None
    missing = required_arguments(factory) if not kwargs else []
    if missing:
        example = json.dumps({name: "..." for name in missing})
        raise TraceError(f"cannot build {request['label']}: its constructor needs "
                         f"{', '.join(f'`{m}`' for m in missing)}; pass --kwargs '{example}'")
    # the runtime pass's first forward: the same inputs tried, the same judgement of whether
    # another size may cure a failure, the same ML701 at the line that built the layer
    checks = checks_for([stopped_code()])
    hint = "pass --input SHAPE, e.g. --input 2,3,32,32"
    run = Runner(checks, factory=factory, kwargs=kwargs, specs=specs or None, device=device,
                 user_roots=roots, label=request["label"], train=False,
                 input_hint=hint).run()
    failed = [raw for raw in run.findings if raw.code in {c.code for c in checks}]
    if failed and run.failures:
        tracer = run.failures[0].tracer
        rows = [{**row.to_json(), **({} if row.done else {"raised": True})}
                for row in (tracer.rows if tracer is not None else [])]
        raw = failed[0]
        raise ForwardFailed(runtime_findings([raw], hidden=False)[0],
                            _summary(request, run, rows, device))
    if run.first is None or run.model is None or run.input_specs is None:
        reason = next((raw.message for raw in run.findings), None)
        raise TraceError(reason or f"{request['label']} could not be traced")
    model, candidate = run.model, run.input_specs
    result = _summary(request, run, [row.to_json() for row in run.first.rows], device)
    if feature_maps is not None:
        if image is not None:
            candidate = _image_spec(candidate)
        result.update(_feature_maps(model, candidate, device, feature_maps, layers, image,
                                    kwargs))
    if memory:
        result.update(_memory(model, candidate, device, optimizer, dtype, batch, target,
                              result["param_bytes"]))
    result["seconds"] = time.perf_counter() - start
    return result


def _summary(request: dict, run, rows: list[dict], device: str) -> dict:
    model = run.model
    assert model is not None
    return {
        "target": request["label"],
        "inputs": run.inputs,
        "rows": rows,
        "total_params": sum(p.numel() for p in model.parameters()),
        "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "device": device,
    }


def _feature_maps(model, candidate, device: str, folder: str, layers, image, kwargs) -> dict:
    """One more eval forward, on the picture when given, that keeps the chosen layers'
    outputs and writes them as PNG grids; its rows are the table's."""
    import torch

    from modellint.runtime import inputs as inputs_mod
    from modellint.runtime.engine import first_line
    from modellint.runtime.featuremaps import FeatureMapError, FeatureMaps, load_image, notes
    from modellint.runtime.tracer import Tracer

    args, kw = inputs_mod.make_all(candidate, device)
    if image is not None:
        try:
            args = (load_image(image, candidate[0]["shape"], device), *args[1:])
        except FeatureMapError as exc:
            raise TraceError(str(exc)) from None
    tracer = Tracer(model)
    try:
        with tracer, torch.no_grad(), FeatureMaps(model, layers) as maps:
            model(*args, **kw)
    except Exception as exc:  # noqa: BLE001
        raise TraceError(f"the forward for --feature-maps failed: {first_line(exc)}") from None
    if not maps.matched:
        raise TraceError("no module matches --layers " + " or ".join(repr(p) for p in layers or ()))
    return {"rows": [row.to_json() for row in tracer.rows],
            "inputs": inputs_mod.spec_text(candidate),
            "feature_maps": maps.write(folder), "notes": notes(image, kwargs)}


def _image_spec(candidate):
    first = dict(candidate[0])
    first["shape"] = [1, *list(first["shape"])[1:]]
    return [first, *candidate[1:]]


def _memory(model, candidate, device, optimizer, dtype, batch, target, param_bytes) -> dict:
    """A train-mode forward with gradients, its saved tensors measured."""
    import torch

    from modellint.runtime import inputs as inputs_mod
    from modellint.runtime.engine import first_line
    from modellint.runtime.memory import ActivationMeter, estimate, unit_for
    from modellint.runtime.tracer import Tracer

    if batch is not None:
        candidate = [{**spec, "shape": [batch, *list(spec["shape"])[1:]]} if spec["shape"]
                     else spec for spec in candidate]
    shape = candidate[0]["shape"] if candidate and candidate[0]["shape"] else []
    used_batch = batch if batch is not None else (shape[0] if shape else None)
    args, kw = inputs_mod.make_all(candidate, device)
    tracer = Tracer(model, rows=False)
    meter = ActivationMeter(model, tracer.innermost)
    model.train()
    try:
        with tracer, meter, torch.enable_grad():
            output = model(*args, **kw)
    except Exception as exc:  # noqa: BLE001
        raise TraceError(f"the train-mode forward for --memory failed: {first_line(exc)}"
                         ) from None
    finally:
        model.eval()
    del output
    found = estimate(model, meter, optimizer=optimizer, dtype=dtype, batch=used_batch)
    # the table's summary line and the memory summary show their sizes in one unit
    unit = unit_for(found.total, target or 0, param_bytes)
    out: dict[str, Any] = {"memory": found.to_json(), "memory_text": found.render(target, unit), "unit": unit}
    if target is not None:
        out["memory"]["target"] = target
        out["memory"]["exceeds_target"] = found.total > target
    return out


def _shapes(shapes) -> str:
    text = ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in shapes[:3])
    return text + (", ..." if len(shapes) > 3 else "")


def render(rows: list[dict], result: dict, failed: bool = False) -> str:
    """The table of `rows`; `failed`: the forward raised, in the rows marked `raised` (the
    failing layer and those that called it)."""
    from modellint.runtime.memory import size_text, unit_for

    unit = result.get("unit") or unit_for(result["param_bytes"])
    header = ("module", "type", "input", "output", "params", "device", "dtype")
    table = [header]
    for row in rows:
        name = ("  " * max(row["depth"] - 1, 0) + row["path"]) if row["path"] else "(model)"
        table.append((name, row["type"], _shapes(row["input_shapes"]),
                      "raised" if row.get("raised") else _shapes(row["output_shapes"]),
                      f"{row['params']:,}" if row["params"] else "-",
                      row["device"] or "-", row["dtype"] or "-"))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = []
    for index, r in enumerate(table):
        lines.append("  ".join(
            cell.rjust(widths[i]) if i == 4 else cell.ljust(widths[i]) for i, cell in enumerate(r)
        ).rstrip())
        if index == 0:
            lines.append("-" * len(lines[0]))
    lines.append("-" * len(lines[0]))
    calls = f"{len(rows)} module calls" + (" until the forward failed" if failed else "")
    lines.append(f"{result['target']} on {result['device']}, input {result['inputs']}: "
                 f"{calls}, {result['total_params']:,} parameters "
                 f"({result['trainable_params']:,} trainable, "
                 f"{size_text(result['param_bytes'], unit)})")
    return "\n".join(lines)
