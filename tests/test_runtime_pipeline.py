"""One findings pipeline for both passes: runtime findings meet the suppressions static ones
do (file-level noqa, per-file-ignores), and what a user meets with --runtime."""

from __future__ import annotations

import pytest
from conftest import write

pytest.importorskip("torch")

UNUSED = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.aux = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)
"""
# ML703 (unused parameters) is found only by the runtime pass, at `self.aux = ...`
RUNTIME_ONLY = ("--runtime", "--select", "ML703", "--format", "json")


def test_runtime_finding_is_reported_without_suppression(modellint, tmp_path):
    write(tmp_path, "net.py", UNUSED)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.codes() == [("ML703", 8)], result


def test_per_file_ignores_hide_runtime_findings(modellint, tmp_path):
    write(tmp_path, "net.py", UNUSED)
    write(tmp_path, "pyproject.toml", """\
        [tool.modellint.per-file-ignores]
        "net.py" = ["ML703"]
        """)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.rc == 0 and result.json() == [], result


def test_file_level_noqa_for_a_code_hides_runtime_findings(modellint, tmp_path):
    write(tmp_path, "net.py", "# modellint: noqa: ML703\n" + UNUSED)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.rc == 0 and result.json() == [], result


def test_file_level_noqa_hides_runtime_findings_of_a_configured_model(modellint, tmp_path):
    # a configured target is checked even in an exempt file: its findings are still hidden
    write(tmp_path, "net.py", "# modellint: noqa\n" + UNUSED)
    write(tmp_path, "pyproject.toml", """\
        [[tool.modellint.runtime.models]]
        target = "net.py:Net"
        inputs = [[2, 8]]
        """)
    result = modellint("check", "net.py", *RUNTIME_ONLY)
    assert result.rc == 0 and result.json() == [], result
    # the same target without the noqa is reported
    write(tmp_path, "net.py", UNUSED)
    assert modellint("check", "net.py", *RUNTIME_ONLY).codes() == [("ML703", 8)]


TRAINING_SCRIPT = """\
import pathlib
import torch
import torch.nn as nn

HIDDEN = 8
Act = nn.ReLU
try:
    import not_installed_anywhere
except ImportError:
    not_installed_anywhere = None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(HIDDEN, HIDDEN)
        self.act = Act()
        self.aux = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        return self.act(self.fc(x))


def train():
    pathlib.Path("TRAINED").write_text("the training loop ran")


pathlib.Path("TOP_LEVEL").write_text("the script body ran")
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train()

if __name__ == "__main__":
    pathlib.Path("MAIN").write_text("the main block ran")
"""


def test_runtime_pass_does_not_run_a_training_scripts_body(modellint, tmp_path):
    write(tmp_path, "train.py", TRAINING_SCRIPT)
    result = modellint("check", "train.py", *RUNTIME_ONLY)
    # the model is still built from the definitions (constants, aliases, guarded imports)
    assert result.codes() == [("ML703", 18)], result
    # and nothing of the script part ran
    for marker in ("TOP_LEVEL", "TRAINED", "MAIN"):
        assert not (tmp_path / marker).exists(), marker


def test_definitions_only_keeps_definitions_and_line_numbers():
    from modellint.runtime.build import definitions_only

    tree = definitions_only(TRAINING_SCRIPT, "train.py").tree
    kept = [(type(node).__name__, node.lineno) for node in tree.body]
    assert kept == [("Import", 1), ("Import", 2), ("Import", 3), ("Assign", 5), ("Assign", 6),
                    ("Try", 7), ("ClassDef", 13), ("FunctionDef", 24)]


# the names an `if` reads, and an assignment's value, come from a line that calls something
NEEDS_A_SKIPPED_NAME = TRAINING_SCRIPT.replace("HIDDEN = 8\n", """\
use_accel = torch.cuda.mem_get_info()[0] > 2**30
if use_accel:
    HIDDEN = 16
else:
    HIDDEN = 8
WIDTH = HIDDEN if use_accel else 8
TWICE = use_accel * 2
""")


def test_a_kept_line_that_needs_a_skipped_name_is_skipped_too(modellint, tmp_path):
    from modellint.runtime.build import definitions_only

    tree = definitions_only(NEEDS_A_SKIPPED_NAME, "train.py").tree
    assert [type(node).__name__ for node in tree.body] == [
        "Import", "Import", "Import", "Assign", "Try", "ClassDef", "FunctionDef"]
    # the import goes through (the `if use_accel:` stopped it with a NameError) and the model
    # is checked
    write(tmp_path, "train.py", NEEDS_A_SKIPPED_NAME.replace("nn.Linear(HIDDEN, HIDDEN)",
                                                             "nn.Linear(8, 8)"))
    result = modellint("check", "train.py", *RUNTIME_ONLY)
    assert result.codes() == [("ML703", 24)], result


# what tutorial files bind at top level for their models to read
READS_TOP_LEVEL_VALUES = """\
import logging
from functools import partial

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
logger = logging.getLogger(__name__)
Norm = partial(nn.LayerNorm, eps=1e-6)
SCALE = torch.ones(8) * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        logger.info("building Net")
        self.fc = nn.Linear(8, 8)
        self.norm = Norm(8)

    def forward(self, x):
        return self.norm(self.fc(x.to(device)))


class Scaled(Net):
    def forward(self, x):
        return super().forward(x) * SCALE
"""


def test_top_level_values_from_pure_calls_are_kept_and_the_others_said(modellint, tmp_path):
    from modellint.runtime.build import definitions_only

    definitions = definitions_only(READS_TOP_LEVEL_VALUES, "net.py")
    assert [node.lineno for node in definitions.tree.body] == [1, 2, 4, 5, 7, 8, 9, 13, 24]
    assert definitions.left_out == {"SCALE": 10}
    write(tmp_path, "net.py", READS_TOP_LEVEL_VALUES)
    result = modellint("check", "net.py", "--runtime", "--format", "json")
    # `Net` is checked (clean); `Scaled` reads what the runtime pass left out: not a failed
    # forward (ML701) but a model it did not check, which says why
    assert result.codes() == [("ML002", 24)], result
    message = result.json()[0]["message"]
    assert message.startswith("`net.py:Scaled` was not run: ")
    assert "reads `SCALE` at net.py:26, which net.py:10 binds by running code" in message
    assert result.rc == 0


SHADOWS_A_PURE_CALL = """\
from os import getenv


def getenv(name):
    raise SystemExit("the file's own getenv ran")


WIDTH = getenv("WIDTH")
squares = [x * x for x in range(3)]
"""


def test_only_calls_of_the_modules_named_are_kept_and_only_top_level_names_left_out():
    from modellint.runtime.build import definitions_only

    definitions = definitions_only(SHADOWS_A_PURE_CALL, "net.py")
    # `getenv` is the file's own function by then: calling it is not reading the machine
    assert [node.lineno for node in definitions.tree.body] == [1, 4]
    # a comprehension's variable is its own, not a name of the module
    assert definitions.left_out == {"WIDTH": 8, "squares": 9}


SEES_THE_GPUS = """\
import os

import torch.nn as nn


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        if os.environ.get("CUDA_VISIBLE_DEVICES") != "":
            raise RuntimeError("this model's process can see the machine's GPUs")
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)
"""


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_models_checked_on_the_cpu_or_meta_see_no_gpu(modellint, tmp_path, device):
    # so that a file's `torch.device("cuda" if torch.cuda.is_available() else "cpu")` picks
    # the device its models are built on, on a machine with GPUs too
    write(tmp_path, "probe.py", SEES_THE_GPUS)
    result = modellint("check", "probe.py", "--runtime", "--device", device, "--format", "json")
    assert result.codes() == [], result
    assert result.rc == 0


def test_runtime_without_torch_is_one_message_naming_the_extra(modellint, tmp_path):
    write(tmp_path, "net.py", UNUSED)
    # a folder first on the path where `import torch` finds nothing
    blocker = write(tmp_path / "no_torch", "sitecustomize.py", """\
        import importlib.abc
        import sys


        class NoTorch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None


        sys.meta_path.insert(0, NoTorch())
        """)
    result = modellint("check", "net.py", "--runtime", env={"PYTHONPATH": str(blocker.parent)})
    assert result.rc == 2, result
    assert "modellint[runtime]" in result.err and "internal error" not in result.err, result
    assert "Traceback" not in result.err


BROKEN_REGISTRATION = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = [nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3)]
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for conv in self.convs:
            x = conv(x)
        return self.head(x.mean((2, 3)))
"""


def test_broken_registration_gives_no_misleading_forward_failure(tmp_path):
    # the registered layers start at the head: an input guessed from it fails in the first
    # conv, which says nothing about the model; ML101 says what is wrong, ML002 why it did
    # not run
    from modellint.runtime.build import import_file
    from modellint.runtime.engine import ModelCheck

    module = import_file(str(write(tmp_path, "broken.py", BROKEN_REGISTRATION)))
    outcome = ModelCheck(factory=module.Net, label="Net", user_roots=[str(tmp_path)]).run()
    codes = [(f.code, f.line) for f in outcome.findings]
    assert ("ML101", 7) in codes, outcome.findings
    assert "ML701" not in [code for code, _ in codes], outcome.findings
    [skipped] = [f for f in outcome.findings if f.code == "ML002"]
    assert "could not be inferred because `self.convs`" in skipped.message


# one static finding (ML203, line 11) and one runtime finding (ML703, line 9) in one file: every
# suppression hides both, whichever pass made them
BOTH_PASSES = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.aux = nn.Linear(8, 8){aux}

    def forward(self, x):
        return self.fc(x) * torch.ones(x.shape[0], 8){ones}
"""
BOTH_SELECTED = ("--runtime", "--select", "ML203,ML703", "--format", "json", "--no-cache")


def _both(tmp_path, head="", aux="", ones=""):
    write(tmp_path, "net.py", head + BOTH_PASSES.format(aux=aux, ones=ones))


def test_both_passes_report_without_suppression(modellint, tmp_path):
    _both(tmp_path)
    result = modellint("check", "net.py", *BOTH_SELECTED)
    assert sorted(result.codes()) == [("ML203", 12), ("ML703", 9)], result
    assert {f["pass"] for f in result.json()} == {"static", "runtime"}


@pytest.mark.parametrize("how", ["line noqa", "line noqa, all codes", "file noqa for the codes",
                                 "file noqa", "per-file-ignores", "--ignore"])
def test_one_suppression_step_hides_the_findings_of_both_passes(modellint, tmp_path, how):
    extra: tuple[str, ...] = ()
    if how == "line noqa":
        _both(tmp_path, aux="  # noqa: ML703", ones="  # noqa: ML203")
    elif how == "line noqa, all codes":
        _both(tmp_path, aux="  # noqa", ones="  # noqa")
    elif how == "file noqa for the codes":
        _both(tmp_path, head="# modellint: noqa: ML203, ML703\n")
    elif how == "file noqa":
        _both(tmp_path, head="# modellint: noqa\n")
    elif how == "per-file-ignores":
        _both(tmp_path)
        write(tmp_path, "pyproject.toml", """\
            [tool.modellint.per-file-ignores]
            "net.py" = ["ML203", "ML7"]
            """)
    else:
        _both(tmp_path)
        extra = ("--ignore", "ML203", "--ignore", "ML703")
    result = modellint("check", "net.py", *BOTH_SELECTED, *extra)
    assert result.rc == 0 and result.json() == [], result


def test_a_noqa_for_another_code_hides_neither(modellint, tmp_path):
    _both(tmp_path, head="# modellint: noqa: ML204\n", aux="  # noqa: ML203", ones="  # noqa: ML703")
    result = modellint("check", "net.py", *BOTH_SELECTED)
    assert sorted(result.codes()) == [("ML203", 13), ("ML703", 10)], result


def test_runtime_models_are_the_classes_the_static_pass_indexed(cli, tmp_path, monkeypatch):
    # the runtime pass builds what the static pass found while linting (no second discovery,
    # no second parse): the classes and their lines come from the linted files' outcomes
    import modellint.runtime.pass_ as pass_
    import modellint.static.outline as outline

    indexed, built = [], []
    real_index = outline.model_classes

    def index(tree):
        classes = real_index(tree)
        indexed.append(classes)
        return classes

    def run_jobs(jobs, *args, **kwargs):
        built.extend((job.label, job.line) for job in jobs)
        return []

    monkeypatch.setattr(outline, "model_classes", index)
    monkeypatch.setattr(pass_, "run_jobs", run_jobs)
    write(tmp_path, "models/net.py", UNUSED + "\n\nclass Head(nn.Module):\n    pass\n")
    write(tmp_path, "models/blocks.py", "import torch.nn as nn\n\n\n"
          "class Block(nn.Module):\n    pass\n\n\nclass Stack(nn.Module):\n"
          "    def __init__(self):\n        super().__init__()\n        self.b = Block()\n")
    write(tmp_path, "models/exempt.py", "# modellint: noqa\n" + UNUSED)
    write(tmp_path, "models/plain.py", "x = 1\n")
    result = cli("check", "models", "--runtime", "--select", "ML703", "--no-cache", "--jobs", "1")
    assert result.rc == 0, result
    # a used sub-module (Block) is checked inside the model that uses it; an exempt file and a
    # file without a module class give none; a file is parsed once: its classes are found
    # once, from the project index's parse
    assert sorted(built) == [("models/blocks.py:Stack", 8), ("models/net.py:Head", 14),
                             ("models/net.py:Net", 4)]
    assert len(indexed) == 2


def test_runtime_models_come_back_from_the_cache(modellint, tmp_path):
    write(tmp_path, "net.py", UNUSED)
    args = ("check", "net.py", "--runtime", "--select", "ML703", "--format", "json")
    env = {"MODELLINT_CACHE_DIR": str(tmp_path / "cache"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    first = modellint(*args, env=env)
    assert list((tmp_path / "cache").rglob("*.json")), "nothing was cached"
    again = modellint(*args, env=env)  # the static results (and the index) come from the cache
    assert first.codes() == again.codes() == [("ML703", 8)], (first, again)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_configured_model_without_a_known_site_points_at_its_class_line(tmp_path, newline):
    # the last resort when a failure names no line: where `class Net` is, as Python counts lines
    from modellint.runtime.pass_ import _job_location
    from modellint.runtime.specs import ModelJob

    path = tmp_path / "models.py"
    path.write_bytes(newline.join(["# a model", "import torch.nn as nn", "", "",
                                   "class Net(nn.Module):", "    pass", ""]).encode())
    job = ModelJob(label="models.py:Net", file=str(path), name="Net", configured=True)
    assert _job_location(job) == (str(path), 5)
