"""Memory benchmark: peak memory and time of linting one large file, against LibCST's own
parse of the same text.

    python bench/memory_bench.py [--sizes 0.25,0.5] [--kinds modules,dense,calls]
                                 [--max-code-bytes N] [--parts] [--diff]

For each kind and size (MiB of code) a file is generated: `modules` (model classes with
layers and a forward, a training step and a loader with a finding, each block distinct),
`dense` (a short line with a finding on each: positions for every node), `calls` (`f()` on
each line: the most LibCST nodes per byte). Each measurement runs in a fresh process:
`modellint check` (the real command, no cache, every rule) and `libcst.parse_module` of the
same text alone. Printed: peak RSS (MiB) and seconds, per MiB of code, and modellint's ratio
to the parse. `--parts` measures the steps of a lint in one process (CPython's parse, the
outline, LibCST's parse, the rules' walk), each as the peak RSS after it; `--diff` also
measures `check --diff` (the fixes make a second tree). Sizes past `max-code-bytes` (default
512 KiB) are one ML001 and not parsed: pass `--max-code-bytes` above them to lint them.

The default `max-code-bytes` comes from these numbers: a file at the limit stays under about
1.5 GB for the worst code and 0.2-0.4 GB for real model code, within a CI runner's 7 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BLOCK = '''\
class Block{i}(nn.Module):
    """Residual block {i}: two convolutions and a norm."""

    def __init__(self, channels: int = {c}, dropout: float = 0.1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(channels * 4, {i} + 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.drop(self.bn2(self.conv2(out)))
        out = out + identity
        if self.training and out.shape[0] > {c}:
            out = out.view(out.size(0), -1)[:, : {c}]
        return F.relu(out)


def train_step_{i}(model, batch, optimizer, scaler=None):
    inputs, targets = batch
    optimizer.zero_grad()
    with torch.autocast("cuda", enabled=scaler is not None):
        logits = model(inputs.cuda())
        loss = F.cross_entropy(logits, targets.cuda(), label_smoothing=0.{i})
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return {{"loss": loss.item(), "step": {i}}}


def load_{i}(path):
    state = torch.load(path)
    return torch.log(1 + state["scale"])


'''

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


DENSE = "y{i} = torch.log(1 + x[{i}]) * w.a.b(c, d={i})\n"
CALLS = "f()\n"
KINDS = {"modules": BLOCK, "dense": DENSE, "calls": CALLS}


def torch_code(mib: float, kind: str = "modules") -> str:
    """At least `mib` MiB of code: model modules (`BLOCK`, each distinct), short lines with a
    finding on each (`DENSE`: positions for every node), or `f()` on each line (`CALLS`: the
    most LibCST nodes per byte, the worst case)."""
    parts, size, i = [HEADER], len(HEADER), 0
    while size < mib * 1024 * 1024:
        block = KINDS[kind].format(i=i, c=16 + i % 48)
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)


def measured(command: list[str]) -> tuple[float, float, str]:
    """(peak RSS in MiB, wall seconds, stdout) of `command` run in a fresh process (this
    function is called in a fresh process too: RUSAGE_CHILDREN is then only that command's)."""
    probe = (
        "import json, resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - start\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(json.dumps([peak, wall, done.stdout, done.returncode, done.stderr[-2000:]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True,
                         text=True, check=True).stdout
    peak, wall, stdout, rc, err = json.loads(out)
    if rc not in (0, 1):
        sys.exit(f"{command[:4]} failed (exit {rc}):\n{err}")
    return peak, wall, stdout


PARSE_ONLY = "import libcst, sys; libcst.parse_module(open(sys.argv[1]).read())"

PARTS = '''\
import ast, gc, resource, sys, time
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
text = open(sys.argv[1]).read()
import libcst
from modellint.config import Config
from modellint.static.engine import run_rules, parse_with_libcst
from modellint.static.outline import Outline
from modellint.testing import registry
rules = list(registry().rules.values())
rows = [("start (imports, the text)", peak(), 0.0)]
t = time.perf_counter(); tree = ast.parse(text); rows.append(("CPython's parse", peak(), time.perf_counter() - t))
t = time.perf_counter(); outline = Outline.of(tree, text); del tree; gc.collect(); rows.append(("outline (tree dropped)", peak(), time.perf_counter() - t))
t = time.perf_counter(); module = parse_with_libcst(text); rows.append(("LibCST's parse", peak(), time.perf_counter() - t))
t = time.perf_counter(); found = run_rules("big.py", text, module, rules, Config().rule_options(), [], None, outline.lines)
rows.append((f"rules' walk ({len(found)} findings)", peak(), time.perf_counter() - t))
for name, rss, seconds in rows:
    print(f"  {name:<34} peak {rss:8.0f} MiB  {seconds:7.2f} s")
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.25,0.5", help="MiB of code, comma-separated")
    parser.add_argument("--kinds", default="modules,dense,calls",
                        help="the code generated: modules (model classes, a few findings), "
                        "dense (a finding on each short line), calls (`f()` lines)")
    parser.add_argument("--diff", action="store_true",
                        help="also measure `check --diff` (the fixes: a second tree)")
    parser.add_argument("--parts", action="store_true", help="also measure each step")
    parser.add_argument("--max-code-bytes", default=None,
                        help="passed to modellint (set it above the sizes to lint them)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="modellint-memory-bench-") as scratch:
        print(f"{'kind':<8} {'MiB':>5} {'lint MiB':>9} {'lint s':>7} {'parse MiB':>10} {'parse s':>8}"
              f" {'lint MiB/MiB':>13} {'s/MiB':>6} {'x parse RSS':>12}")
        limit = ["--max-code-bytes", args.max_code_bytes] if args.max_code_bytes else []
        for kind, size in ((k, float(s)) for k in args.kinds.split(",")
                           for s in args.sizes.split(",")):
            path = Path(scratch, "big.py")
            text = torch_code(size, kind)
            path.write_text(text, encoding="utf-8")
            mib = len(text.encode()) / (1024 * 1024)
            lint_peak, lint_wall, _ = measured([
                sys.executable, "-m", "modellint", "check", "--no-cache", "--exit-zero",
                "--select", "ALL", "--format", "concise", *limit, "--output-file",
                os.devnull, str(path)])
            parse_peak, parse_wall, _ = measured([sys.executable, "-c", PARSE_ONLY, str(path)])
            if args.diff:
                diff_peak, diff_wall, _ = measured([
                    sys.executable, "-m", "modellint", "check", "--diff", "--exit-zero",
                    "--select", "ALL", *limit, str(path)])
            print(f"{kind:<8} {mib:5.2f} {lint_peak:9.0f} {lint_wall:7.1f} {parse_peak:10.0f}"
                  f" {parse_wall:8.1f} {lint_peak / mib:13.0f} {lint_wall / mib:6.1f}"
                  f" {lint_peak / parse_peak:12.2f}"
                  + (f"   --diff: {diff_peak:.0f} MiB, {diff_wall:.1f} s" if args.diff else ""))
            if args.parts:
                print(subprocess.run([sys.executable, "-c", PARTS, str(path)],
                                     capture_output=True, text=True, check=True).stdout)


if __name__ == "__main__":
    main()
