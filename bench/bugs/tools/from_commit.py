"""Write a bench/bugs case.toml from a fix commit: where the code is, never the code itself.

The buggy files are the fix commit's parent's, the fixed twins the fix commit's (or a later
commit's, `--fixed-from`). A file too large to keep whole is cut to an excerpt (`--excerpt
PATH:FIRST-LAST[,FIRST-LAST...]`, lines of the buggy file); bench/bugs_cases.py maps it into the
fixed file through the diff, and the mistake's line is shifted into the excerpt here. The
licence is read from the repository's LICENSE at the buggy commit. The case is then
materialized into the cache (bench/bugs_cases.py) and each mistake's line printed, to check.

    python bench/bugs/tools/from_commit.py --mirror /work/.mirror --repo o/n --fix 1a2b3c \\
        --id c-n-what --class missing-zero-grad --title "..." \\
        --path train.py --line train.py:42 --found-by "git log -i --grep zero_grad"

With `--mirror DIR` the commits are read from the bare repository `DIR/<owner>+<name>/repo`;
without it the repository is cloned into the cache, as `bench/bugs_cases.py fetch` does.
`--context PATH` keeps a file that holds no mistake (the script that trains a model whose
mistake is in another file). Without `--line`, a file's mistake line is the first line the fix
removes or changes in it (or, for a pure insertion, the buggy line just before it): check it
before committing.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

BUGS = Path(__file__).resolve().parents[1]
CASES = BUGS / "cases"
LICENCE_FILES = ("LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE", "COPYING", "LICENSE.rst")


def _bugs_cases():
    if "bugs_cases" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bugs_cases", BUGS.parent / "bugs_cases.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bugs_cases"] = module
        spec.loader.exec_module(module)
    return sys.modules["bugs_cases"]


def licence_of(repo, commit: str) -> str:
    root = repo.git(commit, "ls-tree", "--name-only", commit).decode().splitlines()
    for name in sorted(root, key=lambda n: (n not in LICENCE_FILES, n)):
        if not name.lower().startswith(("licen", "copying")):
            continue
        try:
            head = repo.read(commit, name)[:3000].decode(errors="replace")
        except _bugs_cases().CaseError:
            continue
        if "Apache License" in head:
            return "Apache-2.0"
        if "MIT License" in head or "Permission is hereby granted, free of charge" in head:
            return "MIT"
        if "GNU AFFERO" in head:
            return "AGPL-3.0"
        if "GNU LESSER" in head:
            return "LGPL"
        if "GNU GENERAL PUBLIC LICENSE" in head:
            return "GPL-3.0" if "Version 3" in head else "GPL-2.0"
        if "Attribution-NonCommercial" in head:
            return "CC BY-NC 4.0"
        if "Redistribution and use" in head:
            return ("BSD-3-Clause" if "Neither the name" in head or "names of its" in head
                    else "BSD-2-Clause")
        return f"see {name} (unrecognised)"
    return "none stated"


def first_changed_line(buggy: list[bytes], fixed: list[bytes]) -> int:
    """The first buggy line the fix removes or replaces; for an insertion, the line before it."""
    matcher = difflib.SequenceMatcher(None, buggy, fixed, autojunk=False)
    for tag, i1, _i2, _j1, _j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            return i1 + 1
        if tag == "insert":
            return max(i1, 1)
    return 1


def enclosing_spans(source: bytes, line: int) -> list[list[int]]:
    """The module's leading imports and the top-level statement around `line`, as line spans:
    whole statements keep the excerpt parseable, which a static linter needs. The code is
    parsed, never run."""
    body = ast.parse(source).body
    around = next(n for n in body if n.lineno <= line <= (n.end_lineno or n.lineno))
    leading: list[ast.stmt] = []
    for node in body:
        if node is around or not isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr)):
            break
        if not isinstance(node, ast.Expr):  # a module docstring is skipped, not kept
            leading.append(node)
    spans = []
    if leading:
        spans.append([leading[0].lineno, leading[-1].end_lineno or leading[-1].lineno])
    first = min([around.lineno] + [d.lineno for d in getattr(around, "decorator_list", [])])
    spans.append([first, around.end_lineno or around.lineno])
    return spans


def quote(value: object) -> str:
    """A TOML value: JSON's strings, numbers, lists and booleans are TOML's too."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{quote(k)} = {quote(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    bugs_cases = _bugs_cases()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, help="bare repositories DIR/<owner>+<name>/repo")
    parser.add_argument("--repo", required=True, help="owner/name on GitHub")
    parser.add_argument("--fix", required=True, help="the fix commit")
    parser.add_argument("--id", required=True)
    parser.add_argument("--title", required=True)
    parser.add_argument("--class", dest="klass", required=True)
    parser.add_argument("--pass", dest="pass_", default="static", choices=bugs_cases.PASSES)
    parser.add_argument("--path", action="append", required=True, help="a file in the repository")
    parser.add_argument("--context", action="append", default=[],
                        help="a file kept for context, with no mistake")
    parser.add_argument("--line", action="append", default=[], help="PATH:N, a line of the buggy file")
    parser.add_argument("--excerpt", action="append", default=[],
                        help="PATH:FIRST-LAST[,FIRST-LAST...] of the buggy file, or PATH:auto for "
                        "its imports and the top-level statement around the mistake")
    parser.add_argument("--found-by", required=True)
    parser.add_argument("--confirmed-by", default="the fix commit's message")
    parser.add_argument("--fixed-from", help="take the fixed twin from this later commit instead")
    parser.add_argument("--no-fixed", action="store_true", help="keep no fixed twin")
    parser.add_argument("--cases", type=Path, default=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--force", action="store_true", help="overwrite an existing case")
    args = parser.parse_args(argv)

    classes = bugs_cases.load_classes()
    if args.klass not in classes:
        parser.error(f"class {args.klass!r} is not in {bugs_cases.CLASSES_FILE.name}")
    paths = args.path + args.context
    for path in paths:
        try:
            bugs_cases.safe_name(path, "--path")
        except bugs_cases.CaseError as error:
            parser.error(str(error))
    cache = bugs_cases.cache_dir()
    repo = bugs_cases.Repository(args.repo, cache, args.mirror)
    try:
        fix = repo.git(args.fix, "rev-parse", f"{args.fix}^{{commit}}").decode().strip()
        parent = repo.git(fix, "rev-parse", f"{fix}^").decode().strip()
        subject = repo.git(fix, "log", "-1", "--format=%s", fix).decode().strip()
        fixed_commit = repo.git(fix, "rev-parse", f"{args.fixed_from or fix}^{{commit}}").decode().strip()
    except subprocess.CalledProcessError as error:
        parser.error(f"{args.repo}: {error.stderr.decode(errors='replace').strip()}")
    lines = dict(item.rsplit(":", 1) for item in args.line)
    wanted = dict(item.rsplit(":", 1) for item in args.excerpt)
    auto = {path for path, spans in wanted.items() if spans == "auto"}
    excerpts = {path: [[int(n) for n in span.split("-")] for span in spans.split(",")]
                for path, spans in wanted.items() if path not in auto}
    fixed_excerpts: dict[str, list[list[int]]] = {}
    names = [PurePosixPath(p).name for p in paths]
    flat = len(set(names)) == len(names) and names != paths

    case = args.cases / args.id
    if case.exists() and not args.force:
        parser.error(f"{case} exists (--force to overwrite)")
    mistakes: list[tuple[str, int]] = []
    fixed_files: list[str] = []
    for path, name in zip(paths, names if flat else paths, strict=True):
        try:
            buggy = bugs_cases.lines_of(repo.read(parent, path))
        except bugs_cases.CaseError as error:
            parser.error(str(error))
        try:
            fixed = None if args.no_fixed else bugs_cases.lines_of(repo.read(fixed_commit, path))
        except bugs_cases.CaseError:
            fixed = None  # the fix deleted or moved the file: no twin for it
        fixed_files.append(path if fixed is not None else "")
        line = (int(lines[path]) if path in lines
                else first_changed_line([b.rstrip(b"\r\n") for b in buggy],
                                        [f.rstrip(b"\r\n") for f in fixed or []]))
        if path in args.context:
            continue
        if path in auto:
            try:
                spans = enclosing_spans(b"".join(buggy), line)
                excerpts[path] = spans
                if fixed is not None:
                    old = [b.rstrip(b"\r\n") for b in buggy]
                    new = [f.rstrip(b"\r\n") for f in fixed]
                    mine = enclosing_spans(b"".join(fixed), bugs_cases.map_line(old, new, line))
                    if mine != [list(s) for s in bugs_cases.fixed_spans(
                            b"".join(buggy), b"".join(fixed), [(a, b) for a, b in spans])]:
                        fixed_excerpts[path] = mine
            except (SyntaxError, ValueError, StopIteration):
                parser.error(f"{path}: no top-level statement around line {line} (does it parse?)")
        if path in excerpts:
            kept = 0
            for first, last in excerpts[path]:
                if first <= line <= last:
                    line = kept + line - first + 1
                    break
                kept += last - first + 1
            else:
                parser.error(f"{path}: line {line} is outside the excerpt {excerpts[path]}")
        mistakes.append((name, line))

    code: dict[str, object] = {"files": paths}
    if flat:
        code["flat"] = True
    if args.no_fixed:
        code["fixed"] = False
    elif any(name == "" for name in fixed_files):
        code["fixed_files"] = fixed_files
    if excerpts:
        code["excerpt"] = {path: spans[0] if len(spans) == 1 else spans
                           for path, spans in excerpts.items()}
    if fixed_excerpts:
        code["fixed_excerpt"] = {path: spans[0] if len(spans) == 1 else spans
                                 for path, spans in fixed_excerpts.items()}
    confirmed = (f"{args.confirmed_by}: {subject}"
                 if args.confirmed_by == parser.get_default("confirmed_by") else args.confirmed_by)
    toml = [
        f"id = {quote(args.id)}",
        f"title = {quote(args.title)}",
        f"class = {quote(args.klass)}",
        f"expected = {quote(classes[args.klass].get('code', ''))}",
        f"pass = {quote(args.pass_)}",
        'kind = "bug"',
        "",
        "[source]",
        'kind = "fix-commit"',
        f"url = {quote(f'https://github.com/{args.repo}/commit/{fix}')}",
        f"repo = {quote(args.repo)}",
        f"commit = {quote(parent)}",
        f"fix_commit = {quote(fixed_commit)}",
        f"licence = {quote(licence_of(repo, parent))}",
        f"found_by = {quote(args.found_by)}",
        f"confirmed_by = {quote(confirmed)}",
        "",
        "[code]",
        *(f"{key} = {quote(value)}" for key, value in code.items()),
    ]
    for name, line in mistakes:
        toml += ["", "[[mistake]]", f"file = {quote(name)}", f"line = {line}"]
    case.mkdir(parents=True, exist_ok=True)
    (case / "case.toml").write_text("\n".join(toml) + "\n", encoding="utf-8")
    try:
        problems: list[str] = []
        loaded = [c for c in bugs_cases.load_cases(args.cases, problems) if c.id == args.id]
        if not loaded:
            raise bugs_cases.CaseError("; ".join(p for p in problems if p.startswith(args.id)))
        out = bugs_cases.materialize(loaded[0], cache, args.mirror)
    except bugs_cases.CaseError as error:
        print(f"from_commit: {case / 'case.toml'} written, but: {error}", file=sys.stderr)
        return 1
    for name, line in mistakes:
        text = (out / "buggy" / name).read_bytes().splitlines()
        shown = text[line - 1].decode(errors="replace").strip() if line <= len(text) else "??"
        print(f"{args.id}: {name}:{line}: {shown}")
    print(f"materialized in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
