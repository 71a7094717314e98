"""The facts of the files of a run for the project index (`modellint.static.index`): each
file's from the facts cache (`modellint.static.cache`, keyed by the sha256 of its bytes), else
extracted from its bytes (`modellint.static.facts`; by several processes when many files
missed) and put there. A file's *summary* (its imports and the digests of its facts and text)
is read apart from its facts (the first of the two parts of its entry), the summaries of all
the run's files from one entry, and the digests of the linted files under the key of the
whole run's bytes (`snapshot_key`): a rerun on unchanged files reads one entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from modellint.static.facts_version import FACTS_VERSION
from modellint.static.source import DecodeError, decode

# The extraction and the summaries (`facts`, `outline`, `summary`) are imported where they are
# used: a rerun that finds every file in the cache reads digests alone (`CachedDigests`), and
# need not load them.

if TYPE_CHECKING:
    import ast

    from modellint.static.index import ProjectIndex
    from modellint.static.outline import Outline


_MISSING = object()
_SUMMARY_KEYS = ("v", "imports", "notebook", "digest", "text")
# a file's summary in the entry of the whole project: without its imports, four fifths of it,
# which a run on one edited file need not read (it keeps which files each file imports:
# `ProjectIndex.known_imports`); they are in an entry of their own (`_imports_key`), read when
# a file's imports are asked for
_PROJECT_SUMMARY_KEYS = tuple(key for key in _SUMMARY_KEYS if key != "imports")


def summary_of(facts: dict, text_digest: str, digest: str | None = None) -> dict:
    """What the index needs of a file before a rule looks into it: its imports (the project's
    import graph), whether it is a notebook, the digest of its facts (the cache keys of the
    files that depend on it) and of its text. Much smaller than the facts, and read apart
    from them: a run decodes only the facts that its lints look up. `facts` either as
    extracted or as the cache holds them (`convert_facts(facts, to_json)`: cheaper to
    digest): both have one digest. `digest`: that digest, when the caller has it."""
    return {"v": FACTS_VERSION, "imports": facts["imports"],
            "notebook": bool(facts.get("notebook")),
            "digest": facts_digest(facts) if digest is None else digest, "text": text_digest}


def facts_digest(facts: dict) -> str:
    """The sha256 of the JSON of `facts`, in their own order: the extraction makes the same
    facts in the same order from the same text (the order of a set never shows), and the
    cache keeps that order."""
    from modellint.static.summary import JSON_DEFAULT

    return _digest(json.dumps(facts, default=JSON_DEFAULT))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _facts_key(content: str) -> str:
    """The cache key of the summary and the facts of a file whose bytes have the sha256
    `content`: one entry of two parts (`Cache.put_facts_parts`), each read alone."""
    return hashlib.sha256(b"project-summary-and-facts\0" + bytes.fromhex(content)).hexdigest()


def _summaries_key(files: list[tuple[str, Any]]) -> str:
    """The cache key of the summaries of a project's files (by their display paths); the
    second kind of entry, whose summaries come without their imports (`_imports_key`)."""
    return _project_key("project-summaries-2", files)


def _imports_key(files: list[tuple[str, Any]]) -> str:
    """The cache key of the imports of a project's files, kept apart from their summaries."""
    return _project_key("project-imports", files)


def _project_key(kind: str, files: list[tuple[str, Any]]) -> str:
    """The cache key of an entry of `kind` about exactly these files (by their display
    paths)."""
    digest = hashlib.sha256(f"{kind}={FACTS_VERSION}".encode())
    for display, _ in files:
        digest.update(display.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


# (display path, path on disk, the cache or None, whether the file is linted (its outline is
# kept, see `ProjectIndex.outline`), the sha256 of its bytes when the run has read them, the
# run's max-code-bytes)
Task = tuple[str, Any, Any, bool, "str | None", int]


def _cached_facts(task: Task, known: dict) -> Any:
    """(display, summary, loader of the facts) of one file from the cache, None when it
    cannot be read, `_MISSING` when it is not in the cache (`_read_facts` extracts it).
    `known`: display -> [sha256 of the bytes, summary] of the project's files at its last
    run (`_summaries_key`), read as one entry."""
    from modellint.static.discover import read_file_bytes

    display, path, cache, _, content, _ = task
    if cache is None:
        return _MISSING
    if content is None:
        try:
            content = hashlib.sha256(read_file_bytes(path, _limit(path))).hexdigest()
        except OSError:
            return None
    last = known.get(display)
    key = _facts_key(content)
    if (isinstance(last, list) and len(last) == 2 and last[0] == content
            and isinstance(last[1], dict) and set(_PROJECT_SUMMARY_KEYS) <= last[1].keys()):
        summary = last[1]
    else:
        summary = cache.get_facts_part(key, 0, _SUMMARY_KEYS)
    if summary is None or summary["v"] != FACTS_VERSION or not all(
            isinstance(summary[k], str) for k in ("digest", "text")) or not isinstance(
            summary.get("imports", {}), dict):
        return _MISSING
    return display, summary, functools.partial(_load_facts, task, key)


def _load_facts(task: Task, key: str) -> dict:
    """The facts of a file whose summary came from the cache: from the cache too (the hash
    of the text is kept beside them: a hit decodes nothing), else extracted again."""
    from modellint.static.facts import extract
    from modellint.static.summary import convert_facts, from_json

    facts = task[2].get_facts_part(key, 1, ("v", "imports", "classes", "functions", "globals"))
    if facts is not None and facts["v"] == FACTS_VERSION:
        try:
            return convert_facts(facts, from_json)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            pass  # not facts this version wrote: extracted again
    found = _read_facts(task)
    return found[1] if found is not None else extract("")


def _read_facts(task: Task, as_json: bool = False
                ) -> tuple[str, Any, str, str | None, tuple[bytes, Outline] | None] | None:
    """(display, facts, text hash, facts digest, outline) of one file, or None when it cannot
    be read or decoded (its own lint reports why), extracted with `ast` and put in the cache
    with its summary (the digest of the facts only then). The outline (with the hash of the
    bytes it was made of) only for a linted file that parses. `as_json`: the facts as the
    JSON text put in the cache, when they were (`_decoded` makes them again)."""
    from modellint.static.collection import no_collections

    with no_collections():
        return _read_facts_of(task, as_json)


def _read_facts_of(task: Task, as_json: bool
                   ) -> tuple[str, Any, str, str | None, tuple[bytes, Outline] | None] | None:
    from modellint.static.discover import read_file_bytes
    from modellint.static.outline import Outline
    from modellint.static.summary import convert_facts, to_json

    display, path, cache, linted, _, max_code_bytes = task
    try:
        data = read_file_bytes(path, _limit(path))
    except OSError:
        return None
    read = facts_of_bytes(path, data, max_code_bytes)
    if read is None:
        return None
    facts, text, tree = read
    content = hashlib.sha256(data)
    outline = None
    if linted and tree is not None and not facts.get("notebook"):
        outline = (content.digest(), Outline.of(tree, text))
    digest = text_hash(text)
    summary = body = None
    if cache is not None:
        encoded = convert_facts(facts, to_json)
        body = json.dumps(encoded)
        summary = summary_of(encoded, digest, _digest(body))
        # the facts as encoded (and hashed) once; a file of their own would cost a run on a
        # fresh cache a third more files to write
        cache.put_facts_parts(_facts_key(content.hexdigest()), [json.dumps(summary), body])
    return (display, body if as_json and body is not None else facts, digest,
            summary["digest"] if summary is not None else None, outline)


def _decoded(item: Any) -> Any:
    """An item of `_read_facts(task, as_json=True)` with its facts decoded."""
    if item is None or not isinstance(item[1], str):
        return item
    from modellint.static.summary import convert_facts, from_json

    return (item[0], convert_facts(json.loads(item[1]), from_json), *item[2:])


def facts_of_bytes(path: Any, data: bytes, max_code_bytes: int
                    ) -> tuple[dict, str, ast.Module | None] | None:
    """(facts, text, CPython's tree of it or None) of a file's bytes; None when they cannot
    be decoded, or hold more than `max_code_bytes` of code (the file's own lint reports why;
    a parse of it could take gigabytes). A notebook's text is that of its code
    cells joined (what its lint reads), and its facts are marked `notebook`: it imports the
    project's files, and nothing imports it."""
    from modellint.static import notebook
    from modellint.static.facts import extract
    from modellint.static.outline import parse

    if notebook.is_notebook(path, data):
        try:
            book = notebook.read_notebook(data, max_code_bytes)
        except notebook.NotebookError:
            return None
        if book.too_much_code:
            return None
        return notebook_facts(book), book.source, book.tree
    if len(data) > max_code_bytes:
        return None
    try:
        text, _ = decode(data)
    except DecodeError:
        return None
    tree = parse(text)
    # (a file that does not parse: the facts of what does, and no tree kept for the outline:
    # the file's lint recovers it again and reports its syntax errors)
    return extract(text, tree), text, tree


def notebook_facts(book: Any) -> dict:
    from modellint.static.facts import extract

    # no tree: the cells do not parse, or hold more code than `max-code-bytes` (not parsed)
    facts = extract(book.source if book.tree is not None else "", book.tree)
    facts["notebook"] = True
    return facts


def _limit(path: Any) -> int:
    from modellint.static import notebook
    from modellint.static.discover import MAX_FILE_BYTES

    return notebook.MAX_BYTES if str(path).endswith(notebook.SUFFIX) else MAX_FILE_BYTES


# below this many files the index is read in this process
_PARALLEL_FROM = 64


def _read_shared(tasks: list[Task], jobs: int) -> list:
    """`_read_facts` of each task, by this process and `jobs - 1` forked ones, the files dealt
    out largest first, one to each in turn. What this process reads is not pickled back to
    it: copying the facts between processes cost a fifth of the index (what the others read
    comes back as the JSON text of their facts, made for the cache: half the cost of pickling
    them both ways). A task whose process could not start or died is read here."""
    import multiprocessing

    from modellint.static.discover import file_size

    context = multiprocessing.get_context("fork")
    order = sorted(range(len(tasks)), key=lambda n: -file_size(tasks[n][1]))

    def read(share: int, as_json: bool = False) -> list[tuple[int, Any]]:
        return [(number, _read_facts(tasks[number], as_json)) for number in order[share::jobs]]

    def work(share: int, connection: Any) -> None:
        try:
            connection.send(read(share, as_json=True))
        finally:
            connection.close()

    workers = []
    found: list = [_MISSING] * len(tasks)
    try:
        for share in range(1, jobs):
            try:
                ours, theirs = context.Pipe(duplex=False)
                process = context.Process(target=work, args=(share, theirs), daemon=True)
                process.start()
            except (OSError, RuntimeError):
                break  # fewer processes (none): this one reads the rest
            theirs.close()
            workers.append((process, ours))
        for number, item in read(0):
            found[number] = item
        for _, connection in workers:
            try:
                for number, item in connection.recv():
                    found[number] = _decoded(item)
            except (EOFError, OSError):
                pass  # it died: what it had read is read again below
    finally:
        for process, connection in workers:
            connection.close()
            if process.is_alive() and found.count(_MISSING):
                process.kill()  # this process failed before it had every share
            process.join()
    return [_read_facts(task) if item is _MISSING else item
            for task, item in zip(tasks, found, strict=True)]


def snapshot_key(files: list[tuple[str, Any]], cache: Any = None
                 ) -> tuple[str, dict[str, str]]:
    """(the key of the index of exactly these files' bytes, the sha256 of each file that
    could be read: the results cache's keys take it instead of reading the file again).
    With a `cache`, a file whose stat says it has not changed is not read (`content_digests`)."""
    contents = content_digests(files, cache)
    digest = hashlib.sha256(f"project-index-snapshot={FACTS_VERSION}".encode())
    empty = hashlib.sha256(b"").hexdigest()
    for display, _ in files:
        digest.update(display.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(bytes.fromhex(contents.get(display, empty)))
    return digest.hexdigest(), contents


# a file changed less than this long before its stat was recorded may change again within the
# file system's timestamp granularity without changing its stat: it is read again
_STAT_MARGIN_NS = 2_000_000_000
# the entries of a whole project (the stats of its files, their summaries) are written again
# once more than this many files differ from them; fewer are read on their own, each run
# (pre-commit edits a file or two: rewriting half a megabyte of JSON for each cost more)
_STALE_FILES = 32


def content_digests(files: list[tuple[str, Any]], cache: Any) -> dict[str, str]:
    """The sha256 of the bytes of each file that can be read. A file whose stat (mode, size,
    modification and change times, inode, device) is the one the cache recorded beside its
    digest is not read again, as git trusts a clean stat: its change time moves on every
    write and no program sets it (on POSIX systems; elsewhere every file is read). A file
    that changed less than `_STAT_MARGIN_NS` before its stat was taken, by the clock of its
    own file system (that of the record, which must be on the same one), is read again: a
    write in the same tick of that clock could leave its stat as it was. The record is made
    again when more than `_STALE_FILES` files were read."""
    from modellint.static.discover import read_file_bytes

    key = _project_key("project-stats", files)
    found = (cache.get_facts_written(key, required=("at", "took", "files"))
             if cache is not None else None)
    known: dict = {}
    trusted_before, device = 0, None
    if found is not None and isinstance(found[0]["files"], dict):
        stored, written = found
        known = stored["files"]
        if os.name == "posix" and isinstance(stored["at"], int) and isinstance(
                stored["took"], int):
            # the stats were taken between `at` (this machine's clock) and `took` before the
            # record was written (the file system's clock)
            trusted_before = min(stored["at"], written.st_mtime_ns - stored["took"]
                                 ) - _STAT_MARGIN_NS
            device = written.st_dev
    at = time.time_ns()
    contents: dict[str, str] = {}
    recorded: dict[str, list] = {}
    read = 0
    for display, path in files:
        try:
            info = os.stat(path)
        except OSError:
            continue
        stat_of = [info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino,
                   info.st_dev]
        last = known.get(display)
        if (isinstance(last, list) and len(last) == 7 and last[:6] == stat_of
                and info.st_dev == device
                and max(info.st_mtime_ns, info.st_ctime_ns) < trusted_before
                and isinstance(last[6], str)):
            contents[display] = last[6]
            recorded[display] = last
            continue
        read += 1
        try:
            contents[display] = hashlib.sha256(read_file_bytes(path, _limit(path))).hexdigest()
        except OSError:
            continue
        recorded[display] = [*stat_of, contents[display]]
    if cache is not None and (found is None or read > _STALE_FILES):
        cache.put_facts(key, {"at": at, "took": time.time_ns() - at, "files": recorded})
    return contents


Snapshot = tuple["str | None", dict[str, str], "dict[str, str] | None"]


def project_order(files: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The files of an index in one order whatever the command line's: a run on a few files
    and a run on the whole project make the same index (and share its snapshot)."""
    return sorted(files, key=lambda item: item[0])


def read_snapshot(files: list[tuple[str, Any]], cache: Any) -> Snapshot:
    """(the key of the index of exactly these files' bytes (`snapshot_key`), the sha256 of
    each file that could be read, the digests of files that the cache holds under that key,
    or None when it holds no entry there); `files` sorted by display path."""
    snapshot, contents = snapshot_key(files, cache) if cache is not None else (None, {})
    known: dict[str, str] | None = None
    if snapshot is not None:
        stored = cache.get_facts(snapshot, required=("digests",))
        digests = stored.get("digests") if stored is not None else None
        if isinstance(digests, dict) and all(isinstance(d, str) for d in digests.values()):
            known = digests
    return snapshot, contents, known


class CachedDigests:
    """The index of a rerun on files whose bytes the cached snapshot holds, every linted
    one's digest with them: what a run needs of the index to look its files up in the
    results cache (`contents`, `digest`), without reading a fact. `index()` is the index
    proper, whose facts are read when a lint first looks them up (a file that missed)."""

    def __init__(self, files: list[tuple[str, Any]], cache: Any, linted: Collection[str],
                 max_code_bytes: int, contents: dict[str, str], digests: dict[str, str],
                 new_index: Callable[[], ProjectIndex]) -> None:
        self.contents = contents
        self._digests = digests
        self._files, self._cache, self._linted = files, cache, linted
        self._max_code_bytes = max_code_bytes
        self._new_index = new_index
        self._index: ProjectIndex | None = None

    @classmethod
    def of(cls, files: list[tuple[str, Any]], cache: Any, linted: Collection[str],
           max_code_bytes: int, snapshot: Snapshot, new_index: Callable[[], ProjectIndex]
           ) -> CachedDigests | None:
        """The digests of the snapshot when it holds every linted file that can be read;
        `new_index()`: an empty `ProjectIndex` (whose module this one does not import)."""
        _, contents, known = snapshot
        if known is None or not all(path in known for path in linted if path in contents):
            return None
        return cls(files, cache, linted, max_code_bytes, contents, known, new_index)

    def digest(self, path: str) -> str:
        found = self._digests.get(path)
        return found if found is not None else self.index().digest(path)

    def index(self) -> ProjectIndex:
        if self._index is None:
            index = self._index = self._new_index()
            index._digests = dict(self._digests)
            index.contents = self.contents
            files, cache, linted = self._files, self._cache, self._linted
            max_code_bytes = self._max_code_bytes
            # read later in a worker process, which may not start processes of its own
            index._loader = lambda: fill_index(index, files, cache, 1, linted, max_code_bytes)
        return self._index


def fill_index(index: ProjectIndex, files: list[tuple[str, Any]], cache: Any, jobs: int,
               linted: Collection[str], max_code_bytes: int) -> None:
    """Add the facts of `files` ((display path, path on disk) pairs) to `index`, with the
    outlines of the `linted` ones that it parses."""
    linted = frozenset(linted)
    tasks: list[Task] = [(display, path, cache, display in linted, index.contents.get(display),
                          max_code_bytes) for display, path in files]
    # the cache first, in this process; only the files it misses are parsed (by `jobs`
    # processes when there are many)
    known: dict = {}
    direct: dict = {}
    if cache is not None:
        stored = cache.get_facts(_summaries_key(files), required=("files",))
        if stored is not None and isinstance(stored["files"], dict):
            known = stored["files"]
            if isinstance(stored.get("direct"), dict):
                direct = stored["direct"]
    found = [_cached_facts(task, known) for task in tasks]
    if cache is not None:
        index.imports_of_unchanged = functools.partial(_project_imports, cache, files)
    missing = [number for number, item in enumerate(found) if item is _MISSING]
    if jobs > 1 and len(missing) >= _PARALLEL_FROM and os.name == "posix":
        extracted = _read_shared([tasks[n] for n in missing], jobs)
    else:
        extracted = [_read_facts(tasks[n]) for n in missing]
    for number, item in zip(missing, extracted, strict=True):
        found[number] = item
    summaries = {}
    unchanged = []  # the files read from the summaries entry as they were
    for item in found:
        if item is None:
            continue
        if callable(item[2]):
            index.add_summary(*item)
            summaries[item[0]] = item[1]
            last = known.get(item[0])
            if isinstance(last, list) and last and last[0] == index.contents.get(item[0]):
                unchanged.append(item[0])
        else:
            display, facts, digest, known_digest, outline = item
            index.add(display, facts, digest)
            if known_digest is not None:
                index._fact_digests[display] = known_digest
                summaries[display] = {"v": FACTS_VERSION, "imports": facts["imports"],
                                      "notebook": bool(facts.get("notebook")),
                                      "digest": known_digest, "text": digest}
            if outline is not None:
                index.outlines[display] = outline
    # the files an unchanged file imports are the same among the same files, every one of
    # them in the index (the entry is keyed by their names, `_summaries_key`, and keeps what
    # it found only when it had them all)
    complete = all(item is not None for item in found)
    if complete:
        index.known_imports({display: direct[display] for display in unchanged
                             if isinstance(direct.get(display), list)})
    for path in sorted(linted):
        if path in index.files:
            index.digest(path)  # once here, not in each worker
    stale = sum(item is not None for item in found) - len(unchanged)
    if cache is not None and (not known or stale > _STALE_FILES):
        # the next run (one file edited, as pre-commit makes) reads this one entry instead of
        # one per file
        kept = {display: summary for display, summary in summaries.items()
                if display in index.contents}
        cache.put_facts(_summaries_key(files), {"files": {
            display: [index.contents[display], {key: summary[key]
                                                for key in _PROJECT_SUMMARY_KEYS}]
            for display, summary in kept.items()},
            "direct": index.direct_imports() if complete else {}})
        # (a summary read from the entry came without its imports: the index has them)
        cache.put_facts(_imports_key(files), {"files": {
            display: [index.contents[display], summary["imports"] if "imports" in summary
                      else index.imports_of(display)]
            for display, summary in kept.items()}})


def _project_imports(cache: Any, files: list[tuple[str, Any]]) -> dict[str, tuple[str, dict]]:
    """Display path -> (sha256 of the bytes, imports) of the files of the project's imports
    entry (`_imports_key`)."""
    stored = cache.get_facts(_imports_key(files), required=("files",))
    found: dict[str, tuple[str, dict]] = {}
    if stored is not None and isinstance(stored["files"], dict):
        for display, item in stored["files"].items():
            if (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], dict)):
                found[display] = (item[0], item[1])
    return found


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
