"""Notebook benchmark: a folder of notebooks lints at least as fast per line of code as the same
code in .py files, and a notebook's outputs (plots embedded as base64) cost no parse time.

    python bench/notebook_bench.py [--runs 3] [--corpus torchvision/models] [--jobs 1]

Each .py file of the corpus (a package folder of the installed sources, default torchvision's
models) becomes a notebook written as nbformat writes one: a code cell per top-level statement,
a markdown cell before each, every code cell with a stream output and every fourth with a
~200 KB PNG. The two folders are linted cold (no cache) by the real command, and the median wall
and CPU time (the command and its workers: steadier than wall time on a busy machine) of the
runs are reported per line of code (the .py files' lines). Then one notebook is
linted with and without a 5 MB image in its outputs.

Target: notebooks lines/s >= .py lines/s (ratio >= 1.0 within run-to-run noise), and a 5 MB
image adding under 0.1 s.
"""

from __future__ import annotations

import argparse
import ast
import base64
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def corpus_dir(spec: str) -> Path:
    package, _, sub = spec.partition("/")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        sys.exit(f"{package} is not installed in this environment")
    return Path(next(iter(found.submodule_search_locations))) / sub


def cells_of(source: str) -> list[str]:
    """One cell per top-level statement (a statement's comments above it go with it)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [1]
    for node in tree.body[1:]:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        starts.append(first)
    starts = sorted(set(starts))
    return ["".join(lines[a - 1:b - 1]).rstrip("\n")
            for a, b in zip(starts, [*starts[1:], len(lines) + 1], strict=True)]


def image(size: int) -> str:
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()


def notebook(cells: list[str], big_image: str | None = None, plots: bool = True) -> str:
    """The notebook of `cells`: a ~200 KB plot in every fourth code cell (`plots`), and
    `big_image` in the first one."""
    out = []
    for n, text in enumerate(cells):
        out.append({"cell_type": "markdown", "id": f"m{n}", "metadata": {},
                    "source": ["Explanation of the next cell."]})
        outputs = [{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}]
        if (plots and n % 4 == 0) or (big_image and n == 0):
            png = big_image if big_image and n == 0 else image(200_000)
            outputs.append({"data": {"image/png": png,
                                     "text/plain": ["<Figure>"]},
                            "metadata": {}, "output_type": "display_data"})
        out.append({"cell_type": "code", "execution_count": n + 1, "id": f"c{n}",
                    "metadata": {}, "outputs": outputs,
                    "source": text.splitlines(keepends=True)})
    document = {"cells": out, "metadata": {"language_info": {"name": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    # nbformat's own writer: indent 1, sorted keys, a final newline
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def lint(target: Path, jobs: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its workers)."""
    command = [sys.executable, "-m", "modellint", "check", "--no-cache", "--exit-zero", "-q",
               "--jobs", str(jobs), "--format", "concise", "--output-file", os.devnull,
               str(target)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--corpus", default="torchvision/models")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="modellint-nb-bench-"))
    py_dir, nb_dir = scratch / "py", scratch / "nb"
    py_dir.mkdir()
    nb_dir.mkdir()
    lines = files = 0
    nb_bytes = 0
    for path in sorted(corpus_dir(args.corpus).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        try:
            cells = cells_of(source)
        except SyntaxError:
            continue
        name = str(path.relative_to(corpus_dir(args.corpus))).replace(os.sep, "__")
        (py_dir / name).write_text(source, encoding="utf-8")
        text = notebook(cells)
        (nb_dir / name.replace(".py", ".ipynb")).write_text(text, encoding="utf-8")
        nb_bytes += len(text.encode())
        files += 1
        lines += source.count("\n")
    print(f"corpus: {args.corpus} — {files} files, {lines} lines of code; the notebooks hold "
          f"{nb_bytes / 1e6:.1f} MB of JSON; --jobs {args.jobs}, median of {args.runs} runs\n")

    lint(py_dir, args.jobs)  # warm the OS's file cache and Python's bytecode
    results = {}
    # the two folders alternate, so that a change in the machine's load hits both alike
    runs: dict[str, list[tuple[float, float]]] = {".py files": [], "notebooks": []}
    for _ in range(args.runs):
        for label, folder in ((".py files", py_dir), ("notebooks", nb_dir)):
            runs[label].append(lint(folder, args.jobs))
    for label, measured in runs.items():
        results[label] = (statistics.median(w for w, _ in measured),
                          statistics.median(c for _, c in measured))
    print(f"{'folder':<12} {'wall s':>8} {'lines/s':>10} {'CPU s':>8} {'lines/CPU s':>12}")
    for label, (wall, cpu) in results.items():
        print(f"{label:<12} {wall:>8.2f} {lines / wall:>10,.0f} {cpu:>8.2f} {lines / cpu:>12,.0f}")
    ratio = results[".py files"][1] / results["notebooks"][1]
    print(f"\nnotebooks per line of code: {ratio:.2f}x the speed of .py files in CPU time "
          f"({'meets' if ratio >= 0.97 else 'MISSES'} the target of >= 1.0 within 3% noise)")

    # one notebook with and without a 5 MB embedded image
    biggest = max(py_dir.iterdir(), key=lambda p: p.stat().st_size)
    cells = cells_of(biggest.read_text(encoding="utf-8"))
    small, large = scratch / "small.ipynb", scratch / "large.ipynb"
    small.write_text(notebook(cells, plots=False), encoding="utf-8")
    large.write_text(notebook(cells, big_image=image(5_000_000), plots=False), encoding="utf-8")
    walls = {}
    for label, path in (("without images", small), ("one 5 MB image", large)):
        walls[label] = statistics.median(lint(path, 1)[1] for _ in range(args.runs))
    size = large.stat().st_size / 1e6
    print(f"\none notebook ({biggest.name}, {len(cells)} code cells):")
    for label, wall in walls.items():
        print(f"  {label:<24} {wall:.3f} s of CPU")
    extra = walls["one 5 MB image"] - walls["without images"]
    print(f"  the outputs ({size:.0f} MB of JSON) add {extra:+.3f} s")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
