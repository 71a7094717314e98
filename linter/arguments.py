"""The pieces every front door shares (`check`, `rules`, `rule`, `server`, `run`): the parser
that suggests the option meant, the option groups, the exit codes and where a report is
written. The front doors import them from here, never from each other."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from modellint.config import ConfigError, check_max_code_bytes, check_timeout, closest, did_you_mean
from modellint.plugins import ALLOW_CONFIG_PLUGINS_FLAG
from modellint.safe_write import UnsafePath, check_target, replacing
from modellint.session import UsageError

# the built-in report formats (modellint.report.builtin); plugins may add more
FORMATS = ("text", "concise", "json", "github", "sarif")
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _terminal_width() -> int:
    """The width `shutil.get_terminal_size` gives ($COLUMNS, else the terminal's, else 80),
    found as it finds it without importing `shutil` (and its compression modules) for it."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's own, on the width of the terminal (argparse makes one to check each option
    it is given, and each looked the width up through `shutil`)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_width() - 2 if width is None else width)


class Parser(argparse.ArgumentParser):
    # the subcommand of the command line being parsed: suggestions come from its options only
    command: str | None = None

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

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


def codes(value: str) -> list[str]:
    return [part.strip().upper() for part in value.split(",") if part.strip()]


def seconds(value: str) -> float:
    try:
        return check_timeout(float(value), "the value")
    except (ValueError, ConfigError) as exc:
        raise argparse.ArgumentTypeError(str(exc) if isinstance(exc, ConfigError) else
                                         f"not a number: {value!r}") from None


def code_bytes(value: str) -> int:
    try:
        return check_max_code_bytes(int(value.replace("_", "")), "the value")
    except (ValueError, ConfigError) as exc:
        raise argparse.ArgumentTypeError(str(exc) if isinstance(exc, ConfigError) else
                                         f"not a whole number of bytes: {value!r}") from None


def add_plugin_options(parser: argparse.ArgumentParser) -> None:
    """`-p MODULE` and the opt-in to the config's plugins: every command that loads rules."""
    parser.add_argument("-p", dest="plugins", action="append", default=[], metavar="MODULE",
                        help="load a plugin module (repeatable)")
    parser.add_argument(ALLOW_CONFIG_PLUGINS_FLAG, action="store_true",
                        help="load the plugins the config names (runs the repository's code)")


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """The options `check` and `run` share: which codes to report, how, and with which
    configuration and plugins."""
    parser.add_argument("--select", type=codes, metavar="CODES",
                        help="comma-separated codes, prefixes or rule names, or ALL")
    parser.add_argument("--extend-select", type=codes, action="extend", default=[],
                        metavar="CODES",
                        help="codes or prefixes to add to the selected ones (repeatable)")
    parser.add_argument("--ignore", type=codes, action="extend", default=[], metavar="CODES",
                        help="codes or prefixes not to report (repeatable)")
    parser.add_argument("--format", "--output-format", dest="format", default="text",
                        help=f"{', '.join(FORMATS)} (default text), or a plugin's")
    parser.add_argument("--output-file", "-o", metavar="FILE",
                        help="write the report to FILE instead of the standard output")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    parser.add_argument("--statistics", action="store_true", help="count findings per rule")
    parser.add_argument("--config", metavar="FILE", help="a pyproject.toml or modellint.toml to use")
    add_plugin_options(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="no summary line")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="color the text report (default auto: on a terminal, unless NO_COLOR)")


def overrides(args, **more):
    """The settings a command line sets over the configuration (`modellint.session.Overrides`)
    from its parsed options."""
    from modellint.session import Overrides

    select = getattr(args, "select", None)
    return Overrides(
        select=tuple(select) if select is not None else None,
        extend_select=tuple(getattr(args, "extend_select", ())),
        ignore=tuple(getattr(args, "ignore", ())),
        plugins=tuple(getattr(args, "plugins", ())),
        allow_config_plugins=bool(getattr(args, "allow_config_plugins", False)),
        config_file=getattr(args, "config", None),
        **more,
    )


def output_tree(linted: Sequence[Path]) -> tuple[Path, ...]:
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


def use_color(choice: str, stream) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()
