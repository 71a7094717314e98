"""`modellint run` on real training scripts that no test uses: each must give no finding.

Each repository is cloned at a pinned commit into `$MODELLINT_CORPUS_DIR` (default
`~/.cache/modellint-corpus`, folder `run-<owner>+<name>@<commit>`), never into this checkout,
and its training script is run for a few steps on CPU with tiny settings and local data
(makemore's names.txt, minGPT's synthetic addition task, nanoGPT on random tokens and timm's
train.py, with the repository's own timm package, on random images, both written here), plus
the one CPU-reproducible user-code case of TrainCheck's silent-issue workloads
(stackoverflow-60335387 with FakeData), which must give ML303 while its fix gives none. pytorch/examples is held out on purpose (the independent check).

    python bench/run_corpus.py [--mirror DIR] [--only makemore,minGPT,nanoGPT]
                               [--extend-select ML324,ML325]

`--mirror DIR` clones from DIR/<owner>+<name>/repo instead of GitHub; `--extend-select`
measures rules that are off by default (their false alarms on these scripts). THIS RUNS THE
REPOSITORIES' CODE (that is what `modellint run` does): run it where you would run them.
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

TB_STUB = ("class SummaryWriter:  # stub: tensorboard is not a dependency of modellint\n"
           "    def __init__(self, *a, **k): pass\n"
           "    def __getattr__(self, name): return lambda *a, **k: None\n")


def _makemore(tree: Path) -> list[list[str]]:
    source = (tree / "makemore.py").read_text()
    (tree / "makemore_notb.py").write_text(re.sub(
        r"^from torch.utils.tensorboard import SummaryWriter$", TB_STUB, source, flags=re.M))
    return [["--steps", "30", "--", "python", "makemore_notb.py", "-i", "names.txt", "-o",
             "out-" + kind, "--num-workers", "0", "--type", kind]
            for kind in ("transformer", "rnn", "mlp", "bow")] + [
        ["--steps", "30", "--", "python", "makemore_notb.py", "-i", "names.txt", "-o",
         "out-workers", "--num-workers", "2", "--type", "bow"]]


def _mingpt(tree: Path) -> list[list[str]]:
    return [["--steps", "30", "--", "python", "projects/adder/adder.py"]]


def _nanogpt(tree: Path) -> list[list[str]]:
    import numpy as np

    data = tree / "data" / "fake"
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, size in (("train", 200_000), ("val", 20_000)):
        rng.integers(0, 65, size).astype(np.uint16).tofile(data / f"{split}.bin")
    (data / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65}))
    return [["--steps", "30", "--", "python", "train.py", "--dataset=fake", "--device=cpu",
             "--compile=False", "--dtype=float32", "--eval_iters=2", "--eval_interval=10",
             "--log_interval=5", "--block_size=32", "--batch_size=4", "--n_layer=2",
             "--n_head=2", "--n_embd=32", "--max_iters=100", "--gradient_accumulation_steps=2",
             "--dropout=0.1", "--out_dir=out-fake"]]


def _timm(tree: Path) -> list[list[str]]:
    """timm's train.py (the installed timm package) on a folder of random 40x40 PNGs."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "validation"):
        for label in ("a", "b"):
            folder = tree / "fake-images" / split / label
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(16):
                Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(
                    folder / f"{index}.png")
    return [["--steps", "20", "--", "python", "train.py", "fake-images", "--model", "resnet18",
             "--num-classes", "2", "--img-size", "32", "-b", "4", "--epochs", "10", "-j", "1",
             "--device", "cpu", "--sched", "cosine", "--model-ema", "--output", "out-fake",
             "--log-interval", "5"]]


def _traincheck(tree: Path) -> list[list[str]]:
    """TrainCheck's silent-issue workload stackoverflow-60335387 (optimizer.zero_grad()
    missing) and its fix, on FakeData instead of MNIST (no download) and on CPU: the bug must
    be ML303, the fix clean (see EXPECTED)."""
    folder = "silent-issue-detection/bug-reprod-scripts/stackoverflow-60335387"
    for name in ("bug", "fixed"):
        source = subprocess.run(["git", "-C", str(tree), "show", f"HEAD:{folder}/{name}.py"],
                                capture_output=True, text=True, check=True).stdout
        source = re.sub(r"datasets\.MNIST\(root='./data', train=(True|False), download=True, "
                        r"transform=transform\)", "datasets.FakeData(size=512, image_size=(1, "
                        "28, 28), num_classes=10, transform=transform)", source)
        source = source.replace(".cuda()", "").replace("device='cuda'", "device='cpu'")
        (tree / f"so60335387_{name}.py").write_text(source)
    return [["--", "python", "so60335387_bug.py"], ["--", "python", "so60335387_fixed.py"]]


# scripts that must give findings (every other command must give none)
EXPECTED = {"so60335387_bug.py": {"ML303"}}

CORPUS = [
    ("karpathy/makemore", "988aa59e4d8fefa526d06f3b453ad116258398d4", _makemore),
    ("karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26", _mingpt),
    ("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", _nanogpt),
    ("huggingface/pytorch-image-models", "aa4b5850c1543fa488abf260f18390eda46cf85d", _timm),
    ("OrderLab/TrainCheck-Evaluation-Workloads", "2de9268be8845dade014e5e065693e4fdd9095d6",
     _traincheck),
]


def checkout(name: str, commit: str, cache: Path, mirror: Path | None) -> Path:
    tree = cache / f"run-{name.replace('/', '+')}@{commit}"
    if not (tree / ".git").is_dir():
        source = (str(mirror / name.replace("/", "+") / "repo") if mirror
                  else f"https://github.com/{name}.git")
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", source, str(tree)],
                       check=True)
    # a checkout can fail on files kept out of a mirror (large traces): what is there is used
    subprocess.run(["git", "-C", str(tree), "checkout", "--quiet", commit, "--", "."],
                   capture_output=True)
    return tree


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mirror", type=Path)
    parser.add_argument("--only")
    parser.add_argument("--extend-select", default="")
    args = parser.parse_args()
    select = ["--extend-select", args.extend_select] if args.extend_select else []
    cache = Path(os.environ.get("MODELLINT_CORPUS_DIR",
                                Path.home() / ".cache" / "modellint-corpus"))
    cache.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, commit, commands in CORPUS:
        if args.only and name.split("/")[1] not in args.only.split(","):
            continue
        tree = checkout(name, commit, cache, args.mirror)
        for argv in commands(tree):
            proc = subprocess.run([sys.executable, "-m", "modellint", "run", "--format",
                                   "concise", *select, *argv], cwd=tree, capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(tree)})
            report = proc.stdout.strip().splitlines()
            script = argv[argv.index("--") + 2] if argv[argv.index("--") + 1] == "python" \
                else argv[argv.index("--") + 1]
            codes = set(re.findall(r": (ML\d+) ", proc.stdout))
            ok = codes == EXPECTED.get(script, set())
            verdict = "ok" if ok else "UNEXPECTED"
            failed += not ok
            print(f"{verdict:8} {name}@{commit[:7]} {' '.join(argv[argv.index('--') + 1:])}")
            for line in report:
                print(f"         {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
