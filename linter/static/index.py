"""The project index: the facts of every file of the run (`modellint.static.facts`, read
with CPython's `ast`, never imported) and how the files import each other.

`ProjectIndex` holds the facts of every file of the run, resolves `from models import Net` to
the project's own file, knows which files a file's findings depend on (its cache key), and
evaluates summaries to Kinds (`modellint.static.evaluate`, the half it derives from). What it
cannot know is None. `index_files` makes the index of a run's files (their facts from the
cache, `modellint.static.facts_cache`), `build` that of texts.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from modellint.config import DEFAULT_MAX_CODE_BYTES
from modellint.static.evaluate import PARAM_DEPTH, Evaluation
from modellint.static.facts import extract
from modellint.static.facts_cache import (
    CachedDigests,
    Snapshot,
    facts_digest,
    facts_of_bytes,
    fill_index,
    notebook_facts,
    project_order,
    read_snapshot,
    text_hash,
)
from modellint.static.facts_version import FACTS_VERSION
from modellint.static.outline import Outline


@functools.lru_cache(maxsize=65536)
def module_name(path: str) -> str:
    """`pkg/models/net.py` -> `pkg.models.net`; `pkg/__init__.py` -> `pkg`."""
    parts = [p for p in re.split(r"[\\/]+", path) if p and p != "."]
    if parts and parts[-1].endswith((".py", ".pyi")):
        parts[-1] = parts[-1].rsplit(".", 1)[0]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# -- the index --------------------------------------------------------------------------------


class _Files(Mapping):
    """`ProjectIndex.files` while some files' facts are not parsed yet."""

    def __init__(self, index: ProjectIndex) -> None:
        self._index = index

    def __getitem__(self, path: str) -> dict:
        found = self._index._facts_of(path)
        if found is None:
            raise KeyError(path)
        return found

    def __contains__(self, path: object) -> bool:
        return path in self._index._files or path in self._index._pending

    def __iter__(self):
        yield from list(self._index._files)
        yield from list(self._index._pending)

    def __len__(self) -> int:
        return len(self._index._files) + len(self._index._pending)


class ProjectIndex(Evaluation):
    def __init__(self, files: dict[str, dict] | None = None) -> None:
        super().__init__()
        # path -> facts (see `files`)
        self._files: dict[str, dict] = {}
        # reads the facts on first use, for an index whose digests came from the cache
        self._loader: Callable[[], None] | None = None
        # dotted module name (and each of its suffixes, when unambiguous) -> path
        self._modules: dict[str, str] = {}
        self._ambiguous: set[str] = set()
        self._digests: dict[str, str] = {}
        self._fact_digests: dict[str, str] = {}
        self._direct: dict[str, list[str]] = {}
        # absolute module name -> the project file it names (`_import_target`): the files of
        # a project import the same modules over and over
        self._targets: dict[str, str | None] = {}
        # (path, dotted name) -> what it stands for (`resolve`): rules and the evaluation ask
        # for the same names of the same files throughout a run
        self._resolved: dict[tuple[str, str], tuple[str, str, str] | None] = {}
        # path -> every file it imports, transitively (`_closure`)
        self._closures: dict[str, frozenset[str]] = {}
        self._importers: dict[str, list[str]] | None = None
        self._callers: dict[tuple[str, str], list] | None = None
        # path -> text_hash of the text its facts were read from, when known
        self._hashes: dict[str, str] = {}
        # path -> sha256 of the file's bytes as the run read them for the index
        self.contents: dict[str, str] = {}
        # path -> (sha256 of the bytes parsed, their outline) of linted files the index parsed
        self.outlines: dict[str, tuple[bytes, Outline]] = {}
        # files whose facts are parsed on first use (`add_summary`): path -> (summary, loader)
        self._pending: dict[str, tuple[dict, Callable[[], dict]]] = {}
        # gives display -> (sha256 of the bytes, imports) of the files whose cached summary
        # came without their imports (`facts_cache.fill_index`); read on first need
        self.imports_of_unchanged: Callable[[], dict[str, tuple[str, dict]]] | None = None
        self._unchanged_imports: dict[str, tuple[str, dict]] | None = None
        for path, facts in (files or {}).items():
            self.add(path, facts)

    def _load(self) -> None:
        if self._loader is not None:
            loader, self._loader = self._loader, None
            digests = dict(self._digests)
            loader()
            self._digests.update(digests)

    @property
    def files(self) -> Mapping[str, dict]:
        """Path -> facts of every file of the run (a file's facts are parsed when first
        looked up: most lints need those of a few files)."""
        self._load()
        return _Files(self) if self._pending else self._files

    def add_source(self, path: str, data: bytes,
                   max_code_bytes: int = DEFAULT_MAX_CODE_BYTES) -> None:
        """The facts of the file at `path` from `data`, its content as the run has it (read
        from standard input), in place of the file's on disk."""
        read = facts_of_bytes(path, data, max_code_bytes)
        if read is not None:
            self.add(path, read[0], text_hash(read[1]))

    def add_notebook(self, path: str, book: Any) -> None:
        """The facts of the notebook at `path` from its cells as the editor has them (a
        `modellint.static.notebook.Notebook`)."""
        self.add(path, notebook_facts(book), text_hash(book.source))

    def outline(self, path: str, data: bytes) -> Outline | None:
        """The outline of CPython's parse of `data`, when the index parsed these very bytes
        for the file at `path` (else its lint parses them)."""
        found = self.outlines.get(path)
        if found is None or found[0] != hashlib.sha256(data).digest():
            return None
        return found[1]

    @property
    def hashes(self) -> dict[str, str]:
        self._load()
        return self._hashes

    def copy(self) -> ProjectIndex:
        other = ProjectIndex(dict(self.files))
        other._hashes = dict(self.hashes)
        return other

    def add_summary(self, path: str, summary: dict, load: Callable[[], dict]) -> None:
        """A file known by its summary (`summary_of`): its imports (or not: `imports_of` reads
        them when asked), the digest of its facts and of its text; `load()` gives its facts
        when a rule looks them up."""
        self.add(path, {"imports": summary.get("imports", {}), "notebook": summary["notebook"]},
                 summary["text"])
        del self._files[path]
        self._pending[path] = (summary, load)
        self._fact_digests[path] = summary["digest"]

    def _facts_of(self, path: str) -> dict | None:
        found = self._files.get(path)
        if found is None and path in self._pending:
            _, load = self._pending.pop(path)
            found = self._files[path] = load()
        return found

    def imports_of(self, path: str) -> dict | None:
        """A file's imports, without parsing its facts: from its summary, or the project's
        imports entry when the summary came without them."""
        pending = self._pending.get(path)
        if pending is not None and "imports" in pending[0]:
            return pending[0]["imports"]
        if pending is not None:
            if self._unchanged_imports is None:
                load = self.imports_of_unchanged
                self._unchanged_imports = load() if load is not None else {}
            stored = self._unchanged_imports.get(path)
            if stored is not None and stored[0] == self.contents.get(path):
                return stored[1]
            return self._facts_of(path)["imports"]  # type: ignore[index]
        facts = self._files.get(path)
        return facts["imports"] if facts is not None else None

    def add(self, path: str, facts: dict, text_digest: str | None = None) -> None:
        """The facts of the file at `path`; a notebook's (`facts["notebook"]`, or a path
        ending in .ipynb) are no module's: nothing imports a notebook's definitions."""
        self._files[path] = facts
        self._pending.pop(path, None)
        self._importers = self._callers = None
        self._fact_digests.pop(path, None)
        if text_digest is not None:
            self._hashes[path] = text_digest
        self._memo.clear()
        self._locals.clear()
        self._digests.clear()
        self._direct.clear()
        self._targets.clear()
        self._resolved.clear()
        self._closures.clear()
        if facts.get("notebook") or path.endswith(".ipynb"):
            return
        parts = module_name(path).split(".")
        for start in range(len(parts)):
            name = ".".join(parts[start:])
            if not name:
                continue
            other = self._modules.get(name)
            if other is not None and other != path:
                if start == 0:
                    self._modules[name] = path  # a full name wins over a suffix
                else:
                    self._ambiguous.add(name)
            else:
                self._modules[name] = path

    def module_file(self, name: str) -> str | None:
        path = self._modules.get(name)
        if path is None or (name in self._ambiguous and module_name(path) != name):
            return None
        return path

    # -- what a file depends on ---------------------------------------------------------
    def dependencies(self, path: str) -> list[str]:
        """The project files whose facts `path`'s findings may depend on: those it imports,
        and theirs, transitively (itself excluded)."""
        return sorted(self._closure(path) - {path})

    def _closure(self, path: str) -> frozenset[str]:
        """Every project file `path` imports, transitively (itself too when it is in an
        import cycle): computed once per strongly connected group of files (Tarjan), each
        group's from those of the groups it imports."""
        found = self._closures.get(path)
        if found is not None:
            return found
        closures = self._closures
        number: dict[str, int] = {path: 0}
        low = {path: 0}
        stack, on_stack = [path], {path}
        work = [(path, iter(self._imported(path)))]
        while work:
            node, children = work[-1]
            for child in children:
                if child in closures:
                    continue
                if child not in number:
                    number[child] = low[child] = len(number)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(self._imported(child))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], number[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == number[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    group = set(members)
                    reached: set[str] = set()
                    for member in members:
                        for target in self._imported(member):
                            reached.add(target)
                            if target not in group:
                                reached |= closures[target]
                    frozen = frozenset(reached)
                    for member in members:
                        closures[member] = frozen
        return closures[path]

    def _imported(self, path: str) -> list[str]:
        """The project files `path` imports directly (computed once per file)."""
        found = self._direct.get(path)
        if found is None:
            self._load()
            imports = self.imports_of(path)
            targets = set()
            for qualified in (imports.values() if imports is not None else ()):
                target = self._import_target(path, qualified)
                if target is not None and target != path:
                    targets.add(target)
            found = self._direct[path] = sorted(targets)
        return found

    def known_imports(self, direct: Mapping[str, list[str]]) -> None:
        """The project files that files import directly, as a run on the same files found
        them (`direct_imports`): not resolved again."""
        for path, targets in direct.items():
            if all(isinstance(target, str) and (target in self._files or target in self._pending)
                   for target in targets):
                self._direct[path] = targets

    def direct_imports(self) -> dict[str, list[str]]:
        """The project files each file imports directly, where this run resolved them."""
        return dict(self._direct)

    def importers(self, path: str) -> list[str]:
        """The project files that import `path` directly (their call sites of its functions
        are facts of its findings)."""
        if self._importers is None:
            found: dict[str, set[str]] = {}
            for other in self.files:
                for target in self._imported(other):
                    found.setdefault(target, set()).add(other)
            self._importers = {key: sorted(value) for key, value in found.items()}
        return self._importers.get(path, [])

    def callers(self, path: str, function: str) -> list[tuple[str, dict, list]]:
        """Every call of the project function `function` of `path` that passes plain names:
        (caller's file, the caller's mode facts (`evals`, `trains`, `calls`), the names passed
        by position). Calls from the caller's own file and from the files that import it."""
        if self._callers is None:
            self._callers = {}
            for caller_path, facts in self.files.items():
                bodies = [facts.get("script")]
                bodies += list(facts["functions"].values())
                bodies += [m for c in facts["classes"].values() for m in c["methods"].values()]
                for body in bodies:
                    for callee, args in (body or {}).get("calls", ()):
                        found = self.resolve(caller_path, callee)
                        if found is not None and found[0] == "function":
                            self._callers.setdefault((found[1], found[2]), []).append(
                                (caller_path, body, args))
        return self._callers.get((path, function), [])

    def digest(self, path: str) -> str:
        """A hash of the facts of every file `path` depends on (those it imports, and those
        that import it: call sites): part of its cache key."""
        found = self._digests.get(path)
        if found is None:
            # one hash of one joined text: a file's dependencies can be most of the project
            parts = [f"facts={FACTS_VERSION}"]
            for dependency in sorted(self._related(path)):
                parts.append(dependency)
                parts.append(self._facts_digest(dependency))
            found = self._digests[path] = hashlib.sha256(
                "\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()
        return found

    def _related(self, path: str) -> set[str]:
        """The files whose facts `path`'s findings may depend on: those it imports, and those
        that import it (their call sites of its functions), theirs, `PARAM_DEPTH` importers
        up, with what each of them imports (what they pass)."""
        related = set(self.dependencies(path))
        frontier = {path}
        for _ in range(PARAM_DEPTH):
            frontier = {i for f in frontier for i in self.importers(f)} - related - {path}
            if not frontier:
                break
            for importer in frontier:
                related.add(importer)
                related |= self._closure(importer)
        related.discard(path)
        return related

    def _facts_digest(self, path: str) -> str:
        """A hash of one file's facts, computed once."""
        found = self._fact_digests.get(path)
        if found is None:
            found = self._fact_digests[path] = facts_digest(self.files[path])
        return found

    def _absolute(self, path: str, qualified: str) -> str:
        """A relative import (`..models.Net`) made absolute from the file's package."""
        if not qualified.startswith("."):
            return qualified
        level = len(qualified) - len(qualified.lstrip("."))
        package = module_name(path).split(".")
        if not path.replace("\\", "/").endswith("__init__.py"):
            package = package[:-1]
        if level - 1 > len(package):
            return qualified.lstrip(".")
        base = package[: len(package) - (level - 1)]
        rest = qualified[level:]
        return ".".join([*base, rest]) if rest else ".".join(base)

    def _import_target(self, path: str, qualified: str) -> str | None:
        """The project file an import names (the module itself or the module of a name)."""
        absolute = self._absolute(path, qualified)
        if absolute in self._targets:
            return self._targets[absolute]
        parts = absolute.split(".")
        found = None
        for end in range(len(parts), 0, -1):
            found = self.module_file(".".join(parts[:end]))
            if found is not None:
                break
        self._targets[absolute] = found
        return found

    # -- resolving names ----------------------------------------------------------------
    def resolve(self, path: str, dotted: str, depth: int = 0) -> tuple[str, str, str] | None:
        """What a module-level dotted name of `path` stands for: ("torch", qualified, "") for
        an outside name, ("class"|"function"|"global", file, name + rest) for the project's."""
        if depth:
            return self._resolve(path, dotted, depth)
        key = (path, dotted)
        try:
            return self._resolved[key]
        except KeyError:
            found = self._resolved[key] = self._resolve(path, dotted, 0)
            return found

    def _resolve(self, path: str, dotted: str, depth: int) -> tuple[str, str, str] | None:
        facts = self.files.get(path)
        if facts is None or depth > 10:
            return None
        head, _, rest = dotted.partition(".")
        for table, what in (("classes", "class"), ("functions", "function")):
            if head in facts[table]:
                return (what, path, dotted)
        if head in facts["globals"]:
            return ("global", path, dotted)
        qualified = facts["imports"].get(head)
        if qualified is None:
            return None
        qualified = self._absolute(path, qualified)
        full = f"{qualified}.{rest}" if rest else qualified
        return self.resolve_qualified(full, depth + 1)

    def resolve_qualified(self, qualified: str, depth: int = 0):
        parts = qualified.split(".")
        for end in range(len(parts) - 1, 0, -1):
            target = self.module_file(".".join(parts[:end]))
            if target is not None:
                return self.resolve(target, ".".join(parts[end:]), depth + 1)
        from modellint.static.imports import canonical  # imports LibCST: not at startup

        return ("torch", canonical(qualified), "")


def index_files(files: Iterable[tuple[str, Any]], cache: Any = None,
                jobs: int = 1, linted: Collection[str] = (),
                max_code_bytes: int = DEFAULT_MAX_CODE_BYTES,
                snapshot: Snapshot | None = None) -> ProjectIndex:
    """The index of the files of a run: (display path, path on disk) pairs, read by `jobs`
    processes (forked, on POSIX) when there are many. For the `linted` ones (display paths)
    that it parses, the index keeps their outline for their lint (`ProjectIndex.outline`).
    A file holding more than `max_code_bytes` of code is not parsed (nor in the index).

    A rerun on unchanged files needs only each file's digest (its cache key): those are kept
    in one cache entry keyed by every file's path and bytes, and the facts are then read only
    when a rule asks for them (a file that missed the cache). `snapshot`: what
    `read_snapshot` read of them, when the caller did (`project_order`)."""
    files = project_order(files)
    read = snapshot if snapshot is not None else read_snapshot(files, cache)
    cached = CachedDigests.of(files, cache, linted, max_code_bytes, read, ProjectIndex)
    if cached is not None:
        return cached.index()
    snapshot_name, contents, known = read
    index = ProjectIndex()
    index.contents = contents
    fill_index(index, files, cache, jobs, linted, max_code_bytes)
    if snapshot_name is not None:
        # the digests of the files linted (their cache keys), with those a run on other files
        # of the same bytes found
        cache.put_facts(snapshot_name, {"digests": {
            **(known or {}), **{path: index.digest(path) for path in linted if path in index.files}}})
    return index


def build(files: Iterable[tuple[str, str]]) -> ProjectIndex:
    """The index of (path, text) pairs."""
    index = ProjectIndex()
    for path, text in files:
        index.add(path, extract(text), text_hash(text))
    return index
