"""The optimizer- and scheduler-state rules (ML328, ML329, ML340) on whole training scripts."""

from __future__ import annotations

import textwrap

import pytest

from modellint.rules.training import SchedulerStepInBatchLoop
from modellint.rules.training_schedule import (
    IterationSchedulerSteppedPerEpoch,
    OptimizerRebuiltPerEpoch,
    SchedulerGetLr,
)
from modellint.testing import fix_text, lint_project, lint_text

ALL = [OptimizerRebuiltPerEpoch, IterationSchedulerSteppedPerEpoch, SchedulerGetLr]


def found(source, rules=ALL):
    return sorted((f.code, f.line) for f in lint_text(source, rules))


def line_of(source, text):
    lines = textwrap.dedent(source).splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


# A beginner's script that decays the learning rate by building the optimizer again each
# epoch, logs the rate with get_lr(), and sizes a warm-up in iterations but steps it per epoch.
SCRIPT = """\
import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader

model = torchvision.models.resnet18(num_classes=10)
loader = DataLoader(torchvision.datasets.FakeData(transform=torchvision.transforms.ToTensor()),
                    batch_size=32)
criterion = nn.CrossEntropyLoss()
base_lr = 0.1

for epoch in range(30):
    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr * 0.1 ** (epoch // 10), momentum=0.9)  # rebuilt
    for images, labels in loader:
        optimizer.zero_grad()
        criterion(model(images), labels).backward()
        optimizer.step()

optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, 0.01, total_iters=5 * len(loader))
for epoch in range(30):
    for images, labels in loader:
        optimizer.zero_grad()
        criterion(model(images), labels).backward()
        optimizer.step()
    warmup.step()  # per epoch
    print(f"epoch {epoch} lr {warmup.get_lr()[0]:.4f}")  # get_lr
"""


def test_each_mistake_of_the_script_is_found_once_at_its_line():
    assert found(SCRIPT) == [
        ("ML328", line_of(SCRIPT, "# rebuilt")),
        ("ML329", line_of(SCRIPT, "# per epoch")),
        ("ML340", line_of(SCRIPT, "# get_lr")),
    ]


def test_the_fixed_script_is_clean():
    fixed = SCRIPT.replace(
        "for epoch in range(30):\n    optimizer = torch.optim.SGD(model.parameters(), "
        "lr=base_lr * 0.1 ** (epoch // 10), momentum=0.9)  # rebuilt\n",
        "optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9)\n"
        "decay = torch.optim.lr_scheduler.StepLR(optimizer, 10)\n"
        "for epoch in range(30):\n",
    ).replace("    warmup.step()  # per epoch\n", "").replace(
        "        optimizer.step()\n    print", "        optimizer.step()\n        warmup.step()\n"
        "    print").replace("warmup.get_lr()", "warmup.get_last_lr()")
    assert fixed != SCRIPT
    assert found(fixed) == []


# -- ML328 ------------------------------------------------------------------------------------

CROSS_VALIDATION = """\
import torch
from sklearn.model_selection import KFold

def run(dataset, make_loader, criterion, epochs):
    for fold, (train_ids, val_ids) in enumerate(KFold(5).split(dataset)):
        model = Net()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        for epoch in range(epochs):
            for x, y in make_loader(train_ids):
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
"""


def test_a_new_model_and_optimizer_per_fold_is_a_fresh_run():
    assert found(CROSS_VALIDATION) == []


def test_an_optimizer_rebuilt_in_the_epoch_loop_of_each_fold_is_found():
    source = CROSS_VALIDATION.replace(
        "        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n"
        "        for epoch in range(epochs):\n",
        "        for epoch in range(epochs):\n"
        "            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\n")
    assert found(source) == [("ML328", line_of(source, "optimizer = torch.optim.AdamW"))]


# a function that trains one epoch and builds its own Adam each time it is called
EPOCH_FUNCTION = """\
import torch

def train_epoch(net, batches, learning_rate=1e-3):
    adam = torch.optim.Adam(net.parameters(), lr=learning_rate)
    total = 0.0
    for inputs, targets in batches:
        adam.zero_grad()
        error = torch.nn.functional.mse_loss(net(inputs), targets)
        error.backward()
        adam.step()
        total += error.item()
    return total / len(batches)
"""


def test_a_function_that_trains_one_epoch_and_builds_its_optimizer():
    assert found(EPOCH_FUNCTION) == [("ML328", line_of(EPOCH_FUNCTION, "adam = torch.optim.Adam"))]


def test_a_function_called_in_the_epoch_loop_is_per_epoch_whatever_its_name():
    source = EPOCH_FUNCTION.replace("def train_epoch", "def train") + (
        "\n\nfor epoch in range(n_epochs):\n    mean_error = train(net, batches)\n")
    findings = lint_text(source, [OptimizerRebuiltPerEpoch])
    assert [f.line for f in findings] == [line_of(source, "adam = torch.optim.Adam")]
    assert "for epoch in range(n_epochs)" in findings[0].message


def test_a_function_called_once_is_a_whole_run():
    source = EPOCH_FUNCTION.replace("def train_epoch", "def train") + (
        "\n\nmean_error = train(net, batches)\n")
    assert found(source) == []


def test_a_function_that_loads_the_model_it_trains_is_a_whole_run():
    source = EPOCH_FUNCTION.replace(
        "    adam = torch.optim.Adam",
        "    net.load_state_dict(torch.load('start.pt', weights_only=True))\n"
        "    adam = torch.optim.Adam")
    assert found(source) == []


def test_a_noqa_comment_hides_a_deliberate_rebuild():
    source = EPOCH_FUNCTION.replace("lr=learning_rate)", "lr=learning_rate)  # noqa: ML328")
    assert found(source) == []


# -- ML329 ------------------------------------------------------------------------------------

_TRANSFORMERS = """\
import torch
from transformers import get_linear_schedule_with_warmup

def train(model, loader, epochs):
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=0, num_training_steps=len(loader) * epochs)
    for epoch in range(epochs):
        model.train()
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
{batch}            optimizer.zero_grad()
{epoch}"""


def test_a_transformers_schedule_stepped_per_epoch():
    source = _TRANSFORMERS.format(batch="", epoch="        scheduler.step()\n")
    findings = lint_text(source, ALL)
    assert [(f.code, f.line) for f in findings] == [("ML329", line_of(source, "scheduler.step()"))]
    assert "num_training_steps=len(loader) * epochs" in findings[0].message


def test_a_transformers_schedule_stepped_per_batch():
    assert found(_TRANSFORMERS.format(batch="            scheduler.step()\n", epoch="")) == []


def test_the_batch_loop_in_an_imported_train_one_epoch():
    source = """\
    import torch
    from engine import train_one_epoch

    def main(model, loader, args):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=args.epochs * len(loader))
        for epoch in range(args.epochs):
            train_one_epoch(model, loader, optimizer, epoch)
            scheduler.step()
    """
    assert found(source) == [("ML329", line_of(source, "scheduler.step()"))]


def test_a_scheduler_of_a_trainer_built_in_init():
    source = """\
    import torch

    class Trainer:
        def __init__(self, model, loader, epochs):
            self.model, self.loader, self.epochs = model, loader, epochs
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
                self.optimizer, 0.1, epochs=epochs, steps_per_epoch=len(loader))

        def fit(self):
            for epoch in range(self.epochs):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()
                self.scheduler.step()
    """
    assert found(source) == [("ML329", line_of(source, "self.scheduler.step()"))]


@pytest.mark.parametrize("scheduler", [
    "StepLR(optimizer, step_size=30)",
    "StepLR(optimizer, step_size=30 * len(loader))",
    "MultiStepLR(optimizer, milestones=[30, 60])",
    "CosineAnnealingLR(optimizer, T_max=epochs)",
    "CosineAnnealingLR(optimizer, T_max=epochs * len(loader))",
    "OneCycleLR(optimizer, 0.1, epochs=epochs, steps_per_epoch=len(loader))",
    "OneCycleLR(optimizer, 0.1, total_steps=epochs)",
    "LinearLR(optimizer, 0.1, total_iters=warmup_iters)",
    "LinearLR(optimizer, 0.1, total_iters=5)",
    "CyclicLR(optimizer, 0.01, 0.1)",
    "LambdaLR(optimizer, lambda step: min(1.0, step / warmup_steps))",
    "ExponentialLR(optimizer, 0.9)",
])
@pytest.mark.parametrize("per_batch", [True, False])
def test_ml301_and_ml329_never_both_report_one_step(scheduler, per_batch):
    step = "            scheduler.step()\n" if per_batch else "        scheduler.step()\n"
    source = ("import torch\n\n"
              "def train(model, loader, epochs, warmup_iters, warmup_steps):\n"
              "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              f"    scheduler = torch.optim.lr_scheduler.{scheduler}\n"
              "    for epoch in range(epochs):\n"
              "        for x, y in loader:\n"
              "            optimizer.zero_grad()\n"
              "            model(x).sum().backward()\n"
              "            optimizer.step()\n" + step)
    codes = [f.code for f in lint_text(source, [SchedulerStepInBatchLoop,
                                                IterationSchedulerSteppedPerEpoch])]
    assert len(codes) <= 1
    if not per_batch:
        iteration_sized = ("len(loader)" in scheduler or "warmup" in scheduler
                           or scheduler.startswith("CyclicLR"))
        assert codes == (["ML329"] if iteration_sized else [])


# -- ML340 ------------------------------------------------------------------------------------


def test_get_lr_is_fixed_to_get_last_lr_only_as_an_unsafe_fix():
    source = """\
    import torch

    def log(model, writer, epoch):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [30, 60])
        writer.add_scalar("lr", scheduler.get_lr()[0], epoch)
    """
    assert fix_text(source, [SchedulerGetLr], unsafe=False) == textwrap.dedent(source)
    assert "scheduler.get_last_lr()[0]" in fix_text(source, [SchedulerGetLr])


def test_a_scheduler_built_by_a_factory_of_another_file():
    files = {
        "schedules.py": """\
            import torch

            def make_scheduler(optimizer, epochs):
                return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
        """,
        "train.py": """\
            import torch
            from schedules import make_scheduler

            def train(model, epochs):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                scheduler = make_scheduler(optimizer, epochs)
                for epoch in range(epochs):
                    print(scheduler.get_lr())
                    scheduler.step()
        """,
    }
    findings = lint_project(files, [SchedulerGetLr])
    assert [(f.code, f.line) for f in findings["train.py"]] == [("ML340", 8)]
    assert "CosineAnnealingLR" in findings["train.py"][0].message


@pytest.mark.parametrize("receiver_setup", [
    "trainer = Trainer()",                               # a class of the project
    "scheduler = build_scheduler(optimizer)",            # not known
    "scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)",  # raises instead
])
def test_receivers_not_known_to_be_a_chainable_torch_scheduler(receiver_setup):
    name = receiver_setup.split(" ", 1)[0]
    source = ("import torch\n\n"
              "def log(model):\n"
              "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              f"    {receiver_setup}\n"
              f"    print({name}.get_lr())\n")
    assert found(source, [SchedulerGetLr]) == []


def _stepped_reads(cls_name):
    """(get_lr(), get_last_lr()) after each of six steps of a torch scheduler of this class."""
    import warnings

    import torch
    from torch.optim import lr_scheduler as schedulers

    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9)
    build = {
        "LambdaLR": lambda: schedulers.LambdaLR(optimizer, lambda e: 0.5 ** e),
        "MultiplicativeLR": lambda: schedulers.MultiplicativeLR(optimizer, lambda e: 0.5),
        "StepLR": lambda: schedulers.StepLR(optimizer, 2, 0.5),
        "MultiStepLR": lambda: schedulers.MultiStepLR(optimizer, [2, 4], 0.5),
        "ConstantLR": lambda: schedulers.ConstantLR(optimizer, 0.5, 3),
        "LinearLR": lambda: schedulers.LinearLR(optimizer, 0.1, 1.0, 5),
        "ExponentialLR": lambda: schedulers.ExponentialLR(optimizer, 0.5),
        "PolynomialLR": lambda: schedulers.PolynomialLR(optimizer, 5, 1.0),
        "CosineAnnealingLR": lambda: schedulers.CosineAnnealingLR(optimizer, 5),
        "CyclicLR": lambda: schedulers.CyclicLR(optimizer, 0.01, 0.1, 2),
        "OneCycleLR": lambda: schedulers.OneCycleLR(optimizer, 0.1, total_steps=10),
        "CosineAnnealingWarmRestarts": lambda: schedulers.CosineAnnealingWarmRestarts(
            optimizer, 3),
    }
    reads = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scheduler = build[cls_name]()
        for _ in range(6):
            optimizer.step()
            scheduler.step()
            reads.append((scheduler.get_lr(), scheduler.get_last_lr()))
    return reads


@pytest.mark.parametrize("cls_name", [
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
    "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "CyclicLR", "OneCycleLR",
    "CosineAnnealingWarmRestarts",
])
def test_which_schedulers_get_lr_misreads_matches_the_installed_torch(cls_name):
    from modellint.rules.training_schedule import _CLOSED_FORM

    wrong = [a != pytest.approx(b) for a, b in _stepped_reads(cls_name)]
    assert any(wrong) == (cls_name not in _CLOSED_FORM)


# a per-epoch function that builds a default optimizer when none is passed, in one branch of a
# switch on the framework, and steps it through a helper defined inside it
DEFAULT_OPTIMIZER = """\
def run_one_epoch(net, batches, optimizer=None, framework="torch"):
    if framework == "jax":
        raise NotImplementedError(framework)
    elif framework == "torch":
        import torch
        if optimizer is None:
            optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

        def update(inputs, targets):
            optimizer.zero_grad()
            error = torch.nn.functional.mse_loss(net(inputs), targets)
            error.backward()
            optimizer.step()
            return error.item()
    errors = []
    for inputs, targets in batches:
        errors.append(update(inputs, targets))
    return errors
"""


def test_a_default_optimizer_of_a_per_epoch_function_stepped_by_a_closure():
    findings = lint_text(DEFAULT_OPTIMIZER, [OptimizerRebuiltPerEpoch])
    assert [f.line for f in findings] == [line_of(DEFAULT_OPTIMIZER, "optimizer = torch.optim.SGD")]
    assert "without being given `optimizer`" in findings[0].message


def test_a_default_optimizer_that_the_file_always_passes_is_not_rebuilt():
    source = DEFAULT_OPTIMIZER + (
        "\n\nclass Loop:\n"
        "    def __init__(self, net):\n"
        "        import torch\n"
        "        self.net = net\n"
        "        self.sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)\n\n"
        "    def epoch(self, batches):\n"
        "        return run_one_epoch(self.net, batches, optimizer=self.sgd)\n")
    assert found(source) == []


def test_an_optimizer_built_lazily_once_is_not_rebuilt():
    source = """\
    import torch

    class Trainer:
        def train_epoch(self, loader):
            if self.optimizer is None:
                self.optimizer = torch.optim.Adam(self.model.parameters())
            for x, y in loader:
                self.optimizer.zero_grad()
                self.model(x).sum().backward()
                self.optimizer.step()
    """
    assert found(source) == []


def test_get_lr_on_a_scheduler_chosen_by_configuration_names_every_choice():
    source = """\
    import torch
    from torch import optim

    def train(model, config, epochs):
        optimizer = optim.Adam(model.parameters())
        if config == "cosine":
            scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
        else:
            scheduler = optim.lr_scheduler.CyclicLR(optimizer, 0.001, 0.1)
        for epoch in range(epochs):
            lr = scheduler.get_lr()[0]
    """
    findings = lint_text(source, [SchedulerGetLr])
    assert [f.line for f in findings] == [line_of(source, "get_lr()")]
    assert "`CosineAnnealingLR` or `CyclicLR`" in findings[0].message
    assert "for `CosineAnnealingLR` it computes the next rate" in findings[0].message


def test_a_scheduler_chosen_by_configuration_is_iteration_sized_if_one_choice_is():
    # stepped once per epoch whatever the choice, the OneCycleLR branch is broken (ivadomed's
    # CyclicLR next to CosineAnnealingLR, bench/bugs c-ivadomed-cyclic-lr-stepped-per-epoch)
    source = """\
    import torch

    def train(model, loader, epochs, name):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        if name == "cosine":
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, {period})
        else:
            scheduler = torch.optim.lr_scheduler.OneCycleLR(
                optimizer, 0.1, epochs=epochs, steps_per_epoch=len(loader))
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
            scheduler.step()
    """
    mixed = source.replace("{period}", "epochs")
    findings = lint_text(mixed, [IterationSchedulerSteppedPerEpoch])
    assert [(f.code, f.line) for f in findings] == [
        ("ML329", line_of(mixed, "    scheduler.step()"))]
    assert "(OneCycleLR)" in findings[0].message
    assert "when the configuration picks it" in findings[0].message
    sized = source.replace("{period}", "epochs * len(loader)")
    assert found(sized) == [("ML329", line_of(sized, "    scheduler.step()"))]
    # every choice counted in epochs
    epochs = mixed.replace("steps_per_epoch=len(loader)", "steps_per_epoch=1").replace(
        "OneCycleLR(\n                optimizer, 0.1, epochs=epochs, steps_per_epoch=1)",
        "StepLR(optimizer, 30)")
    assert "StepLR" in epochs
    assert found(epochs) == []


def test_a_model_output_rewrapped_through_any_value_keeping_method_is_a_graph_cut():
    # `_SAME_VALUES` is torch's value-keeping tensor methods (VALUE_METHODS): a permute or a
    # transpose keeps the model's output as well as `.float()` does
    from modellint.rules.training_schedule import GraphCutBeforeLoss

    source = """\
    import torch
    import torch.nn.functional as F

    def step(model, x, y, optimizer):
        out = model(x)
        out = torch.tensor(out.permute(0, 2, 1).bfloat16(), requires_grad=True)
        F.mse_loss(out, y).backward()
        optimizer.step()
    """
    assert found(source, [GraphCutBeforeLoss]) == [("ML342", line_of(source, "torch.tensor("))]
