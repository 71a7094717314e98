"""Command line: `modellint [check] PATH...`, `modellint rules`, `modellint rule CODE`."""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import traceback
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO

import modellint
from modellint.config import (
    Config,
    ConfigError,
    check_max_code_bytes,
    check_timeout,
    closest,
    did_you_mean,
    enabled_codes,
    find_pyproject,
    is_excluded,
    load_config,
    validate_codes,
)
from modellint.plugins import (
    ALLOW_CONFIG_PLUGINS_FLAG,
    LIGHT_FORMATS,
    LightRegistry,
    PluginError,
    Registry,
    config_plugins_allowed,
    config_plugins_refused,
    is_static,
    light_registry,
    load_registry,
    save_manifest,
)
from modellint.report import printable
from modellint.safe_write import UnsafePath, check_target, replacing
from modellint.suppress import hidden_codes, shown_codes

SUBCOMMANDS = ("check", "rules", "rule", "trace", "server", "run")
# the built-in report formats (modellint.report.builtin); plugins may add more
FORMATS = ("text", "concise", "json", "github", "sarif")
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    # the subcommand of the command line being parsed: suggestions come from its options only
    command: str | None = None

    def error(self, message: str):  # exit 2 with our prefix, like argparse but no usage dump
        raise UsageError(message + _suggestion(self, message))

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.command = getattr(parsed, "command", None)
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


# words that turn an option's meaning around: `--exit-non-zero-on-fix` is not `--exit-zero`
_NEGATIONS = frozenset({"no", "non", "not", "without", "disable", "skip"})


def _same_sense(option: str, other: str) -> bool:
    words = (set(option.lstrip("-").split("-")) & _NEGATIONS,
             set(other.lstrip("-").split("-")) & _NEGATIONS)
    return words[0] == words[1]


def _suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """The closest valid option or choice to what argparse refused: an option of the same
    subcommand, never the one refused, never one of the opposite meaning."""
    choice = re.match(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)$", message)
    if choice:
        return did_you_mean(choice.group(2), re.findall(r"'([^']*)'", choice.group(3)))
    unknown = re.match(r"unrecognized arguments: (.*)$", message)
    if unknown:
        parsers: dict[str | None, argparse.ArgumentParser] = {None: parser}
        command = getattr(parser, "command", None)
        if parser._subparsers is not None:
            # argparse reports a subcommand's unknown options on the top parser
            parsers = {name: sub for action in parser._subparsers._group_actions
                       if isinstance(action, argparse._SubParsersAction)
                       for name, sub in action.choices.items()}
        own = parsers.get(command, parser)
        options = {o for action in own._actions for o in action.option_strings}
        for word in unknown.group(1).split():
            if not word.startswith("--"):
                continue
            refused = word.split("=", 1)[0]
            # compared without the dashes that every option shares
            alike = {o[2:]: o for o in options
                     if o.startswith("--") and o != refused and _same_sense(refused, o)}
            best = closest(refused[2:], alike)
            if best is not None:
                return f" (did you mean `{alike[best]}`?)"
            elsewhere = sorted(name for name, sub in parsers.items() if name is not None
                               and any(refused in action.option_strings
                                       for action in sub._actions))
            if elsewhere:
                return f" (`{refused}` is an option of `modellint {elsewhere[0]}`)"
    return ""


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


def _codes(value: str) -> list[str]:
    return [part.strip().upper() for part in value.split(",") if part.strip()]


def _seconds(value: str) -> float:
    try:
        return check_timeout(float(value), "the value")
    except (ValueError, ConfigError) as exc:
        raise argparse.ArgumentTypeError(str(exc) if isinstance(exc, ConfigError) else
                                         f"not a number: {value!r}") from None


def _code_bytes(value: str) -> int:
    try:
        return check_max_code_bytes(int(value.replace("_", "")), "the value")
    except (ValueError, ConfigError) as exc:
        raise argparse.ArgumentTypeError(str(exc) if isinstance(exc, ConfigError) else
                                         f"not a whole number of bytes: {value!r}") from None


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """The options `check` and `run` share: which codes to report, how, and with which
    configuration and plugins."""
    parser.add_argument("--select", type=_codes, metavar="CODES",
                        help="comma-separated codes, prefixes or rule names, or ALL")
    parser.add_argument("--extend-select", type=_codes, action="extend", default=[],
                        metavar="CODES",
                        help="codes or prefixes to add to the selected ones (repeatable)")
    parser.add_argument("--ignore", type=_codes, action="extend", default=[], metavar="CODES",
                        help="codes or prefixes not to report (repeatable)")
    parser.add_argument("--format", "--output-format", dest="format", default="text",
                        help=f"{', '.join(FORMATS)} (default text), or a plugin's")
    parser.add_argument("--output-file", "-o", metavar="FILE",
                        help="write the report to FILE instead of the standard output")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    parser.add_argument("--statistics", action="store_true", help="count findings per rule")
    parser.add_argument("--config", metavar="FILE", help="a pyproject.toml or modellint.toml to use")
    parser.add_argument("-p", dest="plugins", action="append", default=[], metavar="MODULE",
                        help="load a plugin module (repeatable)")
    parser.add_argument(ALLOW_CONFIG_PLUGINS_FLAG, action="store_true",
                        help="load the plugins the config names (runs the repository's code)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no summary line")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="color the text report (default auto: on a terminal, unless NO_COLOR)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    check.add_argument("--max-code-bytes", type=_code_bytes, metavar="N",
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
    check.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="seconds per model (runtime pass)")
    check.add_argument("--fail-on-unchecked", action="store_true",
                       help="exit 1 when the runtime pass could not check a model (ML002)")

    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("-p", dest="plugins", action="append", default=[], metavar="MODULE",
                       help="load a plugin module (repeatable)")
    rules.add_argument(ALLOW_CONFIG_PLUGINS_FLAG, action="store_true",
                       help="load the plugins the config names (runs the repository's code)")
    rules.add_argument("--format", "--output-format", dest="format", choices=("text", "json"),
                       default="text",
                       help="text (a table) or json")

    rule = sub.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("code", nargs="?", help="the rule's code, e.g. ML101")
    rule.add_argument("--all", action="store_true", help="every rule")
    rule.add_argument("--format", "--output-format", dest="format", choices=("text", "json"),
                      default="text",
                      help="text (markdown) or json")
    rule.add_argument("-p", dest="plugins", action="append", default=[], metavar="MODULE",
                      help="load a plugin module (repeatable)")
    rule.add_argument(ALLOW_CONFIG_PLUGINS_FLAG, action="store_true",
                      help="load the plugins the config names (runs the repository's code)")

    # `modellint trace ...` is run by the runtime's own parser (see `main`); listed here, with
    # its options, for `modellint --help` and for suggestions
    from modellint.runtime.cli import build_parser as trace_parser

    # (typeshed wants parents of the subparsers' own class; argparse takes any parser)
    sub.add_parser("trace", parents=[trace_parser()], add_help=False,  # type: ignore[list-item]
                   help="build a model and print the shape, parameters, device and dtype of "
                        "every layer (torchinfo-style); --memory, --feature-maps")

    from modellint.watching.cli import build_parser as run_parser

    sub.add_parser("run", parents=[run_parser(argparse.ArgumentParser)],  # type: ignore[list-item]
                   add_help=False, help="run a training script for a few steps under "
                   "instrumentation (EXECUTES it): modellint run [options] -- python train.py")

    server = sub.add_parser("server", help="run the language server on stdin and stdout "
                            "(needs the `server` extra)")
    server.add_argument("-p", dest="plugins", action="append", default=[], metavar="MODULE",
                        help="load a plugin module (repeatable)")
    server.add_argument(ALLOW_CONFIG_PLUGINS_FLAG, action="store_true",
                        help="load the plugins the config names (runs the repository's code)")
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
            traceback.print_exc()
        print(
            f"modellint: internal error: {type(exc).__name__}: {printable(str(exc))}"
            + ("" if debug else " (rerun with --debug for the traceback)"),
            file=sys.stderr,
        )
        return EXIT_ERROR


def _config_for(args) -> Config:
    if getattr(args, "config", None):
        path = Path(args.config)
        if not path.is_file():
            raise ConfigError(f"config file {args.config} does not exist")
        return load_config(path)
    start = getattr(args, "stdin_filename", None) or (getattr(args, "paths", None) or ["."])[0]
    return load_config(find_pyproject(Path(start)))


def _registry(config: Config, args) -> Registry:
    return project_registry(config, args.plugins, args.allow_config_plugins)


def _warn_stderr(message: str) -> None:
    print(f"modellint: {printable(message)}", file=sys.stderr)


def project_registry(config: Config, plugins: list[str], allow_config_plugins: bool,
                     warn=_warn_stderr) -> Registry:
    """The plugins for `config`: the config's own `plugins = [...]` only when opted in
    (otherwise `warn` is told why they were not loaded)."""
    config_plugins = config.plugins
    if config_plugins and not config_plugins_allowed(allow_config_plugins):
        warn(config_plugins_refused(config_plugins, config.where()))
        config_plugins = []
    return load_registry(plugins, config_plugins=config_plugins, config_root=config.root)


def _cmd_rules(args) -> int:
    config = _config_for(args)
    registry = _registry(config, args)
    rows = [rule_row(registry.rules[code]) for code in sorted(registry.rules)]
    if args.format == "json":
        import json

        print(json.dumps(rows, indent=2))
        return EXIT_CLEAN
    widths = {key: max(len(key), *(len(r[key]) for r in rows)) for key in ("code", "name", "pass")}
    header = (
        f"{'code':<{widths['code']}}  {'name':<{widths['name']}}  {'pass':<{widths['pass']}}"
        "  default  fix"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['code']:<{widths['code']}}  {r['name']:<{widths['name']}}  "
            f"{r['pass']:<{widths['pass']}}  {r['default']:<7}  {r['fix']}"
            f"{' (sometimes)' if r['fix_availability'] == 'sometimes' else ''}"
        )
    return EXIT_CLEAN


def rule_row(rule) -> dict[str, str]:
    """A rule's line in `modellint rules` and the README's table."""
    return {
        "code": rule.code,
        "name": rule.name,
        "pass": "+".join(rule.passes),
        "default": "on" if rule.default_enabled else "off",
        "fix": rule.fix or "",
        "fix_availability": rule.fix_availability if rule.fix else "",
        "summary": rule.summary(),
    }


def rule_metadata(rule) -> dict:
    """Everything `modellint rule` knows of a rule, for documentation sites and editors."""
    from modellint.rule import Valid

    return {
        **rule_row(rule),
        "passes": list(rule.passes),
        "severity": rule.severity.value,
        "default_enabled": bool(rule.default_enabled),
        "fix": rule.fix or None,
        "fix_availability": rule.fix_availability if rule.fix else None,
        "documentation": rule.documentation(),
        "invalid": [{"code": e.code, "line": e.line} for e in rule.invalid],
        "valid": [e.code if isinstance(e, Valid) else e for e in rule.valid],
    }


def _cmd_rule(args) -> int:
    if args.all == bool(args.code):
        raise UsageError("give one rule code, or --all")
    config = _config_for(args)
    registry = _registry(config, args)
    if args.all:
        chosen = [registry.rules[code] for code in sorted(registry.rules)]
    else:
        rule = registry.rules.get(args.code.upper())
        if rule is None:
            raise UsageError(f"unknown rule code `{args.code}`"
                             f"{did_you_mean(args.code.upper(), registry.rules)} "
                             "(see `modellint rules`)")
        chosen = [rule]
    if args.format == "json":
        import json

        documents = [{**rule_metadata(rule), "plugin": registry.origins[rule.code]}
                     for rule in chosen]
        print(json.dumps(documents if args.all else documents[0], indent=2))
    else:
        print("\n".join(render_rule_doc(rule) for rule in chosen))
    return EXIT_CLEAN


def render_rule_doc(rule) -> str:
    from modellint.rule import Valid

    out = io.StringIO()
    out.write(f"# {rule.code} {rule.name}\n\n")
    out.write(
        f"Pass: {'+'.join(rule.passes)}. Severity: {rule.severity.value}. "
        f"Default: {'on' if rule.default_enabled else 'off'}. "
        f"Fix: {rule.fix_description()}.\n\n"
    )
    out.write(rule.documentation() + "\n")
    if rule.invalid:
        out.write("\n## Flagged examples\n")
        for example in rule.invalid:
            out.write(f"\n```python\n{example.code.strip()}\n```\n(line {example.line})\n")
    if rule.valid:
        out.write("\n## Not flagged\n")
        for example in rule.valid:
            code = example.code if isinstance(example, Valid) else example
            out.write(f"\n```python\n{code.strip()}\n```\n")
    return out.getvalue()


def _cache(config: Config, rules, sources=None):
    from modellint.static.cache import Cache, default_dir, settings_key

    directory = default_dir(config.root)
    if directory is None:
        return None
    cache = Cache(directory, settings_key(modellint.__version__, rules, config.rule_options(),
                                          sources), tree=(Path.cwd(), config.root))
    if cache.prepare():
        return cache
    if cache.problem:
        print(f"modellint: {printable(cache.problem)}; the run goes on without it",
              file=sys.stderr)
    return None


def _settings_text(config: Config, args, enabled: set[str], static_rules) -> str:
    """`--show-settings`: one `key = value  # origin` line per setting, TOML-like."""
    import json

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


def linted_tree(config: Config, args, paths: Sequence[str]) -> tuple[Path, ...]:
    """The folders a run lints, beyond which a link in them is not the run's to write through:
    each folder named (a named file's own folder) and the project whose config file was found
    for them. Never the current folder as such: run from a parent folder, it holds more than
    what was named (a --config kept elsewhere says nothing of where the project is either)."""
    named = tuple(Path(p) if os.path.isdir(p) else Path(p).parent for p in paths)
    explicit = getattr(args, "config", None)
    return named if config.source is None or explicit else (config.root, *named)


def _output_tree(linted: Sequence[Path]) -> tuple[Path, ...]:
    """Where a link on the way to an output file is refused: the current folder (the checkout,
    in CI) and the folders linted, all the repository's to plant links in."""
    return (Path.cwd(), *linted)


def check_output_file(path: str, tree: Sequence[Path]) -> None:
    """Refuse, before the work starts, an output file that would be refused at the end."""
    try:
        check_target(path, tree)
    except UnsafePath as exc:
        raise UsageError(f"--output-file: {exc}") from None


@contextmanager
def output_file(path: str, tree: Sequence[Path]) -> Iterator[IO[str]]:
    """The report's file, written as `modellint.safe_write.replacing` writes; a refusal or a
    failed write is a usage error naming the option."""
    try:
        with replacing(path, tree) as handle:
            yield handle
    except UnsafePath as exc:
        raise UsageError(f"--output-file: {exc}") from None
    except OSError as exc:
        raise UsageError(f"--output-file: cannot write {path}: {exc.strerror or exc}") from None


def _check_named_file(path: str) -> None:
    """A file named on the command line is linted by its content: Python, or a Jupyter
    notebook. Anything else is refused with a message, rather than read as Python (a named
    notebook once got "All checks passed")."""
    from modellint.static.discover import NOTEBOOK_SUFFIXES, SUFFIXES, read_file_bytes
    from modellint.static.notebook import looks_like_notebook

    if os.path.isdir(path) or path.endswith((*SUFFIXES, ".pyw", *NOTEBOOK_SUFFIXES)):
        return
    try:
        data = read_file_bytes(path)
    except OSError:
        return  # reported as "cannot read file" where it is linted
    if looks_like_notebook(data):
        return
    first = data.split(b"\n", 1)[0]
    if first.startswith(b"#!") and b"python" in first:
        return
    if not os.path.splitext(path)[1]:
        # a script without a suffix (`bin/train`): Python when it parses as Python
        import ast
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(data)
            return
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            pass
    raise UsageError(
        f"{path}: neither Python source nor a Jupyter notebook; name .py, .pyi or .ipynb "
        "files, or folders (nothing was linted)")


def _would_fix(outcomes, findings, unsafe_fixes: bool) -> str:
    would_fix = sum(outcome.would_fix for outcome in outcomes)
    unsafe_left = 0 if unsafe_fixes else sum(
        1 for f in findings if f.fix is not None and not f.fix.safe)
    more = f" ({unsafe_left} more with --unsafe-fixes)" if unsafe_left else ""
    if not would_fix:
        return f"No fixes available{more}."
    return f"Would fix {would_fix} finding{'' if would_fix == 1 else 's'}{more}."


def _use_color(choice: str, stream) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def static_setup(config: Config, registry: Registry | LightRegistry, select: list[str] | None = None,
                 extend_select: Sequence[str] = (), ignore: Sequence[str] = ()) -> tuple[set[str], list]:
    """(enabled codes, the enabled rules with a static check) for `config` with the command
    line's selectors merged in; raises ConfigError for an unknown code. `check` and the
    language server both start here."""
    # validate before merging, so that a bad code is blamed on the file or the command line
    # it came from; rule names become codes in these lists
    selectors = {"select": list(select or []), "extend-select": list(extend_select),
                 "ignore": list(ignore)}
    validate_codes(config, registry.rules, selectors)
    if select is not None:
        config.select = selectors["select"]
    config.extend_select = [*config.extend_select, *selectors["extend-select"]]
    config.ignore = [*config.ignore, *selectors["ignore"]]
    if registry.manager is not None:  # a manifest's registry has no configure hooks
        registry.manager.hook.modellint_configure(config=config)
    enabled = enabled_codes(config, registry.rules)
    static_rules = [registry.rules[code] for code in sorted(enabled)
                    if is_static(registry.rules[code])]
    return enabled, static_rules


def disabled_for(config: Config, enabled: set[str], path: Path,
                 codes: Iterable[str]) -> frozenset[str]:
    """The codes (of all `codes`) hidden in the whole of `path`: not shown in this run, or
    turned off by per-file-ignores."""
    shown = shown_codes(config, enabled)
    return frozenset(set(codes) - shown) | hidden_codes(config, shown, path)


def _manifest_store(args, config: Config, stdin_name: str | None):
    """Where the plugins' manifest is kept, for a run that may be served from the cache and
    loads only built-in and installed plugins; else None (the plugins are imported)."""
    from modellint.static.cache import default_dir, manifest_store

    if (args.no_cache or args.fix or args.diff or args.runtime or args.plugins or config.plugins
            or args.format not in LIGHT_FORMATS or stdin_name is not None
            or default_dir(config.root) is None):
        return None
    return manifest_store()


def _rule_classes(config: Config, args, rules) -> list:
    """The rule classes of a run whose registry came from the manifest (`rules`: RuleInfos):
    the built-in ones imported where the manifest says they are; with a rule of an installed
    plugin, every plugin is loaded as usual (its hooks run)."""
    from modellint.plugins import builtin_rule_classes

    found = builtin_rule_classes(rules)
    if found is not None:
        return found
    registry = _registry(config, args)
    return [registry.rules[rule.code] for rule in rules]


class _Settings:
    """One configuration of a run and what it selects: the registry of its plugins, the codes
    it enables and the enabled rules with a static check."""

    def __init__(self, config: Config, registry: Registry | LightRegistry, enabled: set[str],
                 static_rules: list, sources) -> None:
        self.config, self.registry, self.enabled = config, registry, enabled
        self.static_rules = static_rules
        # the plugins' sources when `registry` came from the manifest (the rules are imported
        # for the first file that misses the cache), else None
        self.sources = sources

    def options(self, args, project: list, paths: list[str]):
        from modellint.static.runner import StaticOptions

        light = self.sources is not None
        return StaticOptions(
            project=project,
            rules=[] if light else self.static_rules,
            load_rules=(lambda: _rule_classes(self.config, args, self.static_rules))
            if light else None,
            options=self.config.rule_options(),
            fix=args.fix,
            unsafe_fixes=args.unsafe_fixes,
            diff=args.diff,
            jobs=args.jobs,
            cache=None if args.no_cache or args.fix or args.diff else _cache(
                self.config, self.static_rules, self.sources),
            # what links lead to beyond them is not the linted tree's to change
            tree=linted_tree(self.config, args, paths),
        )


class _FileSettings:
    """The settings of each file of a run: those of the nearest `pyproject.toml` with a
    `[tool.modellint]` at or above its folder (ruff's rule, and what a run on that file alone,
    `--stdin-filename` and the language server give it), or the `--config` given, for all.
    A nested `aaa/pyproject.toml` thus governs the files under `aaa/` in a full run as in a
    pre-commit run, and no other file whichever file comes first."""

    def __init__(self, args, config: Config, registry: Registry | LightRegistry,
                 enabled: set[str], static_rules: list, sources) -> None:
        self.args = args
        self.first = _Settings(config, registry, enabled, static_rules, sources)
        self.by_source: dict[Path | None, _Settings] = {config.source: self.first}
        self.by_folder: dict[str, _Settings] = {}

    def of(self, path: Path) -> _Settings:
        if self.args.config:
            return self.first
        folder = os.path.realpath(path if os.path.isdir(path) else os.path.dirname(path) or ".")
        found = self.by_folder.get(folder)
        if found is None:
            # the folders up to one already looked up, or to one with a pyproject.toml, share
            # its answer: each pyproject.toml of the tree is read once, not once per folder
            chain: list[str] = []
            for candidate in (folder, *map(str, Path(folder).parents)):
                found = self.by_folder.get(candidate)
                if found is not None:
                    break
                chain.append(candidate)
                if os.path.isfile(os.path.join(candidate, "pyproject.toml")):
                    found = self._for(find_pyproject(Path(candidate)))
                    break
            else:
                found = self._for(None)
            for candidate in chain:
                self.by_folder[candidate] = found
        return found

    def _for(self, source: Path | None) -> _Settings:
        found = self.by_source.get(source)
        if found is None:
            found = self.by_source[source] = self._load(source)
        return found

    def _load(self, source: Path | None) -> _Settings:
        config = load_config(source)
        first = self.first
        if config.plugins or first.config.plugins:
            # its own plugins (or none where the first configuration loaded some)
            registry: Registry | LightRegistry = _registry(config, self.args)
            sources = None
        else:
            registry, sources = first.registry, first.sources
        enabled, static_rules = static_setup(config, registry, self.args.select,
                                             self.args.extend_select, self.args.ignore)
        return _Settings(config, registry, enabled, static_rules, sources)

    def excluded(self, path: Path) -> bool:
        return is_excluded(self.of(path).config, path)

    def groups(self) -> list[_Settings]:
        return list(self.by_source.values())

    def rules(self) -> dict:
        return {code: rule for settings in self.groups()
                for code, rule in settings.registry.rules.items()}


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
    from modellint.static.discover import discover
    from modellint.static.runner import index_with_source, lint_file, run

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
    config = _config_for(args)
    if args.max_code_bytes is not None:
        config.max_code_bytes = args.max_code_bytes
    # a run that can be served from the cache reads the plugins' manifest, not the plugins
    store = _manifest_store(args, config, stdin_name)
    manifest = light_registry(store) if store is not None else None
    registry: Registry | LightRegistry
    if manifest is None:
        registry = _registry(config, args)
        if store is not None:
            save_manifest(store, registry)
    else:
        registry = manifest
    enabled, static_rules = static_setup(config, registry, args.select, args.extend_select,
                                         args.ignore)
    if args.format not in registry.reporters:
        raise UsageError(
            f"unknown format `{args.format}`{did_you_mean(args.format, registry.reporters)} "
            f"(choose from {', '.join(sorted(registry.reporters))})"
        )
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    def warn(message: str) -> None:  # a folder the walk cannot search, an unusable .gitignore
        print(f"modellint: warning: {printable(message)}", file=sys.stderr)

    if args.show_settings:
        print(_settings_text(config, args, enabled, static_rules))
        return EXIT_CLEAN
    for path in paths if stdin_name is None else []:
        _check_named_file(path)
    tree = linted_tree(config, args, [] if stdin_name is not None else paths)
    if args.output_file:
        check_output_file(args.output_file, _output_tree(tree))
    from modellint.static.discover import NOTEBOOK_SUFFIXES, SUFFIXES

    settings = _FileSettings(args, config, registry, enabled, static_rules,
                             manifest.sources if manifest is not None else None)
    walked = (*SUFFIXES, *NOTEBOOK_SUFFIXES)
    tasks: list[tuple[str, Path, frozenset[str]]] = []
    # what .gitignore files kept out of the walk (a named file is always linted, as in ruff)
    ignored: list[str] = []
    found = ([(stdin_name, Path(stdin_name))] if stdin_name is not None
             else discover(paths, settings.excluded, warn, walked, ignored))
    groups: dict[int, list[int]] = {}  # id of a file's settings -> the numbers of its tasks
    for display, path in found:
        group = settings.of(path)
        if (display.endswith(NOTEBOOK_SUFFIXES) and not group.config.notebooks
                and display not in paths):
            continue  # `notebooks = false`: a walk takes no notebook, a named one is linted
        groups.setdefault(id(group), []).append(len(tasks))
        tasks.append((display, path, disabled_for(group.config, group.enabled, path,
                                                  group.registry.rules)))
    if args.show_files:
        for display, _, _ in tasks:
            print(printable(display))
        for display in ignored:
            print(f"modellint: ignored by .gitignore: {printable(display)}", file=sys.stderr)
        return EXIT_CLEAN
    project: list = []
    if any(group.static_rules for group in settings.groups()):
        # a run on a few files (pre-commit), or on an editor's buffer, still sees the whole
        # project's definitions
        from modellint.static.discover import project_files, project_root

        # a --config kept elsewhere (a home folder) says nothing of where the project is
        root = project_root(None if args.config else config.source, paths)
        if root is not None:
            project = project_files(root, paths, settings.excluded,
                                    walked if config.notebooks else SUFFIXES, warn)
    if args.runtime:
        from modellint.runtime.pass_ import torch_missing

        if torch_missing():
            raise UsageError(torch_missing())
    outcomes: list = [None] * len(tasks)
    index = None
    findings = []
    # the runtime pass: models tried and not checked, over every settings group
    models = unchecked = 0
    fail_on_unchecked = args.fail_on_unchecked
    for group in settings.groups():
        numbers = groups.get(id(group), [])
        if not numbers:
            continue
        opts = group.options(args, project, [] if stdin_name is not None else paths)
        if stdin_name is not None:
            stdin_source = sys.stdin.buffer.read()
            if group.static_rules:
                opts.index = index_with_source(tasks[0][0], stdin_source, opts)
            outcomes = [lint_file(*tasks[0], opts, stdin=stdin_source)]
            numbers = [0]
        else:
            if len(groups) > 1 and group.static_rules:
                # one index for the whole run, whichever settings each file has
                from modellint.static.index import index_files

                if index is None:
                    index = index_files([(d, p) for d, p, _ in tasks] + list(project),
                                        opts.cache, args.jobs,
                                        linted=[display for display, _, _ in tasks])
                opts.index = index
            for number, outcome in zip(numbers, run([tasks[n] for n in numbers], opts),
                                       strict=True):
                outcomes[number] = outcome
        if opts.cache is not None:
            opts.cache.prune()
        found_here = [f for number in numbers for f in outcomes[number].findings]
        if args.runtime:
            from modellint.runtime.pass_ import LintedFile, run_runtime_pass

            # the files discovered once, with the model classes the static pass indexed in them
            files = [LintedFile(tasks[n][0], os.path.realpath(tasks[n][1]),
                                outcomes[n].classes) for n in numbers]
            checked = run_runtime_pass(found_here, files, group.config, group.registry,
                                       shown_codes(group.config, group.enabled), args)
            found_here = checked.findings
            models += checked.models
            unchecked += checked.unchecked
            fail_on_unchecked = fail_on_unchecked or bool(
                (group.config.runtime or {}).get("fail-on-unchecked"))
        findings.extend(found_here)
    findings.sort(key=lambda f: f.sort_key())
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
        sys.stdout.buffer.write(outcomes[0].fixed_source or stdin_source)
        sys.stdout.flush()
    with (output_file(args.output_file, _output_tree(tree)) if args.output_file
          else nullcontext(sys.stderr if stdin_name is not None and args.fix else sys.stdout)
          ) as stream:
        if args.diff:
            stream.write(diff_text)
            if not args.quiet:
                print(_would_fix(outcomes, findings, args.unsafe_fixes), file=sys.stderr)
        else:
            summary = Summary(
                files_checked=len(tasks),
                files_ignored=sum(not display.endswith("/") for display in ignored),
                notebooks_checked=sum(outcome.notebook for outcome in outcomes),
                fixed=sum(outcome.fixed for outcome in outcomes),
                rules=settings.rules(),
                statistics=args.statistics,
                quiet=args.quiet,
                color=_use_color(args.color, stream),
                fix_mode=args.fix,
                unsafe_fixes=args.unsafe_fixes,
                models=models,
                models_unchecked=unchecked,
            )
            registry.reporters[args.format](stream).report(findings, summary)
    if args.diff:
        return EXIT_FINDINGS if diff_text else EXIT_CLEAN
    if args.exit_zero:
        return EXIT_CLEAN
    if args.exit_non_zero_on_fix and any(outcome.fixed for outcome in outcomes):
        return EXIT_FINDINGS
    counted = [f for f in findings if f.severity.value != "info"]
    if unchecked and fail_on_unchecked:
        return EXIT_FINDINGS
    return EXIT_FINDINGS if counted else EXIT_CLEAN
