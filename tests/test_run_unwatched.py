"""`modellint run` on training that no optimizer step shows (issue 27, items 9-11): updates by
hand, an optimizer that never steps, processes the script starts (Hogwild), LBFGS closures,
and generators held by a dataset's transforms. Each mistake is a script in
fixtures/training/ with a clean twin, run by real `modellint run` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "training"


def _run(*argv, cwd=FIXTURES, timeout=300):
    return subprocess.run([sys.executable, "-m", "modellint", "run", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1"})


def _findings(script: Path, cwd=FIXTURES) -> tuple[list[tuple[str, int]], str]:
    out = _run("--format", "json", "--", "python", str(script), cwd=cwd)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    found = sorted((f["code"], f["line"]) for f in json.loads(out.stdout))
    assert out.returncode == (1 if found else 0)
    return found, "\n".join(f["message"] for f in json.loads(out.stdout))


@pytest.mark.parametrize(("name", "expected"), [
    ("manual_bad.py", [("ML303", 17)]),
    ("manual_good.py", []),
    ("ml320_nostep_bad.py", [("ML320", 15)]),
    # accumulates over 8 batches, more than the 5 an epoch is cut to: it does step
    ("ml320_nostep_good.py", []),
    ("lbfgs_bad.py", [("ML303", 14)]),
    ("lbfgs_good.py", []),
    ("ml322_transform_bad.py", [("ML322", 52)]),
    ("ml322_transform_good.py", []),
])
def test_training_no_optimizer_step_shows_is_checked(name, expected):
    found, _ = _findings(FIXTURES / name)
    assert found == expected


@pytest.mark.parametrize(("old", "new", "expected"), [
    # the loss kept with its graph in the running total
    ("total_loss += loss.item()", "total_loss += loss", [("ML304", 22)]),
    # train() once before the loop: evaluation leaves the model in eval mode
    ("for epoch in range(10):\n    model.train()\n", "model.train()\nfor epoch in range(10):\n",
     [("ML312", 23)]),
])
def test_updates_by_hand_are_steps_for_the_other_checks(old, new, expected, tmp_path):
    text = (FIXTURES / "manual_good.py").read_text()
    assert old in text
    script = tmp_path / "train.py"
    script.write_text(text.replace(old, new))
    found, _ = _findings(script, cwd=tmp_path)
    assert found == expected


def test_updates_by_hand_are_counted_in_the_summary():
    out = _run("--steps", "6", "--", "python", "manual_good.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "modellint run: 6 step(s) (6 by hand)" in out.stdout
    assert "step budget spent" in out.stdout


def test_an_optimizer_that_never_steps_names_it_and_stops_the_run():
    found, message = _findings(FIXTURES / "ml320_nostep_bad.py")
    assert "`SGD` took no step in 80 backward passes" in message
    # the optimizer's line is the related one, named at the end of the message
    assert message.endswith("; `SGD` built: ml320_nostep_bad.py:9"), message


def test_a_target_transform_generator_is_seen(tmp_path):
    text = (FIXTURES / "ml322_transform_bad.py").read_text()
    old = "Points(transform=Compose([torch.tanh, AddNoise(0.1)]))"
    assert old in text
    script = tmp_path / "train.py"
    script.write_text(text.replace(old, "Points(target_transform=AddNoise(0.1))"))
    found, message = _findings(script, cwd=tmp_path)
    assert found == [("ML322", 52)]
    assert "`Points.target_transform.rng`" in message


@pytest.mark.parametrize(("name", "expected"), [
    ("hogwild_bad.py", [("ML303", 16)]),
    ("hogwild_good.py", []),
])
def test_processes_the_script_spawns_are_followed(name, expected):
    out = _run("--format", "concise", "--", "python", name)
    assert out.returncode == (1 if expected else 0), out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    for code, line in expected:
        assert f"{name}:{line}:" in out.stdout and code in out.stdout
    assert out.stdout.count("ML3") == len(expected)
    assert "20 optimizer step(s) in each of 2 process(es) the script started" in out.stdout


def test_processes_started_with_multiprocessing_process_are_followed(tmp_path):
    # pytorch/examples' mnist_hogwild: mp.Process(target=train, ...) with fork on Linux
    text = (FIXTURES / "hogwild_bad.py").read_text()
    old = "    mp.spawn(train, args=(model,), nprocs=2)\n"
    assert old in text
    script = tmp_path / "hogwild.py"
    script.write_text(text.replace(old, (
        "    processes = [mp.Process(target=train, args=(rank, model)) for rank in range(2)]\n"
        "    for process in processes:\n        process.start()\n"
        "    for process in processes:\n        process.join()\n")))
    found, _ = _findings(script, cwd=tmp_path)
    assert found == [("ML303", 16)]
