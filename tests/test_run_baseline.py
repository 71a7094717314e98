"""`modellint run --record` / `--compare` (issue 28): a baseline recorded from a training script
committed in a test repository, changes that break it reported with their code at the line that
made them, changes that do not (another seed, another budget) reported clean; the baseline read
as untrusted input; the API (`watch(baseline=...)`) and the pytest fixture. Real processes."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import modellint  # noqa: E402
from modellint.watching.baseline import BaselineError, parse  # noqa: E402

pytest_plugins = ["pytester"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "training"
SCRIPT = (FIXTURES / "clean.py").read_text()


def _run(*argv, cwd, timeout=240):
    return subprocess.run([sys.executable, "-m", "modellint", "run", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


def _git(repo: Path, *argv: str) -> None:
    subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A repository with train.py and the baseline recorded from it, both committed."""
    repo = tmp_path_factory.mktemp("repo")
    (repo / "train.py").write_text(SCRIPT)
    out = _run("--record", "baseline.json", "--", sys.executable, "train.py", cwd=repo)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "baseline of 1 run(s) written" in out.stderr
    _git(repo, "init", "-q")
    _git(repo, "add", "train.py", "baseline.json")
    _git(repo, "commit", "-qm", "known-good run")
    return repo


def _changed(repo: Path, old: str, new: str, name: str = "changed.py") -> str:
    """A copy of the script with `old` replaced by `new` (each a line; several, `|`-separated,
    for a change of several lines)."""
    text = SCRIPT
    for before, after in zip(old.split("|"), new.split("|"), strict=True):
        assert before in text, before
        text = text.replace(before, after, 1)
    (repo / name).write_text(text)
    return name


def _compare(repo: Path, script: str, *options: str):
    out = _run("--compare", "baseline.json", "--format", "json", *options, "--",
               sys.executable, script, cwd=repo)
    assert "Traceback" not in out.stderr, out.stderr
    return out, json.loads(out.stdout) if out.stdout.strip() else []


def test_the_baseline_is_small_readable_versioned_json(repo):
    text = (repo / "baseline.json").read_text()
    data = json.loads(text)
    assert data["format"] == "modellint-baseline" and data["version"] == 1
    assert data["runs"] == 1 and data["steps"] == 20
    model = data["models"]["Sequential"]
    assert set(model["parameters"]) == {"0.weight", "0.bias", "3.weight", "3.bias"}
    assert all(p["trained"] and p["dtype"] == "float32" for p in model["parameters"].values())
    assert model["modes"]["grad"] == {"train": 20} or set(model["modes"]["grad"]) == {"train"}
    assert set(model["modes"]["no_grad"]) == {"eval"}
    [opt] = data["optimizers"]
    assert opt["class"] == "SGD" and opt["schedulers"] == ["StepLR"]
    assert opt["lr"] == [[[0.1, 10], [0.05, 10]]]  # StepLR(2, 0.5) over 2 epochs of 5 steps
    assert opt["groups"][0]["options"]["momentum"] == 0.9
    assert set(data["layers"]) == {"Sequential.0", "Sequential.3"}
    low, high = data["layers"]["Sequential.0"]["grad_norm"]
    assert 0 < low <= high
    assert len(text) < 4000 and '"sites"' not in text  # no paths or lines of this checkout


def test_the_same_script_compares_clean(repo):
    out, findings = _compare(repo, "train.py")
    assert out.returncode == 0 and findings == [], out.stderr


@pytest.mark.parametrize(("old", "new", "code", "line"), [
    # a layer frozen by accident: at the freezing call
    ("criterion = nn", "model[0].requires_grad_(False)\ncriterion = nn", "ML330", 13),
    # a head left out of the optimizer by a parameter filter: at the optimizer
    ("SGD(model.parameters()", "SGD(model[0].parameters()", "ML330", 11),
    # a scheduler swapped: at the new scheduler
    ("StepLR(optimizer, step_size=2, gamma=0.5)", "CosineAnnealingLR(optimizer, T_max=10)",
     "ML331", 12),
    # eval() moved into the training loop: at the training call in eval mode
    ("    model.train()\n", "    model.eval()\n", "ML332", 20),
    # a dtype changed: at the cast
    ("torch.randn(256, 8)|nn.Linear(16, 3))\n",
     "torch.randn(256, 8, dtype=torch.float64)|nn.Linear(16, 3)).double()\n", "ML333", 10),
    # an option of the group changed: at the optimizer
    ("momentum=0.9", "momentum=0.5", "ML334", 11),
])
def test_a_change_that_breaks_the_baseline_is_reported_at_its_line(repo, old, new, code, line):
    script = _changed(repo, old, new)
    out, findings = _compare(repo, script)
    assert out.returncode == 1
    at = [(f["code"], f["line"]) for f in findings]
    assert (code, line) in at, out.stdout
    found = next(f for f in findings if f["code"] == code)
    assert "baseline" in found["message"] and "now" in found["message"]


def test_another_seed_and_budget_of_the_same_script_compare_clean(repo):
    script = _changed(repo, "torch.manual_seed(0)", "torch.manual_seed(7)", "seeded.py")
    out, findings = _compare(repo, script, "--steps", "14")
    assert out.returncode == 0 and findings == [], out.stdout


def test_accepted_changes_in_the_configuration(repo, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "baseline.json").write_text((repo / "baseline.json").read_text())
    (work / "train.py").write_text(SCRIPT.replace("momentum=0.9", "momentum=0.5"))
    (work / "pyproject.toml").write_text(
        '[tool.modellint]\nbaseline-accept = ["ML334:optimizers[[]0].groups[[]0].momentum"]\n')
    out, findings = _compare(work, "train.py")
    assert findings == [] and out.returncode == 0, out.stdout
    (work / "pyproject.toml").write_text('[tool.modellint]\nbaseline-accept = ["ML301"]\n')
    out = _run("--compare", "baseline.json", "--", sys.executable, "train.py", cwd=work)
    assert out.returncode == 2 and "`baseline-accept` entry 'ML301'" in out.stderr
    (work / "pyproject.toml").write_text('[tool.modellint]\nbaseline-acept = ["ML331"]\n')
    out = _run("--compare", "baseline.json", "--", sys.executable, "train.py", cwd=work)
    assert out.returncode == 2 and "unknown key `baseline-acept`" in out.stderr
    assert "did you mean `baseline-accept`" in out.stderr


def test_update_rewrites_the_baseline(repo, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "baseline.json").write_text((repo / "baseline.json").read_text())
    (work / "train.py").write_text(SCRIPT.replace("momentum=0.9", "momentum=0.5"))
    out = _run("--compare", "baseline.json", "--update", "--", sys.executable, "train.py",
               cwd=work)
    assert out.returncode == 1 and "ML334" in out.stdout  # reported, then accepted
    assert json.loads((work / "baseline.json").read_text())["optimizers"][0]["groups"][0][
        "options"]["momentum"] == 0.5
    out, findings = _compare(work, "train.py")
    assert findings == [] and out.returncode == 0


def test_recording_again_adds_the_run_and_widens_the_bands(repo, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    before = json.loads((repo / "baseline.json").read_text())
    (work / "baseline.json").write_text((repo / "baseline.json").read_text())
    (work / "train.py").write_text(SCRIPT.replace("manual_seed(0)", "manual_seed(3)"))
    out = _run("--record", "baseline.json", "--", sys.executable, "train.py", cwd=work)
    assert out.returncode == 0 and "baseline of 2 run(s) written" in out.stderr
    after = json.loads((work / "baseline.json").read_text())
    assert after["runs"] == 2
    for layer, bands in before["layers"].items():
        for kind, (low, high) in bands.items():
            new_low, new_high = after["layers"][layer][kind]
            assert new_low <= low and new_high >= high
    assert after["optimizers"][0]["lr"] == before["optimizers"][0]["lr"]


@pytest.mark.parametrize(("content", "says"), [
    ("not json", "is not valid JSON"),
    ('{"format": "modellint-baseline", "version": 99}', "version 99"),
    ('["a list"]', "is not a modellint baseline"),
    ('{"format": "modellint-baseline", "version": 1, "runs": 1, "steps": 2, "models": '
     '{"M": {"class": 3}}}', "`models.M.class` must be str"),
    ('{"format": "modellint-baseline", "version": 1, "runs": NaN}', "NaN is not allowed"),
    ("[" * 100000, "is not valid JSON"),
])
def test_a_malformed_baseline_is_one_clear_error_and_the_script_never_runs(repo, tmp_path,
                                                                             content, says):
    (tmp_path / "baseline.json").write_text(content)
    (tmp_path / "train.py").write_text("print('THE SCRIPT RAN')\n")
    out = _run("--compare", "baseline.json", "--", sys.executable, "train.py", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert "THE SCRIPT RAN" not in out.stderr + out.stdout


def test_a_baseline_path_that_is_a_link_is_refused(repo, tmp_path):
    (tmp_path / "train.py").write_text("print('THE SCRIPT RAN')\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text((repo / "baseline.json").read_text())
    (tmp_path / "baseline.json").symlink_to(outside)
    for option in ("--record", "--compare"):
        out = _run(option, "baseline.json", "--", sys.executable, "train.py", cwd=tmp_path)
        assert out.returncode == 2 and "link" in out.stderr, out.stderr
        assert "THE SCRIPT RAN" not in out.stderr
    assert json.loads(outside.read_text())["runs"] == 1  # never written through the link
    out = _run("--update", "--", sys.executable, "train.py", cwd=tmp_path)
    assert out.returncode == 2 and "--update rewrites the baseline of --compare" in out.stderr


def test_a_failed_run_is_never_recorded(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT.replace("        optimizer.step()\n",
                                                      "        optimizer.step()\n"
                                                      "        raise ValueError('bad batch')\n"))
    out = _run("--record", "baseline.json", "--", sys.executable, "train.py", cwd=tmp_path)
    assert out.returncode == 1 and "ML003" in out.stdout
    assert "not written, the script failed" in out.stderr
    assert not (tmp_path / "baseline.json").exists()


def test_parse_never_raises_anything_but_a_baseline_error():
    good = {"format": "modellint-baseline", "version": 1, "runs": 1, "steps": 1, "models": {},
            "optimizers": [], "layers": {}, "loss": None, "ranks": None}
    assert parse(json.dumps(good))["steps"] == 1
    for key in good:
        for value in (None, 1, "x", [], {}, [[1]], {"a": [1, "b"]}, True, -1.5):
            bad = {**good, key: value}
            try:
                parse(json.dumps(bad))
            except BaselineError:
                pass


# -- in process: the API and the pytest fixture ---------------------------------------------
@pytest.mark.filterwarnings("ignore")
def test_watch_records_then_compares(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    baseline = tmp_path / "baseline.json"
    with modellint.watch(steps=12, baseline=baseline) as w:
        runpy.run_path(str(script), run_name="__main__")
    assert w.ok and json.loads(baseline.read_text())["steps"] == 12
    script.write_text(SCRIPT.replace("SGD(model.parameters()", "SGD(model[3].parameters()"))
    with modellint.watch(steps=12, baseline=baseline) as w:
        runpy.run_path(str(script), run_name="__main__")
    assert ("ML330", 11) in [(f.code, f.line) for f in w.findings], str(w)
    with modellint.watch(steps=12, baseline=baseline, accept=["ML330", "ML334"],
                         ignore=["ML305"]) as w:
        runpy.run_path(str(script), run_name="__main__")
    assert w.ok, str(w)
    baseline.write_text("{")
    with pytest.raises(BaselineError, match="not valid JSON"):
        modellint.watch(baseline=baseline)


def test_pytest_fixture_compares_with_a_baseline(pytester, repo):
    (pytester.path / "baseline.json").write_text((repo / "baseline.json").read_text())
    (pytester.path / "good.py").write_text(SCRIPT)
    (pytester.path / "bad.py").write_text(SCRIPT.replace("    model.train()\n",
                                                         "    model.eval()\n"))
    pytester.makepyfile(test_loop="""
        import runpy

        def test_good(modellint):
            with modellint.watch(steps=20, batches_per_epoch=5, baseline="baseline.json"):
                runpy.run_path("good.py", run_name="__main__")

        def test_bad(modellint):
            with modellint.watch(steps=20, batches_per_epoch=5, baseline="baseline.json"):
                runpy.run_path("bad.py", run_name="__main__")
    """)
    result = pytester.runpytest_subprocess("-q", "-W", "ignore", "-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ML332*eval mode with gradients*"])


# -- under torchrun: two gloo ranks on CPU ----------------------------------------------------
DDP = '''import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
sampler = DistributedSampler(data, shuffle=True)
loader = DataLoader(data, batch_size=8, sampler=sampler)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
model = DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for epoch in range(10):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
dist.destroy_process_group()
'''


def test_under_torchrun_a_model_no_longer_wrapped_in_ddp_is_reported(tmp_path):
    pytest.importorskip("torch.distributed")
    (tmp_path / "train.py").write_text(DDP)
    out = _run("--record", "baseline.json", "--steps", "8", "--", "torchrun",
               "--nproc-per-node", "2", "train.py", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads((tmp_path / "baseline.json").read_text())
    assert data["ranks"] == {"count": 2, "params_agree": True, "differ": []}
    assert data["models"]["Sequential"]["wrapper"] == "DistributedDataParallel"
    # one code path leaves the wrapper out (each rank seeded apart, as a per-rank seed does)
    (tmp_path / "train.py").write_text(DDP.replace(
        "model = DistributedDataParallel(model)\n",
        "torch.manual_seed(dist.get_rank())\n"
        "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))\n"))
    out = _run("--compare", "baseline.json", "--steps", "8", "--format", "concise", "--",
               "torchrun", "--nproc-per-node", "2", "train.py", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "train.py:23:9: ML335" in out.stdout and "baseline all ranks agree" in out.stdout
    assert "ML339 `Sequential` is wrapped differently: baseline DistributedDataParallel, " \
           "now not wrapped" in out.stdout


# -- the rules' own examples: the baseline recorded from the `baseline` option ----------------
def _example_cases(kind):
    from modellint.rules.run_baseline import BASELINE_RULES

    for rule in BASELINE_RULES:
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind}-{index}")


def _compared(example, tmp_path, code):
    baseline = tmp_path / "baseline.json"
    script = tmp_path / "example.py"
    script.write_text(example.options["baseline"])
    with modellint.watch(steps=20, batches_per_epoch=5, baseline=baseline, select=[code]):
        runpy.run_path(str(script), run_name="__main__")
    assert baseline.exists()
    script.write_text(example.code)
    with modellint.watch(steps=20, batches_per_epoch=5, baseline=baseline, select=[code]) as w:
        runpy.run_path(str(script), run_name="__main__")
    return w


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("rule", "example"), list(_example_cases("valid")))
def test_baseline_rule_valid_example(rule, example, tmp_path, capsys):
    w = _compared(example, tmp_path, rule.code)
    assert rule.code not in w.codes(), str(w)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("rule", "example"), list(_example_cases("invalid")))
def test_baseline_rule_invalid_example(rule, example, tmp_path, capsys):
    w = _compared(example, tmp_path, rule.code)
    assert (rule.code, example.line) in [(f.code, f.line) for f in w.findings], str(w)


def test_under_torchrun_fsdp2_records_and_compares(tmp_path):
    pytest.importorskip("torch.distributed")
    fsdp = DDP.replace("from torch.nn.parallel import DistributedDataParallel\n",
                       "from torch.distributed.fsdp import fully_shard\n").replace(
        "model = DistributedDataParallel(model)\n", "fully_shard(model[0])\nfully_shard(model)\n")
    (tmp_path / "train.py").write_text(fsdp)
    out = _run("--record", "baseline.json", "--steps", "8", "--format", "concise", "--",
               "torchrun", "--nproc-per-node", "2", "train.py", cwd=tmp_path)
    # sharded parameters hold each rank's own shard: not ranks that diverge (ML323)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads((tmp_path / "baseline.json").read_text())
    model = data["models"]["Sequential"]  # the user's class, not FSDP2's FSDPSequential
    assert model["wrapper"] == "fully_shard" and model["parameters"]["0.weight"]["shape"] == [16, 8]
    (tmp_path / "train.py").write_text(fsdp.replace("lr=0.01", "lr=0.1"))
    out = _run("--compare", "baseline.json", "--steps", "8", "--format", "concise", "--",
               "torchrun", "--nproc-per-node", "2", "train.py", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "train.py:16:1: ML331" in out.stdout and "baseline 0.01, now 0.1" in out.stdout
    assert "ML323" not in out.stdout
