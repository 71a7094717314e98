"""Directory walk under an adversarially large .gitignore (issue 16, item 11).

    python bench/gitignore_bench.py [--lines 30000] [--files 1000] [--keep DIR]

Generates a scratch tree of `--files` Python files in nested folders, with a `.gitignore` of
`--lines` patterns of every kind (plain names, `*` globs, anchored paths, `**`, dir-only,
negations, comments), then times modellint's file discovery over it: the CPU seconds of reading
and compiling the patterns, of the whole walk, and how many files it keeps. `git check-ignore`
is run on the same tree when git is installed, and its count is printed beside ours.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from modellint.static.discover import GitIgnore, discover


def gitignore_lines(count: int, rng: random.Random) -> list[str]:
    kinds = [
        lambda i: f"generated_{i}.py",
        lambda i: f"*.ext{i}",
        lambda i: f"/top_{i}",
        lambda i: f"cache_{i}/",
        lambda i: f"src/**/gen_{i}_*.py",
        lambda i: f"**/tmp_{i}",
        lambda i: f"pkg_{i % 50}/mod_{i}?.py",
        lambda i: f"!keep_{i}.py",
        lambda i: f"data/[abc]_{i}/**",
        lambda i: f"[Bb]uild_{i}*",
        lambda i: f"*_{i}_*.bak",
        lambda i: f"/out_{i}/*.py",
        lambda i: f"# comment {i}",
    ]
    return [rng.choice(kinds)(i) for i in range(count)]


def make_tree(root: Path, files: int, lines: int, seed: int) -> None:
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    patterns = gitignore_lines(lines, rng)
    # a few patterns that do match, so that the walk has something to skip
    patterns += ["pkg_3/", "*_skip.py", "!pkg_4/keep_skip.py", "/pkg_5/sub_1/**"]
    (root / ".gitignore").write_text("\n".join(patterns) + "\n", encoding="utf-8")
    for index in range(files):
        folder = root / f"pkg_{index % 50}" / f"sub_{index % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        name = "keep_skip.py" if index % 97 == 4 else f"mod_{index}{'_skip' if index % 13 == 0 else ''}.py"
        (folder / name).write_text("x = 1\n", encoding="utf-8")


def git_count(root: Path) -> int | None:
    if shutil.which("git") is None:
        return None
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "--", "*.py"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.split()
    return len(listed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=30_000)
    parser.add_argument("--files", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--keep", help="build the tree here and keep it")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gitignore-bench-"))
    try:
        make_tree(root, args.files, args.lines, args.seed)
        start = time.process_time()
        GitIgnore.read(root)
        compile_s = time.process_time() - start
        start = time.process_time()
        found = list(discover([str(root)], lambda *_: False))
        walk_s = time.process_time() - start
        expected = git_count(root)
        print(f".gitignore lines: {args.lines}, files: {args.files}")
        print(f"read + compile the .gitignore: {compile_s:.2f} s CPU")
        print(f"whole walk (discover):         {walk_s:.2f} s CPU")
        print(f"files kept: {len(found)}"
              + ("" if expected is None else f" (git ls-files --others --exclude-standard: {expected})"))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
