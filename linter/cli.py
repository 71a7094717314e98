"""Command line: `modellint [check] PATH...`, `modellint rules`, `modellint rule CODE`: an
adapter over the application layer (`modellint.session`), which resolves the settings and
runs the passes; here the command line is parsed and what the session returns is shown."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import NoReturn

import modellint
from modellint.arguments import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    Parser,
    UsageError,
    add_plugin_options,
    add_report_options,
    check_output_file,
    code_bytes,
    output_file,
    output_tree,
    overrides,
    seconds,
    use_color,
)
from modellint.config import ConfigError, did_you_mean
from modellint.plugins import PluginError
from modellint.report import printable
from modellint.session import SUBCOMMANDS, CheckOptions, Session, manifest_store_for


def _refuse_file_names_as_options(argv: list[str]) -> None:
    """Without `--`, a `check` command line may hold file names where options go (a pre-commit
    hook whose `args` do not end with `--` puts a committed `--allow-config-plugins` first,
    as file names starting with `-` sort first): an option spelled like a file that exists
    here is refused rather than obeyed, wherever it stands, so that no file name can turn
    on a switch that runs the repository's code (`--allow-config-plugins`, `--runtime`, `-p`,
    or any abbreviation) or pass the run (`--exit-zero`). A `--` ends the options, unless a
    file named `--` is here: then it too may be a file name."""
    end = argv.index("--") if "--" in argv else len(argv)
    if end < len(argv) and not os.path.lexists("--"):
        return
    for word in argv[:end]:
        if word.startswith("-") and word != "-" and os.path.lexists(word):
            raise UsageError(
                f"{word} is an option and the name of a file here, which may come from a list "
                "of file names: put `--` before the file names (`modellint check [OPTIONS] -- "
                "PATH...`; in a pre-commit hook, end `args` with `--`)")


def build_parser(others_in_full: bool = True) -> Parser:
    """The command line's parser. `trace` and `run` have parsers of their own (`main` hands
    them their arguments); with `others_in_full` their options are listed here too, for
    `modellint --help`: a run of another command need not build (nor import) them."""
    parser = Parser(
        prog="modellint",
        description="A static-plus-runtime linter for PyTorch model code.",
    )
    parser.add_argument("--version", action="version", version=f"modellint {modellint.__version__}")
    sub = parser.add_subparsers(dest="command")

    check = sub.add_parser("check", help="lint files and folders (the default command)")
    check.add_argument("paths", nargs="*", metavar="PATH",
                       help="files and folders to lint (default: the current folder)")
    add_report_options(check)
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    check.add_argument("--diff", action="store_true", help="print the fixes as a diff; write nothing")
    check.add_argument("--add-noqa", action="store_true",
                       help="write `# noqa: CODE` on every line with a finding; report nothing")
    check.add_argument("--exit-non-zero-on-fix", action="store_true",
                       help="with --fix, exit 1 when a file was fixed, even if no finding is left")
    check.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, metavar="N",
                       help="files linted in parallel (default: the number of CPUs)")
    check.add_argument("--no-cache", action="store_true",
                       help="lint every file again, without reading or writing the results cache")
    check.add_argument("--max-code-bytes", type=code_bytes, metavar="N",
                       help="bytes of code one file may hold to be linted (default 524288, "
                       "or max-code-bytes in the config); a larger file is one ML001")
    check.add_argument("--debug", action="store_true", help="print tracebacks of internal errors")
    check.add_argument("--show-settings", action="store_true",
                       help="print the resolved settings and where each came from; lint nothing")
    check.add_argument("--show-files", action="store_true",
                       help="print the files that would be linted; lint nothing")
    check.add_argument("--stdin-filename", metavar="PATH",
                       help="lint standard input as the file PATH (its config, per-file-ignores "
                       "and name in messages); with --fix, print the fixed source")
    check.add_argument("--runtime", action="store_true", help="also build and trace the models")
    check.add_argument("--device", help="cpu, cuda, cuda:N, mps or meta (runtime pass)")
    check.add_argument("--timeout", type=seconds, metavar="SECONDS", help="seconds per model (runtime pass)")
    check.add_argument("--fail-on-unchecked", action="store_true",
                       help="exit 1 when the runtime pass could not check a model (ML002)")

    rules = sub.add_parser("rules", help="list every rule")
    add_plugin_options(rules)
    rules.add_argument("--format", "--output-format", dest="format", choices=("text", "json"),
                       default="text",
                       help="text (a table) or json")

    rule = sub.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("code", nargs="?", help="the rule's code, e.g. ML101")
    rule.add_argument("--all", action="store_true", help="every rule")
    rule.add_argument("--format", "--output-format", dest="format", choices=("text", "json"),
                      default="text",
                      help="text (markdown) or json")
    add_plugin_options(rule)

    # `modellint trace ...` is run by the runtime's own parser (see `main`); listed here, with
    # its options, for `modellint --help` and for suggestions
    trace_parents: list = []
    run_parents: list = []
    if others_in_full:
        from modellint.runtime.cli import build_parser as trace_parser
        from modellint.watching.cli import build_parser as run_parser

        trace_parents = [trace_parser()]
        run_parents = [run_parser(argparse.ArgumentParser)]
    # (typeshed wants parents of the subparsers' own class; argparse takes any parser)
    sub.add_parser("trace", parents=trace_parents, add_help=False,
                   help="build a model and print the shape, parameters, device and dtype of "
                        "every layer (torchinfo-style); --memory, --feature-maps")
    sub.add_parser("run", parents=run_parents, add_help=False,
                   help="run a training script for a few steps under "
                   "instrumentation (EXECUTES it): modellint run [options] -- python train.py")

    server = sub.add_parser("server", help="run the language server on stdin and stdout "
                            "(needs the `server` extra)")
    add_plugin_options(server)
    return parser


def _cmd_server(args) -> int:
    try:
        from modellint.server import serve
    except ImportError as exc:
        if exc.name not in ("pygls", "lsprotocol", "cattrs", "attrs"):
            raise
        raise UsageError("`modellint server` needs the server extra: "
                         "pip install 'modellint[server]'") from None
    return serve(args.plugins, args.allow_config_plugins)


def _normalise_argv(argv: list[str]) -> list[str]:
    """`modellint PATH...` means `modellint check PATH...`."""
    if not argv:
        return ["check"]
    first = argv[0]
    if first in SUBCOMMANDS or first in ("-h", "--help", "--version"):
        return argv
    return ["check", *argv]


def run_command() -> NoReturn:
    """The `modellint` command (and `python -m modellint`): `main()`, then the end of the
    process without tearing the interpreter down. Freeing a large project's index object by
    object at exit costs seconds of CPU (a tenth of a cold run on timm) and does nothing for
    the user; the exit handlers still run (temporary folders, pools, logging) and the streams
    are flushed, as mypy's `hard_exit` does. The garbage collector runs rarely throughout
    (`fewer_collections`), and not at all at the end: put back to its usual pace, it would
    first scan everything the run left alive."""
    from modellint.static.collection import fewer_collections

    with fewer_collections():
        code = main()
        gc.disable()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a reader that went away
            code = code or EXIT_ERROR
        except ValueError:  # closed (the language server's, at its `exit`): nothing to flush
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    argv = _normalise_argv(list(sys.argv[1:] if argv is None else argv))
    debug = "--debug" in argv
    try:
        if argv[0] == "trace":
            from modellint.runtime.cli import trace_main

            return trace_main(argv[1:])
        if argv[0] == "run":
            from modellint.watching.cli import run_main

            return run_main(argv[1:])
        if argv[0] == "check":
            _refuse_file_names_as_options(argv[1:])
        try:
            # a command's own arguments are parsed by its subparser alone
            args = build_parser(others_in_full=argv[0] not in SUBCOMMANDS).parse_args(argv)
        except UsageError:
            # the message names the command an unknown option belongs to: all are needed
            args = build_parser().parse_args(argv)
        if args.command == "rules":
            return _cmd_rules(args)
        if args.command == "rule":
            return _cmd_rule(args)
        if args.command == "server":
            return _cmd_server(args)
        return _cmd_check(args)
    except (UsageError, ConfigError, PluginError) as exc:
        print(f"modellint: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("modellint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - never show a user a bare traceback
        if debug:
            import traceback

            traceback.print_exc()
        print(
            f"modellint: internal error: {type(exc).__name__}: {printable(str(exc))}"
            + ("" if debug else " (rerun with --debug for the traceback)"),
            file=sys.stderr,
        )
        return EXIT_ERROR


def _cmd_rules(args) -> int:
    from modellint.report.rule_docs import rule_row, rules_table

    rules = Session.open(overrides(args), select=False).rule_docs()
    if args.format == "json":
        import json

        print(json.dumps([rule_row(rule) for rule in rules], indent=2))
        return EXIT_CLEAN
    print(rules_table(rules))
    return EXIT_CLEAN


def _cmd_rule(args) -> int:
    from modellint.report.rule_docs import render_rule_doc, rule_metadata

    if args.all == bool(args.code):
        raise UsageError("give one rule code, or --all")
    session = Session.open(overrides(args), select=False)
    chosen = session.rule_docs(None if args.all else args.code)
    if args.format == "json":
        import json

        origins = session.settings.registry.origins
        documents = [{**rule_metadata(rule), "plugin": origins[rule.code]} for rule in chosen]
        print(json.dumps(documents if args.all else documents[0], indent=2))
    else:
        print("\n".join(render_rule_doc(rule) for rule in chosen))
    return EXIT_CLEAN


def _settings_text(session: Session, args) -> str:
    """`--show-settings`: one `key = value  # origin` line per setting, TOML-like."""
    import json

    config = session.settings.config
    enabled, static_rules = session.settings.enabled, session.settings.static_rules

    def origin(key: str, cli_value=None) -> str:
        from_file = key in config.keys
        if cli_value:
            return f"{config.where()} and the command line" if from_file else "the command line"
        return config.where() if from_file else "default"

    def value(item) -> str:
        return json.dumps(item, default=str)

    cache = "off (--no-cache)" if args.no_cache else None
    if cache is None:
        from modellint.static.cache import default_dir

        directory = default_dir(config.root)
        cache = "off (CI: set MODELLINT_CACHE_DIR)" if directory is None else str(directory)
    rows = [
        ("config-file", config.where() if config.source else "none", "discovered"
         if config.source and not args.config else ("--config" if args.config else "default")),
        ("project-root", str(config.root), "the config file's folder" if config.source
         else "the current folder"),
        ("select", value(config.select if config.select is not None else "default rules"),
         origin("select", args.select)),
        ("extend-select", value(config.extend_select), origin("extend-select",
                                                              args.extend_select)),
        ("ignore", value(config.ignore), origin("ignore", args.ignore)),
        ("exclude", value(config.exclude), origin("exclude")),
        ("per-file-ignores", value(config.per_file_ignores), origin("per-file-ignores")),
        ("plugins", value(config.plugins), origin("plugins")),
        ("notebooks", value(config.notebooks), origin("notebooks")),
        ("target-torch-version", value(".".join(map(str, config.target_torch_version))),
         origin("target-torch-version")),
        ("target-gpu-memory", value(config.target_gpu_memory), origin("target-gpu-memory")),
        ("baseline-accept", value(config.baseline_accept), origin("baseline-accept")),
        ("max-code-bytes", value(config.max_code_bytes), origin("max-code-bytes",
                                                                args.max_code_bytes)),
        ("runtime", value(config.runtime), origin("runtime")),
        ("enabled-rules", value(sorted(enabled)), "select, extend-select and ignore"),
        ("static-rules", value(len(static_rules)), "enabled rules with a static check"),
        ("format", value(args.format), "the command line" if args.format != "text"
         else "default"),
        ("jobs", value(args.jobs), "default (CPU count)" if args.jobs == (os.cpu_count() or 1)
         else "the command line"),
        ("cache", value(cache), "MODELLINT_CACHE_DIR" if os.environ.get("MODELLINT_CACHE_DIR")
         else "default"),
    ]
    return "\n".join(f"{key} = {printable(text)}  # {printable(source)}"
                     for key, text, source in rows)


def _would_fix(outcomes, findings, unsafe_fixes: bool) -> str:
    would_fix = sum(outcome.would_fix for outcome in outcomes)
    unsafe_left = 0 if unsafe_fixes else sum(
        1 for f in findings if f.fix is not None and not f.fix.safe)
    more = f" ({unsafe_left} more with --unsafe-fixes)" if unsafe_left else ""
    if not would_fix:
        return f"No fixes available{more}."
    return f"Would fix {would_fix} finding{'' if would_fix == 1 else 's'}{more}."


def _add_noqa(findings: list, paths: dict[str, Path], tree: Sequence[Path]) -> int:
    """`check --add-noqa`: a noqa for each finding at its line, as ruff adds them (the engine's
    own ML000/ML001 excepted: a file that does not parse or could not be linted is not
    edited)."""
    from modellint.fix import add_noqa
    from modellint.static.engine import INTERNAL_ERROR, SYNTAX_ERROR

    wanted: dict[str, dict[int | None, dict[int, set[str]]]] = {}
    for finding in findings:
        if finding.code in (SYNTAX_ERROR[0], INTERNAL_ERROR[0]) or finding.path not in paths:
            continue
        lines = wanted.setdefault(finding.path, {}).setdefault(finding.cell, {})
        lines.setdefault(finding.line, set()).add(finding.code)
    added = 0
    for display, codes in wanted.items():
        count, messages = add_noqa(paths[display], codes, tree)
        added += count
        for message in messages:
            print(f"modellint: {printable(message)}", file=sys.stderr)
    print(f"Added {added} noqa directive{'' if added == 1 else 's'}.", file=sys.stderr)
    return EXIT_CLEAN


def _cmd_check(args) -> int:
    from modellint.report import Summary

    stdin_name = args.stdin_filename
    if stdin_name is None and args.paths == ["-"]:
        stdin_name = "-"  # as in ruff: `-` is standard input (`--stdin-filename` names it)
    if args.add_noqa and (args.fix or args.diff):
        raise UsageError("--add-noqa cannot be combined with --fix or --diff")
    if stdin_name is not None:
        if args.add_noqa:
            raise UsageError("--add-noqa writes files; it cannot take standard input")
        if args.paths not in ([], ["-"]):
            raise UsageError("--stdin-filename lints standard input: give no PATH (or `-`)")
        if args.runtime:
            raise UsageError("--runtime builds the models of files on disk; it cannot lint "
                             "standard input")
    paths = [stdin_name] if stdin_name is not None else args.paths or ["."]
    for path in paths if stdin_name is None else []:
        if not os.path.lexists(path):
            # `modellint chek`: a mistyped subcommand reads as a path
            hint = "" if os.sep in path else did_you_mean(path, SUBCOMMANDS)
            raise UsageError(f"path does not exist: {path}{hint}")
    wanted = overrides(args, max_code_bytes=args.max_code_bytes, device=args.device,
                       timeout=args.timeout, fail_on_unchecked=args.fail_on_unchecked)
    options = CheckOptions(fix=args.fix, unsafe_fixes=args.unsafe_fixes, diff=args.diff,
                           jobs=args.jobs, cache=not args.no_cache, runtime=args.runtime,
                           progress=sys.stderr.isatty() and not args.quiet, format=args.format)
    # a run that can be served from the cache reads the plugins' manifest, not the plugins
    session = Session.open(wanted, paths[0], manifest_store=manifest_store_for(
        options, wanted, stdin_name is not None))
    registry = session.settings.registry
    if args.format not in registry.reporters:
        raise UsageError(
            f"unknown format `{args.format}`{did_you_mean(args.format, registry.reporters)} "
            f"(choose from {', '.join(sorted(registry.reporters))})"
        )
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.show_settings:
        print(_settings_text(session, args))
        return EXIT_CLEAN
    from modellint.session import check_named_file

    for path in paths if stdin_name is None else []:
        check_named_file(path)
    tree = session.tree([] if stdin_name is not None else paths)
    if args.output_file:
        check_output_file(args.output_file, output_tree(tree))
    plan = session.plan(paths, stdin_name)
    tasks = plan.tasks
    if args.show_files:
        for display, _, _ in tasks:
            print(printable(display))
        for display in plan.ignored:
            print(f"modellint: ignored by .gitignore: {printable(display)}", file=sys.stderr)
        return EXIT_CLEAN
    result = session.lint(plan, options, read_stdin=sys.stdin.buffer.read)
    outcomes, findings = result.outcomes, result.findings
    for outcome in outcomes:
        for message in outcome.messages:
            # messages name files and quote what went wrong in them: shown, never acted on
            print(f"modellint: {printable(message)}", file=sys.stderr)
        if args.debug:
            for text in outcome.tracebacks:
                print(text, file=sys.stderr)
    if args.add_noqa:
        return _add_noqa(findings, {display: path for display, path, _ in tasks}, tree)
    diff_text = "".join(outcome.diff for outcome in outcomes)
    if stdin_name is not None and args.fix:
        # like ruff: the fixed source is the output; the findings go beside it
        sys.stdout.buffer.write(outcomes[0].fixed_source or result.stdin_source or b"")
        sys.stdout.flush()
    with (output_file(args.output_file, output_tree(tree)) if args.output_file
          else nullcontext(sys.stderr if stdin_name is not None and args.fix else sys.stdout)
          ) as stream:
        if args.diff:
            stream.write(diff_text)
            if not args.quiet:
                print(_would_fix(outcomes, findings, args.unsafe_fixes), file=sys.stderr)
        else:
            summary = Summary(
                files_checked=len(tasks),
                files_ignored=sum(not display.endswith("/") for display in plan.ignored),
                notebooks_checked=sum(outcome.notebook for outcome in outcomes),
                fixed=sum(outcome.fixed for outcome in outcomes),
                rules=plan.files.rules(),
                statistics=args.statistics,
                quiet=args.quiet,
                color=use_color(args.color, stream),
                fix_mode=args.fix,
                unsafe_fixes=args.unsafe_fixes,
                models=result.models,
                models_unchecked=result.unchecked,
            )
            registry.reporters[args.format](stream).report(findings, summary)
    if args.diff:
        return EXIT_FINDINGS if diff_text else EXIT_CLEAN
    if args.exit_zero:
        return EXIT_CLEAN
    if args.exit_non_zero_on_fix and any(outcome.fixed for outcome in outcomes):
        return EXIT_FINDINGS
    counted = [f for f in findings if f.severity.value != "info"]
    if result.unchecked and result.fail_on_unchecked:
        return EXIT_FINDINGS
    return EXIT_FINDINGS if counted else EXIT_CLEAN
