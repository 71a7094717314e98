"""Run the static pass over many files: workers, fixes, and collecting the outcome."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from modellint.config import DEFAULT_MAX_CODE_BYTES
from modellint.finding import Finding, Fix
from modellint.records import record
from modellint.static import notebook
from modellint.static.cache import Cache, Outcome, RunOutcomes
from modellint.static.collection import fewer_collections, no_collections
from modellint.static.discover import MAX_FILE_BYTES, SUFFIXES, file_size, read_file_bytes
from modellint.static.source import DecodeError, decode

if TYPE_CHECKING:
    from modellint.rule import StaticRule
    from modellint.static.linter import Linter

# LibCST, the rules and the fixer (modellint.static.linter, modellint.fix, modellint.rule) are
# imported in the functions that lint a file, not when its findings come from the cache: a warm
# rerun imports none of them (see `StaticOptions.load_rules`)


@record
class StaticOptions:
    rules: Sequence[type[StaticRule]]
    options: dict[str, Any]
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    jobs: int = 1
    cache: Cache | None = None
    # the folders being linted: --fix writes no file whose real path leaves them
    tree: tuple[Path, ...] = ()
    # the project index of every file of the run (made by `run` when None)
    index: Any = None
    # files of the project that the run does not lint, read for the index only (a run on a
    # few files: `discover.project_files`)
    project: Sequence[tuple[str, Path]] = ()
    # when set, gives `rules` on first need: a file that misses the cache (a warm run then
    # never imports the rules, nor LibCST); given the texts of the files to lint, only the
    # rules that can run on them (None: every rule), with the trigger words of those left out
    load_rules: Callable[[Iterable[str] | None],
                         tuple[Sequence[type[StaticRule]], frozenset[str]]] | None = None
    # the codes of `rules` that read the project's other files (`needs.project_codes`); None:
    # found from `rules`
    project_codes: frozenset[str] | None = None
    # the trigger words of the rules `static_rules` left out, and what loads every rule: a
    # file that holds one of the words changed since its text was read, and is linted with
    # every rule (`every_rule_runs`)
    left_out_words: frozenset[str] = frozenset()
    load_every_rule: Callable[[], Sequence[type[StaticRule]]] | None = None
    # the run keeps its files' outcomes as one entry (`_CachedRun`): none is looked up nor put
    # in the cache alone
    outcomes_kept_by_run: bool = False

    def static_rules(self, texts: Iterable[str] | None = None) -> Sequence[type[StaticRule]]:
        """The run's rules; loaded on the first call, those that can run on `texts` when it
        gives them (every text the run will lint)."""
        if self.load_rules is not None:
            loader, self.load_rules = self.load_rules, None
            rules, self.left_out_words = loader(texts)
            self.rules = list(rules)
            if self.left_out_words:
                self.load_every_rule = lambda: loader(None)[0]
        return self.rules

    def every_rule_runs(self, data: bytes) -> bool:
        """A rule that `static_rules` left out would run on the text of `data` (the file
        changed after the run read it to choose its rules)."""
        if not self.left_out_words:
            return False
        try:
            text = decode(data)[0]
        except DecodeError:
            return False
        return any(word in text for word in self.left_out_words)

    def has_rules(self) -> bool:
        return self.load_rules is not None or bool(self.rules)

    def needs_index(self, tasks: Sequence[tuple[str, Path, frozenset[str]]]) -> bool:
        """Some file of `tasks` runs a rule that reads the project's other files: the run
        needs the project index (otherwise it is neither built nor read from the cache)."""
        from modellint.static.needs import project_codes, reads_project

        codes = self.project_codes
        if codes is None:
            codes = self.project_codes = project_codes(self.static_rules())
        return reads_project(codes, (disabled for _, _, disabled in tasks))

    def linter(self, every_rule: bool = False) -> Linter:
        """The linter of the run's rules (loaded now; `every_rule`: those left out too, from
        now on), options and index."""
        from modellint.static.linter import Linter

        rules = self.static_rules()
        if every_rule and self.load_every_rule is not None:
            rules = self.rules = list(self.load_every_rule())
            self.load_every_rule, self.left_out_words = None, frozenset()
        return Linter(rules, self.options, self.index)

    @property
    def max_code_bytes(self) -> int:
        return self.options.get("max_code_bytes", DEFAULT_MAX_CODE_BYTES)


@record
class FileOutcome:
    path: str
    findings: list[Finding] = field(default_factory=list)
    fixed: int = 0
    diff: str = ""
    # findings the --diff would fix (`fixed` stays 0: nothing was written)
    would_fix: int = 0
    # for source read from standard input: the text after --fix, which is printed, not written
    fixed_source: bytes | None = None
    messages: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)
    notebook: bool = False
    # the file's model classes (name, line), from the static pass's parse: what the runtime
    # pass builds
    classes: tuple[tuple[str, int], ...] = ()


def _without_nodes(findings: list[Finding]) -> list[Finding]:
    """`findings` with their fixes' nodes dropped (they stay in this process; reporters only
    need to know a finding is fixable)."""
    return [finding if finding.fix is None else replace(
        finding, fix=Fix((), finding.fix.description, finding.fix.safe)) for finding in findings]


def _file_finding(code_name: tuple[str, str], display: str, message: str) -> Finding:
    """A finding about the whole file (it cannot be read, linting it failed): at line 1, built
    as the engine builds its own (`engine.error_finding`)."""
    from modellint.static.engine import error_finding

    return error_finding(code_name, display, message, 1, 1)


def _read_error(display: str, exc: OSError) -> Finding:
    from modellint.static.engine import SYNTAX_ERROR

    reason = exc.strerror or type(exc).__name__
    return _file_finding(SYNTAX_ERROR, display, f"cannot read file: {reason}")


def lint_file(display: str, path: Path, disabled: frozenset[str], opts: StaticOptions,
              stdin: bytes | None = None) -> FileOutcome:
    """Lint the file at `path`, or `stdin` (what was read from standard input for `path`,
    which is then never read nor written)."""
    try:
        with no_collections():
            return _lint_file(display, path, disabled, opts, stdin)
    except Exception as exc:  # noqa: BLE001 - one file must not stop the run
        from modellint.static.engine import INTERNAL_ERROR
        from modellint.static.parse import traceback_text

        outcome = FileOutcome(path=display)
        outcome.tracebacks.append(traceback_text(exc))
        outcome.findings.append(_file_finding(
            INTERNAL_ERROR, display,
            f"modellint failed on this file: {type(exc).__name__}: {exc}"))
        return outcome


def _lint_file(display: str, path: Path, disabled: frozenset[str], opts: StaticOptions,
               stdin: bytes | None) -> FileOutcome:
    outcome = FileOutcome(path=display)
    try:
        # a FIFO or device named on the command line, or a file past the size limit, is one
        # "cannot read file" finding rather than a hang
        original = stdin if stdin is not None else read_file_bytes(
            path, notebook.MAX_BYTES if str(path).endswith(notebook.SUFFIX) else MAX_FILE_BYTES)
    except OSError as exc:
        from modellint.static.engine import SYNTAX_ERROR

        if SYNTAX_ERROR[0] not in disabled:
            outcome.findings.append(_read_error(display, exc))
        return outcome
    wants_fix = opts.fix or opts.diff
    outcome.notebook = notebook.is_notebook(path, original)
    key = None
    if opts.cache is not None and not wants_fix and not opts.outcomes_kept_by_run:
        key = _file_key(display, original, disabled, opts)
        cached = opts.cache.get(key)
        if cached is not None:
            outcome.findings, outcome.classes = cached
            return outcome
    if wants_fix:  # a lint that fixes nothing does not import the fixes
        from modellint.fix import (
            PythonText,
            WriteError,
            applicable,
            fix_rounds,
            unified_diff,
            write_atomically,
        )
    from modellint.static.engine import SYNTAX_ERROR

    linter = opts.linter(every_rule=opts.every_rule_runs(original))
    if outcome.notebook:
        return _lint_notebook_file(display, path, original, disabled, opts, outcome, key,
                                   piped=stdin is not None)
    result = linter.lint(display, original, disabled)
    outcome.tracebacks.extend(result.tracebacks)
    wants_fix = wants_fix and (result.module is not None or result.recovered)
    if wants_fix and any(applicable(f, opts.unsafe_fixes) for f in result.findings):
        fixing = fix_rounds(PythonText(linter, display, original, disabled), result,
                            opts.unsafe_fixes)
        text, result = fixing.text, fixing.result
        outcome.fixed += fixing.fixed
        outcome.tracebacks.extend(fixing.tracebacks)
        outcome.messages.extend(fixing.messages)
    if (opts.fix or opts.diff) and result.module is None:
        unparsed = [f.message for f in result.findings if f.code == SYNTAX_ERROR[0]]
        waiting = any(f.fix is not None and applicable(f, opts.unsafe_fixes) and not f.fix.edits
                      for f in result.findings)
        if unparsed:
            outcome.messages.append(
                f"{display}: {'partly fixed' if outcome.fixed else 'not fixed'}: the file "
                f"does not parse on Python {sys.version_info[0]}.{sys.version_info[1]}, which "
                f"runs modellint ({unparsed[0]})"
                + ("; its other fixes are made once it parses" if waiting else ""))
    if wants_fix and outcome.fixed:
        if opts.diff:
            outcome.diff = unified_diff(display, _decode(original, result.encoding), text)
            # --diff writes nothing: report what is still there now
            result.module = None  # one tree at a time (see `fix_rounds`)
            result = linter.lint(display, original, disabled)
            outcome.would_fix, outcome.fixed = outcome.fixed, 0
        elif stdin is not None:
            outcome.fixed_source = text.encode(result.encoding)
        else:
            try:
                write_atomically(path, text.encode(result.encoding), original, opts.tree)
            except WriteError as exc:
                outcome.messages.append(str(exc))
                outcome.fixed = 0
                result.module = None  # one tree at a time (see `fix_rounds`)
                result = linter.lint(display, original, disabled)
    # the nodes stay in this process; reporters only need to know it is fixable
    outcome.findings = _without_nodes(result.findings)
    outcome.classes = result.classes
    # a file whose linting failed is linted again next time
    if key is not None and opts.cache is not None and not result.tracebacks:
        opts.cache.put(key, outcome.findings, result.classes)
    return outcome


def _lint_notebook_file(display: str, path: Path, original: bytes, disabled: frozenset[str],
                        opts: StaticOptions, outcome: FileOutcome, key: str | None,
                        piped: bool) -> FileOutcome:
    from modellint.fix import applicable
    from modellint.static.engine import SYNTAX_ERROR, error_finding

    try:
        book = notebook.read_notebook(original, opts.max_code_bytes)
    except notebook.NotebookError as exc:
        if SYNTAX_ERROR[0] not in disabled:
            outcome.findings.append(error_finding(SYNTAX_ERROR, display, str(exc), exc.line,
                                                  exc.column))
        return outcome
    if book.language.lower() != "python":
        outcome.messages.append(
            f"{display}: not linted: the notebook's language is {book.language}, not Python")
        return outcome
    linted = opts.linter().lint_notebook(display, book, disabled)
    result = linted.result
    outcome.tracebacks.extend(result.tracebacks)
    if (opts.fix or opts.diff) and any(
            f.fix is not None and applicable(f, opts.unsafe_fixes) and f.fix.edits
            for f in linted.findings):
        linted, original, book = _fix_notebook_syntax(display, path, original, book, linted,
                                                      disabled, opts, outcome, piped)
        result = linted.result
    if (opts.fix or opts.diff) and result.module is not None and any(
            applicable(f, opts.unsafe_fixes) for f in linted.findings):
        linted = _fix_notebook(display, path, original, book, linted, disabled, opts, outcome,
                               piped)
    outcome.findings = _without_nodes(linted.findings)
    # lines of the joined cells, as the runtime pass builds them (`read_notebook_file`)
    outcome.classes = linted.result.classes
    if key is not None and opts.cache is not None and not linted.result.tracebacks:
        opts.cache.put(key, outcome.findings, linted.result.classes)
    return outcome


def _fix_notebook(display, path, original, book, linted, disabled, opts, outcome, piped):
    """Apply the fixes to the joined cells, round after round, then splice the changed cell
    sources into the notebook's text; the linting of what was written is returned."""
    from modellint.fix import NotebookCells, fix_rounds

    cells = NotebookCells(opts.linter(), display, book, linted.result, disabled)
    fixing = fix_rounds(cells, linted.result, opts.unsafe_fixes)
    outcome.tracebacks.extend(fixing.tracebacks)
    outcome.messages.extend(fixing.messages)
    if not fixing.fixed:
        return linted
    sources = cells.splice(fixing.text)
    if sources is None:
        outcome.messages.append(f"{display}: the fixes moved code across cells; "
                                "notebook left unchanged")
        return linted
    return _write_cells(display, path, original, book, sources, fixing.fixed, linted, disabled,
                        opts, outcome, piped)[0]


def _fix_notebook_syntax(display, path, original, book, linted, disabled, opts, outcome, piped):
    """Apply the text edits of the syntax errors in the notebook's cells (`Fix.edits`, in
    lines of the cell): (the linting of what was written, its bytes, its notebook), or what
    was given when nothing was written."""
    from modellint.fix import cell_text_fixes

    sources, fixed = cell_text_fixes(book, linted.findings, opts.unsafe_fixes)
    if not fixed:
        return linted, original, book
    return _write_cells(display, path, original, book, sources, fixed, linted, disabled, opts,
                        outcome, piped)


def _write_cells(display, path, original, book, sources, fixed, linted, disabled, opts,
                 outcome, piped):
    """Write the notebook with the cells of `sources` changed by `fixed` fixes (or show the
    diff): (the linting of what was written, its bytes, its notebook), or `linted`, `original`
    and `book` when nothing was written."""
    from modellint.fix import WriteError, unified_diff, write_atomically

    unchanged = linted, original, book
    new_bytes = book.with_sources(sources).encode("utf-8")
    try:
        # read back what would be written: it must be a notebook with exactly those sources
        again = notebook.read_notebook(new_bytes, opts.max_code_bytes)
        if {c.number: c.source for c in again.cells if c.number in sources} != sources:
            raise notebook.NotebookError("the cell sources did not survive writing")
    except notebook.NotebookError as exc:
        outcome.messages.append(f"{display}: writing the fixes would not give a valid notebook "
                                f"({exc}); notebook left unchanged")
        return unchanged
    if opts.diff:
        outcome.diff += "".join(
            unified_diff(f"{display}:cell {number}", _ended(book.cell(number).source),
                         _ended(source))
            for number, source in sources.items() if source != book.cell(number).source)
        outcome.would_fix += fixed
        return unchanged
    try:
        if piped:
            outcome.fixed_source = new_bytes
        else:
            write_atomically(path, new_bytes, original, opts.tree)
    except WriteError as exc:
        outcome.messages.append(str(exc))
        return unchanged
    outcome.fixed += fixed
    return opts.linter().lint_notebook(display, again, disabled), new_bytes, again


def _ended(cell_source: str) -> str:
    """A cell's source for a diff: Jupyter leaves the last line without a line break."""
    return cell_source if cell_source.endswith(("\n", "\r")) or not cell_source else \
        cell_source + "\n"


def _decode(data: bytes, encoding: str) -> str:
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def _worker(connection, opts: StaticOptions) -> None:
    """A worker process: lints each (index, display, path, disabled) it receives and sends
    back (index, outcome), until it receives None."""
    # Ctrl-C is the parent's to handle: it stops the workers without a traceback from each
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        task = connection.recv()
        if task is None:
            return
        index, display, path, disabled = task
        connection.send((index, lint_file(display, Path(path), disabled, opts)))


def _died(display: str, exitcode: int | None) -> FileOutcome:
    from modellint.static.engine import INTERNAL_ERROR

    if exitcode is not None and exitcode < 0:
        try:
            how = f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"was killed by signal {-exitcode}"
    else:
        how = f"exited with status {exitcode}"
    outcome = FileOutcome(path=display)
    outcome.findings.append(_file_finding(
        INTERNAL_ERROR, display,
        f"the worker process linting this file {how}; it was not linted"))
    return outcome


def run(
    tasks: list[tuple[str, Path, frozenset[str]]], opts: StaticOptions
) -> list[FileOutcome]:
    with fewer_collections():
        return _run_all(tasks, opts)


def _run_all(
    tasks: list[tuple[str, Path, frozenset[str]]], opts: StaticOptions
) -> list[FileOutcome]:
    looks_up = opts.cache is not None and not (opts.fix or opts.diff)
    if opts.index is None and opts.has_rules() and opts.needs_index(tasks):
        from modellint.static.facts_cache import CachedDigests, project_order, read_snapshot

        files = project_order([*[(display, path) for display, path, _ in tasks], *opts.project])
        linted = [display for display, _, _ in tasks]
        snapshot = read_snapshot(files, opts.cache)
        # a rerun looks its files up by their digests alone: the index proper is made (and
        # imported) only when one of them must be linted
        opts.index = CachedDigests.of(files, opts.cache, linted, opts.max_code_bytes,
                                      snapshot, _new_index) if looks_up else None
        if opts.index is None:
            from modellint.static.index import index_files

            opts.index = index_files(files, opts.cache, opts.jobs, linted=linted,
                                     max_code_bytes=opts.max_code_bytes, snapshot=snapshot)
    cached = _CachedRun(tasks, opts) if looks_up else None
    outcomes: list[FileOutcome | None] = (
        cached.outcomes if cached is not None else [None] * len(tasks))
    missed = [number for number, outcome in enumerate(outcomes) if outcome is None]
    fresh: list[FileOutcome | None] = [None] * len(missed)
    try:
        if missed:
            from modellint.static.facts_cache import CachedDigests

            if isinstance(opts.index, CachedDigests):  # the lint reads facts
                opts.index = opts.index.index()
            # before the workers are forked, so that they share what the rules imported
            opts.static_rules(None if opts.fix or opts.diff else _texts(
                [tasks[n][1] for n in missed]))
            if cached is not None and cached.several:
                opts = replace(opts, outcomes_kept_by_run=True)
            _run([tasks[n] for n in missed], opts, fresh)
    finally:
        for number, outcome in zip(missed, fresh, strict=True):
            outcomes[number] = outcome
        if cached is not None:
            cached.keep(outcomes)  # an interrupted run's too: what it finished
    return outcomes  # type: ignore[return-value]


def _texts(paths: list[Path]) -> Iterator[str] | None:
    """The texts of the Python files `paths`, as the lint decodes them (one that cannot be read
    or decoded is not linted by the rules); None when one is a notebook (its JSON is not the
    text of its cells)."""
    if not all(str(path).endswith((".py", ".pyi")) for path in paths):
        return None

    def read() -> Iterator[str]:
        for path in paths:
            try:
                yield decode(read_file_bytes(path, MAX_FILE_BYTES))[0]
            except (OSError, DecodeError):
                continue

    return read()


class _CachedRun:
    """The outcomes of a run's files that the cache holds: read here, so that a warm run
    starts no worker and imports no rule. A run of several files keeps every file's outcome,
    beside the file's key, in one entry (`Cache.put_run`) named by the files of the project
    (those of the run and the others the index reads: a run on some of a project's files
    shares it with a run on all of them). A file is found there when its key is the one kept,
    else in its own entry, which a run on one file keeps (and looks up first)."""

    def __init__(self, tasks: list[tuple[str, Path, frozenset[str]]],
                 opts: StaticOptions) -> None:
        assert opts.cache is not None
        self.cache = opts.cache
        self.tasks = tasks
        self.keys = [_cache_key(display, path, disabled, opts)
                     for display, path, disabled in tasks]
        self.several = len(tasks) > 1
        self.run_key = (_run_key(tasks, opts.project) if self.several or opts.project
                        else None)
        self._stored: RunOutcomes | None = None
        self.from_entry = 0
        self.outcomes: list[FileOutcome | None] = [None] * len(tasks)
        for number, found in enumerate(self.keys):
            if found is None:
                continue
            key, is_book = found
            entry = self._find(tasks[number][0], key)
            if entry is not None:
                outcome = self.outcomes[number] = FileOutcome(tasks[number][0], notebook=is_book)
                outcome.findings, outcome.classes = entry

    def stored(self) -> RunOutcomes:
        if self._stored is None:
            assert self.run_key is not None
            self._stored = self.cache.get_run(self.run_key)
            if self.several:
                self._stored.items()  # each file looked up in it
        return self._stored

    def _find(self, display: str, key: str) -> Outcome | None:
        """The file's outcome: a run on one file looks in the file's own entry first (a small
        read), a run of several in the run's entry first."""
        if not self.several:
            own = self.cache.get(key)
            if own is not None:
                return own
        if self.run_key is not None:
            kept = self.stored().get(display)
            if kept is not None and kept[0] == key:
                self.from_entry += 1
                return kept[1]
        return self.cache.get(key) if self.several else None

    def keep(self, outcomes: list[FileOutcome | None]) -> None:
        """Keep the outcomes of a run of several files in its entry, with those the entry
        holds of the project's other files, unless every one came from it. A file whose lint
        failed is left out: linted again next time."""
        if not self.several or self.from_entry == len(self.tasks):
            return
        kept = dict(self.stored().items())
        linted = {}
        for (display, _, _), found, outcome in zip(self.tasks, self.keys, outcomes, strict=True):
            kept.pop(display, None)
            if found is not None and outcome is not None and not outcome.tracebacks:
                linted[display] = (found[0], (outcome.findings, outcome.classes))
        assert self.run_key is not None
        self.cache.put_run(self.run_key, kept.values(), linted)


def _run_key(tasks: list[tuple[str, Path, frozenset[str]]],
             project: Sequence[tuple[str, Path]]) -> str:
    """The key of the entry of the outcomes of a run of several files (`_CachedRun`): the
    display paths of the files it lints and of the project's others."""
    digest = hashlib.sha256(b"run-outcomes\0")
    for display in sorted({display for display, _, _ in tasks}.union(
            display for display, _ in project)):
        digest.update(display.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


def _new_index() -> Any:
    from modellint.static.index import ProjectIndex

    return ProjectIndex()


def index_with_source(display: str, data: bytes, opts: StaticOptions) -> Any:
    """The project index for a lint of `data`, the text of the file `display` read from
    standard input (an editor's unsaved buffer): the project's other files as they are on
    disk, and this text in place of the file's."""
    from modellint.static.index import index_files

    index = index_files(opts.project, opts.cache, opts.jobs,
                        max_code_bytes=opts.max_code_bytes)
    index.add_source(display, data, opts.max_code_bytes)
    return index


def _cache_key(display: str, path: Path, disabled: frozenset[str],
               opts: StaticOptions) -> tuple[str, bool] | None:
    """(the cache key of a file's outcome, whether it is a notebook), or None when it cannot
    be read (`lint_file` reports that)."""
    assert opts.cache is not None
    content = opts.index.contents.get(display) if opts.index is not None else None
    if content is not None and str(path).endswith(SUFFIXES):
        # the index read it a moment ago: its hash is enough to look it up (a Python file's
        # name says it is no notebook)
        return opts.cache.file_key(display, None, disabled, opts.index.digest(display),
                                   content=content), False
    try:
        original = read_file_bytes(path, notebook.MAX_BYTES if str(path).endswith(
            notebook.SUFFIX) else MAX_FILE_BYTES)
    except OSError:
        return None
    return _file_key(display, original, disabled, opts), notebook.is_notebook(path, original)


def _file_key(display: str, original: bytes, disabled: frozenset[str],
              opts: StaticOptions) -> str:
    assert opts.cache is not None
    # the facts of the project files it imports (and that import it) decide its findings too
    return opts.cache.file_key(display, original, disabled,
                               opts.index.digest(display) if opts.index is not None else "")


def _run(tasks: list[tuple[str, Path, frozenset[str]]], opts: StaticOptions,
         outcomes: list[FileOutcome | None]) -> None:
    """Lint `tasks`, each outcome into `outcomes` (of their order) as it comes."""
    jobs = max(1, min(opts.jobs, len(tasks)))
    if jobs == 1 or len(tasks) < 4:
        for number, (display, path, disabled) in enumerate(tasks):
            outcomes[number] = lint_file(display, path, disabled, opts)
        return
    import multiprocessing
    from multiprocessing.connection import Connection, wait

    # largest files first, so that no worker is left with a big file at the end while the
    # others idle; results go back into the order of `tasks`
    order = sorted(range(len(tasks)), key=lambda i: -file_size(tasks[i][1]))
    pending = [(i, tasks[i][0], str(tasks[i][1]), tasks[i][2]) for i in reversed(order)]
    # fork shares the loaded plugins with the workers; spawn would re-import them
    context: multiprocessing.context.ForkContext | multiprocessing.context.SpawnContext = (
        multiprocessing.get_context("fork") if os.name == "posix"
        else multiprocessing.get_context("spawn"))
    # one file at a time per worker, so that a worker that dies (LibCST's parser can crash the
    # process) costs that file alone: it is reported and the worker replaced
    workers: dict[Any, tuple[Any, Any]] = {}  # connection -> (process, task it is on)

    def start() -> Any:
        ours, theirs = context.Pipe()
        process = context.Process(target=_worker, args=(theirs, opts), daemon=True)
        process.start()
        theirs.close()
        workers[ours] = (process, None)
        return ours

    def give(connection) -> None:
        process, _ = workers[connection]
        task = pending.pop() if pending else None
        workers[connection] = (process, task)
        try:
            connection.send(task)
        except OSError:  # it died before this send; noticed when its pipe closes
            pass

    finished = False
    try:
        for _ in range(jobs):
            give(start())
        while any(task is not None for _, task in workers.values()):
            for ready in wait(list(workers)):
                connection = cast(Connection, ready)  # the workers' pipes, nothing else
                process, task = workers[connection]
                try:
                    index, outcome = connection.recv()
                except Exception:  # noqa: BLE001 - EOF or a torn message: the worker died
                    # its file is reported, and a new worker takes the rest
                    process.join()
                    del workers[connection]
                    connection.close()
                    if task is not None:
                        outcomes[task[0]] = _died(task[1], process.exitcode)
                    if pending:
                        give(start())
                    continue
                outcomes[index] = outcome
                give(connection)
        finished = True
    finally:
        for connection, (process, _) in workers.items():
            connection.close()
            # after the last file each worker was told to stop; otherwise (interrupted) stop it
            if finished:
                process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
