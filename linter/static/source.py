"""A file's bytes as the text Python reads (its coding cookie honoured), without LibCST: the
project index decodes every file of a run, most of them before LibCST is imported."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable

_BYTE_LINE_END = re.compile(rb"\r\n|\r|\n")


# the last text asked about (`mentioned_in`), and what was found of each word in it
_LAST_MENTIONS: tuple[str, dict[str, bool]] = ("", {})


def mentioned_in(text: str) -> Callable[[str], bool]:
    """`lambda word: word in text`, each word looked for once in the same text: rules share
    trigger words, and a run on a file asks for them twice (which rule modules to import,
    which rules to run); a word the file lacks is a scan of all of it."""
    global _LAST_MENTIONS
    last, found = _LAST_MENTIONS
    if last is not text and last != text:
        found = {}
        _LAST_MENTIONS = (text, found)

    def mentions(word: str) -> bool:
        hit = found.get(word)
        if hit is None:
            hit = found[word] = word in text
        return hit

    return mentions


class DecodeError(ValueError):
    """The bytes of a file are not text; `line` and `column` point at the first bad byte."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


def decode(data: bytes) -> tuple[str, str]:
    """(text, encoding) honouring a PEP 263 coding cookie; raises DecodeError with a message."""
    if b"\x00" in data:
        raise DecodeError(
            "file contains NUL bytes; it is not Python source", *_position(data, data.index(b"\x00"))
        )
    problem = None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        # also raised, without a cookie, for a first line that is not UTF-8: say which byte
        encoding, problem = "utf-8", exc.msg
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line, column = _position(data, exc.start)
        raise DecodeError(
            f"cannot decode line {line} as {encoding} (byte 0x{data[exc.start]:02x});"
            " add a coding declaration or save the file as UTF-8",
            line, column,
        ) from None
    if problem is not None:
        raise DecodeError(f"cannot read the coding declaration: {problem}")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, encoding


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """(line, column), both from 1, of byte `offset`, with Python's line ends."""
    lines = _BYTE_LINE_END.split(data[:offset])
    return len(lines), len(lines[-1]) + 1
