"""Lint large real code bases with every rule and require no crash and no false syntax error.

    python bench/sweep.py [PATH ...] [--jobs N]

Without paths it lints the installed torchvision and the timm and transformers sources under
/work/corpus/src (or $MODELLINT_CORPUS). It runs the real command line (`--select ALL`),
prints the number of files and lines, the time taken and the findings per code, lists every
ML000 (syntax error) and ML001 (internal error), and exits 1 unless there are none of either.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from modellint.static.discover import discover


def default_roots() -> list[Path]:
    import torchvision

    corpus = Path(os.environ.get("MODELLINT_CORPUS", "/work/corpus/src"))
    return [Path(torchvision.__file__).parent, corpus / "timm", corpus / "transformers"]


def count_lines(paths: list[str]) -> tuple[int, int]:
    files = lines = 0
    for _, path in discover(paths, lambda *_: False):
        files += 1
        with open(path, "rb") as handle:
            lines += sum(1 for _ in handle)
    return files, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    roots = [str(Path(p).resolve()) for p in args.paths] or [str(p) for p in default_roots()]
    missing = [root for root in roots if not os.path.exists(root)]
    if missing:
        print(f"sweep: missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    files, lines = count_lines(roots)
    for root in roots:
        print(f"root: {root}")
    print(f"files: {files}  lines: {lines}  jobs: {args.jobs}")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "modellint", "check", *roots, "--select", "ALL", "--format", "json",
         "--no-cache", "--exit-zero", "-q", "--jobs", str(args.jobs)],
        capture_output=True, text=True,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        print(f"sweep: modellint exited with {proc.returncode}\n{proc.stderr}", file=sys.stderr)
        return 1
    findings = json.loads(proc.stdout)
    print(f"time: {elapsed:.1f} s  ({lines / elapsed:,.0f} lines/s)")
    counts = collections.Counter(f["code"] for f in findings)
    names = {f["code"]: f["name"] for f in findings}
    labels = [Path(root).name for root in roots]

    def corpus_of(path: str) -> str:
        resolved = str(Path(path).resolve())
        return next((Path(r).name for r in roots if resolved.startswith(r + os.sep)), "?")

    per_corpus = collections.Counter((f["code"], corpus_of(f["path"])) for f in findings)
    print(f"findings: {len(findings)}  (per rule and code base; off-by-default rules included)")
    print(f"  {'code':<6} {'name':<36} " + " ".join(f"{label:>12}" for label in labels)
          + f" {'total':>7}")
    for code in sorted(counts):
        row = " ".join(f"{per_corpus[(code, label)]:>12}" for label in labels)
        print(f"  {code:<6} {names[code]:<36} {row} {counts[code]:>7}")
    broken = [f for f in findings if f["code"] in ("ML000", "ML001")]
    for f in broken:
        print(f"{f['code']} {f['path']}:{f['line']}:{f['column']} {f['message']}")
    if proc.stderr.strip():
        print(f"stderr:\n{proc.stderr.strip()}")
    print(f"ML000: {counts['ML000']}  ML001: {counts['ML001']}  ->",
          "FAIL" if broken else "OK")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
