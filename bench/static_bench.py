"""Static-pass benchmark: modellint against TorchFix 0.7.0, torch-preflight 0.5.0 and LibCST's
parse-only time, on copies of the installed torchvision and timm sources, in one run.

    python bench/static_bench.py [--runs 3] [--peers-venv DIR] [--corpus torchvision,timm]

The peers go into a virtual environment of their own (created on first use, default
~/.cache/modellint-bench/peers). The sources are copied to a scratch folder so that no cache of
any tool is shared with the installed packages. Prints, per tool: the median wall time of the
runs, lines per second, and the ratio against modellint's cold run; then the warm (cached)
rerun, the one-file (pre-commit) case, and the peak memory of the whole-corpus run.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PEERS = ("torchfix==0.7.0", "torch-preflight==0.5.0")


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{name} is not installed in this environment (pip install {name})")
    return Path(next(iter(spec.submodule_search_locations)))


def ensure_peers(venv: Path) -> Path:
    bin_dir = venv / "bin"
    if not (bin_dir / "torchfix").exists() or not (bin_dir / "torch-preflight").exists():
        print(f"creating the peers' venv in {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(bin_dir / "pip"), "install", "-q", *PEERS], check=True)
    return bin_dir


def count_lines(root: Path) -> tuple[int, int]:
    files = lines = 0
    for path in root.rglob("*.py"):
        files += 1
        with open(path, "rb") as handle:
            lines += sum(1 for _ in handle)
    return files, lines


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
    """(wall seconds, peak RSS in MB of the largest process, exit code)."""
    start = time.perf_counter()
    wrapped = ["/usr/bin/time", "-f", "%M", *command] if Path("/usr/bin/time").exists() else command
    proc = subprocess.run(wrapped, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = 0.0
    if wrapped is not command:
        try:
            peak = int(proc.stderr.strip().splitlines()[-1]) / 1024
        except (ValueError, IndexError):
            peak = 0.0
    return wall, peak, proc.returncode


def _parse(path: str) -> None:
    import libcst

    try:
        libcst.parse_module(Path(path).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - timing only
        pass


def parse_only(root: Path) -> float:
    files = [str(p) for p in sorted(root.rglob("*.py"))]
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        pool.map(_parse, files, chunksize=8)
    return time.perf_counter() - start


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--peers-venv", type=Path, default=Path.home() / ".cache" / "modellint-bench" / "peers"
    )
    parser.add_argument("--corpus", default="torchvision,timm")
    parser.add_argument("--skip-peers", action="store_true")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="modellint-bench-"))
    corpus = scratch / "corpus"
    for name in args.corpus.split(","):
        shutil.copytree(package_dir(name), corpus / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    files, lines = count_lines(corpus)
    print(f"corpus: {args.corpus} — {files} files, {lines} lines, {os.cpu_count()} cores, "
          f"{args.runs} runs each (median)\n")

    modellint = [sys.executable, "-m", "modellint", "check", "--exit-zero", "-q",
                 "--format", "concise", "--output-file", os.devnull]
    results: dict[str, tuple[float, float]] = {}

    cold, peaks = [], []
    for _ in range(args.runs):
        env = dict(os.environ, MODELLINT_CACHE_DIR=str(scratch / f"cache-{time.time_ns()}"))
        wall, peak, _ = timed([*modellint, str(corpus)], env=env)
        cold.append(wall)
        peaks.append(peak)
    results["modellint (cold)"] = (median(cold), max(peaks))

    warm_env = dict(os.environ, MODELLINT_CACHE_DIR=str(scratch / "cache-warm"))
    timed([*modellint, str(corpus)], env=warm_env)
    warm = [timed([*modellint, str(corpus)], env=warm_env) for _ in range(args.runs)]
    results["modellint (warm)"] = (median([w for w, _, _ in warm]), max(p for _, p, _ in warm))

    one_file = next(iter(sorted((corpus / "torchvision" / "models").glob("resnet.py"))), None)
    one_file = one_file or next(iter(sorted(corpus.rglob("*.py"))))
    single = [timed([*modellint, "--no-cache", str(one_file)]) for _ in range(args.runs)]
    results["modellint (one file)"] = (median([w for w, _, _ in single]),
                                        max(p for _, p, _ in single))

    results["libcst parse only"] = (median([parse_only(corpus) for _ in range(args.runs)]), 0.0)

    if not args.skip_peers:
        peers = ensure_peers(args.peers_venv)
        for label, command in (
            ("TorchFix 0.7.0 (--select ALL)", [str(peers / "torchfix"), "--select", "ALL"]),
            ("torch-preflight 0.5.0", [str(peers / "torch-preflight"), "check"]),
        ):
            runs = [timed([*command, str(corpus)], cwd=scratch) for _ in range(args.runs)]
            results[label] = (median([w for w, _, _ in runs]), max(p for _, p, _ in runs))

    base = results["modellint (cold)"][0]
    print(f"{'tool':<32} {'wall s':>8} {'lines/s':>10} {'x modellint cold':>17} {'peak MB':>8}")
    for label, (wall, peak) in results.items():
        per_second = f"{lines / wall:,.0f}" if "one file" not in label else "-"
        ratio = f"{wall / base:.2f}"
        print(f"{label:<32} {wall:>8.2f} {per_second:>10} {ratio:>17} {peak:>8.0f}")
    print("\npeak MB: the largest single process (workers are separate processes).")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
