"""Static-pass benchmark: modellint against TorchFix 0.7.0, torch-preflight 0.5.0 and LibCST's
parse-only time, on copies of the installed torchvision and timm sources, in one run.

    python bench/static_bench.py [--runs 3] [--peers-venv DIR] [--corpus torchvision,timm]

The peers go into a virtual environment of their own (created on first use, default
~/.cache/modellint-bench/peers). The sources are copied to a scratch folder so that no cache of
any tool is shared with the installed packages. Prints, per tool: the median wall time of the
runs (of 3 x --runs, at least 5, for the sub-second cases), lines per second, and the ratio
against modellint's cold run; then the warm (cached) rerun, the one-file (pre-commit) cases,
and the peak memory of the whole-corpus run.

Then the ratios of the speed targets, in CPU time (user + system, the process and its workers:
steadier than wall time on a shared machine), each against a peer measured in the same run:

- cold run / LibCST's parse-only CPU time (target <= 2)
- warm rerun / a Python process that merely reads and hashes the same files (target <= 3)
- one file of the project, the project index cached, the file edited since (a pre-commit run)
  / the floor of any LibCST-based lint of it: a Python that imports LibCST and parses that
  file (target <= 1.3)
- the same file unchanged / `python -c "import libcst"` (target <= 1.5)

The corpus root gets a `pyproject.toml` with `[tool.modellint]`, so that a run on one file
reads the rest of the project for its index, as in a real repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import resource
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_timed(command: list[str], env: dict[str, str] | None = None,
              cwd: Path | None = None) -> float:
    """CPU seconds (user + system) of `command` and every process it waited for."""
    before = _children_cpu()
    subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    return _children_cpu() - before


READ_AND_HASH = """\
import hashlib, os, sys
for folder, dirs, names in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(names):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as handle:
                hashlib.sha256(handle.read()).digest()
"""


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


def parse_only(root: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of parsing every file with LibCST, on every core."""
    files = [str(p) for p in sorted(root.rglob("*.py"))]
    start, cpu = time.perf_counter(), _children_cpu() + _self_cpu()
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        pool.map(_parse, files, chunksize=8)
    return time.perf_counter() - start, _children_cpu() + _self_cpu() - cpu


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
    parser.add_argument("--skip-cold", action="store_true",
                        help="only the warm and one-file cases (and their peers): quick")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="modellint-bench-"))
    corpus = scratch / "corpus"
    for name in args.corpus.split(","):
        shutil.copytree(package_dir(name), corpus / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    files, lines = count_lines(corpus)
    # the project's root: a run on one file reads the others for its index
    (corpus / "pyproject.toml").write_text("[tool.modellint]\n")
    print(f"corpus: {args.corpus} — {files} files, {lines} lines, {os.cpu_count()} cores, "
          f"{args.runs} runs each (median)\n")

    # as a user's Python runs: modellint's own bytecode is cached after the first run
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    modellint = [sys.executable, "-m", "modellint", "check", "--exit-zero", "-q",
                 "--format", "concise", "--output-file", os.devnull]
    results: dict[str, tuple[float, float]] = {}
    cpu: dict[str, float] = {}

    peers: list[tuple[str, list[str]]] = []
    if not args.skip_peers:
        bin_dir = ensure_peers(args.peers_venv)
        peers = [("TorchFix 0.7.0 (--select ALL)", [str(bin_dir / "torchfix"), "--select", "ALL"]),
                 ("torch-preflight 0.5.0", [str(bin_dir / "torch-preflight"), "check"])]
    # each round runs modellint cold, LibCST's parse and each peer one after the other, so
    # that every ratio compares runs made minutes apart at most (a shared machine drifts)
    cold, peaks, cold_cpu, parsed = [], [], [], []
    peer_runs: dict[str, list] = {label: [] for label, _ in peers}
    for _ in range(0 if args.skip_cold else args.runs):
        env = dict(base_env, MODELLINT_CACHE_DIR=str(scratch / f"cache-{time.time_ns()}"))
        before = _children_cpu()
        wall, peak, _ = timed([*modellint, str(corpus)], env=env)
        cold_cpu.append(_children_cpu() - before)
        cold.append(wall)
        peaks.append(peak)
        parsed.append(parse_only(corpus))
        for label, command in peers:
            peer_runs[label].append(timed([*command, str(corpus)], cwd=scratch))
    if cold:
        results["modellint (cold)"] = (median(cold), max(peaks))
        cpu["cold"] = median(cold_cpu)

    warm_env = dict(base_env, MODELLINT_CACHE_DIR=str(scratch / "cache-warm"))
    timed([*modellint, str(corpus)], env=warm_env)
    timed([*modellint, str(corpus)], env=warm_env)  # the plugin manifest is written once
    # The sub-second cases run more often, each beside the process it is compared with (one
    # after the other, round after round): a shared machine's speed drifts over a minute,
    # and a ratio of runs made minutes apart measures the drift.
    rounds = max(5, 3 * args.runs)
    warm, warm_cpu, read_hash = [], [], []
    for _ in range(rounds):
        before = _children_cpu()
        warm.append(timed([*modellint, str(corpus)], env=warm_env))
        warm_cpu.append(_children_cpu() - before)
        read_hash.append(cpu_timed([sys.executable, "-c", READ_AND_HASH, str(corpus)],
                                   env=base_env))
    results["modellint (warm)"] = (median([w for w, _, _ in warm]), max(p for _, p, _ in warm))
    cpu["warm"] = median(warm_cpu)
    cpu["read+hash"] = median(read_hash)

    one_file = next(iter(sorted((corpus / "torchvision" / "models").glob("resnet.py"))), None)
    one_file = one_file or next(iter(sorted(corpus.rglob("*.py"))))
    # run from the corpus root, as pre-commit runs from the repository's
    relative = str(one_file.relative_to(corpus))
    import_libcst = [sys.executable, "-c", "import libcst"]
    # what no LibCST-based lint of the edited file can go below
    parse_file = [sys.executable, "-c",
                  f"import libcst; libcst.parse_module(open({str(one_file)!r}).read())"]
    cpu_timed([*modellint, relative], env=warm_env, cwd=corpus)  # its own cache entry
    unchanged, imports = [], []
    for _ in range(rounds):
        unchanged.append(cpu_timed([*modellint, relative], env=warm_env, cwd=corpus))
        imports.append(cpu_timed(import_libcst, env=base_env))
    cpu["one file, unchanged"] = median(unchanged)
    edited, edited_wall, floors = [], [], []
    for number in range(rounds):
        with open(one_file, "a", encoding="utf-8") as handle:
            handle.write(f"# edit {number} {time.time_ns()}\n")
        before = _children_cpu()
        edited_wall.append(timed([*modellint, relative], env=warm_env, cwd=corpus))
        edited.append(_children_cpu() - before)
        floors.append(cpu_timed(parse_file, env=base_env))
    cpu["one file, edited"] = median(edited)
    results["modellint (one file, edited)"] = (median([w for w, _, _ in edited_wall]),
                                                max(p for _, p, _ in edited_wall))
    cpu["import libcst"] = median(imports)
    cpu["import libcst + parse file"] = median(floors)

    if cold:
        results["libcst parse only"] = (median([wall for wall, _ in parsed]), 0.0)
        cpu["libcst parse only"] = median([used for _, used in parsed])
        for label, runs in peer_runs.items():
            results[label] = (median([w for w, _, _ in runs]), max(p for _, p, _ in runs))

    base = results["modellint (cold)"][0] if cold else results["modellint (warm)"][0]
    against = "x modellint cold" if cold else "x modellint warm"
    print(f"{'tool':<32} {'wall s':>8} {'lines/s':>10} {against:>17} {'peak MB':>8}")
    for label, (wall, peak) in results.items():
        per_second = f"{lines / wall:,.0f}" if "one file" not in label else "-"
        ratio = f"{wall / base:.2f}"
        print(f"{label:<32} {wall:>8.2f} {per_second:>10} {ratio:>17} {peak:>8.0f}")
    print("\npeak MB: the largest single process (workers are separate processes).")
    print("\nCPU seconds (median; user + system of the process and its workers):")
    for label, used in cpu.items():
        print(f"  {label:<28} {used:8.3f}")
    print("\ntargets, as ratios of CPU time in this run:")
    for label, numerator, denominator, target in (
        ("cold / LibCST parse only", "cold", "libcst parse only", 2.0),
        ("warm / read+hash", "warm", "read+hash", 3.0),
        ("one file edited / import+parse it", "one file, edited", "import libcst + parse file",
         1.3),
        ("one file unchanged / import libcst", "one file, unchanged", "import libcst", 1.5),
    ):
        if numerator not in cpu or denominator not in cpu:
            continue
        ratio = cpu[numerator] / cpu[denominator] if cpu[denominator] else float("inf")
        verdict = "ok" if ratio <= target else "over"
        print(f"  {label:<36} {ratio:6.2f}  (target <= {target}: {verdict})")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
