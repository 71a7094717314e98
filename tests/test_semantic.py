"""The semantic model: kinds of values across a project's files, and the rules built on it,
on small multi-file projects."""

from __future__ import annotations

import inspect
import textwrap

import libcst as cst
import pytest

from modellint.static.context import FileContext
from modellint.static.index import build
from modellint.static.kinds import SCHEDULERS
from modellint.static.scope import scope_of
from modellint.static.summary import BinOp, Const, Num, Ref, SelfAttr, UnaryOp
from modellint.testing import lint_project, registry


def rule(code):
    return registry().rules[code]


def codes(found, path):
    return [(f.code, f.line) for f in found[path]]


MODELS = '''\
import torch.nn as nn
import torch.nn.functional as F


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 128)


class Classifier(Backbone):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(128, 10), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(self.fc(x))


class Regularized(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.2))

    def forward(self, x):
        return F.softmax(self.net(x), dim=-1)


def build_model():
    return Classifier()


class LabelLoss(nn.Module):
    def forward(self, logits, target):
        return F.cross_entropy(logits, target)


def loss_fn(pred, target):
    return F.nll_loss(pred, target)
'''


def kinds_in(files, path, function, names):
    index = build((p, textwrap.dedent(t)) for p, t in files.items())
    text = textwrap.dedent(files[path])
    module = cst.parse_module(text)
    context = FileContext(path, text, {}, index)
    func = next(s for s in module.body
                if isinstance(s, cst.FunctionDef) and s.name.value == function)
    scope = scope_of(context, func)
    return {name: context.semantic.kind_of_name(name, scope, 10**9) for name in names}


def test_kinds_follow_imports_bases_factories_tuples_and_loops():
    train = '''\
    import torch
    from models import Classifier, Regularized, build_model, LabelLoss, loss_fn

    def train(loader, device):
        model = Classifier().to(device)
        a, b = Regularized(), build_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)
        criterion = LabelLoss()
        for p in model.parameters():
            pass
        for group in optimizer.param_groups:
            for q in group["params"]:
                pass
        for m in model.modules():
            pass
        out = model(loader)
    '''
    kinds = kinds_in({"models.py": MODELS, "train.py": train}, "train.py", "train",
                     ["model", "a", "b", "optimizer", "scheduler", "criterion", "p", "q", "m",
                      "out", "loss_fn", "device"])
    assert kinds["model"].kind == "module" and kinds["model"].cls == "models.py:Classifier"
    assert kinds["model"].outputs == "softmax" and kinds["model"].mode is False
    assert kinds["a"].mode is True and kinds["a"].outputs == "softmax"
    assert kinds["b"].cls == "models.py:Classifier"
    assert kinds["optimizer"].kind == "optimizer"
    assert (kinds["scheduler"].kind, kinds["scheduler"].step) == ("scheduler", "epoch")
    assert kinds["criterion"].loss == "cross_entropy"
    assert kinds["p"].parameter and kinds["q"].parameter
    assert kinds["m"].kind == "module"
    assert (kinds["out"].kind, kinds["out"].outputs) == ("tensor", "softmax")
    assert kinds["loss_fn"].loss == "nll_loss"
    assert kinds["device"] is None  # a parameter of unknown kind stays unknown


def test_a_base_class_of_an_unknown_package_is_a_module_only_when_used_as_one():
    models = '''\
    import torch.nn as nn
    from somewhere import Base, Config

    class Net(Base):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            self.drop = nn.Dropout()

    class Settings(Config):
        def __init__(self):
            super().__init__()
            self.lr = 0.1
    '''
    train = '''\
    from models import Net, Settings

    def main():
        net = Net()
        settings = Settings()
    '''
    kinds = kinds_in({"models.py": models, "train.py": train}, "train.py", "main",
                     ["net", "settings"])
    assert kinds["net"].kind == "module" and kinds["net"].mode is True
    assert kinds["settings"] is None


def test_relative_imports_and_packages_resolve_to_the_project_file():
    files = {
        "pkg/__init__.py": "from .nets import Net\n",
        "pkg/nets.py": "import torch.nn as nn\n\nclass Net(nn.Module):\n"
                       "    def __init__(self):\n        super().__init__()\n"
                       "        self.bn = nn.BatchNorm2d(3)\n",
        "pkg/train.py": "from . import Net\nfrom .nets import Net as N2\n\n"
                        "def main():\n    a = Net()\n    b = N2()\n",
    }
    kinds = kinds_in(files, "pkg/train.py", "main", ["a", "b"])
    assert kinds["a"].cls == kinds["b"].cls == "pkg/nets.py:Net"
    assert kinds["a"].mode is True


def test_the_scheduler_table_covers_every_scheduler_of_the_installed_torch():
    scheduler = pytest.importorskip("torch.optim.lr_scheduler")
    base = scheduler.LRScheduler
    found = {
        name for name, value in vars(scheduler).items()
        if inspect.isclass(value) and value.__module__ == scheduler.__name__
        and (issubclass(value, base) or name == "ReduceLROnPlateau")
    }
    assert found, "no scheduler classes found"
    missing = found - set(SCHEDULERS)
    assert not missing, f"add these to modellint.static.kinds.SCHEDULERS: {sorted(missing)}"
    assert set(SCHEDULERS.values()) <= {"epoch", "batch", "either"}


# -- the rules, across files -------------------------------------------------------------------


def test_ml308_probabilities_from_a_model_of_another_file():
    train = '''\
    import torch.nn as nn
    import torch.nn.functional as F
    from models import Classifier, build_model

    criterion = nn.CrossEntropyLoss()

    def train(loader):
        model = Classifier()
        for x, y in loader:
            out = model(x)
            loss = criterion(out, y)

    def finetune(x, y):
        model = build_model()
        return F.cross_entropy(model(x), y)
    '''
    found = lint_project({"models.py": MODELS, "train.py": train}, [rule("ML308")])
    assert codes(found, "train.py") == [("ML308", 11), ("ML308", 15)]
    assert codes(found, "models.py") == []


def test_ml308_a_loss_wrapper_of_another_file():
    train = '''\
    import torch
    import torch.nn.functional as F
    from models import LabelLoss, loss_fn

    def step(model, x, y):
        criterion = LabelLoss()
        first = criterion(F.softmax(model(x), dim=1), y)
        second = loss_fn(torch.softmax(model(x), dim=1), y)
        third = loss_fn(F.log_softmax(model(x), dim=1), y)
        return first + second + third
    '''
    found = lint_project({"models.py": MODELS, "train.py": train}, [rule("ML308")])
    assert codes(found, "train.py") == [("ML308", 7), ("ML308", 8)]


def test_ml308_silent_when_the_model_is_not_known():
    train = '''\
    import torch.nn.functional as F
    from elsewhere import Classifier

    def step(x, y):
        model = Classifier()
        return F.cross_entropy(model(x), y)
    '''
    found = lint_project({"models.py": MODELS, "train.py": train}, [rule("ML308")])
    assert codes(found, "train.py") == []


def test_ml303_a_gan_trainer_class_zeroes_one_optimizer():
    gan = '''\
    import torch

    class Trainer:
        def __init__(self, generator, discriminator):
            self.G, self.D = generator, discriminator
            self.opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
            self.opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)

        def fit(self, loader, z):
            for real in loader:
                self.opt_d.zero_grad()
                fake = self.G(z)
                (self.D(fake.detach()).mean() - self.D(real).mean()).backward()
                self.opt_d.step()
                (-self.D(fake).mean()).backward()
                self.opt_g.step()
    '''
    found = lint_project({"gan.py": gan}, [rule("ML303")])
    assert codes(found, "gan.py") == [("ML303", 16)]


def test_ml301_a_cosine_schedule_over_epochs_stepped_per_batch():
    train = '''\
    import torch
    from torch.optim.lr_scheduler import CosineAnnealingLR

    class Runner:
        def __init__(self, model, num_epochs):
            self.model = model
            self.optimizer = torch.optim.AdamW(model.parameters())
            self.scheduler = CosineAnnealingLR(self.optimizer, T_max=num_epochs)

        def run(self, loader, num_epochs):
            for epoch in range(num_epochs):
                for x, y in loader:
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()
                    self.scheduler.step()
    '''
    found = lint_project({"runner.py": train}, [rule("ML301")])
    assert codes(found, "runner.py") == [("ML301", 16)]


NETS = '''\
import torch.nn as nn


class Dropper(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.up = nn.Upsample(scale_factor=2)


def make_dropper():
    return Dropper()
'''

EVALUATE = '''\
import torch
from nets import {cls}

def main(loader):
    model = {cls}()
    with torch.no_grad():
        for x in loader:
            print(model(x))
'''


def test_ml306_a_model_of_another_file_with_dropout_is_reported():
    found = lint_project({"nets.py": NETS, "run.py": EVALUATE.format(cls="Dropper")},
                         [rule("ML306")])
    assert codes(found, "run.py") == [("ML306", 8)]
    found = lint_project({"nets.py": NETS, "run.py": EVALUATE.format(cls="make_dropper")},
                         [rule("ML306")])
    assert codes(found, "run.py") == [("ML306", 8)]


def test_ml306_not_on_a_model_that_the_project_knows_has_no_mode():
    found = lint_project({"nets.py": NETS, "run.py": EVALUATE.format(cls="Linear")},
                         [rule("ML306")])
    assert codes(found, "run.py") == []
    # trained here, then evaluated under no_grad without eval(): no dropout, no batch norm
    train = '''\
    import torch
    import torch.nn.functional as F
    from nets import Linear

    model = Linear()

    def fit(loader, optimizer):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        with torch.no_grad():
            for x, y in loader:
                print(model(x))
    '''
    found = lint_project({"nets.py": NETS, "run.py": train}, [rule("ML306")])
    assert codes(found, "run.py") == []
    found = lint_project({"nets.py": NETS.replace("nn.Linear(8, 2)", "nn.Dropout()"),
                          "run.py": train}, [rule("ML306")])
    assert codes(found, "run.py") == [("ML306", 15)]


EVAL_PY = '''\
import torch


@torch.no_grad()
def evaluate(model, loader):
    correct = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
    return correct


def validate(model, loader):
    model.eval()
    with torch.no_grad():
        return [model(x) for x, _ in loader]
'''

TRAIN_PY = '''\
import torch.nn.functional as F
from evaluation import evaluate, validate


def fit(model, train_loader, val_loader, optimizer, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
{before}        print(evaluate(model, val_loader))
'''


def test_ml306_evaluate_whose_callers_never_call_eval():
    found = lint_project({"evaluation.py": EVAL_PY, "train.py": TRAIN_PY.format(before="")},
                         [rule("ML306")])
    assert codes(found, "evaluation.py") == [("ML306", 8)]
    assert "its caller in train.py never puts it in eval mode" in found["evaluation.py"][0].message
    assert codes(found, "train.py") == []


def test_ml306_evaluate_is_silent_when_a_caller_calls_eval_or_is_unknown():
    for before in ("        model.eval()\n", "        validate(model, val_loader)\n",
                   "        helpers.check(model)\n"):
        found = lint_project(
            {"evaluation.py": EVAL_PY, "train.py": TRAIN_PY.format(before=before)},
            [rule("ML306")])
        assert codes(found, "evaluation.py") == [], before
    # no caller in the run (a library function): the caller decides
    found = lint_project({"evaluation.py": EVAL_PY}, [rule("ML306")])
    assert codes(found, "evaluation.py") == []
    # one of two callers puts it in eval mode
    other = 'from evaluation import evaluate\n\ndef test(model, loader):\n' \
            '    model.eval()\n    return evaluate(model, loader)\n'
    found = lint_project({"evaluation.py": EVAL_PY, "train.py": TRAIN_PY.format(before=""),
                          "test.py": other}, [rule("ML306")])
    assert codes(found, "evaluation.py") == []


def test_a_file_depends_on_the_facts_of_the_files_it_imports_and_of_its_importers():
    files = {"evaluation.py": EVAL_PY, "train.py": TRAIN_PY.format(before=""),
             "other.py": "x = 1\n"}
    index = build(files.items())
    assert index.dependencies("train.py") == ["evaluation.py"]
    assert index.importers("evaluation.py") == ["train.py"]
    digests = {path: index.digest(path) for path in files}
    # the caller now puts the model in eval mode: evaluation.py's findings may change
    edited = build({**files, "train.py": TRAIN_PY.format(before="        model.eval()\n")}.items())
    assert edited.digest("evaluation.py") != digests["evaluation.py"]
    assert edited.digest("other.py") == digests["other.py"]
    # an edit that changes no fact (a comment) changes no digest
    commented = build({**files, "train.py": "# note\n" + TRAIN_PY.format(before="")}.items())
    assert commented.digest("evaluation.py") == digests["evaluation.py"]


def test_facts_of_calls_that_pass_names_and_other_values_at_the_same_place():
    text = "def f(model, loader):\n    run(model, 1)\n    run(2, loader)\n    run(model, loader)\n"
    index = build([("a.py", text)])
    calls = index.files["a.py"]["functions"]["f"]["calls"]
    assert ["run", ["model", None]] in calls and ["run", [None, "loader"]] in calls


def test_ml502_saving_a_model_whose_class_is_imported_from_the_project():
    train = '''\
    import torch
    from models import Classifier, build_model

    class Trainer:
        def __init__(self):
            self.model = build_model()

        def save(self, path):
            torch.save(self.model, path)

    def main():
        model = Classifier()
        torch.save(model, "model.pt")
        torch.save(model.state_dict(), "weights.pt")
    '''
    found = lint_project({"models.py": MODELS, "train.py": train}, [rule("ML502")])
    assert codes(found, "train.py") == [("ML502", 9), ("ML502", 13)]


def test_ml108_repeating_what_a_project_factory_returns():
    blocks = "import torch.nn as nn\n\ndef make_block():\n    return nn.Linear(8, 8)\n"
    net = '''\
    import torch.nn as nn
    from blocks import make_block

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(*[make_block()] * 4)
            self.fresh = nn.Sequential(*[make_block() for _ in range(4)])
    '''
    found = lint_project({"blocks.py": blocks, "net.py": net}, [rule("ML108")])
    assert codes(found, "net.py") == [("ML108", 7)]


def test_ml104_a_class_whose_module_base_lives_in_another_file():
    base = "import torch.nn as nn\n\nclass Base(nn.Module):\n    def __init__(self):\n" \
           "        super().__init__()\n"
    net = '''\
    import torch.nn as nn
    from base import Base
    from elsewhere import Unknown

    class Net(Base):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    class Other(Unknown):
        def __init__(self):
            self.fc = nn.Linear(2, 2)
    '''
    found = lint_project({"base.py": base, "net.py": net}, [rule("ML104")])
    assert codes(found, "net.py") == [("ML104", 6)]


def test_the_index_read_by_several_processes_is_the_one_read_by_one(tmp_path):
    from modellint.static.index import index_files

    files = []
    for number in range(70):
        path = tmp_path / f"m{number}.py"
        path.write_text(f"import torch.nn as nn\nfrom m{(number + 1) % 70} import Net{(number + 1) % 70}\n\n"
                        f"class Net{number}(nn.Module):\n    pass\n")
        files.append((path.name, path))
    (tmp_path / "bad.py").write_bytes(b"\xff\xfe not text \x00")
    files.append(("bad.py", tmp_path / "bad.py"))
    one, two = index_files(files, None, 1), index_files(files, None, 2)
    assert one.files == two.files and len(one.files) == 70
    assert one.digest("m0.py") == two.digest("m0.py")


def test_a_file_whose_index_process_died_is_read_by_the_run(tmp_path, monkeypatch):
    import os

    from modellint.static import facts_cache
    from modellint.static.index import index_files

    files = []
    for number in range(70):
        path = tmp_path / f"m{number}.py"
        path.write_text(f"import torch.nn as nn\n\nclass Net{number}(nn.Module):\n    pass\n")
        files.append((path.name, path))
    run = os.getpid()
    read = facts_cache._read_facts

    def dies_in_a_worker(task, *args):
        if os.getpid() != run:
            os._exit(1)  # as a process killed by the system
        return read(task, *args)

    monkeypatch.setattr(facts_cache, "_read_facts", dies_in_a_worker)
    index = index_files(files, None, 2)
    monkeypatch.setattr(facts_cache, "_read_facts", read)
    assert index.files == index_files(files, None, 1).files and len(index.files) == 70


def test_facts_read_by_another_index_process_come_back_the_same(tmp_path):
    """With a cache, what the other processes read comes back as the JSON of its facts made
    for the cache: decoded, the same facts in the same order as read in one process."""
    import json

    from modellint.static.cache import Cache
    from modellint.static.index import index_files

    files = []
    for number in range(70):
        path = tmp_path / f"m{number}.py"
        path.write_text(f"import torch.nn as nn\n\nclass Net{number}(nn.Module):\n"
                        "    def __init__(self):\n        super().__init__()\n"
                        f"        self.fc = nn.Linear({number} + 1, 2.0)\n"
                        "        self.zeta, self.alpha = nn.ReLU(), [nn.Tanh()] * 2\n")
        files.append((path.name, path))
    cache = Cache(tmp_path / "cache", "0" * 32, key_directory=tmp_path / "key")
    assert cache.prepare()
    shared, alone = index_files(files, cache, 2), index_files(files, None, 1)
    assert len(shared.files) == 70
    for name, _ in files:
        assert shared.files[name] == alone.files[name]
        assert json.dumps(shared.files[name], default=repr) == json.dumps(
            alone.files[name], default=repr)  # the order and the types of every value


SCHEDULES = '''\
import torch


def build_scheduler(optimizer, epochs):
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)


class WarmUp:
    def __init__(self, optimizer, steps=500):
        self.optimizer, self.steps, self.count = optimizer, steps, 0

    def step(self):
        self.count += 1


def build_warmup(optimizer):
    return WarmUp(optimizer)
'''

BASE_TRAINER = '''\
class BaseTrainer:
    def fit(self, loader, epochs):
        for epoch in range(epochs):
            self.on_train_epoch_start()
            for batch in loader:
                self.train_step(batch)

    def on_train_epoch_start(self):
        pass
'''

HOOKED = '''\
import torch
import torch.nn.functional as F
from base import BaseTrainer
from schedules import build_scheduler


class Trainer(BaseTrainer):
    def __init__(self, model, epochs):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.lr_sched = build_scheduler(self.optimizer, epochs)

    def on_train_epoch_start(self):
        self.lr_sched.step()

    def train_step(self, batch):
        x, y = batch
        self.optimizer.zero_grad()
        F.cross_entropy(self.model(x), y).backward()
        self.optimizer.step()
'''


def test_ml302_a_scheduler_from_another_file_stepped_in_an_epoch_start_hook():
    files = {"schedules.py": SCHEDULES, "base.py": BASE_TRAINER, "trainer.py": HOOKED}
    found = lint_project(files, [rule("ML302")])
    assert codes(found, "trainer.py") == [("ML302", 14)]
    assert "`on_train_epoch_start()`, which runs at the start of each epoch" in \
        found["trainer.py"][0].message
    # a warm-up class of the project, built by a factory of another file: meant to step first
    warm = HOOKED.replace("build_scheduler", "build_warmup").replace(
        "build_warmup(self.optimizer, epochs)", "build_warmup(self.optimizer)")
    found = lint_project({**files, "trainer.py": warm}, [rule("ML302")])
    assert codes(found, "trainer.py") == []
    # stepped at the end of the epoch
    end = HOOKED.replace("def on_train_epoch_start", "def on_train_epoch_end")
    found = lint_project({**files, "trainer.py": end}, [rule("ML302")])
    assert codes(found, "trainer.py") == []


# ML601 across files: the model's class lives in models.py, its stem in a base class of
# another file; the init loop is in train.py.
BLOCKS = '''\
import torch.nn as nn


class Stem(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.width = width
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, stride=2), nn.BatchNorm2d(width))


class Residual(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
'''

CLASSIFIER = '''\
import torch.nn as nn
from blocks import Residual, Stem


class Classifier(Stem):
    def __init__(self, width=32, num_classes=10, dropout=0.1):
        super().__init__(width)
        self.blocks = nn.ModuleList([Residual(width), Residual(width)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(width, num_classes)
        self.dropout = dropout
'''

INIT_LOOP = '''\
import torch
import torch.nn as nn
from models import Classifier


def build(device):
    model = Classifier(num_classes=100).to(device)
    for name, m in model.named_children():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight)
    return model
'''


def test_ml601_a_children_loop_over_a_model_of_another_file_never_reaches_its_convs():
    files = {"blocks.py": BLOCKS, "models.py": CLASSIFIER, "train.py": INIT_LOOP}
    found = lint_project(files, [rule("ML601")])
    assert codes(found, "train.py") == [("ML601", 8)]
    message = found["train.py"][0].message
    # both the base class's stem and the residual blocks hold convolutions; the Linear head
    # is a direct child
    assert "none of them is a `Conv2d`" in message
    assert "`model.blocks`, `model.stem`" in message
    assert "model.named_modules()" in message


def test_ml601_silent_when_a_direct_child_may_be_the_layer_or_is_not_known():
    files = {"blocks.py": BLOCKS, "models.py": CLASSIFIER, "train.py": INIT_LOOP}
    # the head is a convolution: the loop reaches it (the nested ones it misses are not
    # reported for a model of another file: that takes knowing every layer)
    conv_head = CLASSIFIER.replace("nn.Linear(width, num_classes)", "nn.Conv2d(width, 10, 1)")
    # a child set from a parameter whose default is None: it may be anything
    given = CLASSIFIER.replace("dropout=0.1", "dropout=None")
    # the model is handed to a function before the loop, which may replace its children
    patched = INIT_LOOP.replace("    for name, m", "    convert_sync_batchnorm(model)\n"
                                "    for name, m")
    for changed in ({"models.py": conv_head}, {"models.py": given}, {"train.py": patched}):
        found = lint_project({**files, **changed}, [rule("ML601")])
        assert codes(found, "train.py") == [], changed


def test_the_subclass_table_of_torch_nn_matches_the_installed_torch():
    nn = pytest.importorskip("torch.nn")
    from modellint.static.kinds import NN_BASES

    public = {name: value for name, value in vars(nn).items()
              if name[:1].isupper() and inspect.isclass(value) and issubclass(value, nn.Module)}
    names = {value: name for name, value in public.items()}
    assert "Conv2d" in public
    for name, value in public.items():
        bases = {names[b] for b in value.__mro__[1:] if b in names and b is not nn.Module}
        missing = bases - set(NN_BASES.get(name, ()))
        assert not missing, f"add {sorted(missing)} to modellint.static.kinds.NN_BASES[{name!r}]"


def test_the_self_returning_module_methods_match_the_installed_torch():
    nn = pytest.importorskip("torch.nn")
    from modellint.rule import RETURNS_SELF

    # torch annotates them `-> Self`, all but `to` (overloaded): checked by calling it
    annotated = {name for name, value in vars(nn.Module).items()
                 if inspect.isfunction(value) and not name.startswith("_")
                 and str(inspect.signature(value).return_annotation).rsplit(".", 1)[-1] == "Self"}
    layer = nn.Linear(2, 2)
    assert layer.to("cpu") is layer and layer.train() is layer
    assert RETURNS_SELF == annotated | {"to"}, sorted(RETURNS_SELF ^ (annotated | {"to"}))


def test_facts_keep_parameter_defaults_and_arithmetic():
    from modellint.static.facts import extract

    facts = extract(textwrap.dedent('''\
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self, dim, heads=8, *, bias=True, norm=None):
            super().__init__()
            self.scale = dim ** -0.5
            self.add_module("proj", nn.Linear(dim, dim))

        def fit(self, scaler):
            self.opt.step()
            scaler.step(self.opt_d)
    '''))
    net = facts["classes"]["Net"]
    assert net["methods"]["__init__"]["steps"] == []
    assert set(net["methods"]["fit"]["steps"]) == {SelfAttr("opt"), SelfAttr("opt_d")}
    assert net["methods"]["__init__"]["defaults"] == {
        "heads": Num(8.0), "bias": Const("True"), "norm": Const("None")}
    assert net["attrs"]["scale"] == [
        ["__init__", BinOp("**", Ref("dim"), UnaryOp("-", Num(0.5)))]]
    assert net["registers"] is True


def test_facts_round_trip_through_the_json_of_the_cache():
    import json

    from modellint.static.facts import extract
    from modellint.static.summary import convert_facts, from_json, to_json

    facts = extract(textwrap.dedent('''\
    import torch.nn as nn
    from collections import OrderedDict

    TABLE = {"a": nn.ReLU(), "b": None}
    HEADS = [nn.Linear(2, 2) for _ in range(3)]

    class Net(nn.Module):
        def __init__(self, dim, heads=8, **kw):
            super().__init__()
            self.body = nn.Sequential(OrderedDict([("fc", nn.Linear(dim, dim))]))
            self.items = {k: v for k, v in kw.items()}
            self.scale = -dim ** 0.5 if heads else x[1:2]

        def forward(self, x):
            y, z = self.body(x), x[0]
            y = y @ self.w
            for i, m in enumerate(self.body):
                x = m(x, *y, key=x["k"], **kw)
            return self.items["a"](x) > 1, f"{x}", not y, 'text', True
    '''))
    plain = json.loads(json.dumps(convert_facts(facts, to_json)))
    assert convert_facts(plain, from_json) == facts
    assert json.dumps(plain, sort_keys=True) == json.dumps(
        convert_facts(convert_facts(plain, from_json), to_json), sort_keys=True)
    with pytest.raises(ValueError):
        from_json(["no such tag", 1])


ENGINE = '''\
import torch.nn.functional as F


def train_one_epoch(model, loader, optimizer, scaler=None):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def evaluate(model, loader):
    model.eval()
    return sum(F.cross_entropy(model(x), y).item() for x, y in loader)
'''

MAIN = '''\
import torch
from engine import evaluate, train_one_epoch


def main(model, train_loader, val_loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [30, 60])
    for epoch in range(epochs):
        scheduler.step()
        train_one_epoch(model, train_loader, optimizer)
        evaluate(model, val_loader)
'''


def test_ml302_a_scheduler_stepped_before_the_training_function_of_another_file():
    found = lint_project({"engine.py": ENGINE, "main.py": MAIN}, [rule("ML302")])
    assert codes(found, "main.py") == [("ML302", 9)]
    assert "`train_one_epoch()` (engine.py), which steps the optimizer" in \
        found["main.py"][0].message
    # stepped after the epoch's training; or before a function that does not train
    after = MAIN.replace("        scheduler.step()\n", "") + "        scheduler.step()\n"
    only_eval = MAIN.replace("        train_one_epoch(model, train_loader, optimizer)\n", "")
    for main in (after, only_eval):
        assert main != MAIN
        found = lint_project({"engine.py": ENGINE, "main.py": main}, [rule("ML302")])
        assert codes(found, "main.py") == []


def test_ml302_an_epoch_start_hook_of_a_trainer_whose_base_of_another_file_steps():
    base = '''\
    class BaseTrainer:
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer

        def train_step(self, batch):
            self.optimizer.zero_grad()
            self.model(batch).sum().backward()
            self.optimizer.step()
    '''
    trainer = '''\
    import torch
    from base import BaseTrainer


    class Trainer(BaseTrainer):
        def __init__(self, model, optimizer):
            super().__init__(model, optimizer)
            self.scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 30)

        def on_epoch_start(self):
            self.scheduler.step()
    '''
    found = lint_project({"base.py": base, "trainer.py": trainer}, [rule("ML302")])
    assert codes(found, "trainer.py") == [("ML302", 11)]
    assert "`BaseTrainer.train_step` (base.py)" in found["trainer.py"][0].message
    # the base class only logs
    logging = base.replace("self.optimizer.step()", "print(self.optimizer)")
    found = lint_project({"base.py": logging, "trainer.py": trainer}, [rule("ML302")])
    assert codes(found, "trainer.py") == []


def test_ml601_self_in_a_base_class_method_may_be_any_subclass():
    base = '''\
    import torch.nn as nn


    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())

        def init_weights(self):
            for m in self.children():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight)
    '''
    found = lint_project({"base.py": base}, [rule("ML601")])
    assert [f.line for f in found["base.py"]] == [10]
    assert "none of them is a `Conv2d`" in found["base.py"][0].message
    # a subclass of another file adds a convolution as a direct child: `self` may be one
    net = '''\
    import torch.nn as nn
    from base import Base


    class Net(Base):
        def __init__(self):
            super().__init__()
            self.head = nn.Conv2d(8, 2, 1)
    '''
    found = lint_project({"base.py": base, "net.py": net}, [rule("ML601")])
    assert all("none of them" not in f.message for f in found["base.py"])


def test_a_copy_of_the_index_keeps_the_text_hashes():
    """The semantic model copies the run's index for a file whose text changed (--fix)."""
    index = build([("models.py", MODELS)])
    other = index.copy()
    assert other.hashes == index.hashes and other.files == index.files


def test_dependencies_through_import_cycles():
    """Transitive imports, computed once per cycle: a -> b -> (a, c) -> d."""
    index = build([("a.py", "import b\n"), ("b.py", "import a\nimport c\n"),
                   ("c.py", "from d import X\n"), ("d.py", "X = 1\n"), ("e.py", "import c\n")])
    assert index.dependencies("c.py") == ["d.py"]  # before the cycle is walked
    assert index.dependencies("a.py") == ["b.py", "c.py", "d.py"]
    assert index.dependencies("b.py") == ["a.py", "c.py", "d.py"]
    assert index.dependencies("e.py") == ["c.py", "d.py"]
    assert index.dependencies("d.py") == []


JOINED = '''\
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.head = nn.Sequential(nn.Linear(8, 2), nn.Softmax(dim=1))

    def forward(self, x):
        x = self.conv(x)
        x = x.mean((2, 3))
        return self.head(x)


def step(model, x, y):
    out = model(x)
    out = out.view(len(x), -1)
    outs = [model(x)]
    outs.append(out)
    return F.cross_entropy(out, y) + F.cross_entropy(outs[0], y)


step(Net(), None, None)
'''


def test_a_files_tree_does_not_outlive_its_lint():
    """The rules, the file's context and its semantic model refer to one another and to the
    file's tree, and the index keeps what the evaluation finds: once the lint of a file is
    done, nothing keeps its tree waiting for the garbage collector (whose collection then
    walked all of it: a twentieth of a cold run's CPU)."""
    import gc

    from modellint.static.linter import Linter
    from modellint.testing import _options

    texts = {"nets.py": JOINED, "other.py": JOINED.replace("Net", "Other")}
    linter = Linter([r for r in registry().rules.values() if hasattr(r, "get_visitors")],
                    _options(None), build(texts.items()))
    gc.collect()
    gc.disable()
    try:
        codes = []
        for path, text in texts.items():
            result = linter.lint(path, text.encode())
            codes += [f.code for f in result.findings]
            del result
        alive = sum(1 for o in gc.get_objects()
                    if type(o) is cst.Module and o.body or type(o) is cst.FunctionDef)
    finally:
        gc.enable()
    # the semantic model was asked, through a name assigned twice and a list changed (that
    # one not known: the list changed)
    assert codes.count("ML308") == 2
    assert alive == 0
