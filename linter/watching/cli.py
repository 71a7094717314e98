"""`modellint run [OPTIONS] -- python train.py ARGS...` (or `-- train.py ...`, `-- -m pkg.mod
...`): run the user's training script in a child process with the instrumentation loaded, for
a bounded budget, and report what it saw through the reporters `check` uses."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import cast

from modellint.finding import RawFinding

DEFAULT_STEPS = 20
DEFAULT_BATCHES = 5
DEFAULT_TIMEOUT = 600.0
GRACE = 30.0  # seconds the child gets past --timeout to write its result before it is killed


def build_parser(parser_class) -> argparse.ArgumentParser:
    from modellint.arguments import add_report_options, seconds

    parser = parser_class(prog="modellint run", description=(
        "Run a training script for a few steps under instrumentation and report silent "
        "training mistakes. It EXECUTES the script."))
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"optimizer steps before the run is stopped (default "
                             f"{DEFAULT_STEPS})")
    parser.add_argument("--batches-per-epoch", type=int, default=DEFAULT_BATCHES,
                        help=f"cut each DataLoader iteration after this many batches "
                             f"(default {DEFAULT_BATCHES}; 0: no cut)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT,
                        help=f"seconds before the run is stopped (default {DEFAULT_TIMEOUT:g})")
    add_report_options(parser)
    parser.add_argument("--plots", metavar="DIR",
                        help="write PNGs of loss, learning rates and gradient norm per step")
    baseline = parser.add_mutually_exclusive_group()
    baseline.add_argument("--record", metavar="BASELINE",
                          help="write what held in this run to BASELINE (JSON, to commit; an "
                               "existing baseline gets this run added, its bands widened: see "
                               "docs/run-baseline.md)")
    baseline.add_argument("--compare", metavar="BASELINE",
                          help="report what held in the run recorded in BASELINE and no longer "
                               "holds (ML330-ML339)")
    parser.add_argument("--update", action="store_true",
                        help="with --compare: rewrite BASELINE from this run after reporting")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of internal errors")
    return parser


_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?(\.exe)?$")


def split_target(argv: list[str], usage_error) -> tuple[list[str], list[str], str | None]:
    """(modellint options, the command to run as [interpreter, ...], the script's path)."""
    if "--" not in argv:
        raise usage_error("give the script to run after `--`: modellint run -- python "
                          "train.py ARGS (or -- -m package.module ARGS)")
    index = argv.index("--")
    options, target = argv[:index], argv[index + 1:]
    if not target:
        raise usage_error("nothing to run after `--`")
    interpreter = sys.executable
    if os.path.basename(target[0]) == "torchrun" or target[:3] == ["python", "-m",
                                                                    "torch.distributed.run"]:
        launcher, rest = _torchrun(target[1:] if target[0] != "python" else target[3:])
        if not rest or not os.path.isfile(rest[0]):
            raise usage_error("give the script after torchrun's options: -- torchrun "
                              "--nproc-per-node 2 train.py ARGS")
        return options, [interpreter, "-m", "torch.distributed.run", *launcher, "-m",
                         "modellint.watching.child", "{RESULT}", "{OPTIONS}", "--", *rest], rest[0]
    if _PYTHON.match(os.path.basename(target[0])):
        found = shutil.which(target[0])
        if found is None:
            raise usage_error(f"`{target[0]}` is not an interpreter on PATH")
        interpreter = found
        target = target[1:]
    if not target:
        raise usage_error("give a script or `-m module` after the interpreter")
    if target[0] == "-m":
        if len(target) < 2:
            raise usage_error("`-m` needs a module name")
        return options, [interpreter, *target], None
    if target[0].startswith("-"):
        raise usage_error(f"interpreter option {target[0]!r} is not supported; give "
                          f"`python script.py` or `python -m module`")
    script = target[0]
    if not os.path.isfile(script):
        raise usage_error(f"script does not exist: {script}")
    return options, [interpreter, *target], script


_TORCHRUN_FLAGS = {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path",
                   "--module", "-m"}


def _torchrun(argv: list[str]) -> tuple[list[str], list[str]]:
    """torchrun's own options, and the script with its arguments."""
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        if argv[index] in ("--module", "-m", "--no-python", "--no_python"):
            raise TorchrunOptionError(argv[index])
        index += 1 if "=" in argv[index] or argv[index] in _TORCHRUN_FLAGS else 2
    return argv[:index], argv[index:]


class TorchrunOptionError(Exception):  # a torchrun option `modellint run` cannot wrap
    pass


def run_main(argv: list[str]) -> int:
    from modellint.arguments import (
        EXIT_CLEAN,
        EXIT_FINDINGS,
        Parser,
        UsageError,
        check_output_file,
        output_file,
        output_tree,
        overrides,
        use_color,
    )
    from modellint.codes import INTERNAL_ERROR, SCRIPT_FAILED
    from modellint.plugins import Registry, config_plugins_allowed
    from modellint.report import Summary, printable
    from modellint.runtime.pass_ import torch_missing
    from modellint.session import Session, config_for, linted_tree

    before = argv[:argv.index("--")] if "--" in argv else argv
    if "-h" in before or "--help" in before:
        build_parser(Parser).parse_args(["--help"])
    try:
        options, command, script = split_target(argv, UsageError)
    except TorchrunOptionError as exc:
        raise UsageError(f"torchrun's {exc} is not supported under `modellint run`; give "
                         f"the script's path") from None
    args = build_parser(Parser).parse_args(options)
    if args.steps < 1:
        raise UsageError("--steps must be at least 1")
    if args.batches_per_epoch < 0:
        raise UsageError("--batches-per-epoch must be 0 (no cut) or more")
    if torch_missing():
        raise UsageError(torch_missing().replace("--runtime builds and runs your models",
                                                 "`modellint run` runs your script"))
    folder = os.path.dirname(os.path.abspath(script)) if script else "."
    wanted = overrides(args)
    config = config_for(wanted, folder)
    # refused now rather than after the script's run
    tree = output_tree(linted_tree(config, bool(wanted.config_file), [folder]))
    if args.output_file:
        check_output_file(args.output_file, tree)
    if args.plots:
        check_plots_folder(args.plots, tree)
    baseline = _baseline_before_run(args, tree)
    session = Session.for_config(config, wanted)
    # loaded, not a manifest's: `run` reads no manifest
    registry, config = cast(Registry, session.settings.registry), session.settings.config
    if args.format not in registry.reporters:
        raise UsageError(f"unknown format `{args.format}` (choose from "
                         f"{', '.join(sorted(registry.reporters))})")
    enabled = session.settings.run_codes()
    plugins = list(args.plugins)
    if config.plugins and config_plugins_allowed(args.allow_config_plugins):
        plugins += list(config.plugins)
    result, stopped = _run_child(command, args, sorted(enabled), plugins,
                                 report_to_stdout=not args.output_file,
                                 observe=bool(args.record or args.compare))
    raws = [RawFinding.from_json(raw) for raw in result.get("findings", [])]
    observation = result.get("observation")
    if (args.record or args.compare) and observation is None and "internal" not in result:
        print("modellint: the run ended before anything could be observed: no baseline "
              "written or compared", file=sys.stderr)
    elif observation is not None:
        failed = stopped is not None or any(r.code == SCRIPT_FAILED for r in raws)
        raws += _baseline_after_run(args, tree, baseline, observation, registry, enabled,
                                    config, failed)
    if len(result.get("rank_prints") or []) > 1:  # checks that compare the ranks
        for code in sorted(enabled):
            compare = getattr(registry.run_checks.get(code), "compare_ranks", None)
            if compare is not None:
                raws += map(RawFinding.from_json, compare(result["rank_prints"]))
    if "internal" in result:
        raws.append(RawFinding(INTERNAL_ERROR, f"`modellint run` failed: {result['internal']}"))
    if stopped:
        raws.append(RawFinding(SCRIPT_FAILED, stopped, script and os.path.abspath(script)))
    findings = session.run_findings(raws, label=script or command[-1])
    for note in result.get("notes", []):
        print(f"modellint: {printable(note)}", file=sys.stderr)
    summary_data = result.get("summary") or {}
    if args.plots and summary_data:
        from modellint.watching.plots import write_plots

        message = write_plots(summary_data, args.plots, tree)
        print(f"modellint: {printable(message)}", file=sys.stderr)
    with (output_file(args.output_file, tree) if args.output_file
          else contextlib.nullcontext(sys.stdout)) as stream:
        summary = Summary(files_checked=1, rules=dict(registry.rules),
                          statistics=args.statistics, quiet=args.quiet,
                          color=use_color(args.color, stream))
        registry.reporters[args.format](stream).report(findings, summary)
        if args.format in ("text", "concise") and not args.quiet and summary_data:
            stream.write(run_summary(summary_data) + "\n")
    if args.exit_zero:
        return EXIT_CLEAN
    counted = [f for f in findings if f.severity.value != "info"]
    return EXIT_FINDINGS if counted else EXIT_CLEAN


def _baseline_before_run(args, tree) -> dict | None:
    """--record / --compare / --update: the paths refused (a link, not a regular file, a folder
    that is a link in the tree) and the baseline read, before the script runs. The baseline
    compared with (or, recording, the one the run is added to), or None."""
    from modellint.arguments import UsageError
    from modellint.safe_write import UnsafePath, check_target
    from modellint.watching.baseline import BaselineError, load

    if args.update and not args.compare:
        raise UsageError("--update rewrites the baseline of --compare: give --compare "
                             "BASELINE")
    path = args.record or args.compare
    if path is None:
        return None
    option = "--record" if args.record else "--compare"
    if args.record or args.update:
        try:
            check_target(path, tree)
        except UnsafePath as exc:
            raise UsageError(f"{option}: {exc}") from None
    if args.record and not os.path.lexists(path):
        return None
    try:
        return load(path)
    except BaselineError as exc:
        if args.record:
            raise UsageError(f"--record: {exc}; remove it to record a new baseline, or "
                                 f"name another file") from None
        raise UsageError(f"--compare: {exc}") from None


def _baseline_after_run(args, tree, baseline, observation, registry, enabled, config,
                        failed: bool) -> list[RawFinding]:
    """Compare with the baseline (the findings), then write what is asked; not from a run
    whose script `failed` (ML003): what it saw is no known-good run."""
    from modellint.arguments import UsageError
    from modellint.report import printable
    from modellint.safe_write import UnsafePath
    from modellint.watching.baseline import compare, merge, write

    raws: list[RawFinding] = []
    if args.compare and baseline is not None:
        raws = compare(baseline, observation, registry, enabled, config.baseline_accept)
    path = args.record or (args.compare if args.update else None)
    if path is None:
        return raws
    if failed:
        print(f"modellint: {printable(path)}: not written, the script failed (ML003)",
              file=sys.stderr)
        return raws
    written = merge(baseline, observation) if args.record and baseline is not None \
        else observation
    option = "--record" if args.record else "--update"
    try:
        write(path, tree, written)
    except UnsafePath as exc:
        raise UsageError(f"{option}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{option}: cannot write {path}: {exc}") from None
    print(f"modellint: {printable(path)}: baseline of {written['runs']} run(s) written",
          file=sys.stderr)
    return raws


def check_plots_folder(folder: str, tree) -> None:
    """--plots: refused before the run when the folder, or a name on the way to it, is a link
    in the tree (`modellint.safe_write.enter_folder`)."""
    from modellint.arguments import UsageError
    from modellint.safe_write import UnsafePath, enter_folder

    try:
        enter_folder(folder, tree, create=False)
    except UnsafePath as exc:
        raise UsageError(f"--plots: {exc}") from None


def run_summary(data: dict) -> str:
    reasons = {"steps": "step budget spent", "timeout": "--timeout reached",
               "interrupted": "interrupted", None: "the script ended"}
    losses = data.get("losses") or []
    loss = f", last loss {losses[-1]:.4g}" if losses else ""
    ranks = f" on each of {data['ranks']} ranks" if data.get("ranks") else ""
    steps = f"{data.get('steps', 0)} optimizer step(s)"
    if data.get("manual_steps"):
        steps = f"{data['steps']} step(s) ({data['manual_steps']} by hand)"
    if data.get("processes"):
        ranks += f" in each of {data['processes']} process(es) the script started"
    return (f"modellint run: {steps}{ranks}, "
            f"{data.get('epochs', 0)} epoch(s), {data.get('optimizers', 0)} optimizer(s), "
            f"{data.get('models', 0)} model(s){loss}, {data.get('seconds', 0):.1f} s "
            f"({reasons.get(data.get('stopped'), data.get('stopped'))})")


def _run_child(command: list[str], args, codes: list[str], plugins: list[str],
               report_to_stdout: bool, observe: bool = False) -> tuple[dict, str | None]:
    """Run the script; (its result, why it gave none or None)."""
    options = {"steps": args.steps, "timeout": args.timeout, "codes": codes,
               "plugins": plugins, "observe": observe,
               "batches_per_epoch": args.batches_per_epoch or None}
    interpreter, target = command[0], command[1:]
    with tempfile.TemporaryDirectory(prefix="modellint-run-") as folder:
        result_path = str(Path(folder) / "result.json")
        if "{RESULT}" in target:  # torchrun: every rank runs the child, writing its own result
            child = [interpreter, *[result_path if a == "{RESULT}" else json.dumps(options)
                                    if a == "{OPTIONS}" else a for a in target]]
        else:
            child = [interpreter, "-m", "modellint.watching.child", result_path,
                     json.dumps(options), "--", *target]
        # the script's own output stays visible; on stderr when the report goes to stdout
        stdout = None
        if report_to_stdout:
            try:
                stdout = sys.stderr.fileno()
            except (AttributeError, OSError, ValueError):  # a captured stream
                stdout = None
        # the script may print anything on its own output, but it must not reach the report:
        # modellint's descriptors are closed to it (see modellint.runtime.worker)
        from modellint.runtime.worker import keep_out_of_reach

        keep_out_of_reach()
        try:
            process = subprocess.Popen(child, stdout=stdout)
        except OSError as exc:
            return {}, f"could not start {interpreter}: {exc}"
        try:
            code = process.wait(timeout=args.timeout + GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return _read(result_path) or {}, (f"the script did not stop within --timeout "
                                              f"{args.timeout:g} s and was killed")
        except KeyboardInterrupt:
            process.kill()
            process.wait()
            raise
        result = _merge([_read(os.path.join(folder, name)) for name in sorted(os.listdir(folder))
                         if name.startswith("result.json")])
        if result is None:
            if code != 0 and interpreter != sys.executable and not _has_modellint(interpreter):
                from modellint.arguments import UsageError

                raise UsageError(f"modellint is not installed for {interpreter}: install it "
                                 f"there, or give `{sys.executable}` after `--`")
            return {}, (f"the script ended (status {code}) before modellint could report: "
                        f"it was killed, or exited with os._exit")
        return result, None


def _merge(ranks: list[dict | None]) -> dict | None:
    """One result from the ranks' (or the one process's, as read: None where none was
    written): findings once each, rank 0's summary."""
    results = [r for r in ranks if r is not None]
    if not results:
        return None
    # the processes the script started (Hogwild) train while the script's own may not
    summary = dict(next((r["summary"] for r in results if (r.get("summary") or {}).get("steps")),
                        results[0].get("summary") or {}))
    followed = sum(1 for r in results if r.get("followed"))
    if len(results) - followed > 1:
        summary["ranks"] = len(results) - followed
    if followed:
        summary["processes"] = followed
    merged: dict = {"findings": [], "notes": [], "summary": summary}
    seen = set()
    for result in results:
        for raw in result.get("findings", []):
            key = (raw["code"], raw.get("file"), raw.get("line"))
            if key not in seen:
                seen.add(key)
                merged["findings"].append(raw)
        merged["notes"] += [n for n in result.get("notes", []) if n not in merged["notes"]]
        if "internal" in result:
            merged["internal"] = result["internal"]
    merged["rank_prints"] = [r.get("rank_prints") or [] for r in results]
    # the baseline: rank 0's observation (the first result), and whether the ranks agreed
    observation = next((r["observation"] for r in results if r.get("observation")
                        and not r.get("followed")), None)
    if observation is not None:
        from modellint.watching.baseline import agree_across_ranks

        own = [r for r in results if not r.get("followed")]  # not processes the script started
        if len(own) > 1:
            observation["ranks"] = agree_across_ranks([r.get("rank_prints") or []
                                                       for r in own])
        merged["observation"] = observation
    return merged


def _read(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _has_modellint(interpreter: str) -> bool:
    try:
        return subprocess.run([interpreter, "-c", "import modellint.watching.child"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
