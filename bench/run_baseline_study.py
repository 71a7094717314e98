"""The mutation study of `modellint run --record / --compare` (issue 28), in one process.

For each clean training script of fixtures/training/ (the *_good.py twins and clean.py): record
a baseline (20 steps, 5 batches per epoch), then compare with it

- the same script with another seed (`manual_seed(n)` -> n + 1) and another budget (14
  steps): any finding of ML330-ML339 is a false alarm;
- its *_bad.py twin, where there is one (a catalogued mistake): caught when a finding of
  ML330-ML339 is reported (the usual run checks are counted apart);
- refactor-style mutants, where the script has what they change: a layer frozen
  (the model's first trainable parameter), the last two parameters left out of the optimizer, the
  scheduler swapped for ExponentialLR, `model.train()` turned into `model.eval()`, a
  learning rate 10x, float64 everywhere (`torch.set_default_dtype`), labels shuffled apart
  from their inputs is NOT among them (its effect on 20 steps is within noise).

    python bench/run_baseline_study.py [--only clean,ml301_good] [--verbose]
    python bench/run_baseline_study.py --traincheck MIRROR [--only pytorch-51800]  # bare clone
      of OrderLab/TrainCheck-Evaluation-Workloads: its silent-error workloads that run on CPU

Runs each script in this process under `modellint.watch(baseline=...)`, as the pytest
fixture does (`modellint run` starts a process each: the same checks, slower).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import runpy
import sys
import tempfile
import warnings
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "training"
SKIP = {"hogwild_good.py"}  # starts processes: only `modellint run` follows them
BASELINE_CODES = [f"ML33{i}" for i in range(10)]


def _freeze(text: str) -> str | None:
    # after the optimizer is built, before training: the model's first parameter frozen
    match = re.search(r"^(\w+) = torch\.optim\.\w+\(", text, re.M)
    model = re.search(r"^(model|net|generator|G)\b\s*=", text, re.M)
    if not match or not model:
        return None
    end = text.index("\n", text.index(")", match.end())) + 1
    return (text[:end] + f"next(p for p in {model.group(1)}.parameters() if p.requires_grad)"
            f".requires_grad_(False)\n" + text[end:])


def _leave_out(text: str) -> str | None:
    new = re.sub(r"(torch\.optim\.\w+\()(\w+(?:\[\d+\])?)\.parameters\(\)",
                 r"\1list(\2.parameters())[:-2]", text, count=1)
    return new if new != text else None


def _swap_scheduler(text: str) -> str | None:
    new = re.sub(r"lr_scheduler\.\w+\((\w+)[^\n]*\)\n", r"lr_scheduler.ExponentialLR(\1, "
                 r"gamma=0.7)\n", text, count=1)
    return new if new != text else None


def _eval_moved(text: str) -> str | None:
    new = text.replace("model.train()", "model.eval()", 1)
    return new if new != text else None


def _lr_10x(text: str) -> str | None:
    def times_ten(match):
        return f"lr={float(match.group(1)) * 10:g}"
    new = re.sub(r"\blr=([0-9.]+(?:e-?\d+)?)", times_ten, text, count=1)
    return new if new != text else None


def _float64(text: str) -> str | None:
    lines = text.split("\n")
    last_import = max(i for i, line in enumerate(lines) if line.startswith(("import ",
                                                                             "from ")))
    lines.insert(last_import + 1, "torch.set_default_dtype(torch.float64)")
    return "\n".join(lines)


MUTANTS = {"layer frozen": _freeze, "head left out of the optimizer": _leave_out,
           "scheduler swapped": _swap_scheduler, "eval() moved": _eval_moved,
           "learning rate 10x": _lr_10x, "dtype float64": _float64}


def _reseed(text: str) -> str:
    return re.sub(r"manual_seed\((\d+)\)", lambda m: f"manual_seed({int(m.group(1)) + 1})",
                  text)


def watched(text: str, folder: Path, baseline: Path, steps: int = 20):
    import torch

    import modellint

    script = folder / "script.py"
    script.write_text(text)
    dtype = torch.get_default_dtype()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()), \
            modellint.watch(steps=steps, batches_per_epoch=5, baseline=baseline) as w:
        warnings.simplefilter("ignore")
        try:
            runpy.run_path(str(script), run_name="__main__")
        except Exception:  # noqa: BLE001 - a mutant that fails: what was seen is compared
            pass
        except SystemExit:
            pass
    torch.set_default_dtype(dtype)
    return w


# real scripts of bench/run_corpus.py whose pinned trees are in the corpus cache: (name,
# commit, (file, seed line, another seed), (file, learning-rate line, 10x))
REAL = [("karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26",
         ("projects/adder/adder.py", "C.system.seed = 3407", "C.system.seed = 3408"),
         ("projects/adder/adder.py", "C.trainer.learning_rate = 5e-4",
          "C.trainer.learning_rate = 5e-3")),
        ("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291",
         ("train.py", "torch.manual_seed(1337 + seed_offset)",
          "torch.manual_seed(1338 + seed_offset)"),
         ("train.py", "learning_rate = 6e-4 # max", "learning_rate = 6e-3 # max"))]


def real_scripts(cache: Path) -> None:
    """Each real script recorded (30 steps), then compared: the same with another seed and
    20 steps (a false alarm if any ML33x), and with a learning rate 10x (caught or not).
    `modellint run` processes, in a copy of the pinned tree (never the cache itself)."""
    import os
    import shutil
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run_corpus

    commands = {"karpathy/minGPT": run_corpus._mingpt, "karpathy/nanoGPT": run_corpus._nanogpt}
    for name, commit, seed, lr in REAL:
        source = cache / f"{name.replace('/', '+')}@{commit}"
        if not source.is_dir():
            print(f"{name}: not in {cache}: skipped")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            shutil.copytree(source, tree, ignore=shutil.ignore_patterns(".git"))
            [argv] = commands[name](tree)
            command = argv[argv.index("--"):]
            command[1] = sys.executable

            def run(*options, tree=tree, command=command):
                proc = subprocess.run([sys.executable, "-m", "modellint", "run", "--format",
                                       "concise", *options, *command], cwd=tree,
                                      capture_output=True, text=True,
                                      env={**os.environ, "PYTHONPATH": str(tree)})
                return sorted(set(re.findall(r": (ML33\d) ", proc.stdout))), proc

            def edit(change, tree=tree):
                path = tree / change[0]
                text = path.read_text()
                assert change[1] in text, change
                path.write_text(text.replace(change[1], change[2], 1))
                return lambda: path.write_text(text)

            codes, proc = run("--steps", "30", "--record", str(Path(tmp) / "b.json"))
            if not (Path(tmp) / "b.json").exists():
                print(f"{name}: no baseline: {proc.stderr[-500:]}")
                continue
            undo = edit(seed)
            alarm, proc = run("--steps", "20", "--compare", str(Path(tmp) / "b.json"))
            undo()
            undo = edit(lr)
            caught, proc = run("--steps", "30", "--compare", str(Path(tmp) / "b.json"))
            undo()
            print(f"{name}: other seed and 20 steps: {alarm or 'clean'}; learning rate 10x: "
                  f"{caught or 'MISSED'}", flush=True)


# TrainCheck's silent-error workloads (OrderLab/TrainCheck-Evaluation-Workloads, the commit
# below): the bug and fix scripts are extracted from the mirror into a cache folder outside the
# repository, and the CPU/data substitutions are applied there as text edits.
TRAINCHECK_REPO = "OrderLab/TrainCheck-Evaluation-Workloads"
TRAINCHECK_COMMIT = "2de9268be8845dade014e5e065693e4fdd9095d6"
TRAINCHECK_DIR = "silent-issue-detection/bug-reprod-scripts"
_MNIST = [("datasets.MNIST(root='./data', train=True, download=True, transform=transform)",
           "datasets.FakeData(size=600, image_size=(1, 28, 28), num_classes=10, "
           "transform=transform, random_offset=0)"),
          ("datasets.MNIST(root='./data', train=False, download=True, transform=transform)",
           "datasets.FakeData(size=60, image_size=(1, 28, 28), num_classes=10, "
           "transform=transform, random_offset=10000)"),
          (".cuda()", ""), ("device='cuda'", "device='cpu'")]
_CIFAR100 = [('datasets.CIFAR100(\n    root="./data", train=True, download=True, '
              'transform=data_transform["train"]\n)',
              'datasets.FakeData(size=640, image_size=(3, 32, 32), num_classes=100, '
              'transform=data_transform["train"], random_offset=0)'),
             ('datasets.CIFAR100(\n    root="./data", train=False, download=True, '
              'transform=data_transform["valid"]\n)',
              'datasets.FakeData(size=20, image_size=(3, 32, 32), num_classes=100, '
              'transform=data_transform["valid"], random_offset=10000)'),
             ("transforms.Resize((224, 224)),", "transforms.Resize((32, 32)),"),
             ("num_workers=1", "num_workers=0"), ("np.Inf", "np.inf"),
             # efficientnet_pytorch's pretrained download: a small stand-in with the same
             # attribute names (`_fc`, batch norms named `_bn*`), so the freezing loops are
             # the workload's own
             ("from efficientnet_pytorch import EfficientNet\n",
              "class EfficientNet(nn.Module):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self._conv_stem = nn.Conv2d(3, 16, 3, 2, 1)\n"
              "        self._bn0 = nn.BatchNorm2d(16)\n"
              "        self._conv_head = nn.Conv2d(16, 32, 3, 2, 1)\n"
              "        self._bn1 = nn.BatchNorm2d(32)\n"
              "        self._fc = nn.Linear(32, 1000)\n"
              "    def forward(self, x):\n"
              "        x = torch.relu(self._bn0(self._conv_stem(x)))\n"
              "        x = torch.relu(self._bn1(self._conv_head(x)))\n"
              "        return self._fc(x.mean((2, 3)))\n"
              "    @classmethod\n"
              "    def from_pretrained(cls, name):\n"
              "        return cls()\n")]
_MNIST_51800 = [("datasets.MNIST('../data', train=True, download=True, transform=transform)",
                 "datasets.FakeData(size=600, image_size=(1, 28, 28), num_classes=10, "
                 "transform=transform, random_offset=0)"),
                ("datasets.MNIST('../data', train=False, transform=transform)",
                 "datasets.FakeData(size=60, image_size=(1, 28, 28), num_classes=10, "
                 "transform=transform, random_offset=10000)")]
# (workload, fixed script, buggy script, substitutions, seed line or None); a workload that
# cannot run here is (workload, None, None, why, None)
TRAINCHECK = [
    ("pytorch-51800", "mnist_51800_buggy_resolved.py", "mnist_51800_buggy.py", _MNIST_51800,
     None),
    ("pytorch-forum-84911", "fixed.py", "bug.py", _CIFAR100, ("seed = 786", "seed = 787")),
    ("stackoverflow-60335387", "fixed.py", "bug.py", _MNIST, None),
    ("baichuan2-86", None, None, "2 GPUs (a CUDA driver/hardware fault)", None),
    ("deepspeed-1801", None, None, "DeepSpeed/Megatron tensor parallelism on GPUs, a "
     "CodeParrot download", None),
    ("deepspeed-5794", None, None, "DeepSpeed; TrainCheck did not evaluate it either", None),
    ("lightning-thunder-725", None, None, "lightning-thunder and CUDA autocast (TrainCheck "
     "simulated its trace)", None),
    ("mmpretrain-702", None, None, "mmpretrain/mmcv and a pretrained VGG19 download "
     "(TrainCheck simulated its trace)", None),
    ("pytorch-84803", None, None, "2 GPUs (a GPU driver fault)", None),
    ("pytorch-96600", None, None, "2 GPUs (shares pytorch-84803's trace)", None),
    ("pytorch-104336", None, None, "multi-GPU DDP (NCCL)", None),
    ("pytorch-115607", None, None, "a torch 2.2 dynamo bug, fixed in the installed torch "
     "(TrainCheck simulated it)", None),
    ("stackoverflow-67180955", None, None, "an outdated Python; TrainCheck did not evaluate "
     "it either", None),
    ("transformers-17877", None, None, "a Hugging Face model and dataset download", None),
    ("transformers-23723", None, None, "Whisper and a Hugging Face dataset download", None),
    ("transformers-33844", None, None, "a Hugging Face translation model download", None),
    ("transformers-34204", None, None, "a Hugging Face model download; TrainCheck did not "
     "evaluate it either", None),
    ("x-jxmnop-ddp-out-of-sync", None, None, "multi-GPU DDP (shares pytorch-104336's trace)",
     None),
]


def _traincheck_source(mirror: Path, workload: str, name: str) -> str:
    import subprocess

    return subprocess.run(["git", "--git-dir", str(mirror), "show",
                           f"{TRAINCHECK_COMMIT}:{TRAINCHECK_DIR}/{workload}/{name}"],
                          check=True, capture_output=True, text=True).stdout


def _substituted(text: str, substitutions) -> str:
    for old, new in substitutions:
        assert old in text, old
        text = text.replace(old, new)
    return text


def _with_seed(text: str, seed: int) -> str:
    lines = text.split("\n")
    last_import = max(i for i, line in enumerate(lines) if line.startswith(("import ", "from "))
                      and not line.startswith("from __future__"))
    lines.insert(last_import + 1, f"torch.manual_seed({seed})")
    return "\n".join(lines)


def traincheck(mirror: Path, cache: Path, steps: int, only: set[str]) -> None:
    """Each TrainCheck workload that runs on CPU: the fixed script recorded, the buggy one
    compared (caught: a finding of ML330-ML339, or another run finding), the fixed one with
    another seed compared (a false alarm if any ML33x). `modellint run` processes."""
    import os
    import subprocess

    caught = runnable = alarms = 0
    rows = []
    for workload, fixed, buggy, substitutions, seed in TRAINCHECK:
        if only and workload not in only:
            continue
        if fixed is None:
            rows.append(f"| `{workload}` | not run: {substitutions} | | |")
            continue
        folder = cache / workload
        folder.mkdir(parents=True, exist_ok=True)
        texts = {}
        for role, name in (("fixed", fixed), ("buggy", buggy)):
            text = _substituted(_traincheck_source(mirror, workload, name), substitutions)
            texts[role] = text if seed is not None else _with_seed(text, 0)
        # a script without a seed of its own is seeded after its imports (0; 1 for the
        # false-alarm run), so that each run is deterministic
        texts["other seed"] = texts["fixed"].replace(*(seed or ("torch.manual_seed(0)",
                                                                "torch.manual_seed(1)")), 1)
        for role, text in texts.items():
            (folder / f"{role.replace(' ', '_')}.py").write_text(text)

        def run(role, *options, folder=folder):
            proc = subprocess.run([sys.executable, "-m", "modellint", "run", "--format",
                                   "concise", "--exit-zero", "--steps", str(steps), *options,
                                   "--", sys.executable, f"{role.replace(' ', '_')}.py"],
                                  cwd=folder, capture_output=True, text=True,
                                  env={**os.environ, "MPLBACKEND": "Agg"})
            codes = re.findall(r": (ML\d{3}) ", proc.stdout)
            return (sorted({c for c in codes if c in BASELINE_CODES}),
                    sorted({c for c in codes if c not in BASELINE_CODES}), proc)

        baseline = folder / "baseline.json"
        baseline.unlink(missing_ok=True)
        _, recorded_others, proc = run("fixed", "--record", str(baseline))
        if not baseline.exists():
            rows.append(f"| `{workload}` | no baseline: {proc.stderr.strip()[-200:]} | | |")
            continue
        runnable += 1
        bug_codes, bug_others, _ = run("buggy", "--compare", str(baseline))
        # a run finding counts only when the fixed script's run does not have it too
        new_others = sorted(set(bug_others) - set(recorded_others))
        alarm, _, _ = run("other seed", "--compare", str(baseline))
        caught += bool(bug_codes or new_others)
        alarms += bool(alarm)
        rows.append(f"| `{workload}` | {', '.join(bug_codes) or 'no ML33x'}; run checks: "
                    f"{', '.join(new_others) or 'none new'} | "
                    f"{'caught' if bug_codes or new_others else 'MISSED'} | "
                    f"{', '.join(alarm) or 'clean'} |")
        print(rows[-1], flush=True)
    print("| workload | buggy script compared | | fixed, another seed |\n|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nTrainCheck workloads run on CPU: {runnable}/{len(TRAINCHECK)}; caught "
          f"{caught}/{runnable}; false alarms {alarms}/{runnable} (TrainCheck: 18/20)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--real", action="store_true",
                        help="also minGPT and nanoGPT of bench/run_corpus.py, from the corpus "
                             "cache ($MODELLINT_CORPUS_DIR or ~/.cache/modellint-corpus)")
    parser.add_argument("--traincheck", metavar="MIRROR",
                        help="also TrainCheck's silent-error workloads that run on CPU, from a "
                             "bare git mirror of " + TRAINCHECK_REPO + "; extracted into "
                             "$MODELLINT_CORPUS_DIR/traincheck-workloads (or a tmp folder)")
    args = parser.parse_args()
    if args.traincheck:
        import os

        corpus = os.environ.get("MODELLINT_CORPUS_DIR")
        with tempfile.TemporaryDirectory() as tmp:
            traincheck(Path(args.traincheck), Path(corpus or tmp) / "traincheck-workloads", 20,
                       {n for n in args.only.split(",") if n})
        return 0
    if args.real:
        import os

        real_scripts(Path(os.environ.get("MODELLINT_CORPUS_DIR",
                                         Path.home() / ".cache" / "modellint-corpus")))
    only = {f"{n}.py" for n in args.only.split(",") if n}
    goods = sorted(p for p in FIXTURES.glob("*.py") if (p.name.endswith("_good.py") or
                                                        p.name == "clean.py")
                   and p.name not in SKIP and (not only or p.name in only))
    caught = total = twins_caught = twins_total = twins_other = twins_either = alarms = 0
    per_kind: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for good in goods:
            text = good.read_text()
            baseline = folder / f"{good.stem}.json"
            watched(text, folder, baseline)
            if not baseline.exists():
                print(f"{good.name}: no baseline recorded", file=sys.stderr)
                continue
            w = watched(_reseed(text), folder, baseline, steps=14)
            false = [f for f in w.findings if f.code in BASELINE_CODES]
            alarms += bool(false)
            line = [f"{good.name}: other seed+budget {'ALARM ' + str([f.code for f in false]) if false else 'clean'}"]
            if args.verbose:
                line += [f"    {f.code} {f.line}: {f.message}" for f in false]
            bad = FIXTURES / good.name.replace("_good.py", "_bad.py")
            if good.name.endswith("_good.py") and bad.exists():
                w = watched(bad.read_text(), folder, baseline)
                codes = sorted({f.code for f in w.findings if f.code in BASELINE_CODES})
                others = sorted({f.code for f in w.findings if f.code not in BASELINE_CODES})
                twins_total += 1
                twins_caught += bool(codes)
                twins_other += bool(others)
                twins_either += bool(codes or others)
                line.append(f"  bad twin: {codes or 'MISSED'} (run checks: {others})")
            for kind, mutate in MUTANTS.items():
                mutant = mutate(text)
                if mutant is None or mutant == text:
                    continue
                w = watched(mutant, folder, baseline)
                codes = sorted({f.code for f in w.findings if f.code in BASELINE_CODES})
                total += 1
                caught += bool(codes)
                per_kind.setdefault(kind, [0, 0])
                per_kind[kind][0] += bool(codes)
                per_kind[kind][1] += 1
                line.append(f"  {kind}: {codes or 'MISSED'}")
            print("\n".join(line), flush=True)
    print(f"\nscripts: {len(goods)}; false alarms (other seed and budget): {alarms}/{len(goods)}")
    print(f"catalogued mistakes (bad twins): {twins_caught}/{twins_total} caught by ML330-ML339 "
          f"({twins_other}/{twins_total} by the usual run checks, {twins_either}/{twins_total} by "
          f"either)")
    print(f"refactor mutants: {caught}/{total} caught")
    for kind, (c, t) in per_kind.items():
        print(f"  {kind}: {c}/{t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
