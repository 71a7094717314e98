"""Applying fixes: combine every applicable fix of a file, round after round until none is
left (`fix_rounds`, over a Python text or a notebook's joined cells), re-parse, write
atomically."""

from __future__ import annotations

import ast
import difflib
import os
import re
import stat
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import libcst as cst

from modellint.finding import Finding
from modellint.records import record
from modellint.report import printable
from modellint.safe_write import new_temporary
from modellint.static.parse import (
    SYNTAX_ERROR,
    call_deeply,
    parse_with_libcst,
    traceback_text,
)

if TYPE_CHECKING:
    from modellint.static.linter import Linter
    from modellint.static.notebook import Notebook

MAX_FIX_ROUNDS = 10


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, cst.CSTNode]) -> None:
        super().__init__()
        self.replacements = replacements
        self.applied: set[int] = set()

    def on_leave(self, original_node, updated_node):
        replacement = self.replacements.get(id(original_node))
        if replacement is None:
            return updated_node
        self.applied.add(id(original_node))
        return replacement


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.safe or unsafe)


def apply_fixes(
    module: cst.Module, findings: Iterable[Finding], unsafe: bool, source: str | None = None
) -> tuple[str, int]:
    """(new source, number of findings fixed). Fixes whose nodes overlap an earlier fix are
    left for the next round. With `source`, the text `module` was parsed from, what the fixes
    do not touch stays byte for byte as it was (see `_lost_tail`)."""
    replacements: dict[int, cst.CSTNode] = {}
    owners: list[tuple[Finding, list[int]]] = []
    for finding in findings:
        fix = finding.fix
        if fix is None or not applicable(finding, unsafe):
            continue
        keys = [id(old) for old, _ in fix.replacements]
        if any(key in replacements for key in keys):
            continue
        for old, new in fix.replacements:
            replacements[id(old)] = new
        owners.append((finding, keys))
    if not replacements:
        return module.code, 0
    tail = "" if source is None else _lost_tail(module, source)
    transformer = _Replace(replacements)
    new_module = module.visit(transformer)
    fixed = sum(1 for _, keys in owners if all(k in transformer.applied for k in keys))
    return new_module.code + tail, fixed


def apply_text_fixes(source: str, findings: Iterable[Finding], unsafe: bool) -> tuple[str, int]:
    """(new source, number of findings fixed) for the fixes that edit the text (`Fix.edits`,
    those of statements that do not parse: there is no tree). A fix whose edits overlap an
    earlier one's is left for the next round."""
    from modellint.static.recover import apply_edits

    taken: list = []
    fixed = 0
    for finding in findings:
        fix = finding.fix
        if fix is None or not fix.edits or not applicable(finding, unsafe):
            continue
        if any(edit.line == other.line and edit.start < other.end and other.start < edit.end
               for edit in fix.edits for other in taken):
            continue
        taken.extend(fix.edits)
        fixed += 1
    if not taken:
        return source, 0
    return apply_edits(source, taken), fixed


def apply_fixes_deeply(module: cst.Module, findings: Iterable[Finding], unsafe: bool,
                       source: str) -> tuple[str, int]:
    """`apply_fixes`, retried with a deep stack for a tree nested too deeply for the default."""
    try:
        return apply_fixes(module, findings, unsafe, source)
    except RecursionError:
        return call_deeply(apply_fixes, module, findings, unsafe, source)


# -- fixing round after round ------------------------------------------------------------------


class FixSource(Protocol):
    """What `fix_rounds` fixes: a text that is linted as Python after each round."""

    # what the messages call it: "{display}: ...; file left unchanged"
    display: str
    noun: str

    def lint(self, text: str, encoding: str) -> Any:
        """The engine's `FileResult` for `text`, the fixed text of this source."""

    def unchanged(self, result: Any) -> Any:
        """The lint of the source as it was before any fix (`result`: the last lint, whose
        tree may be dropped first)."""


class PythonText:
    """A Python file's text, linted whole (its syntax errors' text edits first, then the
    tree fixes once it parses) and written back whole."""

    noun = "file"

    def __init__(self, linter: Linter, display: str, original: bytes,
                 disabled: frozenset[str] = frozenset()) -> None:
        self.linter = linter
        self.display = display
        self.original = original
        self.disabled = disabled

    def lint(self, text: str, encoding: str) -> Any:
        return self.linter.lint(self.display, text.encode(encoding), self.disabled)

    def unchanged(self, result: Any) -> Any:
        result.module = None  # one tree at a time (see `fix_rounds`)
        return self.linter.lint(self.display, self.original, self.disabled)


class NotebookCells:
    """A notebook's code cells joined into one text (`Notebook.source`), linted as one
    program; the fixed text goes back into the cells by `splice` (its syntax errors' text
    edits are made in each cell: `cell_text_fixes`)."""

    noun = "notebook"

    def __init__(self, linter: Linter, display: str, book: Notebook, first: Any,
                 disabled: frozenset[str] = frozenset()) -> None:
        self.linter = linter
        self.display = display
        self.book = book
        self.first = first  # the lint of the joined cells as they were read
        self.disabled = disabled

    def lint(self, text: str, encoding: str) -> Any:
        return self.linter.lint(self.display, text.encode("utf-8"), self.disabled)

    def unchanged(self, result: Any) -> Any:
        return self.first

    def splice(self, text: str) -> dict[int, str] | None:
        """The source of each cell in `text` (the joined cells after fixes), or None when the
        fixes moved code across cells."""
        return self.book.cell_sources(text)


def cell_text_fixes(book: Notebook, findings: Iterable[Finding], unsafe: bool
                    ) -> tuple[dict[int, str], int]:
    """The text edits of the syntax errors in the notebook's cells (`Fix.edits`, in lines of
    the cell) made in each cell: (cell number -> its new source, findings fixed)."""
    findings = list(findings)
    sources = {}
    fixed = 0
    for cell in book.cells:
        ours = [f for f in findings if f.cell == cell.number and f.fix is not None
                and f.fix.edits]
        if ours:
            text, count = apply_text_fixes(cell.source, ours, unsafe)
            if count:
                sources[cell.number], fixed = text, fixed + count
    return sources, fixed


@record
class Fixing:
    """What `fix_rounds` did to a source."""

    text: str  # the fixed text
    result: Any  # the engine's lint of `text` (of the source as it was when nothing was fixed)
    fixed: int = 0  # findings fixed (0 when a fix failed: then nothing is to be written)
    messages: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)


def fix_rounds(source: FixSource, result: Any, unsafe: bool) -> Fixing:
    """Apply the fixes of `result` (the lint of `source`) round after round until none is
    left. A fix that fails or breaks the code leaves the source as it was, with a message."""
    text = result.source
    fixing = Fixing(text, result)

    def left_unchanged(result: Any, why: str) -> Fixing:
        fixing.messages.append(f"{source.display}: {why}; {source.noun} left unchanged")
        fixing.result = source.unchanged(result)
        fixing.text, fixing.fixed = fixing.result.source, 0
        return fixing

    for _ in range(MAX_FIX_ROUNDS):
        if result.module is None and not result.recovered:
            break
        if result.recovered:
            # a file that does not parse: only its syntax errors' text edits, then (once it
            # parses) the other fixes in the next rounds
            new_text, fixed = apply_text_fixes(result.source, result.findings, unsafe)
            if fixed == 0 or new_text == text:
                break
            errors = _syntax_errors(result)
            result = source.lint(new_text, result.encoding)
            if _syntax_errors(result) > errors - fixed:
                return left_unchanged(result, "a fix of a syntax error left it in place")
            fixing.fixed += fixed
            text = new_text
            continue
        try:
            new_text, fixed = apply_fixes_deeply(
                result.module, result.findings, unsafe, result.source)
        except Exception as exc:  # noqa: BLE001 - a rule built a fix LibCST cannot apply
            fixing.tracebacks.append(traceback_text(exc))
            return left_unchanged(
                result, f"applying the fixes failed ({type(exc).__name__}: {exc})")
        if fixed == 0 or new_text == text:
            break
        problem = check_parses(new_text)
        if problem is not None:
            return left_unchanged(result, f"a fix produced invalid code ({problem})")
        fixing.fixed += fixed
        text = new_text
        # the old tree goes before the new one is made: a large file's tree takes gigabytes
        result.module = None
        result = source.lint(new_text, result.encoding)
    fixing.text, fixing.result = text, result
    return fixing


def _syntax_errors(result: Any) -> int:
    return sum(1 for finding in result.findings if finding.code == SYNTAX_ERROR[0])


def _lost_tail(module: cst.Module, source: str) -> str:
    """What LibCST's rendering of `module` leaves off the end of `source`: it takes only `\n`
    for a final line break, so a file ending in a lone `\r` would lose it."""
    rendered = module.code
    if not source.startswith(rendered):
        raise ValueError("LibCST does not reproduce this file byte for byte")
    return source[len(rendered):]


def check_parses(source: str) -> str | None:
    """None when `source` is valid Python, else the reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CPython's SyntaxWarnings are not ours to print
            ast.parse(source)
        parse_with_libcst(source)
    except (SyntaxError, cst.ParserSyntaxError, ValueError, RecursionError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def unified_diff(path: str, old: str, new: str) -> str:
    """The diff of `old` and `new` for a terminal: each line of the source as the text format
    shows it (a control character as its escape, so that the repository's text cannot act on
    the terminal or start a line of its own; tabs stay), and a last line without an end marked
    as git marks it."""
    lines = difflib.unified_diff(
        _lines(old), _lines(new),
        fromfile=_diff_name("a/", path), tofile=_diff_name("b/", path),
    )
    shown = []
    for number, line in enumerate(lines):
        if number < 2 or line.startswith("@@"):  # the headers modellint wrote
            shown.append(line)
            continue
        body = line.rstrip("\r\n")
        shown.append(_printable_in_diff(body) + "\n")
        if body == line:
            shown.append("\\ No newline at end of file\n")
    return "".join(shown)


def _printable_in_diff(text: str) -> str:
    return "\t".join(printable(part) for part in text.split("\t"))


# a line as Python ends it (\n, \r\n or \r), kept with its end; str.splitlines would also
# split at a form feed or \x1c in a comment and show the diff at the wrong lines
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _lines(text: str) -> list[str]:
    return _LINE.findall(text)


def _diff_name(prefix: str, path: str) -> str:
    """A file name in a diff header, quoted as git quotes it when a control character (which
    would end the header line early or act on the terminal), a quote or a backslash is in it."""
    quoted = printable(path.replace("\\", "\\\\").replace('"', '\\"'))
    return prefix + path if quoted == path else f'"{prefix}{quoted}"'


class WriteError(Exception):
    pass


def _inside(path: str, folders: Sequence[Path]) -> bool:
    from modellint.static.discover import inside_folder

    return any(inside_folder(path, os.path.realpath(folder)) for folder in folders)


def write_atomically(
    path: Path, data: bytes, expected_old: bytes, tree: Sequence[Path] = ()
) -> None:
    """Replace `path` with `data` by a rename, so that the file is never left half-written,
    keeping its owner, group and mode. Compare-and-swap: just before the rename the file must
    still hold `expected_old`, or it is left as it is. Refused, with a message, for a file
    whose real path (its links followed) lies outside the folders of `tree` (the folder it is
    named in when empty), and for a file with hard links, which a rename would split."""
    real = os.path.realpath(path)
    if not _inside(real, tree or (Path(os.path.abspath(path)).parent,)):
        raise WriteError(f"{path} leads to {real}, outside the folders being linted; not fixed")
    try:
        before = os.stat(real)
    except OSError as exc:
        raise WriteError(f"cannot read {path}: {exc.strerror}; not fixed") from None
    if not stat.S_ISREG(before.st_mode):
        raise WriteError(f"{path} is not a regular file; not fixed")
    if before.st_nlink > 1:
        raise WriteError(
            f"{path} has {before.st_nlink} hard links, which replacing it would split; not fixed"
        )
    # the mode bits count too: root may write anything, but a read-only file stays read-only
    if not os.access(real, os.W_OK) or not before.st_mode & 0o222:
        raise WriteError(f"{path} is not writable; not fixed")
    try:
        fd, temp = new_temporary(os.path.dirname(real), f".{os.path.basename(real)}.",
                                 ".modellint")
    except OSError as exc:
        raise WriteError(f"cannot write beside {path}: {exc.strerror}; not fixed") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            created = os.fstat(handle.fileno())
            if (created.st_uid, created.st_gid) != (before.st_uid, before.st_gid):
                try:
                    os.fchown(handle.fileno(), before.st_uid, before.st_gid)
                except OSError as exc:
                    raise WriteError(
                        f"cannot keep the owner and group of {path} ({exc.strerror}); not fixed"
                    ) from None
            # after the chown, which clears the set-user-ID and set-group-ID bits
            os.fchmod(handle.fileno(), stat.S_IMODE(before.st_mode))
        _verify_unchanged(path, real, before, expected_old)
        os.replace(temp, real)
    except BaseException as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise WriteError(f"cannot write {path}: {exc.strerror}; not fixed") from None
        raise


def _verify_unchanged(path: Path, real: str, before: os.stat_result, expected: bytes) -> None:
    """The compare of compare-and-swap: the same file, with the same bytes, as when read."""
    try:
        with open(real, "rb") as handle:
            now = os.fstat(handle.fileno())
            current = handle.read()
    except OSError as exc:
        raise WriteError(f"cannot re-read {path}: {exc.strerror}; not fixed") from None
    if current != expected or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
        raise WriteError(f"{path} changed while it was being linted; not fixed")


def add_noqa(path: Path, codes: dict[int | None, dict[int, set[str]]],
             tree: Sequence[Path] = ()) -> tuple[int, list[str]]:
    """Write `# noqa: CODE` on each line of `codes` (cell number, None in a Python file ->
    line -> codes), added to a noqa the line already has: how a team adopts modellint on code
    that has findings. Returns (lines that got a noqa, messages). The file is written
    atomically, and only when what is written still parses (a notebook: still reads as one,
    with exactly the new cell sources)."""
    from modellint.static import notebook
    from modellint.static.noqa import add_codes
    from modellint.static.source import DecodeError, decode

    original = path.read_bytes()
    messages: list[str] = []
    added = 0

    def skipped(lines: list[int], where: str) -> None:
        for line in lines:
            messages.append(f"{path}:{where}{line}: no noqa added: the line ends inside a string "
                            "or continues with a backslash")

    if None not in codes:  # the findings are in cells
        try:
            book = notebook.read_notebook(original)
        except notebook.NotebookError as exc:
            return 0, [f"{path}: no noqa added: {exc}"]
        sources: dict[int, str] = {}
        for number, lines in codes.items():
            cell = book.cell(number) if number is not None else None
            if number is None or cell is None:
                continue
            sources[number], done, left = add_codes(cell.source, lines)
            added += len(done)
            skipped(left, f"cell {number}:")
        data = book.with_sources(sources).encode("utf-8")
        again = notebook.read_notebook(data)
        if any(again.cell(number) is None or again.cell(number).source != source  # type: ignore[union-attr]
               for number, source in sources.items()):
            return 0, [f"{path}: no noqa added: the notebook would not keep its cells"]
    else:
        try:
            text, encoding = decode(original)
        except DecodeError as exc:
            return 0, [f"{path}: no noqa added: {exc}"]
        new, done, left = add_codes(text, codes[None])
        skipped(left, "")
        problem = check_parses(new)
        if problem is not None:
            return 0, [f"{path}: no noqa added: the file would not parse ({problem})"]
        added = len(done)
        data = new.encode(encoding)
    if added:
        try:
            write_atomically(path, data, original, tree)
        except WriteError as exc:
            return 0, [*messages, str(exc)]
    return added, messages
