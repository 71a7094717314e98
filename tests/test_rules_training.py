"""The training-loop rules (ML301-ML308) on whole, realistic training scripts."""

from __future__ import annotations

import textwrap

from modellint.rules.training import (
    EvalWithoutEvalMode,
    EvalWithoutNoGrad,
    LossKeptWithGraph,
    MissingZeroGrad,
    ParamGroupOverlap,
    SchedulerBeforeOptimizer,
    SchedulerStepInBatchLoop,
    SoftmaxBeforeCrossEntropy,
)
from modellint.testing import fix_text, lint_text

ALL = [
    SchedulerStepInBatchLoop, SchedulerBeforeOptimizer, MissingZeroGrad, LossKeptWithGraph,
    ParamGroupOverlap, EvalWithoutEvalMode, EvalWithoutNoGrad, SoftmaxBeforeCrossEntropy,
]


def found(source, rules=ALL, **kwargs):
    return sorted((f.code, f.line) for f in lint_text(source, rules, **kwargs))


def line_of(source, text):
    lines = textwrap.dedent(source).splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


# A beginner's CIFAR script with one mistake of each kind, each marked by a comment.
BUGGY_SCRIPT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 30 * 30, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.conv(x)), 1))


net = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD([
    {"params": net.parameters()},
    {"params": net.fc.parameters(), "lr": 0.01},  # overlap
], lr=0.001, momentum=0.9)
scheduler = StepLR(optimizer, step_size=30, gamma=0.1)

for epoch in range(90):
    running_loss = 0.0
    for inputs, labels in trainloader:
        outputs = net(inputs)
        probs = F.softmax(outputs, dim=1)
        loss = criterion(probs, labels)  # softmax
        loss.backward()
        optimizer.step()  # never zeroed
        scheduler.step()  # per batch
        running_loss += loss  # graph

    net.eval()
    correct = 0
    for images, labels in testloader:
        correct += (net(images).argmax(1) == labels).sum().item()  # no_grad
    net.train()

model = torchvision.models.resnet18()
model.load_state_dict(torch.load("resnet.pt"))
with torch.no_grad():
    prediction = model(image).argmax(1)  # eval mode
"""

FIXED_SCRIPT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 30 * 30, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.conv(x)), 1))


net = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD([
    {"params": net.conv.parameters()},
    {"params": net.fc.parameters(), "lr": 0.01},
], lr=0.001, momentum=0.9)
scheduler = StepLR(optimizer, step_size=30, gamma=0.1)

for epoch in range(90):
    running_loss = 0.0
    net.train()
    for inputs, labels in trainloader:
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    scheduler.step()

    net.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in testloader:
            correct += (net(images).argmax(1) == labels).sum().item()

model = torchvision.models.resnet18()
model.load_state_dict(torch.load("resnet.pt"))
model.eval()
with torch.no_grad():
    prediction = model(image).argmax(1)
"""


def test_each_mistake_of_a_beginner_script_is_found_once():
    expected = sorted([
        ("ML305", line_of(BUGGY_SCRIPT, "# overlap")),
        ("ML308", line_of(BUGGY_SCRIPT, "# softmax")),
        ("ML303", line_of(BUGGY_SCRIPT, "# never zeroed")),
        ("ML301", line_of(BUGGY_SCRIPT, "# per batch")),
        ("ML304", line_of(BUGGY_SCRIPT, "# graph")),
        ("ML307", line_of(BUGGY_SCRIPT, "# no_grad")),
        ("ML306", line_of(BUGGY_SCRIPT, "# eval mode")),
    ])
    assert found(BUGGY_SCRIPT) == expected


def test_the_corrected_script_is_clean():
    assert found(FIXED_SCRIPT) == []


def test_unsafe_fix_adds_item_to_the_accumulated_loss():
    fixed = fix_text(BUGGY_SCRIPT, [LossKeptWithGraph])
    assert "running_loss += loss.item()  # graph" in fixed
    assert fixed.count(".item()") == BUGGY_SCRIPT.count(".item()") + 1
    # a second run changes nothing
    assert fix_text(fixed, [LossKeptWithGraph]) == fixed


def test_noqa_on_the_statement_suppresses_a_finding_reported_after_the_function():
    source = BUGGY_SCRIPT.replace("scheduler.step()  # per batch", "scheduler.step()  # noqa: ML301")
    assert "ML301" not in {code for code, _ in found(source)}
    # ...but a noqa on the enclosing loop does not hide it
    source = BUGGY_SCRIPT.replace("for epoch in range(90):", "for epoch in range(90):  # noqa: ML301")
    assert "ML301" in {code for code, _ in found(source)}


# After torchvision's detection reference (references/detection/engine.py): a warm-up
# LinearLR stepped per iteration, AMP through a GradScaler, and an evaluation function under
# @torch.inference_mode() that calls model.eval().
DETECTION_ENGINE = """\
import math
import torch


def train_one_epoch(model, optimizer, data_loader, device, epoch, scaler=None):
    model.train()
    lr_scheduler = None
    if epoch == 0:
        warmup_iters = min(1000, len(data_loader) - 1)
        lr_scheduler = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=1.0 / 1000, total_iters=warmup_iters
        )
    for images, targets in data_loader:
        with torch.autocast("cuda", enabled=scaler is not None):
            loss_dict = model(images, targets)
            losses = sum(loss for loss in loss_dict.values())
        loss_value = losses.item()
        if not math.isfinite(loss_value):
            raise SystemExit(1)
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(losses).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            losses.backward()
            optimizer.step()
        if lr_scheduler is not None:
            lr_scheduler.step()


@torch.inference_mode()
def evaluate(model, data_loader):
    model.eval()
    results = []
    for images, targets in data_loader:
        outputs = model(images)
        results.append(outputs)
    return results


def main(args, model, data_loader, optimizer):
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones=args.lr_steps, gamma=args.lr_gamma
    )
    for epoch in range(args.start_epoch, args.epochs):
        train_one_epoch(model, optimizer, data_loader, args.device, epoch)
        lr_scheduler.step()
        evaluate(model, data_loader)
"""


def test_torchvision_detection_style_loop_is_clean():
    assert found(DETECTION_ENGINE) == []


# The tutorial this topic comes from (seed 001): an epoch-based MultiStepLR stepped "at the
# beginning of the epoch loop" - correct advice before PyTorch 1.1, a skipped first learning
# rate since - and per-layer learning rates with disjoint groups.
TUTORIAL = """\
import torch
import torch.nn as nn

Net = myNet()
optimiser = torch.optim.SGD([{"params": Net.fc1.parameters(), 'lr' : 0.001, "momentum" : 0.99},
                             {"params": Net.fc2.parameters()}], lr = 0.01, momentum = 0.9)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimiser, milestones = [10,20], gamma = 0.1)

for epoch in range(30):
    scheduler.step()
    for x, y in loader:
        optimiser.zero_grad()
        loss = nn.functional.cross_entropy(Net(x), y)
        loss.backward()
        optimiser.step()
"""


def test_tutorial_scheduler_at_top_of_epoch_loop():
    assert found(TUTORIAL) == [("ML302", line_of(TUTORIAL, "scheduler.step()"))]


# Hugging Face style: a scheduler of unknown kind (get_scheduler) stepped per batch, an
# Accelerator doing backward, gradient accumulation.
HF_LOOP = """\
import torch
from transformers import get_scheduler


def train(model, accelerator, loader, optimizer, args):
    lr_scheduler = get_scheduler("linear", optimizer, num_warmup_steps=100,
                                 num_training_steps=args.max_steps)
    total_loss = 0
    for epoch in range(args.epochs):
        model.train()
        for step, batch in enumerate(loader):
            outputs = model(**batch)
            loss = outputs.loss / args.accum
            total_loss += loss.detach().float()
            accelerator.backward(loss)
            if (step + 1) % args.accum == 0:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
        model.eval()
        losses = []
        for batch in eval_loader:
            with torch.no_grad():
                outputs = model(**batch)
            losses.append(outputs.loss)
"""


def test_hugging_face_style_loop_is_clean():
    assert found(HF_LOOP) == []


# DCGAN (pytorch/examples): two optimizers, zeroing through the networks.
DCGAN = """\
import torch
import torch.nn as nn

criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4)
for epoch in range(25):
    for i, data in enumerate(dataloader):
        netD.zero_grad()
        output = netD(data[0])
        errD_real = criterion(output, label)
        errD_real.backward()
        fake = netG(noise)
        errD_fake = criterion(netD(fake.detach()), label)
        errD_fake.backward()
        optimizerD.step()
        netG.zero_grad()
        errG = criterion(netD(fake), label)
        errG.backward()
        optimizerG.step()
"""


def test_gan_loop_is_clean():
    assert found(DCGAN) == []


def test_gan_loop_without_zeroing_reports_both_optimizers():
    source = DCGAN.replace("        netD.zero_grad()\n", "").replace("        netG.zero_grad()\n", "")
    assert found(source) == [
        ("ML303", line_of(source, "optimizerD.step()")),
        ("ML303", line_of(source, "optimizerG.step()")),
    ]


# A trainer class: the scheduler is built in __init__ and stepped in fit().
TRAINER = """\
import torch
from torch.optim import lr_scheduler


class Trainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.scheduler = lr_scheduler.ExponentialLR(self.optimizer, gamma=0.95)

    def fit(self, epochs):
        for epoch in range(epochs):
            for x, y in self.loader:
                self.optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()
"""


def test_scheduler_kind_is_tracked_through_self_attributes():
    assert found(TRAINER) == [("ML301", line_of(TRAINER, "self.scheduler.step()"))]


def test_scheduler_assigned_twice_in_the_class_is_unknown():
    source = TRAINER.replace(
        "    def fit(self, epochs):",
        "    def reset(self):\n        self.scheduler = make()\n\n    def fit(self, epochs):",
    )
    assert found(source) == []


def test_scheduler_import_forms():
    body = """
    def fit(model, loader, optimizer, epochs):
        scheduler = {ctor}(optimizer, 0.9)
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
                scheduler.step()
    """
    headers = {
        "import torch\n": "torch.optim.lr_scheduler.ExponentialLR",
        "import torch.optim as optim\n": "optim.lr_scheduler.ExponentialLR",
        "from torch.optim.lr_scheduler import ExponentialLR as Exp\n": "Exp",
        "from torch.optim import lr_scheduler as sched\n": "sched.ExponentialLR",
    }
    for header, ctor in headers.items():
        source = header + textwrap.dedent(body).format(ctor=ctor)
        assert found(source, [SchedulerStepInBatchLoop]) == [
            ("ML301", line_of(source, "scheduler.step()"))
        ], header
    # an unimported ExponentialLR is a name of unknown meaning
    source = textwrap.dedent(body).format(ctor="ExponentialLR")
    assert found(source, [SchedulerStepInBatchLoop]) == []


def test_loss_accumulated_under_a_condition_is_still_found():
    source = """\
    import torch.nn.functional as F

    def train(model, loader, optimizer, epochs):
        history = {"loss": []}
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                if i % 100 == 0:
                    history["loss"].append(loss)
    """
    assert found(source) == [("ML304", line_of(source, "history["))]
    assert 'history["loss"].append(loss.item())' in fix_text(source, [LossKeptWithGraph])


def test_loss_reset_every_iteration_is_not_accumulated():
    source = """\
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            logs = []
            logs.append(loss)
            report(logs)
    """
    assert found(source) == []


def test_softmax_through_nn_softmax_module_and_log_softmax_nll_pairs():
    source = """\
    import torch.nn as nn

    def step(model, x, y):
        softmax = nn.Softmax(dim=1)
        nll = nn.NLLLoss()
        good = nll(nn.LogSoftmax(dim=1)(model(x)), y)
        bad = nll(softmax(model(x)), y)
        return good + bad
    """
    assert found(source) == [("ML308", line_of(source, "bad = "))]


def test_softmax2d_output_is_named_softmax_output():
    # segmentation: a channel softmax given to the loss, read from torch's activation table
    source = """\
    import torch.nn as nn
    import torch.nn.functional as F

    def step(x, y):
        channels = nn.Softmax2d()
        return F.cross_entropy(channels(x), y)
    """
    findings = lint_text(source, [SoftmaxBeforeCrossEntropy])
    assert [f.code for f in findings] == ["ML308"]
    assert "given `softmax` output" in findings[0].message


def test_cross_entropy_of_log_softmax_is_a_warning():
    source = """\
    import torch
    import torch.nn.functional as F

    def step(logits, y):
        return F.cross_entropy(torch.log_softmax(logits, -1), y)
    """
    findings = lint_text(source, [SoftmaxBeforeCrossEntropy])
    assert [(f.code, f.severity.value) for f in findings] == [("ML308", "warning")]


def test_eval_mode_rule_ignores_module_methods():
    source = """\
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))
            with torch.no_grad():
                self.size = features(torch.zeros(2, 3, 32, 32)).numel()
            self.features = features
    """
    assert found(source) == []


def test_eval_mode_rule_ignores_submodules_run_in_generate_methods():
    # transformers' generate(): a class of unknown base runs its own layers under no_grad
    source = """\
    import torch
    import torch.nn as nn
    from .modeling_utils import PreTrainedModel

    class Blip(PreTrainedModel):
        def __init__(self, config):
            super().__init__(config)
            self.language_projection = nn.Linear(8, 8)

        @torch.no_grad()
        def generate(self, pixel_values):
            return self.language_projection(pixel_values)
    """
    assert found(source) == []


def test_eval_mode_rule_checks_a_trainer_method_that_trains_its_model():
    source = """\
    import torch
    import torch.nn.functional as F

    class Trainer:
        def fit(self, loader, val_loader):
            for epoch in range(10):
                self.model.train()
                for x, y in loader:
                    self.optimizer.zero_grad()
                    F.cross_entropy(self.model(x), y).backward()
                    self.optimizer.step()
                with torch.no_grad():
                    scores = [self.model(x) for x, _ in val_loader]
    """
    assert found(source) == [("ML306", line_of(source, "scores = "))]


def test_a_project_scheduler_class_may_step_before_the_optimizer():
    source = """\
    from warmup import WarmupScheduler

    def train(model, loader, optimizer):
        scheduler = WarmupScheduler(optimizer, warmup=500)
        for x, y in loader:
            scheduler.step()  # sets this iteration's learning rate
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    """
    assert found(source) == []
    source = source.replace("from warmup import WarmupScheduler", "from transformers import "
                            "get_linear_schedule_with_warmup as WarmupScheduler")
    assert found(source) == [("ML302", line_of(source, "scheduler.step()"))]


# The PyTorch 0.4 MNIST/CIFAR layout: module-level train() and test() functions, and an epoch
# loop that steps the scheduler first, as the tutorials of the time advised.
OLD_STYLE = """\
import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR

model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()


def test():
    model.eval()
    with torch.no_grad():
        return sum(F.nll_loss(model(x), y).item() for x, y in test_loader)


for epoch in range(1, 15):
    scheduler.step()
    train(epoch)
    test()
"""


def test_scheduler_stepped_before_a_training_function_of_the_file():
    assert found(OLD_STYLE) == [("ML302", line_of(OLD_STYLE, "scheduler.step()"))]
    # after the epoch's training: right
    fixed = OLD_STYLE.replace("    scheduler.step()\n    train(epoch)\n",
                              "    train(epoch)\n    scheduler.step()\n")
    assert found(fixed) == []
    # train() is imported: which comes first is not known here
    imported = OLD_STYLE.replace("def train(epoch):", "def train_local(epoch):").replace(
        "from torch.optim.lr_scheduler import StepLR",
        "from torch.optim.lr_scheduler import StepLR\nfrom engine import train")
    assert found(imported) == []


# A hand-written trainer: `fit` runs the epoch hooks itself; the scheduler is stepped in the
# epoch-start hook, the optimizer in `train_step`.
HOOKED_TRAINER = """\
import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, epochs):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.MultiStepLR(self.optimizer, [30, 60])
        self.epochs = epochs

    def fit(self, loader):
        for epoch in range(self.epochs):
            self.on_epoch_start(epoch)
            for batch in loader:
                self.train_step(batch)
            self.on_epoch_end(epoch)

    def on_epoch_start(self, epoch):
        print(f"epoch {epoch}")
        self.scheduler.step()

    def on_epoch_end(self, epoch):
        torch.save(self.model.state_dict(), f"epoch{epoch}.pt")

    def train_step(self, batch):
        x, y = batch
        self.optimizer.zero_grad()
        F.cross_entropy(self.model(x), y).backward()
        self.optimizer.step()
"""


def test_scheduler_stepped_in_an_epoch_start_hook_that_the_trainer_calls_first():
    findings = lint_text(HOOKED_TRAINER, [SchedulerBeforeOptimizer])
    assert [(f.code, f.line) for f in findings] == [
        ("ML302", line_of(HOOKED_TRAINER, "self.scheduler.step()"))]
    assert "`fit` calls before stepping the optimizer" in findings[0].message
    # the same step in the epoch-end hook is right
    moved = HOOKED_TRAINER.replace('        print(f"epoch {epoch}")\n        self.scheduler.step()\n',
                                   '        print(f"epoch {epoch}")\n').replace(
        '        torch.save(', '        self.scheduler.step()\n        torch.save(')
    assert found(moved) == []
    # a hook called after the epoch's steps, whatever its name, is not at the start
    late = HOOKED_TRAINER.replace(
        "            self.on_epoch_start(epoch)\n            for batch in loader:\n"
        "                self.train_step(batch)\n",
        "            for batch in loader:\n                self.train_step(batch)\n"
        "            self.on_epoch_start(epoch)\n")
    assert found(late) == []


def test_epoch_start_callbacks_of_frameworks_and_what_stays_silent():
    source = """\
    import torch
    import torch.nn.functional as F


    class Module:
        def __init__(self, net):
            self.net = net
            self.opt = torch.optim.Adam(net.parameters())
            self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, 0.9)

        def before_train_epoch(self, runner):
            self.sched.step()

        def training_step(self, x, y):
            self.opt.zero_grad()
            F.mse_loss(self.net(x), y).backward()
            self.opt.step()
    """
    assert found(source) == [("ML302", line_of(source, "self.sched.step()"))]
    # validation epochs, and epoch ends, are not the start of a training epoch
    for name in ("on_validation_epoch_start", "after_train_epoch", "on_epoch_end"):
        assert found(source.replace("before_train_epoch", name)) == []
    # no optimizer step in the class: which comes first is not known
    assert found(source.replace("self.opt.step()", "pass")) == []
    # a scheduler of the project's own (a warm-up may be meant to step first)
    assert found(source.replace("torch.optim.lr_scheduler.ExponentialLR(self.opt, 0.9)",
                                "WarmUp(self.opt)")) == []


# Ignite: a torch scheduler stepped by a handler of EPOCH_STARTED runs before the engine's
# first iteration (the examples attach it to EPOCH_COMPLETED).
IGNITE = """\
import torch
from torch.optim.lr_scheduler import StepLR
from ignite.engine import Engine, Events


def run(model, train_loader, epochs, lr):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    lr_scheduler = StepLR(optimizer, step_size=1, gamma=0.5)

    def update(engine, batch):
        x, y = batch
        optimizer.zero_grad()
        loss = torch.nn.functional.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    trainer = Engine(update)

    def lr_step(engine):
        lr_scheduler.step()

    trainer.add_event_handler(Events.EPOCH_STARTED, lr_step)
    trainer.run(train_loader, max_epochs=epochs)
"""


def test_ignite_handler_of_epoch_started_steps_the_scheduler_first():
    assert found(IGNITE) == [("ML302", line_of(IGNITE, "lr_scheduler.step()"))]
    assert found(IGNITE.replace("EPOCH_STARTED", "EPOCH_COMPLETED")) == []
    # a filtered event (every other epoch, once at epoch 3) is not the first one
    assert found(IGNITE.replace("Events.EPOCH_STARTED", "Events.EPOCH_STARTED(every=2)")) == []
    # an engine whose update function is not known here
    assert found(IGNITE.replace("Engine(update)", "Engine(make_update(model))")) == []


def test_scheduler_stepped_at_the_top_of_a_per_epoch_function():
    source = """\
    import torch.nn.functional as F


    def train(train_loader, model, optimizer, scheduler, epoch):
        scheduler.step()
        model.train()
        for i, (images, target) in enumerate(train_loader):
            loss = F.cross_entropy(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    source = textwrap.dedent(source)
    assert found(source) == [("ML302", line_of(source, "scheduler.step()"))]
    # after the batch loop: right
    after = source.replace("    scheduler.step()\n", "") + "    scheduler.step()\n"
    assert found(after) == []
    # only in some calls (a condition, an exception handler): not known to come first
    for wrapped in ("    if epoch:\n        scheduler.step()\n",
                    "    try:\n        pass\n    except ValueError:\n        scheduler.step()\n"):
        changed = source.replace("    scheduler.step()\n", wrapped)
        assert changed != source and found(changed) == []
    # an explicit epoch
    assert found(source.replace("scheduler.step()", "scheduler.step(epoch)")) == []


def test_scheduler_stepped_before_a_training_function_defined_in_main():
    source = textwrap.dedent("""\
    import torch


    def main(model, loader, epochs):
        optimizer = torch.optim.Adam(model.parameters())
        scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.95)

        def train_epoch():
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()

        for epoch in range(epochs):
            scheduler.step()
            train_epoch()
    """)
    assert found(source) == [("ML302", line_of(source, "scheduler.step()"))]
    assert found(source.replace("            optimizer.step()\n", "            pass\n")) == []


def test_eval_loop_calling_forward_by_name_needs_no_grad_too():
    # a forum post's validation loop (bench/bugs r-pysi-105009-validation-without-no-grad)
    source = """\
import torch

model.eval()
for inputs, labels in validation_loader:
    outputs = model.forward(inputs.to(device))
    validation_sum_loss += loss(outputs.squeeze(), labels).item()
"""
    assert found(source, [EvalWithoutNoGrad]) == [("ML307", line_of(source, "model.forward"))]
    fixed = """\
import torch

model.eval()
with torch.no_grad():
    for inputs, labels in validation_loader:
        outputs = model.forward(inputs.to(device))
        validation_sum_loss += loss(outputs.squeeze(), labels).item()
"""
    assert found(fixed, [EvalWithoutNoGrad]) == []


def test_model_output_resized_before_cross_entropy_still_carries_the_softmax():
    # the CDSSM model of bench/bugs r-nishnik-cdssm-softmax-before-ce
    source = """\
import torch
import torch.nn.functional as F


class CDSSM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.learn_gamma = torch.nn.Conv1d(1, 1, 1)

    def forward(self, dots):
        with_gamma = self.learn_gamma(dots.resize(5, 1, 1))
        return F.softmax(with_gamma)


model = CDSSM()
criterion = torch.nn.CrossEntropyLoss()
for dots, y in data:
    y_pred = model(dots)
    loss = criterion(y_pred.resize(1, 5), y)
    logits = criterion(dots.resize(1, 5), y)
"""
    assert found(source, [SoftmaxBeforeCrossEntropy]) == [
        ("ML308", line_of(source, "loss = criterion"))]


POINTNET = """\
import torch
import torch.nn.functional as F

classifier = PointNetCls(k=num_classes)
classifier.load_state_dict(torch.load(opt.model))
optimizer = torch.optim.SGD(classifier.parameters(), lr=0.01, momentum=0.9)
for epoch in range(opt.nepoch):
    for i, data in enumerate(dataloader, 0):
        points, target = data
        optimizer.zero_grad()
        pred, _ = classifier(points)
        loss = F.nll_loss(pred, target)
        loss.backward()
        optimizer.step()
        if i % 10 == 0:
            j, data = next(enumerate(testdataloader, 0))
            points, target = data
            pred, _ = classifier(points)
            print(F.nll_loss(pred, target).item())
"""


def test_a_test_batch_drawn_inside_the_training_loop_is_an_evaluation():
    # PointNet's training scripts (bench/bugs r-pointnet-test-batches-in-train-mode)
    findings = lint_text(POINTNET, [EvalWithoutEvalMode])
    assert [(f.code, f.line) for f in findings] == [
        ("ML306", line_of(POINTNET, "next(enumerate(testdataloader"))]
    assert "next(enumerate(testdataloader, 0))" in findings[0].message
    # the model put in eval mode for the test batch, and back in training mode after
    fixed = POINTNET.replace(
        "            j, data = next(", "            classifier.eval()\n            j, data = next(")
    assert lint_text(fixed, [EvalWithoutEvalMode]) == []
    # a batch drawn from the training data is part of the step
    train_batch = POINTNET.replace("testdataloader", "traindataloader")
    assert lint_text(train_batch, [EvalWithoutEvalMode]) == []
