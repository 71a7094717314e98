"""`modellint run` overhead, as ratios measured in one run (not a timed test).

A small CNN (two conv blocks with batch norm and dropout, CIFAR-sized input) trains for 50
optimizer steps on synthetic data through a DataLoader, with a scheduler and an eval pass,
plain and under `modellint.watch()` (the instrumentation `modellint run` loads), the two
interleaved, best of the repeats. Goal: instrumented ≤ 1.3× plain. Also recording a baseline
(`modellint run --record`, `watch(baseline=...)` with no file yet) and comparing with it
(`--compare`), interleaved with them: goal ≤ 1.2× plain (docs/run-baseline.md).

Memory: the Python allocations the instrumentation adds (tracemalloc, peak over the run) and
the tensors it references (the outputs of the forward's leaf modules, to name the module of a
first non-finite loss, from the forward to the start of the backward: alive then anyway).

    python bench/run_bench.py [--steps 50] [--repeat 5] [--batch 32] [--threads 1]
                              [--clock cpu|wall]

By default torch runs one thread and times are this process's CPU time (see
bench/runtime_bench.py for why on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import tracemalloc


def build(torch, nn):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 8 * 8, 10),
    )
    return model


def train(steps: int, batch: int, loader_data) -> float:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    model = build(torch, nn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
    loader = DataLoader(loader_data, batch_size=batch, shuffle=True)
    done, last = 0, 0.0
    while done < steps:
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            last = loss.item()
            done += 1
            if done == steps:
                break
        scheduler.step()
        model.eval()
        with torch.no_grad():
            model(loader_data.tensors[0][:batch])
    return last


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    import torch
    from torch.utils.data import TensorDataset

    import modellint

    torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    data = TensorDataset(torch.randn(args.batch * 20, 3, 32, 32),
                         torch.randint(0, 10, (args.batch * 20,)))
    train(3, args.batch, data)  # warm up both paths
    with modellint.watch():
        train(3, args.batch, data)
    plain, watched, recorded, compared = [], [], [], []
    folder = tempfile.mkdtemp(prefix="modellint-bench-")
    baseline = os.path.join(folder, "baseline.json")
    for _ in range(args.repeat):
        start = clock()
        train(args.steps, args.batch, data)
        plain.append(clock() - start)
        start = clock()
        with modellint.watch() as w:
            train(args.steps, args.batch, data)
        watched.append(clock() - start)
        assert w.recorder.total_steps == args.steps and w.findings == [], str(w)
        if os.path.exists(baseline):
            os.unlink(baseline)
        start = clock()  # --record: the baseline observed and written
        with modellint.watch(baseline=baseline) as w:
            train(args.steps, args.batch, data)
        recorded.append(clock() - start)
        start = clock()  # --compare: observed, read back and compared
        with modellint.watch(baseline=baseline) as w:
            train(args.steps, args.batch, data)
        compared.append(clock() - start)
        assert w.findings == [], str(w)
    shutil.rmtree(folder, ignore_errors=True)
    best_plain, best_watched = min(plain), min(watched)
    print(f"{args.steps} steps, batch {args.batch}, {args.threads} thread(s), {args.clock} "
          f"time, best of {args.repeat}:")
    print(f"  plain         {best_plain:.3f} s")
    print(f"  instrumented  {best_watched:.3f} s (incl. the checks at the end)")
    ratio = best_watched / best_plain
    print(f"  ratio         {ratio:.2f}x (goal <= 1.3x): {'ok' if ratio <= 1.3 else 'OVER'}")
    for name, times in (("--record", recorded), ("--compare", compared)):
        best = min(times)
        print(f"  {name:<12}  {best:.3f} s: {best / best_plain:.2f}x plain (goal <= 1.2x: "
              f"{'ok' if best / best_plain <= 1.2 else 'OVER'}), {best / best_watched:.2f}x "
              f"instrumented")

    tracemalloc.start()
    train(args.steps, args.batch, data)
    plain_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    with modellint.watch() as w:
        train(args.steps, args.batch, data)
    watched_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    model = build(torch, torch.nn)
    x = data.tensors[0][:args.batch]
    with modellint.watch() as w:  # one training step: what the recorder holds
        out = model(x).sum()
        during = sum(t.numel() * t.element_size() for _, t in w.recorder._leaf_outputs)
        out.backward()
        held = sum(t.numel() * t.element_size() for _, t in w.recorder._leaf_outputs)
    params = sum(p.numel() * p.element_size() for p in build(torch, torch.nn).parameters())
    print(f"memory: Python allocations peak {plain_peak / 2**20:.2f} MiB plain, "
          f"{watched_peak / 2**20:.2f} MiB instrumented "
          f"(+{(watched_peak - plain_peak) / 2**20:.2f} MiB); tensors referenced by the "
          f"recorder: {during / 2**20:.2f} MiB between forward and backward (the leaf "
          f"modules' outputs, alive then anyway), {held / 2**20:.2f} MiB after the backward; "
          f"parameters {params / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
