"""The cases of bench/bugs: load and check each case.toml, and write each case's code into a cache.

    python bench/bugs_cases.py fetch [--mirror DIR] [--only ID]  # needs git (the network without --mirror)
    python bench/bugs_cases.py check                             # offline: every case against the cache

A case commits only its `case.toml`; its `[code]` table says where the code is (bench/bugs/README.md):
files of a public repository at pinned commits, or a snippet quoted in a spreadsheet of a public
repository. `fetch` reads them from git and writes every case, as a scorer reads it, into the cache
folder `$MODELLINT_BUGS_DIR` (default `~/.cache/modellint-bugs`):

    <cache>/cases/<id>/case.toml     the committed case.toml, as is
    <cache>/cases/<id>/buggy/<files>
    <cache>/cases/<id>/fixed/<files> absent when the case has no fixed twin

With `--mirror DIR` it reads the commits from bare repositories `DIR/<owner>+<name>/repo` (or
`DIR/<owner>+<name>`) instead of cloning them into `<cache>/.git/`. Nothing read is ever run: file
names from the repositories and the cases are data (a name that leaves the case folder, an absolute
name, a link or a submodule is refused). `check` validates every case.toml and its materialized
files (each mistake's line inside its file) and prints the counts.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import difflib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any
from xml.etree import ElementTree

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "bugs" / "cases"
CLASSES_FILE = HERE / "bugs" / "classes.toml"
CASE_ID = re.compile(r"[a-z0-9][a-z0-9.-]*")
SHA = re.compile(r"[0-9a-f]{40}")
PASSES = ("static", "runtime", "run")
SOURCE_KINDS = ("fix-commit", "issue", "pull-request", "qa", "forum", "dataset", "repository")
KINDS = ("bug", "good")
SOURCE_KEYS = ("kind", "url", "repo", "commit", "fix_commit", "licence", "found_by", "confirmed_by")
CASE_KEYS = ("id", "title", "class", "expected", "pass", "kind", "source", "code")


def _precision():
    """bench/precision.py, whose git helpers fetch pinned commits for both benchmarks."""
    if "precision" not in sys.modules:
        spec = importlib.util.spec_from_file_location("precision", HERE / "precision.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["precision"] = module
        spec.loader.exec_module(module)
    return sys.modules["precision"]


class CaseError(ValueError):
    """A case.toml that is malformed, or code that cannot be materialized; the message says which."""


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    folder: Path  # bench/bugs/cases/<id>
    data: dict[str, Any]  # the parsed case.toml

    @property
    def code(self) -> dict[str, Any]:
        return self.data["code"]

    @property
    def source(self) -> dict[str, Any]:
        return self.data["source"]

    def repositories(self) -> list[tuple[str, str]]:
        """(owner/name, commit) of every commit the case's code comes from."""
        code = self.code
        if "snippet" in code:
            return [(code["snippet"]["repo"], code["snippet"]["commit"])]
        repo, commit, fix = code_origin(self)
        return [(repo, commit)] + ([(repo, fix)] if fix else [])


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "modellint-bugs"
    return Path(os.environ.get("MODELLINT_BUGS_DIR") or default)


# ------------------------------------------------------------------------------------ loading

def safe_name(name: object, what: str) -> str:
    """`name` when it is a plain relative POSIX path that stays inside its folder."""
    if not isinstance(name, str) or not name:
        raise CaseError(f"{what}: a file name must be a non-empty string, not {name!r}")
    path = PurePosixPath(name)
    if ("\\" in name or "\0" in name or path.is_absolute() or name.startswith("/")
            or any(part in ("", ".", "..") for part in name.split("/"))):
        raise CaseError(f"{what}: {name!r} is not a plain relative path inside the case "
                        "(no '..', no absolute path, no empty or '.' part)")
    return name


def _spans(value: object, what: str) -> list[tuple[int, int]]:
    """An excerpt: [first, last] or [[first, last], ...], lines of the buggy file, 1-based."""
    if (isinstance(value, list) and len(value) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in value)):
        value = [value]
    spans: list[tuple[int, int]] = []
    for span in value if isinstance(value, list) else [None]:
        if not (isinstance(span, list) and len(span) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) for n in span)
                and 1 <= span[0] <= span[1]):
            raise CaseError(f"{what}: an excerpt is [first, last] or a list of them, "
                            f"1 <= first <= last, not {value!r}")
        if spans and span[0] <= spans[-1][1]:
            raise CaseError(f"{what}: excerpt spans must be in order and not overlap: {value!r}")
        spans.append((span[0], span[1]))
    return spans


def code_origin(case: Case) -> tuple[str, str, str]:
    """(repository, buggy commit, fixed commit or "") of a case made of repository files."""
    code, source = case.code, case.source
    repo = code.get("repo", source["repo"])
    commit = code.get("commit", source["commit"])
    fix = code.get("fix_commit", source["fix_commit"]) if code.get("fixed", True) else ""
    return repo, commit, fix


def output_names(case: Case) -> list[str]:
    """The buggy/ (and fixed/) relative names the case's code is written to."""
    code = case.code
    if "snippet" in code:
        return [code.get("file", "train.py")]
    if code.get("flat"):
        return [PurePosixPath(name).name for name in code["files"]]
    return list(code["files"])


def _check_edits(edits: object, what: str) -> None:
    if not isinstance(edits, list) or not all(
            isinstance(e, dict) and set(e) == {"old", "new"} and isinstance(e["old"], str)
            and e["old"] and isinstance(e["new"], str) for e in edits):
        raise CaseError(f"{what}: each edit is a table with a non-empty string `old` and a "
                        "string `new`, nothing else")


def _check_code(case: Case) -> None:
    code, where = case.code, f"{case.id}: [code]"
    if not isinstance(code, dict):
        raise CaseError(f"{where} must be a table")
    if ("files" in code) == ("snippet" in code):
        raise CaseError(f"{where} needs exactly one of `files` (repository files) and "
                        "`snippet` (a spreadsheet cell)")
    if "snippet" in code:
        snippet = code["snippet"]
        need = {"repo": str, "commit": str, "path": str, "sheet": str, "row": int, "column": str}
        if not isinstance(snippet, dict) or any(
                not isinstance(snippet.get(k), t) for k, t in need.items()):
            raise CaseError(f"{where}.snippet needs " + ", ".join(
                f"{k} ({t.__name__})" for k, t in need.items()))
        if not SHA.fullmatch(snippet["commit"]):
            raise CaseError(f"{where}.snippet.commit must be 40 hex digits")
        if not re.fullmatch(r"[A-Z]{1,3}", snippet["column"]) or snippet["row"] < 1:
            raise CaseError(f"{where}.snippet: column is letters (\"C\"), row a number from 1")
        safe_name(snippet["path"], f"{where}.snippet.path")
        safe_name(code.get("file", "train.py"), f"{where}.file")
        for key, kind in (("prelude", str), ("dedent", bool)):
            if key in code and not isinstance(code[key], kind):
                raise CaseError(f"{where}.{key} must be a {kind.__name__}")
        if code.get("prelude", "\n")[-1:] != "\n":
            raise CaseError(f"{where}.prelude must end with a newline")
        _check_edits(code.get("edit", []), f"{where}.edit")
        _check_edits(case.data.get("fixed", {}).get("edit", []), f"{case.id}: [[fixed.edit]]")
        return
    files = code["files"]
    if not isinstance(files, list) or not files:
        raise CaseError(f"{where}.files must be a non-empty list of paths in the repository")
    for name in files:
        safe_name(name, f"{where}.files")
    repo, commit, fix = code_origin(case)
    if not SHA.fullmatch(commit) or (fix and not SHA.fullmatch(fix)):
        raise CaseError(f"{case.id}: the buggy commit (and fix_commit unless \"\") must be 40 hex "
                        f"digits: {commit!r}, {fix!r}")
    fixed_files = code.get("fixed_files", files)
    if not isinstance(fixed_files, list) or len(fixed_files) != len(files):
        raise CaseError(f"{where}.fixed_files must list one path per file of `files` "
                        "(\"\" for a file with no fixed twin)")
    for name in fixed_files:
        if name != "":
            safe_name(name, f"{where}.fixed_files")
    names = output_names(case)
    if len(set(names)) != len(names):
        raise CaseError(f"{where}: two files would be written to the same name: {names}")
    excerpt = code.get("excerpt", {})
    if not isinstance(excerpt, dict) or any(path not in files for path in excerpt):
        raise CaseError(f"{where}.excerpt maps paths of `files` to [first, last] spans")
    for path, spans in excerpt.items():
        _spans(spans, f"{where}.excerpt[{path!r}]")
    fixed_excerpt = code.get("fixed_excerpt", {})
    if not isinstance(fixed_excerpt, dict) or any(path not in excerpt for path in fixed_excerpt):
        raise CaseError(f"{where}.fixed_excerpt maps paths of `excerpt` to the fixed file's spans")
    for path, spans in fixed_excerpt.items():
        _spans(spans, f"{where}.fixed_excerpt[{path!r}]")


def _check_case(case: Case, classes: dict[str, Any]) -> None:
    data = case.data
    # a known-good case holds no mistake, so it has no class (nor a code it expects)
    optional = ("class", "expected") if data.get("kind") == "good" else ()
    missing = [key for key in CASE_KEYS if key not in data and key not in optional]
    if missing:
        raise CaseError(f"{case.id}: case.toml lacks {', '.join(missing)}")
    if data["id"] != case.id or not CASE_ID.fullmatch(case.id):
        raise CaseError(f"{case.id}: id {data['id']!r} must be the folder's name, in kebab-case")
    if "class" in data and data["class"] not in classes:
        raise CaseError(f"{case.id}: class {data['class']!r} is not in bench/bugs/classes.toml")
    if "class" in data and data.get("expected") != classes[data["class"]].get("code", ""):
        raise CaseError(f"{case.id}: expected {data['expected']!r} but class {data['class']!r} "
                        f"has code {classes[data['class']].get('code', '')!r}")
    if data["pass"] not in PASSES or data["kind"] not in KINDS:
        raise CaseError(f"{case.id}: pass must be one of {PASSES} and kind one of {KINDS}")
    source = data["source"]
    if not isinstance(source, dict) or any(not isinstance(source.get(k), str) for k in SOURCE_KEYS):
        raise CaseError(f"{case.id}: [source] needs the strings {', '.join(SOURCE_KEYS)}")
    if source["kind"] not in SOURCE_KINDS:
        raise CaseError(f"{case.id}: source.kind {source['kind']!r} is not one of {SOURCE_KINDS}")
    _check_code(case)
    mistakes = data.get("mistake", [])
    if data["kind"] == "bug" and not mistakes:
        raise CaseError(f"{case.id}: a bug needs at least one [[mistake]]")
    names = output_names(case)
    for mistake in mistakes:
        if (not isinstance(mistake, dict) or mistake.get("file") not in names
                or not isinstance(mistake.get("line"), int) or mistake["line"] < 1):
            raise CaseError(f"{case.id}: each [[mistake]] needs `file`, one of {names}, and a "
                            f"`line` from 1: {mistake!r}")


def load_classes(path: Path = CLASSES_FILE) -> dict[str, Any]:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def load_cases(root: Path = CASES_DIR, problems: list[str] | None = None,
               classes: dict[str, Any] | None = None) -> list[Case]:
    """Every `<root>/<id>/case.toml`, validated. With `problems`, a bad case is skipped and its
    message appended; without, the first bad case raises CaseError."""
    classes = load_classes() if classes is None else classes
    cases = []
    for toml in sorted(Path(root).glob("*/case.toml")):
        try:
            with open(toml, "rb") as handle:
                data = tomllib.load(handle)
            case = Case(toml.parent.name, toml.parent, data)
            _check_case(case, classes)
        except (CaseError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            message = str(error) if isinstance(error, CaseError) else f"{toml}: {error}"
            if problems is None:
                raise CaseError(message) from None
            problems.append(message)
            continue
        cases.append(case)
    return cases


# ------------------------------------------------------------------------------------ reading

class Repository:
    """One repository's bare git directory: a mirror's, or a blob-less clone in the cache."""

    def __init__(self, name: str, cache: Path, mirror: Path | None):
        self.name, self.cache, self.mirror = name, cache, mirror
        self.git_dir: Path | None = None

    def _ensure(self, commit: str) -> Path:
        precision = _precision()
        git_dir = precision._git_dir(precision.Repo(self.name, commit, ()), self.mirror, self.cache)
        self.git_dir = git_dir
        return git_dir

    def git(self, commit: str, *args: str) -> bytes:
        """The output of a git command in the repository that holds `commit`."""
        return _precision()._git(self._ensure(commit), *args).stdout

    def read(self, commit: str, path: str) -> bytes:
        """The bytes of the regular file `path` at `commit` (a link or submodule is refused)."""
        git_dir = self._ensure(commit)
        listing = subprocess.run(["git", "--literal-pathspecs", f"--git-dir={git_dir}", "ls-tree",
                                  "-z", commit, "--",
                                  path], capture_output=True)
        if listing.returncode != 0:
            raise CaseError(f"{self.name}: commit {commit} is not in {git_dir}: "
                            f"{listing.stderr.decode(errors='replace').strip()}")
        entries = [e for e in listing.stdout.decode(errors="replace").split("\0") if e]
        if len(entries) != 1 or entries[0].split("\t", 1)[1] != path:
            raise CaseError(f"{self.name}@{commit[:12]}: no file {path!r}")
        mode, kind, blob = entries[0].split("\t", 1)[0].split()
        if kind != "blob" or mode not in ("100644", "100755"):
            raise CaseError(f"{self.name}@{commit[:12]}: {path!r} is not a regular file "
                            f"(mode {mode}): links and submodules are refused")
        return _precision()._git(git_dir, "cat-file", "blob", blob).stdout


def _column_row(ref: str) -> tuple[str, int]:
    match = re.fullmatch(r"([A-Z]+)(\d+)", ref)
    if not match:
        raise CaseError(f"a spreadsheet cell reference {ref!r} is not like C12")
    return match.group(1), int(match.group(2))


def xlsx_cell(data: bytes, sheet: str, column: str, row: int) -> str:
    """The text of one cell of an .xlsx (a zip of XML), read with the standard library only."""
    ns = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
          "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
          "p": "http://schemas.openxmlformats.org/package/2006/relationships"}
    try:
        book = zipfile.ZipFile(io.BytesIO(data))
        workbook = ElementTree.fromstring(book.read("xl/workbook.xml"))
        rels = ElementTree.fromstring(book.read("xl/_rels/workbook.xml.rels"))
        rel_id = next((s.get(f"{{{ns['r']}}}id") for s in workbook.iterfind("m:sheets/m:sheet", ns)
                       if s.get("name") == sheet), None)
        if rel_id is None:
            raise CaseError(f"the workbook has no sheet named {sheet!r}")
        target = next(r.get("Target", "") for r in rels.iterfind("p:Relationship", ns)
                      if r.get("Id") == rel_id)
        target = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
        shared = []
        if "xl/sharedStrings.xml" in book.namelist():
            strings = ElementTree.fromstring(book.read("xl/sharedStrings.xml"))
            shared = ["".join(t.text or "" for t in si.iter(f"{{{ns['m']}}}t"))
                      for si in strings.iterfind("m:si", ns)]
        worksheet = ElementTree.fromstring(book.read(target))
    except (zipfile.BadZipFile, KeyError, StopIteration, ElementTree.ParseError) as error:
        raise CaseError(f"not a readable .xlsx: {error}") from None
    for cell in worksheet.iterfind("m:sheetData/m:row/m:c", ns):
        if _column_row(cell.get("r", "")) != (column, row):
            continue
        kind = cell.get("t")
        if kind == "s":
            return shared[int(cell.findtext("m:v", "0", ns))]
        if kind == "inlineStr":
            return "".join(t.text or "" for t in cell.iter(f"{{{ns['m']}}}t"))
        return cell.findtext("m:v", "", ns)
    raise CaseError(f"sheet {sheet!r} has no cell {column}{row}")


def apply_edits(text: str, edits: list[dict[str, str]], what: str) -> str:
    """Each edit's `old` must occur exactly once in the text as it is when the edit comes."""
    for number, edit in enumerate(edits, 1):
        count = text.count(edit["old"])
        if count != 1:
            raise CaseError(f"{what} {number}: `old` occurs {count} times, not once: "
                            f"{edit['old'][:60]!r}")
        text = text.replace(edit["old"], edit["new"])
    return text


def snippet_code(case: Case, cell: str) -> tuple[str, str | None]:
    """The buggy file made from a quoted snippet, and its fixed twin (None without [[fixed.edit]]).

    The cell's line ends become \\n and its non-breaking spaces (left by the forum's HTML) plain
    spaces; then `dedent`, the `[[code.edit]]`s, blank lines trimmed at both ends, and the
    `prelude` and one blank line above it. The fixed twin applies `[[fixed.edit]]` to that file."""
    code = case.code
    text = cell.replace("\r\n", "\n").replace("\u00a0", " ")
    if code.get("dedent"):
        text = textwrap.dedent(text)
    text = apply_edits(text, code.get("edit", []), f"{case.id}: [[code.edit]]")
    text = text.strip("\n") + "\n"
    if code.get("prelude"):
        text = code["prelude"] + "\n" + text
    fixed_edits = case.data.get("fixed", {}).get("edit", [])
    fixed = apply_edits(text, fixed_edits, f"{case.id}: [[fixed.edit]]") if fixed_edits else None
    return text, fixed


def map_line(buggy: list[bytes], fixed: list[bytes], line: int) -> int:
    """The fixed file's line that stands for the buggy file's `line` (1-based), through the diff."""
    matcher = difflib.SequenceMatcher(None, buggy, fixed, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if i1 <= line - 1 < i2 or (tag == "insert" and i1 == line - 1):
            return j1 + min(line - 1 - i1, max(j2 - j1 - 1, 0)) + 1
    return len(fixed)


def lines_of(data: bytes) -> list[bytes]:
    """Lines with their ends, split as Python reads source (\\n, \\r\\n, \\r)."""
    return data.splitlines(keepends=True)


def cut(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    lines = lines_of(data)
    return b"".join(b"".join(lines[first - 1:last]) for first, last in spans)


def fixed_spans(buggy: bytes, fixed: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The excerpt's spans mapped into the fixed file: each end through the diff."""
    old = [line.rstrip(b"\r\n") for line in lines_of(buggy)]
    new = [line.rstrip(b"\r\n") for line in lines_of(fixed)]
    return [(map_line(old, new, first), map_line(old, new, last)) for first, last in spans]


def case_files(case: Case, cache: Path, mirror: Path | None) -> dict[str, dict[str, bytes]]:
    """{"buggy": {name: bytes}, "fixed": {...}} for a case (fixed empty when there is no twin)."""
    code = case.code
    out: dict[str, dict[str, bytes]] = {"buggy": {}, "fixed": {}}
    if "snippet" in code:
        snippet = code["snippet"]
        data = Repository(snippet["repo"], cache, mirror).read(snippet["commit"], snippet["path"])
        try:
            cell = xlsx_cell(data, snippet["sheet"], snippet["column"], snippet["row"])
        except CaseError as error:
            raise CaseError(f"{case.id}: {snippet['path']}: {error}") from None
        buggy_text, fixed_text = snippet_code(case, cell)
        name = code.get("file", "train.py")
        out["buggy"][name] = buggy_text.encode()
        if fixed_text is not None:
            out["fixed"][name] = fixed_text.encode()
        return out
    repo_name, commit, fix = code_origin(case)
    repo = Repository(repo_name, cache, mirror)
    excerpt = code.get("excerpt", {})
    for path, fixed_path, name in zip(code["files"], code.get("fixed_files", code["files"]),
                                      output_names(case), strict=True):
        buggy = repo.read(commit, path)
        fixed = repo.read(fix, fixed_path) if fix and fixed_path else None
        if path in excerpt:
            spans = _spans(excerpt[path], f"{case.id}: excerpt")
            if spans[-1][1] > len(lines_of(buggy)):
                raise CaseError(f"{case.id}: excerpt {spans} runs past the {len(lines_of(buggy))} "
                                f"lines of {path}")
            if fixed is not None and path in code.get("fixed_excerpt", {}):
                fixed = cut(fixed, _spans(code["fixed_excerpt"][path], f"{case.id}: fixed_excerpt"))
            elif fixed is not None:
                fixed = cut(fixed, fixed_spans(buggy, fixed, spans))
            buggy = cut(buggy, spans)
        out["buggy"][name] = buggy
        if fixed is not None:
            out["fixed"][name] = fixed
    return out


# ------------------------------------------------------------------------------------ writing

def materialize(case: Case, cache: Path, mirror: Path | None = None) -> Path:
    """Write `<cache>/cases/<id>/{case.toml,buggy/,fixed/}` (replacing an older copy); return it."""
    files = case_files(case, cache, mirror)
    target = cache / "cases" / case.id
    partial = cache / "cases" / f".{case.id}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    shutil.copyfile(case.folder / "case.toml", partial / "case.toml")
    for side, named in files.items():
        for name, data in named.items():
            out = partial / side / safe_name(name, f"{case.id}: {side}")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    check_materialized(case, partial)
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    return target


def check_materialized(case: Case, folder: Path) -> None:
    """The case's files are in `folder` and each mistake's line is inside its file."""
    for name in output_names(case):
        if not (folder / "buggy" / name).is_file():
            raise CaseError(f"{case.id}: buggy/{name} is missing in {folder}")
    for mistake in case.data.get("mistake", []):
        lines = len(lines_of((folder / "buggy" / mistake["file"]).read_bytes()))
        if not 1 <= mistake["line"] <= lines:
            raise CaseError(f"{case.id}: mistake line {mistake['line']} is outside "
                            f"buggy/{mistake['file']} ({lines} lines)")


def has_fixed(case: Case) -> bool:
    if "snippet" in case.code:
        return bool(case.data.get("fixed", {}).get("edit"))
    return bool(code_origin(case)[2])


def counts(cases: list[Case], classes: dict[str, Any]) -> str:
    sources = {case.source["repo"] for case in cases}
    per_class = collections.Counter(case.data["class"] for case in cases if "class" in case.data)
    lines = [f"{len(cases)} cases from {len(sources)} independent sources "
             f"({sum(c.data['kind'] == 'bug' for c in cases)} bugs, "
             f"{sum(c.data['kind'] == 'good' for c in cases)} known-good, "
             f"{sum(has_fixed(c) for c in cases)} with a fixed twin)"]
    for name, count in sorted(per_class.items(), key=lambda item: (-item[1], item[0])):
        code = classes[name].get("code", "") or "no rule"
        lines.append(f"  {count:3}  {name} ({code})")
    without = sorted(name for name in per_class if not classes[name].get("code"))
    lines.append(f"{len(without)} classes with no rule: {', '.join(without)}")
    return "\n".join(lines)


def same_mistake(cases: list[Case]) -> list[list[str]]:
    """Groups of cases from one repository, commit and class: likely one mistake counted twice."""
    groups = collections.defaultdict(list)
    for case in cases:
        if case.source["commit"]:
            groups[(case.source["repo"], case.source["commit"], case.data.get("class"))].append(
                case.id)
    return [ids for ids in groups.values() if len(ids) > 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fetch", "check"))
    parser.add_argument("--mirror", type=Path, help="bare repositories to read instead of cloning")
    parser.add_argument("--only", action="append", default=[], metavar="ID",
                        help="only this case (repeatable)")
    parser.add_argument("--cases", type=Path, default=CASES_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    classes = load_classes()
    problems: list[str] = []
    cases = load_cases(args.cases, problems, classes)
    if args.only:
        cases = [case for case in cases if case.id in args.only]
    cache = cache_dir()
    for case in cases:
        try:
            if args.command == "fetch":
                cache.mkdir(parents=True, exist_ok=True)
                materialize(case, cache, args.mirror)
            else:
                folder = cache / "cases" / case.id
                if not folder.is_dir():
                    raise CaseError(f"{case.id}: not in {cache / 'cases'}; run "
                                    "`python bench/bugs_cases.py fetch` first")
                if (folder / "case.toml").read_bytes() != (case.folder / "case.toml").read_bytes():
                    raise CaseError(f"{case.id}: the cache holds an older case.toml; run "
                                    "`python bench/bugs_cases.py fetch` again")
                check_materialized(case, folder)
        except (CaseError, subprocess.CalledProcessError, OSError) as error:
            detail = (getattr(error, "stderr", b"") or b"").decode(errors="replace").strip()
            message = f"{error} {detail}".strip()
            problems.append(message if message.startswith(f"{case.id}:") else f"{case.id}: {message}")
        except SystemExit as error:  # precision's clone helpers exit with a message
            problems.append(f"{case.id}: {error}")
    print(counts(cases, classes))
    print(f"cache: {cache / 'cases'}")
    for ids in same_mistake(cases):
        print(f"note: one repository, commit and class, likely the same mistake: {', '.join(ids)}")
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
