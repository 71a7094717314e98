"""`modellint trace TARGET --input 1,3,224,224 [--device D] [--depth N] [--format text|json]`:
one row per module call (path, type, input and output shapes, parameters, device, dtype) and
totals."""

from __future__ import annotations

import argparse
import json
import sys
import time

from modellint.runtime.specs import SpecError, parse_cli_input, parse_target


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise SpecError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="modellint trace", description="print the per-module shape table")
    parser.add_argument("target", help="package.module:name or path/file.py:Class")
    parser.add_argument("--input", action="append", default=[], metavar="SHAPE",
                        help="1,3,224,224 or 2,16:int64:0:1000 (repeatable); inferred if absent")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--depth", type=int, default=None, help="deepest row level to show")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--kwargs", default=None, help="constructor arguments as JSON")
    return parser


def trace_main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
        specs = [parse_cli_input(text) for text in args.input] or None
        kwargs = json.loads(args.kwargs) if args.kwargs else {}
        if not isinstance(kwargs, dict):
            raise SpecError("--kwargs must be a JSON object")
        job = parse_target(args.target)
    except (SpecError, json.JSONDecodeError) as exc:
        print(f"modellint: error: {exc}", file=sys.stderr)
        return 2
    try:
        result = trace(job.to_request(), kwargs, specs, args.device)
    except TraceError as exc:
        print(f"modellint: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("modellint: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - never a traceback
        print(f"modellint: error: tracing {args.target} failed: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 2
    rows = [r for r in result["rows"] if args.depth is None or r["depth"] <= args.depth]
    if args.format == "json":
        print(json.dumps({**result, "rows": rows}, indent=1))
    else:
        print(render(rows, result))
    return 0


class TraceError(Exception):
    pass


def trace(request: dict, kwargs: dict, specs, device: str) -> dict:
    import torch

    from modellint.runtime import inputs as inputs_mod
    from modellint.runtime.build import build, resolve
    from modellint.runtime.engine import first_line
    from modellint.runtime.tracer import Tracer, describe

    start = time.perf_counter()
    try:
        factory, _ = resolve(request)
    except Exception as exc:  # noqa: BLE001
        raise TraceError(f"cannot import {request['label']}: {first_line(exc)}") from None
    try:
        model = build(factory, kwargs, device, None)
    except Exception as exc:  # noqa: BLE001
        raise TraceError(f"cannot build {request['label']}: {first_line(exc)}") from None
    model.eval()
    candidates = [specs] if specs else None
    if candidates is None:
        inference = inputs_mod.infer(model)
        if inference is None:
            raise TraceError("no input could be inferred; pass --input SHAPE")
        candidates = inference.candidates
    error = None
    for candidate in candidates:
        args, kw = inputs_mod.make_all(candidate, device)
        tracer = Tracer(model)
        try:
            with tracer, torch.no_grad():
                model(*args, **kw)
        except Exception as exc:  # noqa: BLE001
            path = tracer.innermost()
            where = f" in `{path}` ({describe(model.get_submodule(path))})" if path else ""
            error = f"forward failed{where}: {first_line(exc)}"
            if specs:
                raise TraceError(error) from None
            continue
        params = sum(p.numel() for p in model.parameters())
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        size = sum(p.numel() * p.element_size() for p in model.parameters())
        return {
            "target": request["label"],
            "inputs": inputs_mod.spec_text(candidate),
            "rows": [row.to_json() for row in tracer.rows],
            "total_params": params,
            "trainable_params": trainable,
            "param_bytes": size,
            "device": device,
            "seconds": time.perf_counter() - start,
        }
    raise TraceError(f"no inferred input fits ({error}); pass --input SHAPE")


def _shapes(shapes) -> str:
    text = ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in shapes[:3])
    return text + (", ..." if len(shapes) > 3 else "")


def render(rows: list[dict], result: dict) -> str:
    header = ("module", "type", "input", "output", "params", "device", "dtype")
    table = [header]
    for row in rows:
        name = ("  " * max(row["depth"] - 1, 0) + row["path"]) if row["path"] else "(model)"
        table.append((name, row["type"], _shapes(row["input_shapes"]),
                      _shapes(row["output_shapes"]), f"{row['params']:,}" if row["params"] else "-",
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
    lines.append(f"{result['target']} on {result['device']}, input {result['inputs']}: "
                 f"{len(rows)} module calls, {result['total_params']:,} parameters "
                 f"({result['trainable_params']:,} trainable, "
                 f"{result['param_bytes'] / 2**20:.1f} MiB)")
    return "\n".join(lines)
