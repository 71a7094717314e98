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


def test_ml303_a_step_two_helpers_deep():
    update = "        self._apply(self.optimizer)\n\n    def _apply(self, opt):\n" \
        "        opt.step()\n"
    found = lint_project({"trainer.py": UPDATER.format(update=update)}, [rule("ML303")])
    assert [f.line for f in found["trainer.py"]] == [19]


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


# -- Ignite handlers ---------------------------------------------------------------------------

IGNITE = '''\
import torch
import torch.nn.functional as F
from ignite.engine import Events, create_supervised_trainer


def run(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = {scheduler}
    trainer = create_supervised_trainer(model, optimizer, F.cross_entropy)

    @trainer.on({event})
    def adjust_lr(engine):
        scheduler.step()

    trainer.run(loader, max_epochs=epochs)
'''
STEP_LR = "torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)"
ONE_CYCLE = ("torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, epochs=epochs, "
             "steps_per_epoch=len(loader))")


def test_ml301_an_epoch_scheduler_stepped_by_an_iteration_handler():
    source = IGNITE.format(scheduler=STEP_LR, event="Events.ITERATION_COMPLETED")
    found = lint_project({"run.py": source}, [rule("ML301"), rule("ML329")])
    assert codes(found, "run.py") == [("ML301", 13)]
    assert "`Events.ITERATION_COMPLETED`" in found["run.py"][0].message


def test_ml301_silent_for_an_epoch_handler_or_a_filtered_event():
    for event in ("Events.EPOCH_COMPLETED", "Events.ITERATION_COMPLETED(every=1000)"):
        source = IGNITE.format(scheduler=STEP_LR, event=event)
        found = lint_project({"run.py": source}, [rule("ML301"), rule("ML329")])
        assert codes(found, "run.py") == [], event


def test_ml329_an_iteration_scheduler_stepped_by_an_epoch_handler():
    source = IGNITE.format(scheduler=ONE_CYCLE, event="Events.EPOCH_COMPLETED")
    found = lint_project({"run.py": source}, [rule("ML301"), rule("ML329")])
    assert codes(found, "run.py") == [("ML329", 13)]
    # per iteration, as it is sized
    source = IGNITE.format(scheduler=ONE_CYCLE, event="Events.ITERATION_COMPLETED")
    found = lint_project({"run.py": source}, [rule("ML301"), rule("ML329")])
    assert codes(found, "run.py") == []


def test_an_ignite_handler_attached_with_add_event_handler():
    source = IGNITE.format(scheduler=STEP_LR, event="Events.EPOCH_COMPLETED").replace(
        "    @trainer.on(Events.EPOCH_COMPLETED)\n", "").replace(
        "    trainer.run(", "    trainer.add_event_handler(Events.ITERATION_COMPLETED, "
        "adjust_lr)\n    trainer.run(")
    found = lint_project({"run.py": source}, [rule("ML301")])
    assert codes(found, "run.py") == [("ML301", 12)]


# -- Lightning -------------------------------------------------------------------------------

LIGHTNING = '''\
import lightning as L
import torch
import torch.nn.functional as F


class Classifier(L.LightningModule):
    def __init__(self, net, steps):
        super().__init__()
        self.net = net
        self.steps = steps

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3)
        scheduler = {scheduler}
        return {returned}
'''


def lightning(scheduler, returned):
    return LIGHTNING.format(scheduler=scheduler, returned=returned)


def test_lightning_a_scheduler_sized_in_steps_left_to_step_per_epoch():
    one_cycle = ("torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, "
                 "total_steps=self.trainer.estimated_stepping_batches)")
    rules = [rule("ML301"), rule("ML329")]
    # no interval: Lightning's default is once per epoch
    found = lint_project({"m.py": lightning(one_cycle, '{"optimizer": optimizer, '
                                            '"lr_scheduler": scheduler}')}, rules)
    assert codes(found, "m.py") == [("ML329", 19)]
    assert "no `\"interval\"`" in found["m.py"][0].message
    found = lint_project({"m.py": lightning(one_cycle, '[optimizer], [{"scheduler": scheduler, '
                                            '"interval": "epoch"}]')}, rules)
    assert codes(found, "m.py") == [("ML329", 19)]
    found = lint_project({"m.py": lightning(one_cycle, '[optimizer], [{"scheduler": scheduler, '
                                            '"interval": "step"}]')}, rules)
    assert codes(found, "m.py") == []


def test_lightning_an_epoch_scheduler_asked_to_step_per_batch():
    rules = [rule("ML301"), rule("ML329")]
    step_lr = "torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)"
    returned = ('{"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, '
                '"interval": "step"}}')
    found = lint_project({"m.py": lightning(step_lr, returned)}, rules)
    assert codes(found, "m.py") == [("ML301", 19)]
    found = lint_project({"m.py": lightning(step_lr, "[optimizer], [scheduler]")}, rules)
    assert codes(found, "m.py") == []


def test_lightning_silent_outside_a_lightning_module():
    one_cycle = ("torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, "
                 "total_steps=self.steps)")
    source = lightning(one_cycle, "[optimizer], [scheduler]").replace(
        "L.LightningModule", "torch.nn.Module")
    found = lint_project({"m.py": source}, [rule("ML301"), rule("ML329")])
    assert codes(found, "m.py") == []


def test_lightning_training_step_is_run_per_batch():
    source = '''\
import pytorch_lightning as pl
import torch
import torch.nn.functional as F


class Classifier(pl.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.automatic_optimization = False
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=30)

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.opt.zero_grad()
        self.manual_backward(F.cross_entropy(self.net(x), y))
        self.opt.step()
        self.sched.step()

    def on_train_epoch_end(self):
        pass
'''
    found = lint_project({"m.py": source}, [rule("ML301")])
    assert codes(found, "m.py") == [("ML301", 19)]
    moved = source.replace("        self.sched.step()\n", "").replace(
        "        pass\n", "        self.sched.step()\n")
    found = lint_project({"m.py": moved}, [rule("ML301")])
    assert codes(found, "m.py") == []


# -- Hugging Face TrainerCallback --------------------------------------------------------------

def test_a_trainer_callback_steps_its_scheduler_on_each_step():
    source = '''\
import torch
from transformers import TrainerCallback


class DecayCallback(TrainerCallback):
    def __init__(self, optimizer):
        self.scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)

    def {hook}(self, args, state, control, **kwargs):
        self.scheduler.step()
'''
    found = lint_project({"cb.py": source.format(hook="on_step_end")}, [rule("ML301")])
    assert codes(found, "cb.py") == [("ML301", 10)]
    assert "`TrainerCallback` hook `on_step_end`" in found["cb.py"][0].message
    found = lint_project({"cb.py": source.format(hook="on_epoch_end")}, [rule("ML301")])
    assert codes(found, "cb.py") == []


# -- what runs per batch, for ML303 ------------------------------------------------------------

ENGINE = '''\
import torch
import torch.nn.functional as F
from ignite.engine import Engine


def run(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(engine, batch):
        model.train()
{clear}        x, y = batch
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    trainer = Engine(train_step)
    trainer.run(loader, max_epochs=epochs)
'''


def test_ml303_an_ignite_process_function_that_never_clears_the_gradients():
    found = lint_project({"run.py": ENGINE.format(clear="")}, [rule("ML303")])
    assert codes(found, "run.py") == [("ML303", 14)]
    assert "process function of an Ignite `Engine`" in found["run.py"][0].message
    found = lint_project({"run.py": ENGINE.format(clear="        optimizer.zero_grad()\n")},
                         [rule("ML303")])
    assert codes(found, "run.py") == []
    # the same function not handed to an Engine: one call, one step
    source = ENGINE.format(clear="").replace("Engine(train_step)", "Engine(other)")
    found = lint_project({"run.py": source}, [rule("ML303")])
    assert codes(found, "run.py") == []


def test_ml301_an_epoch_scheduler_stepped_in_an_ignite_process_function():
    source = ENGINE.format(clear="        optimizer.zero_grad()\n").replace(
        "    def train_step", "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)\n\n"
        "    def train_step").replace("        return loss.item()",
                                     "        scheduler.step()\n        return loss.item()")
    found = lint_project({"run.py": source}, [rule("ML301")])
    assert codes(found, "run.py") == [("ML301", 18)]


def test_ml303_lightning_manual_optimization_without_zero_grad():
    source = '''\
import lightning as L
import torch.nn.functional as F


class GAN(L.LightningModule):
    def __init__(self, generator, discriminator):
        super().__init__()
        self.automatic_optimization = False
        self.generator = generator
        self.discriminator = discriminator

    def training_step(self, batch, batch_idx):
        opt_g, opt_d = self.optimizers()
        real, _ = batch
        fake = self.generator(real)
{clear_g}        self.manual_backward(-self.discriminator(fake).mean())
        opt_g.step()
        opt_d.zero_grad()
        d_loss = self.discriminator(fake.detach()).mean() - self.discriminator(real).mean()
        self.manual_backward(d_loss)
        opt_d.step()
'''
    found = lint_project({"gan.py": source.format(clear_g="")}, [rule("ML303")])
    assert codes(found, "gan.py") == [("ML303", 17)]
    assert "`opt_g`" in found["gan.py"][0].message
    found = lint_project({"gan.py": source.format(clear_g="        opt_g.zero_grad()\n")},
                         [rule("ML303")])
    assert codes(found, "gan.py") == []
