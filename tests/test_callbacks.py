"""What runs where the user does not write the loop (issue 24): the `step()` and no_grad of
project helpers at their call sites, and the callbacks of the training frameworks (ignite,
Lightning, Hugging Face) seen as running per batch or per epoch."""

from __future__ import annotations

from modellint.testing import lint_project, registry


def rule(code):
    return registry().rules[code]


def codes(found, path):
    return [(f.code, f.line) for f in found[path]]


# -- step() through a helper -------------------------------------------------------------------

UPDATER = '''\
import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def update(self):
{update}
    def fit(self, loader):
        for x, y in loader:
            F.cross_entropy(self.model(x), y).backward()
            self.update()
'''


def test_ml303_a_helper_method_steps_the_optimizer_and_nothing_clears_the_gradients():
    found = lint_project({"trainer.py": UPDATER.format(update="        self.optimizer.step()\n")},
                         [rule("ML303")])
    assert codes(found, "trainer.py") == [("ML303", 16)]
    assert "`self.optimizer` (in `self.update()`)" in found["trainer.py"][0].message


def test_ml303_silent_when_the_helper_that_steps_also_clears():
    update = "        self.optimizer.step()\n        self.optimizer.zero_grad()\n"
    found = lint_project({"trainer.py": UPDATER.format(update=update)}, [rule("ML303")])
    assert codes(found, "trainer.py") == []
    # a helper stepping something that is not an optimizer (an environment, a scheduler)
    update = ("        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, 3)\n"
              "        self.scheduler.step()\n")
    found = lint_project({"trainer.py": UPDATER.format(update=update)}, [rule("ML303")])
    assert codes(found, "trainer.py") == []


def test_ml303_a_function_of_another_file_steps_the_optimizer_it_is_given():
    helpers = "def apply(opt):\n    opt.step()\n\n\ndef apply_and_clear(opt):\n" \
        "    opt.step()\n    opt.zero_grad()\n"
    train = '''\
import torch
import torch.nn.functional as F
from helpers import {name}


def train(model, loader):
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        F.mse_loss(model(x), y).backward()
        {name}(optimizer)
'''
    found = lint_project({"helpers.py": helpers, "train.py": train.format(name="apply")},
                         [rule("ML303")])
    assert codes(found, "train.py") == [("ML303", 10)]
    found = lint_project({"helpers.py": helpers,
                          "train.py": train.format(name="apply_and_clear")}, [rule("ML303")])
    assert codes(found, "train.py") == []


# -- no_grad through a helper ------------------------------------------------------------------

EVALUATOR = '''\
import torch
import torch.nn.functional as F


class Runner:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

{decorator}    def val_loss(self, x, y):
{body}
    def fit(self, loader, val_loader):
        for x, y in loader:
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.optimizer.step()
        total = 0.0
        for x, y in val_loader:
            loss = self.val_loss(x, y)
            total += loss
        return total
'''


def test_ml304_silent_when_the_loss_comes_from_a_method_run_under_no_grad():
    for decorator, body in (
            ("    @torch.no_grad()\n", "        return F.cross_entropy(self.model(x), y)\n"),
            ("", "        with torch.no_grad():\n"
                 "            return F.cross_entropy(self.model(x), y)\n")):
        source = EVALUATOR.format(decorator=decorator, body=body)
        found = lint_project({"runner.py": source}, [rule("ML304")])
        assert codes(found, "runner.py") == [], decorator


def test_ml304_the_same_loss_from_a_method_with_gradients_on():
    source = EVALUATOR.format(decorator="",
                              body="        return F.cross_entropy(self.model(x), y)\n")
    found = lint_project({"runner.py": source}, [rule("ML304")])
    assert codes(found, "runner.py") == [("ML304", 22)]
