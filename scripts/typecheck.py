"""Type-check modellint with mypy, under the module names it is installed as.

    python scripts/typecheck.py          # what CI runs: the files of [tool.mypy] in pyproject.toml
    python scripts/typecheck.py linter/cli.py rules/   # the same check, errors of these paths only

The package maps `modellint` to linter/ and `modellint.rules` to rules/ ([tool.setuptools]
package-dir), and the editable install reaches them through an import hook that mypy cannot follow:
plain `mypy linter rules` checks them as the packages `linter` and `rules` and finds no
`modellint`, so every cross-module call would be `Any`. This script asks mypy for the same files
and options (command line and [tool.mypy]), renames each file's module by the package-dir mapping,
and runs the build: `from modellint.static.engine import ...` is then the checked source.
"""

from __future__ import annotations

import os
import sys

from mypy import build, util
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.modulefinder import BuildSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the README supports Python 3.10
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_dirs() -> list[tuple[str, str]]:
    """(absolute directory, package) from pyproject.toml's package-dir, deepest directory first."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    pairs = [(os.path.join(ROOT, directory), package) for package, directory in mapping.items()]
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def installed_name(path: str, dirs: list[tuple[str, str]]) -> str | None:
    """The module `path` is imported as once installed, or None if no package holds it."""
    full = os.path.abspath(path)
    for directory, package in dirs:
        if _within(full, directory):
            parts = os.path.relpath(os.path.splitext(full)[0], directory).split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *[p for p in parts if p != "."]])
    return None


def _within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` (an absolute path) or lies inside it."""
    return os.path.commonpath([os.path.abspath(path), folder]) == folder


def main(argv: list[str]) -> int:
    # Paths on the command line only filter the errors shown: a file checked alone would not see
    # the other modellint modules (they are found as sources, never by mypy's import search).
    shown = [os.path.abspath(a) for a in argv if not a.startswith("-") and os.path.exists(a)]
    options_only = [a for a in argv if os.path.abspath(a) not in shown]
    os.chdir(ROOT)
    fscache = FileSystemCache()
    sources, options = process_options(options_only, fscache=fscache)
    checked = [os.path.abspath(s.path) for s in sources if s.path]
    outside = [p for p in shown if not any(_within(c, p) for c in checked)]
    if outside:
        print(f"error: not among the files checked ([tool.mypy] files in pyproject.toml): "
              f"{', '.join(os.path.relpath(p) for p in outside)}", file=sys.stderr)
        return 2
    dirs = package_dirs()
    renamed = []
    for source in sources:
        module = installed_name(source.path, dirs) if source.path else None
        if module is None:
            renamed.append(source)
        else:
            renamed.append(BuildSource(source.path, module, source.text, None))

    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    color = options.color_output  # the formatter writes no colour where the terminal has none
    messages: list[str] = []

    def flush_errors(filename: str | None, new_messages: list[str], serious: bool) -> None:
        if shown and filename and not any(_within(filename, path) for path in shown):
            return
        messages.extend(new_messages)
        for message in new_messages:
            print(formatter.colorize(message) if color else message)

    blockers = False
    try:
        build.build(renamed, options, None, flush_errors, fscache, sys.stdout, sys.stderr)
    except CompileError as e:
        blockers = True
        if e.messages and not messages:
            flush_errors(None, e.messages, True)
    n_errors, _, n_files = util.count_stats(messages)
    if n_errors:
        print(formatter.format_error(n_errors, n_files, len(renamed), blockers=blockers,
                                     use_color=color))
        return 2 if blockers else 1
    if shown:
        print(f"Success: no issues found in {', '.join(os.path.relpath(p) for p in shown)} "
              f"({len(renamed)} source files checked)")
    else:
        print(formatter.format_success(len(renamed), color))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
