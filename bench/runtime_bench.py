"""Runtime-pass benchmarks, as ratios measured in one run (not timed tests).

1. `trace` (one traced forward, shape table) against torchinfo's `summary` on ResNet34
   (goal: no slower).
2. The full runtime check (registration, two eval forwards, state-dict reload, train forward +
   backward) against one plain forward+backward on ResNet34 (goal: at most 2.5x).
3. The ~70B-parameter fixture built and traced on `meta` (goal: under 10 s, under 2 GB peak).
4. The isolation of `check --runtime`: the worker's start-up and the wall time per model of
   `run_jobs` over many small models (LeNet), each checked in a fresh process.

    python bench/runtime_bench.py [--repeat 3] [--size 224] [--threads 1] [--clock cpu|wall]
                                  [--only 1,2,3,4] [--models 20]

By default torch runs one thread and times are this process's CPU time (best of the
repeats, the contenders interleaved): on a shared machine wall-clock ratios swing 2x with the
load (OpenMP threads spin-wait for cores), while one-thread CPU time stays put. Use
`--threads N --clock wall` on a quiet machine for what a user waits.

torchinfo is looked up on the path, then in /work/peers/venv (or $MODELLINT_PEERS), a
separate environment so modellint's own does not depend on it.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _torchinfo():
    try:
        import torchinfo
    except ImportError:
        peers = os.environ.get("MODELLINT_PEERS", "/work/peers/venv")
        for path in glob.glob(os.path.join(peers, "lib", "python3*", "site-packages")):
            sys.path.append(path)
        try:
            import torchinfo
        except ImportError:
            return None
    return torchinfo


CLOCK = time.process_time


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = CLOCK()
        fn()
        times.append(CLOCK() - start)
    return min(times)


def interleaved(a, b, repeat: int) -> tuple[float, float]:
    """Best-of times of `a` and `b`, run alternately so that load changes hit both alike."""
    ta, tb = [], []
    for _ in range(repeat):
        ta.append(best(a, 1))
        tb.append(best(b, 1))
    return min(ta), min(tb)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--only", default="1,2,3,4", help="which benchmarks, e.g. 4")
    parser.add_argument("--models", type=int, default=20, help="models for benchmark 4")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    only = {part.strip() for part in args.only.split(",")}
    # 3 first: its process is forked from this one, and Linux counts the RSS the fork held
    # before `exec` in the child's peak; after 1 and 2 that is ResNet34's and torch's
    if "3" in only and meta_check():
        return 1
    if only & {"1", "2"}:
        code = trace_and_check(args, only)
        if code:
            return code
    if "4" in only:
        workers(args.models, args.repeat, args.threads)
    return 0


def workers(count: int, repeat: int, threads: int) -> None:
    """What `check --runtime` spends around the checks themselves: `run_jobs` over one model
    (the start-up shows) and over `count` models (the cost of each further one), as wall
    time and as the CPU time of the worker processes (steadier on a shared machine)."""
    import resource

    from modellint.runtime.pass_ import run_jobs
    from modellint.runtime.specs import ModelJob

    os.environ["OMP_NUM_THREADS"] = str(threads)  # the workers' torch threads
    lenet = os.path.join(ROOT, "fixtures", "runtime", "clean_lenet.py")
    job = ModelJob(label="clean_lenet.py:LeNet", file=lenet, name="LeNet")
    codes = ["ML002", "ML701", "ML703"]

    def workers_cpu() -> float:
        # the worker processes count here once they have ended and been waited for
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def run(n: int) -> tuple[float, float]:
        start, cpu = time.perf_counter(), workers_cpu()
        results = run_jobs([job] * n, "cpu", 60.0, codes)
        took, cpu = time.perf_counter() - start, workers_cpu() - cpu
        assert all("findings" in result for _, result in results), results
        return took, cpu

    one = [run(1) for _ in range(repeat)]
    many = [run(count) for _ in range(repeat)]
    wall1, cpu1 = min(w for w, _ in one), min(c for _, c in one)
    wall, cpu = min(w for w, _ in many), min(c for _, c in many)
    print(f"4. runtime workers, {threads} thread(s): 1 model {wall1:.2f} s wall, {cpu1:.2f} s "
          f"CPU (start-up included); {count} models {wall:.2f} s wall, {cpu:.2f} s CPU: "
          f"{(wall - wall1) / (count - 1) * 1000:.0f} ms wall, "
          f"{(cpu - cpu1) / (count - 1) * 1000:.0f} ms CPU per further model")


def trace_and_check(args, only: set[str]) -> int:
    import torch
    import torchvision

    from modellint.runtime.engine import ModelCheck
    from modellint.runtime.tracer import Tracer

    torch.set_num_threads(args.threads)
    shape = [args.batch, 3, args.size, args.size]
    spec = [{"shape": shape, "dtype": "float32", "low": 0, "high": 2, "name": None}]
    model = torchvision.models.resnet34().eval()
    x = torch.randn(shape)
    with torch.no_grad():
        model(x)  # warm up

    def trace():
        with Tracer(model), torch.no_grad():
            model(x)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{args.clock} time, best of {args.repeat}, ResNet34 input {shape}")
    torchinfo = _torchinfo()
    if "1" not in only:
        pass
    elif torchinfo is not None:
        def summary():
            torchinfo.summary(model, input_size=tuple(shape), verbose=0, device="cpu")
        t_trace, t_info = interleaved(trace, summary, args.repeat)
        print(f"1. trace {t_trace:.3f} s vs torchinfo.summary {t_info:.3f} s: "
              f"ratio {t_trace / t_info:.2f} (goal <= 1)")
    else:
        t_trace = best(trace, args.repeat)
        print(f"1. trace {t_trace:.3f} s (torchinfo not found; pip install it into "
              f"/work/peers/venv)")

    def plain():
        m = torchvision.models.resnet34()
        m.train()
        m(x).sum().backward()

    def full():
        ModelCheck(factory=torchvision.models.resnet34, specs=spec,
                   label="torchvision.models:resnet34").run()

    def plain_fwd_bwd():
        model.train()
        model.zero_grad()
        model(x).sum().backward()
        model.eval()

    if "2" in only:
        t_full, t_plain = interleaved(full, plain_fwd_bwd, args.repeat)
        t_plain_build = best(plain, args.repeat)
        print(f"2. full runtime check {t_full:.3f} s vs plain forward+backward {t_plain:.3f} "
              f"s: ratio {t_full / t_plain:.2f} (goal <= 2.5); with model construction in both: "
              f"{t_full / t_plain_build:.2f}")
    return 0


def meta_check() -> int:
    code = (
        "import time, resource, sys\n"
        f"sys.path.insert(0, {os.path.join(ROOT, 'fixtures', 'runtime', 'big')!r})\n"
        "start = time.perf_counter(); cpu = time.process_time()\n"
        "from modellint.runtime.engine import ModelCheck\n"
        "from llama70b import Big70B\n"
        "out = ModelCheck(factory=Big70B, device='meta', label='Big70B').run()\n"
        "took = time.perf_counter() - start; cpu = time.process_time() - cpu\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20\n"
        "print(f'{out.parameters} {took} {cpu} {peak} {len(out.findings)}')\n"
    )
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        print("3. meta check failed:", result.stderr[-2000:])
        return 1
    params, took, cpu, peak, count = result.stdout.split()
    print(f"3. {int(params) / 1e9:.1f}B-parameter model on meta: check {float(took):.2f} s "
          f"wall, {float(cpu):.2f} s CPU "
          f"(process incl. torch import {wall:.2f} s), peak RSS {float(peak):.2f} GiB, "
          f"{count} findings (goal < 10 s, < 2 GB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
