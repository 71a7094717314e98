"""Find the Python files under the paths given on the command line, and read them safely."""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

SKIPPED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "build", "dist",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".modellint_cache",
        "node_modules", ".ipynb_checkpoints", "__pypackages__",
    }
)
SUFFIXES = (".py", ".pyi")
NOTEBOOK_SUFFIXES = (".ipynb",)
# No source file or .gitignore of a real project comes near this; a larger one (or /dev/zero
# behind a symlink) is refused instead of read whole into memory.
MAX_FILE_BYTES = 10 * 1024 * 1024
# what a run on a few files (pre-commit, an editor's buffer) reads of the rest of the project
# for the index: about eight times torch's own Python sources (2,400 files, 47 MiB)
MAX_PROJECT_FILES = 20_000
MAX_PROJECT_BYTES = 256 * 1024 * 1024

Warn = Callable[[str], None]


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def file_size(path: Path | str) -> int:
    """The size of the file at `path`, 0 when it cannot be had: for ordering work by it."""
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return 0


def read_file_bytes(path: Path | str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else OSError with a reason to show.

    Never blocks and never reads without end: a FIFO or device (say a `model.py` symlink to
    /dev/zero) is refused before it is opened, and the file is opened non-blocking in case it
    was swapped for one in between."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, f"not a regular file ({_kind(info.st_mode)})", str(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind(info.st_mode)})", str(path))
        chunks = []
        size = 0
        while True:
            # the size from stat may be stale or wrong (/proc): read until end, up to the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise OSError(
                    errno.EFBIG,
                    f"larger than modellint's limit of {limit // (1024 * 1024)} MiB for one file",
                    str(path),
                )
        return b"".join(chunks)
    finally:
        os.close(fd)


# --- .gitignore --------------------------------------------------------------------------------
#
# Every pattern of one .gitignore is translated to a regular expression once, and the patterns
# are matched together: plain names by dictionary lookup, the rest by one alternation per kind of
# target. Git's rule that the last matching pattern decides is kept by grouping the patterns into
# runs of the same sign (ignore or `!` re-include), trying the runs last first and taking the
# first run that matches.
#
# A hostile .gitignore must not make a match take exponential time (`*a*a*a*a*b` against a long
# name): the text a `*` or `**` skips is matched without backtracking (an atomic group), which is
# exact when what follows it is again a `*` or `**`: its earliest match is then always as good
# as any later one.

_ATOMIC_GROUPS = sys.version_info >= (3, 11)
_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "blank": " \\t", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"), "space": " \\t\\n\\r\\x0b\\x0c",
    "upper": "A-Z", "xdigit": "0-9A-Fa-f",
}


class _NeverMatches(Exception):
    """A pattern git rejects (an unclosed `[`, a trailing backslash): it matches nothing."""


class _Names:
    """Fresh group names for the lookahead form of an atomic group (Python 3.10)."""

    def __init__(self) -> None:
        self.count = 0

    def atomic(self, body: str) -> str:
        if _ATOMIC_GROUPS:
            return f"(?>{body})"
        self.count += 1
        return f"(?=(?P<a{self.count}>{body}))(?P=a{self.count})"


def _class(pattern: str, start: int) -> tuple[str, int]:
    """The regex for the bracket expression at pattern[start] == "[", and the index after it."""
    i = start + 1
    negated = i < len(pattern) and pattern[i] in "!^"
    if negated:
        i += 1
    items: list[str] = []
    slash = False  # whether the items take in "/"
    first = True
    while True:
        if i >= len(pattern):
            raise _NeverMatches
        char = pattern[i]
        if char == "]" and not first:
            i += 1
            break
        first = False
        if pattern.startswith("[:", i) and ":]" in pattern[i + 2:]:
            end = pattern.index(":]", i + 2)
            name = pattern[i + 2:end]
            if name not in _POSIX_CLASSES:
                raise _NeverMatches
            items.append(_POSIX_CLASSES[name])
            slash = slash or name in ("graph", "print", "punct")
            i = end + 2
            continue
        low, i = _class_char(pattern, i)
        if i + 1 < len(pattern) and pattern[i] == "-" and pattern[i + 1] != "]":
            high, i = _class_char(pattern, i + 1)
            if low <= high:  # a reversed range matches nothing
                items.append(f"{re.escape(low)}-{re.escape(high)}")
                slash = slash or low <= "/" <= high
        else:
            items.append(re.escape(low))
            slash = slash or low == "/"
    # under git's rules a bracket expression never matches the separator
    if negated:
        return "[^/" + "".join(items) + "]", i
    if not items:
        return "(?!)", i
    return ("(?!/)" if slash else "") + "[" + "".join(items) + "]", i


def _class_char(pattern: str, i: int) -> tuple[str, int]:
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            raise _NeverMatches
    return pattern[i], i + 1


def _segment(segment: str, names: _Names) -> str:
    """The regex for one path segment (`*` and `**` stop at a `/`)."""
    runs: list[str] = [""]  # the fixed text between stars, as regex
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            while i < len(segment) and segment[i] == "*":
                i += 1
            runs.append("")
            continue
        if char == "?":
            runs[-1] += "[^/]"
        elif char == "[":
            regex, i = _class(segment, i)
            runs[-1] += regex
            continue
        else:
            char, i = _class_char(segment, i)
            runs[-1] += re.escape(char)
            continue
        i += 1
    if len(runs) == 1:
        return runs[0]
    middle = "".join(names.atomic(f"[^/]*?{run}") for run in runs[1:-1])
    return f"{runs[0]}{middle}[^/]*{runs[-1]}"


def _split_segments(pattern: str) -> list[str]:
    """Split on `/`, except an escaped one and one inside a bracket expression."""
    segments, current, i, in_class = [], "", 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            current += pattern[i:i + 2]
            i += 2
            continue
        if char == "/" and not in_class:
            segments.append(current)
            current = ""
        else:
            if char == "[":
                in_class = True
            elif char == "]":
                in_class = False
            current += char
        i += 1
    segments.append(current)
    return segments


def _literal_length(pattern: str) -> int:
    """How many characters come before the first wildcard or backslash."""
    match = re.search(r"[*?\[\\]", pattern)
    return len(pattern) if match is None else match.start()


_FOLDERS = object()  # a `**/`: any number of whole folders, none included


def _path_regex(pattern: str, names: _Names) -> str:
    """An anchored pattern as a regex over the whole relative path."""
    pieces: list[object] = []
    # Git compares the text before the first wildcard on its own and matches the rest apart,
    # so a `**` right after that text counts as a whole segment: `a**/b` matches `ab/c/b`,
    # `a/b` and `ab` in git, and so here.
    prefix = _literal_length(pattern)
    stars = len(pattern[prefix:]) - len(pattern[prefix:].lstrip("*"))
    if prefix and stars >= 2 and pattern[prefix - 1] != "/":
        rest = pattern[prefix + stars:]
        if not rest:
            return re.escape(pattern[:prefix]) + ".*"
        if rest.startswith("/"):
            pieces += [re.escape(pattern[:prefix]), _FOLDERS]
            pattern = rest[1:]
    segments = _split_segments(pattern)
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if len(segment) >= 2 and set(segment) == {"*"}:
            if last:  # a trailing `/**`: everything inside
                pieces.append(".*")
            elif not pieces or pieces[-1] is not _FOLDERS:
                pieces.append(_FOLDERS)
            continue
        regex = _segment(segment, names)
        pieces.append(regex if last else regex + "/")
    out: list[str] = []
    i = 0
    while i < len(pieces):
        if pieces[i] is not _FOLDERS:
            out.append(pieces[i])  # type: ignore[arg-type]
            i += 1
            continue
        end = i + 1
        while end < len(pieces) and pieces[end] is not _FOLDERS and pieces[end] != ".*":
            end += 1
        chunk = "".join(pieces[i + 1:end])  # type: ignore[arg-type]
        if end < len(pieces):
            # another `**` follows: the earliest place where the folders between fit is as
            # good as any later one, so no backtracking into it is needed
            out.append(names.atomic(f"(?:.*?/)?{chunk}"))
        else:
            out.append(f"(?:.*/)?{chunk}")
        i = end
    return "".join(out)


class _Patterns:
    """The patterns of one .gitignore that apply to one kind of path (files, or folders),
    indexed so that a path is compared only with the patterns that could match it. Values are
    the patterns' indexes: the newest one that matches decides."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}  # `model.py`: a plain name
        self.suffixes: dict[str, int] = {}  # `*.log`: the plain text after the star
        self.suffix_lengths: set[int] = set()
        self.paths: dict[str, int] = {}  # `/src/model.py`: a plain path
        # the other patterns, keyed by what a match must start and end with: for a name
        # pattern its first and last character, for a path pattern its first folder (None
        # where that is a wildcard); turned into regexes on first use
        self.pending: dict[tuple[str | None, ...], list[tuple[int, str]]] = {}
        self.compiled: dict[tuple[str | None, ...], _Alternation] = {}

    def add(self, index: int, pattern: str, anchored: bool) -> None:
        if _literal_length(pattern) == len(pattern):
            (self.paths if anchored else self.names)[pattern] = index
            return
        if not anchored:
            after = pattern.lstrip("*")
            if after != pattern and after and _literal_length(after) == len(after):
                self.suffixes[after] = index
                self.suffix_lengths.add(len(after))
                return
            last = pattern[-1] if pattern[-1] not in "*?]" and pattern[-2:-1] != "\\" else None
            key: tuple[str | None, ...] = ("name", pattern[0] if _literal_length(pattern[:1]) else None, last)
        else:
            first, slash, _ = pattern.partition("/")
            key = ("path", first if slash and _literal_length(first) == len(first) else None)
        self.pending.setdefault(key, []).append((index, pattern))

    def latest(self, relative: str, name: str) -> int:
        """The index of the newest pattern that matches, -1 if none does."""
        best = max(self.names.get(name, -1), self.paths.get(relative, -1))
        for length in self.suffix_lengths:
            if len(name) >= length:
                best = max(best, self.suffixes.get(name[-length:], -1))
        first = relative.partition("/")[0]
        for key, text in (
            (("name", name[:1], name[-1:]), name), (("name", name[:1], None), name),
            (("name", None, name[-1:]), name), (("name", None, None), name),
            (("path", first), relative), (("path", None), relative),
        ):
            if key in self.pending:
                if key not in self.compiled:
                    self.compiled[key] = _Alternation(self.pending[key], key[0] == "path")
                best = max(best, self.compiled[key].latest(text))
        return best


class GitIgnore:
    """The patterns of one .gitignore file, matched relative to its folder."""

    def __init__(self, base: Path, lines: list[str]) -> None:
        self.base = base
        self.negated: list[bool] = []  # per pattern: whether it is a `!` one
        self.files, self.folders = _Patterns(), _Patterns()
        for raw in lines:
            parsed = _parse_line(raw)
            if parsed is None:
                continue
            pattern, negated, dir_only = parsed
            anchored = "/" in pattern
            pattern = pattern.lstrip("/")
            head, slash, tail = pattern.partition("**/")
            if not head and slash and "/" not in tail and tail.strip("*"):
                # `**/name` is `name` at any depth, as is a pattern without a slash
                pattern, anchored = tail, False
            index = len(self.negated)
            self.negated.append(negated)
            self.folders.add(index, pattern, anchored)
            if not dir_only:
                self.files.add(index, pattern, anchored)

    @classmethod
    def read(cls, directory: Path, warn: Warn | None = None) -> GitIgnore | None:
        path = directory / ".gitignore"
        try:
            data = read_file_bytes(path)
        except OSError as exc:
            if warn is not None and exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                warn(f"{path}: not used: {exc.strerror}")
            return None
        # git splits on "\n" only and drops a "\r" before it (not str.splitlines)
        text = data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
        return cls(directory, text.split("\n"))

    def ignored(self, path: Path, is_dir: bool) -> bool | None:
        """True/False when a pattern decides, None when none matches."""
        try:
            relative = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        name = relative.rpartition("/")[2]
        latest = (self.folders if is_dir else self.files).latest(relative, name)
        return None if latest < 0 else not self.negated[latest]


def _parse_line(raw: str) -> tuple[str, bool, bool] | None:
    """(pattern, negated, dir_only) of one .gitignore line; None for blanks and comments."""
    line = raw[:-1] if raw.endswith("\r") else raw
    if not line or line.startswith("#"):
        return None
    # trailing spaces are dropped unless escaped with a backslash
    end = len(line)
    while end > 0 and line[end - 1] == " ":
        backslashes = len(line[:end - 1]) - len(line[:end - 1].rstrip("\\"))
        if backslashes % 2:
            break
        end -= 1
    line = line[:end]
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
    if not line or line == "/":
        return None
    return line, negated, dir_only


class _Alternation:
    """Many patterns as one regex, to find the newest one that matches a text in O(log n)
    regex calls: the newer half of a range is asked first. (One regex with a group per
    pattern would say which matched in one call, but hundreds of groups make Python's regex
    engine slower than trying the patterns one by one.)"""

    def __init__(self, patterns: list[tuple[int, str]], anchored: bool) -> None:
        names = _Names()
        self.patterns: list[tuple[int, str]] = []  # (index of the pattern, regex), oldest first
        for index, pattern in patterns:
            try:
                regex = _path_regex(pattern, names) if anchored else _segment(pattern, names)
            except _NeverMatches:
                continue
            self.patterns.append((index, regex))
        self.regexes: dict[tuple[int, int], re.Pattern[str]] = {}  # compiled on first use

    def _matches(self, low: int, high: int, text: str) -> bool:
        regex = self.regexes.get((low, high))
        if regex is None:
            body = "|".join(regex for _, regex in self.patterns[low:high])
            regex = self.regexes[(low, high)] = re.compile(f"(?s:{body})")
        return regex.fullmatch(text) is not None

    def latest(self, text: str) -> int:
        """The index of the newest pattern that matches `text`, -1 if none does."""
        low, high = 0, len(self.patterns)
        if not high or not self._matches(low, high, text):
            return -1
        while high - low > 1:
            middle = (low + high) // 2
            if self._matches(middle, high, text):
                low = middle
            else:
                high = middle
        return self.patterns[low][0]


# --- the walk ----------------------------------------------------------------------------------


def _is_virtualenv(directory: Path) -> bool:
    # os.path.isfile answers False for a folder that cannot be searched, where Path.is_file raises
    return os.path.isfile(directory / "pyvenv.cfg")


def discover(
    paths: list[str], excluded: Callable[[Path, bool], bool], warn: Warn | None = None,
    suffixes: tuple[str, ...] = SUFFIXES, ignored: list[str] | None = None,
) -> Iterator[tuple[str, Path]]:
    """(display path, path) for every file to lint, in a stable order. A file named explicitly
    is always linted; folders are walked for regular files named with one of `suffixes` (*.py
    and *.pyi; `check` adds *.ipynb). `warn` is told of each folder that cannot be searched
    (the walk goes on without it); `ignored` gets the display path of each file and folder
    (ending in `/`) that a .gitignore kept out of the walk. `excluded(path, is_dir)` says
    whether the config leaves out a file or folder met by the walk."""
    for given in paths:
        root = Path(given)
        # os.path.isdir, not Path.is_dir: that raises inside a folder that cannot be searched
        if not os.path.isdir(root):
            yield given, root
            continue
        yield from _walk(given, root, excluded, warn, suffixes, ignored)


def _walk(display_root: str, root: Path, excluded: Callable[[Path, bool], bool],
          warn: Warn | None, suffixes: tuple[str, ...] = SUFFIXES,
          ignored: list[str] | None = None):
    ignores: list[GitIgnore] = []
    resolved = Path(os.path.realpath(root))
    for parent in reversed(resolved.parents):
        found = GitIgnore.read(parent)
        if found is not None:
            ignores.append(found)
        if os.path.lexists(parent / ".git"):
            # patterns above the repository root do not apply
            ignores = [found] if found is not None else []
    if os.path.lexists(resolved / ".git"):
        ignores = []
    walk = _Walk(str(resolved), excluded, warn, suffixes, ignored)
    # the links are followed after the rest: a folder or file reached both directly and
    # through a link is walked once, under its own name
    yield from walk.folder(display_root, resolved, str(resolved), ignores)
    while walk.links:
        display, location, real, is_dir, ignores = walk.links.popleft()
        if is_dir:
            yield from walk.folder(display, location, real, ignores)
        elif real not in walk.files:
            walk.files.add(real)
            yield display, location


def inside_folder(real_path: str, real_folder: str) -> bool:
    """Whether `real_path` is `real_folder` or lies under it (both resolved)."""
    return os.path.commonpath([real_path, real_folder]) == real_folder


class _Walk:
    """One folder walk: what it has seen, and the links it has still to follow. A link is
    followed only when its real path stays inside the folder being walked (git and ruff do not
    leave the tree either): `lib -> ../outside` or `leak.py -> ~/.netrc` in a repository would
    otherwise be linted and quoted in the report."""

    def __init__(self, root: str, excluded: Callable[[Path, bool], bool], warn: Warn | None,
                 suffixes: tuple[str, ...], ignored: list[str] | None) -> None:
        self.root, self.excluded, self.warn, self.suffixes = root, excluded, warn, suffixes
        self.ignored = ignored
        self.folders: set[str] = set()  # real paths of the folders walked
        self.files: set[str] = set()  # real paths of the files yielded
        # (display, path in the tree, real path, whether a folder, the .gitignores in force)
        self.links: deque[tuple[str, Path, str, bool, list[GitIgnore]]] = deque()

    def _target(self, display: str, location: Path) -> str | None:
        """The real path of the link `location`, or None (with a warning) when it leaves the
        tree."""
        real = os.path.realpath(location)
        if inside_folder(real, self.root):
            return real
        if self.warn is not None:
            self.warn(f"{display}: a link out of the folder being linted; not followed")
        return None

    def folder(self, display: str, location: Path, real: str, ignores: list[GitIgnore]):
        if real in self.folders:  # a link loop, or a folder reached twice
            return
        self.folders.add(real)
        try:
            entries = sorted(os.scandir(location), key=lambda e: e.name)
        except OSError as exc:
            if self.warn is not None:
                self.warn(f"{display}: folder not searched: "
                          f"{exc.strerror or type(exc).__name__}")
            return
        # a .gitignore linked from outside the tree would decide what is linted
        if not os.path.islink(location / ".gitignore") or self._target(
                os.path.join(display, ".gitignore"), location / ".gitignore") is not None:
            local = GitIgnore.read(location, self.warn)
            if local is not None:
                ignores = [*ignores, local]
        for entry in entries:
            # `modellint .` and a bare `modellint` show `pkg/model.py`, not `./pkg/model.py`
            child_display = (entry.name if display in (".", "./")
                             else os.path.join(display, entry.name))
            child = location / entry.name
            try:
                is_dir = entry.is_dir()
            except OSError:
                # a symlink loop: a *.py one is reported as unreadable rather than skipped
                is_dir = False
            if is_dir:
                if entry.name in SKIPPED_DIRS or entry.name.endswith(".egg-info"):
                    continue
                if _is_virtualenv(child) or self._ignored(ignores, child, child_display + "/",
                                                          True) or self.excluded(child, True):
                    continue
                if not entry.is_symlink():
                    yield from self.folder(child_display, child, os.path.join(real, entry.name),
                                           ignores)
                    continue
                target = self._target(child_display, child)
                if target is not None:
                    self.links.append((child_display, child, target, True, ignores))
            elif entry.name.endswith(self.suffixes):
                if not _regular_or_unreadable(entry):
                    continue  # a FIFO or device named *.py is not source code
                if (self._ignored(ignores, child, child_display, False)
                        or self.excluded(child, False)):
                    continue
                if not entry.is_symlink():
                    self.files.add(os.path.join(real, entry.name))
                    yield child_display, child
                    continue
                target = self._target(child_display, child)
                if target is not None:
                    self.links.append((child_display, child, target, False, ignores))

    def _ignored(self, ignores: list[GitIgnore], path: Path, display: str, is_dir: bool) -> bool:
        decision = False
        for gitignore in ignores:
            verdict = gitignore.ignored(path, is_dir)
            if verdict is not None:
                decision = verdict
        if decision and self.ignored is not None:
            self.ignored.append(display)
        return decision


def _regular_or_unreadable(entry: os.DirEntry) -> bool:
    """False for a FIFO, socket or device (or a link to one); True for a regular file, and for
    a link that cannot be followed, which is then reported as unreadable."""
    try:
        if entry.is_file():
            return True
        entry.stat()
    except OSError:
        return True
    return False


def project_root(config_source: Path | None, paths: list[str]) -> Path | None:
    """The folder of the project the named `paths` belong to: the folder of the config file
    found for them, else the nearest folder at or above the first path that holds
    `.git`; None when there is neither (the run's own files are then the whole project)."""
    if config_source is not None:
        return Path(os.path.realpath(config_source)).parent
    if not paths:
        return None
    start = Path(os.path.realpath(paths[0]))
    directory = start if os.path.isdir(start) else start.parent
    for candidate in (directory, *directory.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return None


def same_file_key(path: Path | str) -> str:
    """A path with its folder resolved (what the walk yields), for telling whether a named
    file is one the walk of a folder finds too."""
    path = str(path)
    return os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))


def project_files(root: Path, paths: list[str], excluded: Callable[[Path, bool], bool],
                  suffixes: tuple[str, ...] = SUFFIXES,
                  warn: Warn | None = None) -> list[tuple[str, Path]]:
    """(display path, path) of every file of the project at `root` that a run on `root`
    would lint, except those the run on `paths` already covers: what a run on a few files
    (pre-commit passes only the changed ones) reads for the project index. Found with the
    same walk, .gitignore files, links and `excluded` as a full run, silently (a folder that
    cannot be searched is the full run's to report); none when a path named is `root` or
    above it. At most MAX_PROJECT_FILES files of MAX_PROJECT_BYTES in all: a run on one file
    must finish whatever the repository holds (`warn` is told when the index stops there)."""
    real_root = os.path.realpath(root)
    named: set[str] = set()
    folders: list[str] = []
    for given in paths:
        real = os.path.realpath(given)
        if real == real_root or real_root.startswith(real.rstrip(os.sep) + os.sep):
            return []
        if os.path.isdir(given):
            folders.append(real.rstrip(os.sep) + os.sep)
        else:
            named.add(same_file_key(os.path.normpath(given)))
    display = os.path.relpath(real_root)
    inside = tuple(folders)
    found: list[tuple[str, Path]] = []
    size = 0
    for shown, path in _walk(display, Path(display), excluded, None, suffixes):
        key = str(path)
        if key in named or (inside and key.startswith(inside)):
            continue
        try:
            size += os.stat(path).st_size
        except OSError:
            pass  # the index reports it when it reads it
        if len(found) == MAX_PROJECT_FILES or size > MAX_PROJECT_BYTES:
            if warn is not None:
                warn(f"the project index of {display} stops at {len(found)} files: the project "
                     f"has more than modellint reads for a run on a few files "
                     f"({MAX_PROJECT_FILES} files, {MAX_PROJECT_BYTES // (1024 * 1024)} MiB); "
                     "findings that depend on the other files may be missing (lint the whole "
                     "folder to read them all)")
            break
        found.append((shown, path))
    return found
