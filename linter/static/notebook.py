"""The Jupyter notebook format as the static pass reads it: read one, mask its magics, join its
code cells into one program and map its lines back to the cells, splice changed cell sources
back into the notebook's text. Nothing here lints (`modellint.static.linter` does).

The public API (used by `check` and by the editor server):

- `read_notebook(data) -> Notebook` (raises `NotebookError` with a message naming the problem):
  `Notebook.source` is the code cells joined in order, each IPython magic masked; `locate(line)`
  maps a line of it to (cell, line in cell); `cells` are the code cells.
- `Notebook.cell_sources(joined)`: the cell sources of a changed joined text, magics restored
  (None when the cell boundaries did not survive), and `Notebook.with_sources(...)`: the
  notebook's text with only those `"source"` values replaced, everything else byte for byte.
- `place(notebook, finding)`: a finding's lines in the joined source turned into lines of its
  cell. Linting the cells is `modellint.static.linter.Linter.lint_notebook`'s job.

Cells are numbered as ruff numbers them: 1-based, by position among all the notebook's cells
(markdown and raw cells count), so `cell 3` is the third cell from the top whatever its kind.

The JSON is parsed by the standard library's C parser (an output holding an image of several
MB costs milliseconds and is never looked at again). Where each `"source"` value lies in the
text is found only for a fix or a SARIF/GitHub location, by walking the structure around the
cells in Python with one C call per value. The text is never re-serialised: a fix splices the
new `"source"` value into the original text.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modellint.config import DEFAULT_MAX_CODE_BYTES
from modellint.patterns import LazyPattern
from modellint.records import record
from modellint.static.discover import MAX_FILE_BYTES, SUFFIXES, read_file_bytes
from modellint.static.outline import parse

if TYPE_CHECKING:
    from modellint.static.recover import Problem, Recovery

SUFFIX = ".ipynb"
# a notebook's outputs (plots, tables) make it far larger than any source file: its own limit
MAX_BYTES = 100 * 1024 * 1024
# cell magics whose body is Python (IPython runs it); the body of any other (`%%bash`,
# `%%writefile`, `%%html`) is not Python and is masked whole
PYTHON_CELL_MAGICS = frozenset(
    {"time", "timeit", "capture", "prun", "debug", "python", "python3", "tensorflow_version"})
# joined between two cells; the number is the cell's (a comment: invisible to the rules)
_SEPARATOR = "# %% modellint-cell {}"
_SEPARATOR_RE = LazyPattern(r"^# %% modellint-cell (\d+)$", re.M)
# a masked line ends in this comment; restoring puts the original line back
_MASK_TAG = "# modellint-masked {}"
_MASK_RE = LazyPattern(r"# modellint-masked (\d+)$")
_LINE_END = LazyPattern(r"\r\n|\r|\n")
_WS = LazyPattern(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# a line IPython would run as a magic, a shell command or a help request
_MAGIC = LazyPattern(
    r"(?P<indent>[ \t]*)(?:"
    r"[%!]"  # %matplotlib inline, !pip install x
    r"|\?"  # ?obj, ??obj
    r"|[\w.]+\?{1,2}[ \t]*$"  # obj?, obj.attr??
    r"|(?P<assign>[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=)[ \t]*[%!]"  # files = !ls
    r")"
)
# a quick look for any line that _MAGIC could match
_ANY_MAGIC = LazyPattern(r"^[ \t]*[%!?]|\?[ \t]*$|=[ \t]*[%!]", re.M)
_FILE_NOQA = LazyPattern(r"[ \t\f]*#[ \t\f]*modellint:[ \t\f]*noqa\b.*", re.I)


class NotebookError(ValueError):
    """The bytes are not a notebook modellint can read; the message names the problem."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


@record
class CodeCell:
    number: int  # 1-based position among all cells, as ruff counts
    source: str  # what Jupyter shows (a list source joined)
    start: int  # offsets of the `"source"` value in the notebook text
    end: int
    is_list: bool
    # where each list item starts in the notebook text (one offset for a string source)
    item_offsets: list[int] = field(default_factory=list)
    masked: str = ""  # the source with its magics masked
    originals: dict[int, str] = field(default_factory=dict)  # masked line -> original line
    error: tuple[str, int, int] | None = None  # cannot be parsed: (message, line, column)
    # its statements that do not parse (`modellint.static.recover`), and the masked source
    # with them blanked: what is joined in its place
    problems: tuple[Problem, ...] = ()
    recovered: str | None = None
    first_line: int = 0  # its first line in the joined source (0: not in it)
    added_newline: bool = False  # joining added a "\n" after its last line


@record
class Notebook:
    text: str  # the notebook's JSON text
    cells: list[CodeCell]  # every code cell, in order
    source: str = ""  # the code cells that parse, joined in order
    line_map: list[tuple[int, int]] = field(default_factory=list)
    language: str = "python"
    trailing_newline: bool = True
    # the code cells hold more than max-code-bytes together: not parsed (`tree` is None)
    too_much_code: bool = False
    # CPython's parse of `source` (None when it does not parse)
    tree: ast.Module | None = None
    _counted: tuple[int, int] = (0, 1)  # (offset, its line): where file_line last counted

    # --- positions ---------------------------------------------------------------------------

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line in the cell), both from 1, of line `line` of `source`."""
        if not self.line_map:
            return 1, 1
        cell, in_cell = self.line_map[min(max(line, 1), len(self.line_map)) - 1]
        return cell, max(in_cell, 1)

    def spans(self) -> None:
        """Find where each code cell's `"source"` value lies in the text (once)."""
        if self.cells and self.cells[0].start < 0:
            where = {number: (start, end, items) for number, start, end, items in _scan(self.text)}
            for cell in self.cells:
                cell.start, cell.end, cell.item_offsets = where[cell.number]

    def cell(self, number: int) -> CodeCell | None:
        for cell in self.cells:
            if cell.number == number:
                return cell
        return None

    def file_line(self, cell_number: int, line: int) -> int:
        """The line of the notebook file (its JSON text) that holds line `line` of the cell:
        where a SARIF viewer or a GitHub annotation can point."""
        cell = self.cell(cell_number)
        if cell is None or not self.text:
            return 1
        self.spans()
        items = cell.item_offsets or [cell.start]
        offset = items[min(max(line, 1), len(items)) - 1]
        start, number = self._counted if self._counted[0] <= offset else (0, 1)
        number += self.text.count("\n", start, offset)
        self._counted = (offset, number)
        return number

    # --- writing back ------------------------------------------------------------------------

    def cell_sources(self, joined: str) -> dict[int, str] | None:
        """The source of each linted cell in `joined` (this notebook's `source` after fixes),
        its masked lines restored; None when a cell boundary or a masked line was lost."""
        linted = [cell for cell in self.cells if cell.first_line]
        if not linted:
            return {}
        separators = list(_SEPARATOR_RE.finditer(joined))
        if [int(m.group(1)) for m in separators] != [c.number for c in linted[1:]]:
            return None
        ends = [*(m.start() for m in separators), len(joined)]
        starts = [0, *(m.end() + 1 for m in separators)]  # past the separator's "\n"
        out: dict[int, str] = {}
        for cell, start, end in zip(linted, starts, ends, strict=True):
            text = joined[start:end]
            if not text.endswith("\n"):
                return None
            if cell.added_newline:
                text = text[:-1]
            restored = _restore(text, cell.originals)
            if restored is None:
                return None
            out[cell.number] = restored
        return out

    def with_sources(self, sources: dict[int, str]) -> str:
        """This notebook's text with the `"source"` value of each cell in `sources` replaced
        (when it changed), and every other byte as it was."""
        self.spans()
        pieces: list[str] = []
        position = 0
        ascii_only = self.text.isascii()
        for cell in self.cells:
            new = sources.get(cell.number)
            if new is None or new == cell.source:
                continue
            pieces.append(self.text[position:cell.start])
            pieces.append(_render_source(self.text, cell, new, ascii_only))
            position = cell.end
        pieces.append(self.text[position:])
        return "".join(pieces)


def _ends_with_line_end(text: str) -> bool:
    return text.endswith(("\n", "\r"))


def _restore(text: str, originals: dict[int, str]) -> str | None:
    if not originals:
        return text
    found: set[int] = set()
    parts = _LINE_END.split(text)
    ends = _LINE_END.findall(text)
    for index, line in enumerate(parts):
        match = _MASK_RE.search(line)
        if match is None:
            continue
        key = int(match.group(1))
        if key not in originals or key in found:
            return None
        found.add(key)
        parts[index] = originals[key]
    if found != originals.keys():
        return None
    return "".join(p + e for p, e in zip(parts, [*ends, ""], strict=True))


def _render_source(text: str, cell: CodeCell, new: str, ascii_only: bool) -> str:
    def dump(value: str) -> str:
        return json.dumps(value, ensure_ascii=ascii_only)

    if not cell.is_list:
        return dump(new)
    items = [p + e for p, e in zip(_LINE_END.split(new), [*_LINE_END.findall(new), ""],
                                   strict=True) if p + e]
    old = text[cell.start:cell.end]
    if not items:
        return "[]"
    offsets = cell.item_offsets
    if len(offsets) >= 1 and old != "[]":
        # the layout of the old list: what comes before the first item, between two, after
        # the last (nbformat writes one item a line, indented one space more than the key)
        first = offsets[0] - cell.start
        lead = old[1:first]
        if len(offsets) >= 2:
            _, after_first = _DECODER.raw_decode(text, offsets[0])
            between = text[after_first:offsets[1]]
        else:
            between = "," + lead
        _, after_last = _DECODER.raw_decode(text, offsets[-1])
        tail = text[after_last:cell.end - 1]
    else:
        indent = _indent_before(text, cell.start)
        newline = "\r\n" if "\r\n" in text[:cell.start] else "\n"
        lead = newline + indent + " "
        between = "," + lead
        tail = newline + indent
    # an unchanged line keeps its old JSON text, whatever escaping the writer chose
    raw: dict[str, str] = {}
    for offset in offsets if old != "[]" else ():
        value, end = _DECODER.raw_decode(text, offset)
        raw.setdefault(value, text[offset:end])
    return "[" + lead + between.join(raw.get(item) or dump(item) for item in items) + tail + "]"


def _indent_before(text: str, offset: int) -> str:
    line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    line = text[line_start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


# --- reading ---------------------------------------------------------------------------------


def is_notebook(path: Path, data: bytes) -> bool:
    """A `.ipynb` file, or a file not named as Python whose content is a notebook (a notebook
    saved as `.json`, or without a suffix)."""
    name = str(path)
    return name.endswith(SUFFIX) or (
        not name.endswith((*SUFFIXES, ".pyw")) and looks_like_notebook(data))


def looks_like_notebook(data: bytes) -> bool:
    """Whether `data` is a notebook by its content (whatever the file's name): a JSON object
    with `cells` or `nbformat` among its keys."""
    head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{"):
        return False
    return b'"nbformat"' in data or b'"cells"' in data[:4096]


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _skip(text: str, i: int) -> int:
    match = _WS.match(text, i)
    assert match is not None  # a `*` pattern matches everywhere (the empty string at worst)
    return match.end()


def _fail(text: str, offset: int, message: str) -> NotebookError:
    line, column = _position(text, offset)
    return NotebookError(f"not a valid notebook: {message} (line {line}, column {column})",
                         line, column)


def _value(text: str, i: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, i)
    except json.JSONDecodeError as exc:
        raise _fail(text, exc.pos, f"invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise _fail(text, i, "invalid JSON: nested too deeply") from None


def _object(text: str, i: int, on_value) -> int:
    """Walk the JSON object at text[i] ("{"): `on_value(key, start)` reads each value and
    returns the offset after it. Returns the offset after the object."""
    if text[i:i + 1] != "{":
        raise _fail(text, i, "invalid JSON: expected an object")
    i = _skip(text, i + 1)
    if text[i:i + 1] == "}":
        return i + 1
    while True:
        if text[i:i + 1] != '"':
            raise _fail(text, i, "invalid JSON: expected a property name in double quotes")
        try:
            # typeshed's json.decoder omits scanstring (the C scanner, or Python's if none)
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        except json.JSONDecodeError as exc:
            raise _fail(text, exc.pos, f"invalid JSON: {exc.msg}") from None
        i = _skip(text, i)
        if text[i:i + 1] != ":":
            raise _fail(text, i, "invalid JSON: expected ':'")
        i = on_value(key, _skip(text, i + 1))
        i = _skip(text, i)
        if text[i:i + 1] == ",":
            i = _skip(text, i + 1)
            continue
        if text[i:i + 1] == "}":
            return i + 1
        raise _fail(text, i, "invalid JSON: expected ',' or '}'")


def _array(text: str, i: int, on_item) -> int:
    if text[i:i + 1] != "[":
        raise _fail(text, i, "`cells` is not a list")
    i = _skip(text, i + 1)
    if text[i:i + 1] == "]":
        return i + 1
    index = 0
    while True:
        i = _skip(text, on_item(index, i))
        index += 1
        if text[i:i + 1] == ",":
            i = _skip(text, i + 1)
            continue
        if text[i:i + 1] == "]":
            return i + 1
        raise _fail(text, i, "invalid JSON: expected ',' or ']'")


def read_notebook(data: bytes, max_code_bytes: int = DEFAULT_MAX_CODE_BYTES) -> Notebook:
    """The notebook in `data`; NotebookError (one message, naming the problem) when it is not
    UTF-8 JSON in nbformat 4. Code cells holding more than `max_code_bytes` together are
    joined but not parsed (their lint reports them). The JSON is parsed by the standard library's C parser; where
    each cell's `"source"` lies in the text is found only when needed (`Notebook.spans`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(
            f"not a valid notebook: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start})") from None
    start = _skip(text, 1 if text.startswith("\ufeff") else 0)
    if text[start:start + 1] != "{":
        raise _fail(text, start, "invalid JSON: the file does not hold a JSON object"
                    if text[start:start + 1] else "the file is empty")
    try:
        top = json.loads(text[start:])
    except json.JSONDecodeError as exc:
        raise _fail(text, start + exc.pos, f"invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise _fail(text, start, "invalid JSON: nested too deeply") from None
    version = top.get("nbformat")
    if version is None or "cells" not in top:
        missing = "`nbformat`" if version is None else "`cells`"
        raise NotebookError(f"not a valid notebook: the JSON has no {missing} key")
    if version != 4 or isinstance(version, bool):
        raise NotebookError(
            f"not nbformat 4 (the file says nbformat {json.dumps(version)}); "
            "convert it with `jupyter nbconvert --to notebook`")
    if not isinstance(top["cells"], list):
        raise NotebookError("not a valid notebook: `cells` is not a list")
    cells = []
    for index, cell in enumerate(top["cells"]):
        if not isinstance(cell, dict):
            raise NotebookError(f"not a valid notebook: cell {index + 1} is not an object")
        if cell.get("cell_type") != "code":
            continue
        if "source" not in cell:
            raise NotebookError(f"not a valid notebook: cell {index + 1} has no `source`")
        value = cell["source"]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            source, is_list = "".join(value), True
        elif isinstance(value, str):
            source, is_list = value, False
        else:
            raise NotebookError(f"not a valid notebook: the source of cell {index + 1} is "
                                "not text")
        cells.append(CodeCell(index + 1, source, -1, -1, is_list))
    notebook = Notebook(text=text, cells=cells, trailing_newline=text.endswith("\n"))
    metadata = top.get("metadata")
    if isinstance(metadata, dict):
        info = metadata.get("language_info")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            notebook.language = info["name"]
    if notebook.language.lower() == "python":
        _join(notebook, max_code_bytes)
    return notebook


def _scan(text: str) -> list[tuple[int, int, int, list[int]]]:
    """(cell number, start, end, item offsets) of the `"source"` value of every code cell, by
    walking the JSON structure value by value (each value, an output of several MB included,
    is one call of the C scanner). The text is valid JSON: `read_notebook` parsed it."""
    found: list[tuple[int, int, int, list[int]]] = []

    def on_cell(index: int, i: int) -> int:
        fields: dict[str, Any] = {}

        def on_field(key: str, j: int) -> int:
            value, end = _value(text, j)
            if key == "source":
                items = []
                if text[j] == "[":
                    k = _skip(text, j + 1)
                    while text[k] != "]":
                        items.append(k)
                        _, k = _DECODER.raw_decode(text, k)
                        k = _skip(text, k)
                        if text[k] == ",":
                            k = _skip(text, k + 1)
                else:
                    items.append(j)
                fields["source"] = (j, end, items)
            elif key == "cell_type":
                fields[key] = value
            return end

        end = _object(text, i, on_field)
        if fields.get("cell_type") == "code" and "source" in fields:
            found.append((index + 1, *fields["source"]))
        return end

    def on_top(key: str, i: int) -> int:
        if key == "cells":
            found.clear()
            return _array(text, i, on_cell)
        return _value(text, i)[1]

    _object(text, _skip(text, 1 if text.startswith("\ufeff") else 0), on_top)
    return found


# --- magics and joining ----------------------------------------------------------------------


def mask(source: str, first_cell: bool = True) -> tuple[str, dict[int, str]]:
    """`source` with each IPython magic, shell command and help request replaced by Python of
    the same line count (`pass`, or `name = ...` for `name = !cmd`), and the original of each
    replaced line. A cell magic whose body is not Python masks the whole cell. Outside the
    first cell a `# modellint: noqa` line is masked too: only the first cell's covers the
    notebook."""
    if "\r" not in source and _ANY_MAGIC.search(source) is None and (
            first_cell or "modellint" not in source):
        return source, {}  # most cells: nothing to mask
    lines = _LINE_END.split(source)
    ends = _LINE_END.findall(source)
    originals: dict[int, str] = {}

    def replace(index: int, text: str) -> None:
        originals[index] = lines[index]
        lines[index] = f"{text}  {_MASK_TAG.format(index)}" if text else _MASK_TAG.format(index)

    first = next((n for n, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name = lines[first].lstrip()[2:].split(None, 1)[0] if lines[first].strip("% \t") else ""
        if name in PYTHON_CELL_MAGICS:
            replace(first, "")
        else:
            for index in range(len(lines)):
                replace(index, "")
            return _join_lines(lines, ends), originals
    candidates = []
    for index, line in enumerate(lines):
        if index in originals:
            continue
        if not first_cell and _FILE_NOQA.fullmatch(line):
            replace(index, "")
            continue
        if line[:1] in "%!?" or (line.lstrip()[:1] in "%!?" if line else False) or "?" in line \
                or "=" in line and ("!" in line or "%" in line):
            match = _MAGIC.match(line)
            if match is not None:
                candidates.append((index, match))
    if candidates and not _parses(_join_lines(lines, ends)):
        # valid Python never starts a statement with one of these; a line that does only in a
        # continuation (`(a\n % b)`) is left alone when the cell parses as it is
        for index, match in candidates:
            indent = match.group("indent")
            assign = match.group("assign")
            replace(index, f"{indent}{assign} ..." if assign else f"{indent}pass")
    return _join_lines(lines, ends), originals


def _join_lines(lines: Sequence[str], ends: Sequence[str]) -> str:
    return "".join(p + e for p, e in zip(lines, [*ends, ""], strict=True))


def _parses(text: str) -> bool:
    return _syntax_error(text) is None


def _syntax_error(text: str) -> tuple[str, int, int] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg}", exc.lineno or 1, exc.offset or 1
    except (ValueError, MemoryError, RecursionError) as exc:
        return f"cannot parse: {type(exc).__name__}: {exc}", 1, 1
    return None


def _join(notebook: Notebook, max_code_bytes: int = DEFAULT_MAX_CODE_BYTES) -> None:
    """Mask each code cell, blank the statements that do not parse (a cell that cannot be
    parsed even so is set aside), and join the cells, a separator comment between two cells, with the map from joined lines to cell lines. Cells
    holding more than `max_code_bytes` together are joined and not parsed: their lint is
    one ML001 (`engine.too_much_code`), and a parse could take gigabytes."""
    for position, cell in enumerate(notebook.cells):
        cell.masked, cell.originals = mask(cell.source, first_cell=position == 0)
    # one parse of all the cells together: when it succeeds and no statement runs across a
    # separator (an unclosed bracket or string in one cell), every cell parses on its own
    _assemble(notebook)
    notebook.too_much_code = len(notebook.source.encode("utf-8")) > max_code_bytes
    if notebook.too_much_code:
        return
    tree = parse(notebook.source)
    if tree is not None and _cells_whole(tree, notebook.line_map):
        notebook.tree = tree
        return
    for cell in notebook.cells:
        cell.error = _syntax_error(cell.masked)
        if cell.error is not None:
            # its statements that parse are linted with the other cells
            from modellint.static.recover import recover

            recovery = recover(cell.masked)
            if recovery.tree is not None and recovery.problems:
                cell.error, cell.problems = None, recovery.problems
                cell.recovered, cell.originals = _mark_blanked(cell.masked, recovery,
                                                               cell.originals)
    _assemble(notebook)
    notebook.tree = parse(notebook.source)


def _mark_blanked(masked: str, recovery: Recovery, originals: dict[int, str]
                  ) -> tuple[str, dict[int, str]]:
    """The recovered text of a cell with each blanked line marked as a masked line is, and
    the originals with those lines': splitting the joined cells back (`cell_sources`, after
    fixes) puts the statements that did not parse back in place."""
    lines = _LINE_END.split(recovery.text)
    ends = _LINE_END.findall(recovery.text)
    before = _LINE_END.split(masked)
    originals = dict(originals)
    marked: set[int] = set()
    for problem in recovery.problems:
        for index in range(problem.first_line - 1, min(problem.last_line, len(lines))):
            if index in marked:
                continue
            marked.add(index)
            originals.setdefault(index, before[index])
            tag = _MASK_TAG.format(index)
            lines[index] = f"{lines[index]}  {tag}" if lines[index].strip() else tag
    return _join_lines(lines, ends), originals


def _cells_whole(tree: ast.Module, line_map: list[tuple[int, int]]) -> bool:
    for statement in tree.body:
        first, last = statement.lineno, statement.end_lineno or statement.lineno
        if line_map[first - 1][0] != line_map[last - 1][0] or any(
                line_map[n - 1][1] == 0 for n in range(first, last + 1)):
            return False
    return True


def _assemble(notebook: Notebook) -> None:
    pieces: list[str] = []
    line_map: list[tuple[int, int]] = []
    line = 1
    for cell in notebook.cells:
        cell.first_line = 0
        if cell.error is not None:
            continue
        if pieces:
            pieces.append(_SEPARATOR.format(cell.number) + "\n")
            line_map.append((cell.number, 0))
            line += 1
        masked = cell.masked if cell.recovered is None else cell.recovered
        cell.added_newline = not _ends_with_line_end(masked)
        text = masked + "\n" if cell.added_newline else masked
        pieces.append(text)
        cell.first_line = line
        count = len(_LINE_END.findall(text))
        line_map.extend((cell.number, n) for n in range(1, count + 1))
        line += count
    notebook.source = "".join(pieces)
    notebook.line_map = line_map


# --- lines of cells --------------------------------------------------------------------------


def place(notebook: Notebook, finding):
    """The finding with its lines in the joined source turned into lines in its cell, and the
    cell named."""
    cell, line = notebook.locate(finding.line)
    end_cell, end_line = notebook.locate(finding.end_line)
    statement_cell, statement_line = notebook.locate(finding.statement_line or finding.line)
    end_column = finding.end_column
    if end_cell != cell:
        end_line, end_column = line, finding.column
    return replace(
        finding, cell=cell, line=line, end_line=end_line, end_column=end_column,
        statement_line=statement_line if statement_cell == cell else line,
        notebook_line=notebook.file_line(cell, line))


def cell_line(source: str, line: int) -> str:
    """Line `line` (from 1) of a cell's source, or "" when it has none."""
    lines = cell_lines(source)
    return lines[line - 1] if 0 < line <= len(lines) else ""


def cell_lines(source: str) -> list[str]:
    """A cell's source split into its lines."""
    return _LINE_END.split(source)


def from_cells(cells: Sequence[tuple[int, str]],
               max_code_bytes: int = DEFAULT_MAX_CODE_BYTES) -> Notebook:
    """A notebook known only by its code cells, (number, source) in order: what an editor
    sends a language server. Masked and joined as `read_notebook` does; it has no file text
    (`file_line` is 1, `with_sources` is not for it)."""
    book = Notebook(text="", cells=[
        CodeCell(number=number, source=source, start=0, end=0, is_list=False, item_offsets=[0])
        for number, source in cells])
    _join(book, max_code_bytes)
    return book


def read_notebook_file(path: str) -> Notebook | None:
    """The notebook at `path` as the static pass reads it (code cells joined, magics masked),
    or None when `path` is not a notebook (`is_notebook`). Raises OSError or NotebookError.
    What the runtime pass builds a notebook's models from."""
    data = read_file_bytes(path, MAX_BYTES if path.endswith(SUFFIX) else MAX_FILE_BYTES)
    if not is_notebook(Path(path), data):
        return None
    return read_notebook(data)

