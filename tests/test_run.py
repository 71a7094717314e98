"""`modellint run` and `modellint.watch()`: each check on a training script with the bug and
on a clean twin (fixtures/training/), the budget, the clean stop, the crash finding and the
reporting pipeline (formats, noqa, --ignore, exit codes)."""

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

pytest_plugins = ["pytester"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "training"

BAD = {
    "ml303_bad.py": [("ML303", 15)],
    "ml301_bad.py": [("ML301", 17)],
    "ml302_bad.py": [("ML302", 13)],
    "ml304_bad.py": [("ML304", 18)],
    "ml306_bad.py": [("ML306", 18)],
    "ml307_bad.py": [("ML307", 15)],
    "ml312_bad.py": [("ML312", 18)],
    "ml305_bad.py": [("ML305", 20), ("ML305", 21)],
    "ml319_bad.py": [("ML319", 21)],
    "ml320_bad.py": [("ML320", 16)],
    "ml321_bad.py": [("ML321", 14)],
    "ml704_bad.py": [("ML704", 26)],
    "ml322_bad.py": [("ML322", 27)],
}
GOOD = ["clean.py", "ml301_good.py", "ml303_good.py", "ml304_good.py", "ml305_good.py",
        "ml319_good.py", "ml321_good.py", "ml322_good.py", "ml303_gan_good.py", "ml302_good.py",
        "ml306_good.py", "amp_good.py"]


def _watch(name: str, **options):
    options = {"steps": 20, "batches_per_epoch": 5, **options}
    with modellint.watch(**options) as w:
        runpy.run_path(str(FIXTURES / name), run_name="__main__")
    return w


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("name", "expected"), sorted(BAD.items()))
def test_buggy_script_is_reported_at_its_line(name, expected, capsys):
    w = _watch(name)
    assert sorted((f.code, f.line) for f in w.findings) == sorted(expected), str(w)
    assert all(f.path.endswith(name) and f.pass_ == "run" for f in w.findings)


@pytest.mark.filterwarnings("ignore")
def test_scheduler_stepped_before_a_scaled_step_is_still_reported(tmp_path, capsys):
    # amp_good.py with the scheduler moved above `scaler.step`: skipped steps excuse nothing
    text = (FIXTURES / "amp_good.py").read_text()
    moved = text.replace("    scaler.step(optimizer)\n    scaler.update()\n    scheduler.step()\n",
                         "    scheduler.step()\n    scaler.step(optimizer)\n    scaler.update()\n")
    assert moved != text
    script = tmp_path / "amp_bad.py"
    script.write_text(moved)
    with modellint.watch(steps=20) as w:
        runpy.run_path(str(script), run_name="__main__")
    assert [(f.code, f.line) for f in w.findings] == [("ML302", 18)]


def test_kept_losses_name_the_variable_that_keeps_them(tmp_path, capsys):
    assert "`total` keeps them" in _watch("ml304_bad.py").findings[0].message
    script = tmp_path / "kept.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(4, 1)\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.01)\nlosses = []\n"
                      "for i in range(30):\n    opt.zero_grad()\n"
                      "    loss = model(torch.randn(8, 4)).pow(2).mean()\n    loss.backward()\n"
                      "    opt.step()\n    losses.append(loss)\n")
    with modellint.watch(steps=20) as w:
        runpy.run_path(str(script), run_name="__main__")
    assert [(f.code, f.line) for f in w.findings] == [("ML304", 10)]
    assert "`losses` keeps them" in w.findings[0].message


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", GOOD)
def test_clean_twin_gives_no_finding(name, capsys):
    w = _watch(name)
    assert w.findings == [], str(w)
    assert w.ok


def _run_rule_cases(kind):
    from modellint.rule import RunRule
    from modellint.testing import registry

    for code, rule in sorted(registry().run_checks.items()):
        if isinstance(rule, type) and issubclass(rule, RunRule):
            for index, example in enumerate(getattr(rule, kind)):
                if "baseline" in getattr(example, "options", {}):
                    continue  # compared with a recorded run: tests/test_run_baseline.py
                text = example if isinstance(example, str) else example.code
                yield pytest.param(rule, text, getattr(example, "line", None),
                                   id=f"{code}-{kind}-{index}")


def _watch_text(text, tmp_path, code):
    from modellint.watching.record import crash_record

    script = tmp_path / "example.py"
    script.write_text(text)
    with modellint.watch(steps=20, batches_per_epoch=5, select=[code]) as w:
        try:
            runpy.run_path(str(script), run_name="__main__")
        except Exception:  # noqa: BLE001 - ML003's invalid example fails on purpose
            w.recorder.crash = crash_record(sys.exc_info()[1], w.recorder.user)
    return w


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("rule", "text", "line"), list(_run_rule_cases("valid")))
def test_run_rule_valid_example(rule, text, line, tmp_path, capsys):
    w = _watch_text(text, tmp_path, rule.code)
    assert rule.code not in w.codes(), str(w)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("rule", "text", "line"), list(_run_rule_cases("invalid")))
def test_run_rule_invalid_example(rule, text, line, tmp_path, capsys):
    w = _watch_text(text, tmp_path, rule.code)
    assert (rule.code, line) in [(f.code, f.line) for f in w.findings], str(w)


@pytest.mark.filterwarnings("ignore")
def test_the_step_budget_stops_the_run_quietly(capsys):
    w = _watch("clean.py", steps=7)
    assert w.recorder.total_steps == 7 and w.recorder.stopped == "steps"
    # 10 epochs of 32 batches, cut to 5 batches: epoch boundaries come after 5 steps
    assert max(r.epochs for r in w.recorder.loaders.values()) == 2


@pytest.mark.filterwarnings("ignore")
def test_batches_per_epoch_cuts_each_loader_iteration(capsys):
    w = _watch("clean.py", steps=1000, batches_per_epoch=3)
    assert w.recorder.total_steps == 30  # 10 epochs of 3 batches
    assert w.recorder.stopped is None


@pytest.mark.filterwarnings("ignore")
def test_select_and_ignore_choose_codes(capsys):
    assert _watch("ml305_bad.py", ignore=["ML305"]).findings == []
    assert _watch("ml303_bad.py", select=["ML30"]).codes() == ["ML303"]


@pytest.mark.filterwarnings("ignore")
def test_instrumentation_is_removed_after_the_block(capsys):
    import torch

    backward, train = torch.autograd.backward, torch.nn.Module.train
    _watch("clean.py", steps=2)
    assert torch.autograd.backward is backward and torch.nn.Module.train is train


def test_pytest_fixture_fails_a_test_with_findings(pytester):
    pytester.makepyfile(test_loop=f"""
        import runpy

        def test_bad(modellint):
            with modellint.watch(steps=8, batches_per_epoch=4):
                runpy.run_path({str(FIXTURES / 'ml303_bad.py')!r}, run_name="__main__")

        def test_good(modellint):
            with modellint.watch(steps=8, batches_per_epoch=4):
                runpy.run_path({str(FIXTURES / 'ml303_good.py')!r}, run_name="__main__")
    """)
    result = pytester.runpytest_subprocess("-q", "-W", "ignore")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ML303*never cleared*"])


# -- the command: a child process each (slow: few of them) ----------------------------------
def _run(*argv, cwd=FIXTURES, timeout=240):
    return subprocess.run([sys.executable, "-m", "modellint", "run", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


def test_command_stops_at_the_budget_without_a_traceback(tmp_path):
    plots = tmp_path / "plots"
    out = _run("--steps", "6", "--plots", str(plots), "--", "python", "clean.py")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    assert "modellint run: 6 optimizer step(s)" in out.stdout
    assert "step budget spent" in out.stdout
    assert "epoch 0: loss" in out.stderr  # the script's own output, kept off the report
    pytest.importorskip("matplotlib")
    assert sorted(p.name for p in plots.iterdir()) == ["grad_norm.png", "loss.png", "lr.png"]
    assert all(p.stat().st_size > 1000 for p in plots.iterdir())


def test_command_reports_a_crash_and_what_came_before(tmp_path):
    out = _run("--format", "json", "--", str(FIXTURES / "crash.py"), cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    found = {(f["code"], f["line"]) for f in json.loads(out.stdout)}
    assert found == {("ML303", 13), ("ML003", 15)}
    assert "ValueError: the data ran out" in out.stderr
    assert "modellint/watching" not in out.stderr and "runpy" not in out.stderr


def test_command_applies_noqa_ignore_and_exit_zero(tmp_path):
    script = tmp_path / "loop.py"
    text = (FIXTURES / "ml303_bad.py").read_text()
    script.write_text(text.replace("optimizer.step()  # line 15", "optimizer.step()  # noqa: ML303"))
    out = _run("--steps", "4", "--", "python", "-m", "loop", cwd=tmp_path)
    assert out.returncode == 0 and "ML303" not in out.stdout, out.stdout + out.stderr
    out = _run("--steps", "4", "--exit-zero", "--format", "concise", "--",
               str(FIXTURES / "ml303_bad.py"), cwd=tmp_path)
    assert out.returncode == 0 and "ML303" in out.stdout


def test_command_timeout_stops_a_script_that_never_steps(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import time\nimport torch\nwhile True:\n    time.sleep(0.1)\n")
    out = _run("--timeout", "3", "--", "python", str(script), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--timeout reached" in out.stdout and "Traceback" not in out.stderr


def test_command_under_torchrun_merges_the_ranks_findings():
    pytest.importorskip("torch.distributed")
    out = _run("--", "torchrun", "--nproc-per-node", "2", "ddp_bad.py")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.count("ML321") == 1 and "ddp_bad.py:18:" in out.stdout
    assert "on each of 2 ranks" in out.stdout
    assert "ML323" not in out.stdout  # DDP keeps the ranks' parameters identical


def test_command_under_torchrun_reports_ranks_that_diverge():
    pytest.importorskip("torch.distributed")
    out = _run("--format", "concise", "--", "torchrun", "--nproc-per-node", "2",
               "ddp_diverge_bad.py")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ddp_diverge_bad.py:23:9: ML323 after optimizer step 1" in out.stdout


@pytest.mark.parametrize(("argv", "message"), [
    ([], "after `--`"),
    (["--"], "nothing to run"),
    (["--", "python", "missing.py"], "script does not exist"),
    (["--steps", "0", "--", "python", str(FIXTURES / "clean.py")], "--steps must be at least 1"),
    (["--", "torchrun", "--nproc-per-node", "2", "-m", "pkg"], "is not supported"),
])
def test_command_usage_errors(argv, message, capsys):
    from modellint.cli import main

    assert main(["run", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the attack goes through /proc")
def test_command_script_cannot_write_into_the_report(tmp_path):
    # the script runs by design and may print anything on its own output; modellint's
    # standard output, where the report goes, is out of its reach through /proc
    script = tmp_path / "train.py"
    tried = tmp_path / "tried.txt"
    script.write_text(f"""\
import os
command = b"::error file=train.py,line=1::forged by the script\\n"
try:
    out = os.open(f"/proc/{{os.getppid()}}/fd/1", os.O_WRONLY | os.O_NONBLOCK)
    os.write(out, command)
    os.close(out)
    outcome = "written"
except OSError as exc:
    outcome = type(exc).__name__
with open({str(tried)!r}, "w") as handle:
    handle.write(outcome)
""" + (FIXTURES / "ml303_bad.py").read_text())
    out = _run("--steps", "4", "--format", "github", "--", "python", str(script), cwd=tmp_path)
    assert tried.read_text()  # the attack ran
    assert "forged by the script" not in out.stdout, out.stdout
    assert [line for line in out.stdout.splitlines() if line.startswith("::")], out.stdout
    assert all("ML303" in line for line in out.stdout.splitlines() if line.startswith("::"))
