"""What the semantic model follows across calls (issue 24): the effects of project functions
and methods where they are called, on small multi-file projects; both the finding and the
silence for each pattern."""

from __future__ import annotations

import textwrap

from modellint.static.index import build
from modellint.testing import lint_project, registry


def rule(code):
    return registry().rules[code]


def codes(found, path):
    return [(f.code, f.line) for f in found[path]]


# -- effects: zero_grad ------------------------------------------------------------------------

SOLVER = '''\
import torch
import torch.nn.functional as F


class Solver:
    def __init__(self, G, D):
        self.G, self.D = G, D
        self.g_optimizer = torch.optim.Adam(G.parameters())
        self.d_optimizer = torch.optim.Adam(D.parameters())

    def reset_grad(self):
{reset}
    def train(self, loader):
        for x, y in loader:
            self.reset_grad()
            F.mse_loss(self.D(x), y).backward()
            self.d_optimizer.step()
            self.reset_grad()
            (-self.D(self.G(x)).mean()).backward()
            self.g_optimizer.step()
'''


def test_ml303_silent_when_a_method_of_the_class_clears_the_gradients():
    reset = "        self.g_optimizer.zero_grad()\n        self.d_optimizer.zero_grad()\n"
    found = lint_project({"solver.py": SOLVER.format(reset=reset)}, [rule("ML303")])
    assert codes(found, "solver.py") == []


def test_ml303_a_method_that_clears_one_optimizer_of_two():
    reset = "        self.d_optimizer.zero_grad()\n"
    found = lint_project({"solver.py": SOLVER.format(reset=reset)}, [rule("ML303")])
    assert codes(found, "solver.py") == [("ML303", 21)]
    assert "`self.g_optimizer`" in found["solver.py"][0].message
    # a method that clears nothing
    found = lint_project({"solver.py": SOLVER.format(reset="        pass\n")}, [rule("ML303")])
    assert codes(found, "solver.py") == [("ML303", 18), ("ML303", 21)]


HELPERS = '''\
def reset_grad(opt):
    opt.zero_grad()


def clear(*opts):
    for opt in opts:
        opt.zero_grad()


def log(opt):
    print(opt)


def reset_twice(opt):
    reset_grad(opt)
'''

TRAIN = '''\
import torch
import torch.nn.functional as F
from helpers import {name}


def train(model, loader):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        {name}(opt)
        F.mse_loss(model(x), y).backward()
        opt.step()
'''


def test_ml303_through_a_function_of_another_file_and_transitively():
    for name in ("reset_grad", "clear", "reset_twice"):
        found = lint_project({"helpers.py": HELPERS, "train.py": TRAIN.format(name=name)},
                             [rule("ML303")])
        assert codes(found, "train.py") == [], name
    found = lint_project({"helpers.py": HELPERS, "train.py": TRAIN.format(name="log")},
                         [rule("ML303")])
    assert codes(found, "train.py") == [("ML303", 11)]


def test_ml303_module_level_helper_on_global_optimizers():
    script = '''\
    import torch
    import torch.nn as nn

    G, D = nn.Linear(4, 4), nn.Linear(4, 1)
    d_optimizer = torch.optim.Adam(D.parameters())
    g_optimizer = torch.optim.Adam(G.parameters())


    def reset_grad():
        d_optimizer.zero_grad()
    {more}

    def main(data):
        for x in data:
            reset_grad()
            D(x).mean().backward()
            d_optimizer.step()
            reset_grad()
            D(G(x)).mean().backward()
            g_optimizer.step()
    '''
    more = "    g_optimizer.zero_grad()\n"
    found = lint_project({"main.py": script.replace("{more}", more)}, [rule("ML303")])
    assert codes(found, "main.py") == []
    found = lint_project({"main.py": script.replace("{more}", "")}, [rule("ML303")])
    assert codes(found, "main.py") == [("ML303", 20)]
    assert "`g_optimizer`" in found["main.py"][0].message


def test_effects_are_followed_a_bounded_number_of_calls_deep():
    chain = "def f0(opt):\n    opt.zero_grad()\n" + "".join(
        f"\n\ndef f{n}(opt):\n    f{n - 1}(opt)\n" for n in range(1, 10))
    index = build([("chain.py", chain)])
    assert ("zero_grad", "param", "opt") in index.effects("chain.py", None, "f3")
    assert index.effects("chain.py", None, "f9") == frozenset()
    recursive = "def f(opt, n):\n    if n:\n        f(opt, n - 1)\n    opt.zero_grad()\n"
    index = build([("rec.py", recursive)])
    assert index.effects("rec.py", None, "f") == {("zero_grad", "param", "opt")}


# -- effects: eval() and train() ---------------------------------------------------------------

MODES = '''\
def set_eval(model):
    model.eval()


def set_train(model):
    model.train()
'''

EVALUATE = '''\
import torch
import torch.nn as nn
from modes import set_eval, set_train


def evaluate(model, loader):
    {call}
    total = 0
    for x, y in loader:
        total += (model(x).argmax(1) == y).sum().item()
    return total
'''


def test_ml307_sees_eval_through_a_helper():
    found = lint_project({"modes.py": MODES,
                          "ev.py": EVALUATE.format(call="set_eval(model)")}, [rule("ML307")])
    assert codes(found, "ev.py") == [("ML307", 10)]
    for call in ("set_train(model)", "print(model)"):
        found = lint_project({"modes.py": MODES, "ev.py": EVALUATE.format(call=call)},
                             [rule("ML307")])
        assert codes(found, "ev.py") == [], call


def test_ml307_sees_eval_through_a_method():
    predictor = '''\
    import torch


    class Predictor:
        def __init__(self, model):
            self.model = model

        def prepare(self):
            self.model.eval()

        def run(self, loader):
            self.prepare()
            return [self.model(x) for x in loader] + [self.model(x) for x in loader if x]

        def scores(self, loader):
            self.prepare()
            out = []
            for x in loader:
                out.append(self.model(x))
            return out
    '''
    found = lint_project({"predictor.py": predictor}, [rule("ML307")])
    assert codes(found, "predictor.py") == [("ML307", 19)]
    found = lint_project({"predictor.py": predictor.replace(
        "            self.model.eval()", "            print(self)")}, [rule("ML307")])
    assert codes(found, "predictor.py") == []


def test_ml306_silent_when_a_helper_puts_the_model_in_eval_mode():
    script = '''\
    import torch
    import torch.nn as nn
    from modes import set_eval


    def main(loader):
        model = nn.Sequential(nn.Linear(4, 4), nn.Dropout())
        {call}
        with torch.no_grad():
            for x in loader:
                print(model(x))
    '''
    found = lint_project({"modes.py": MODES, "main.py": script.replace(
        "{call}", "set_eval(model)")}, [rule("ML306")])
    assert codes(found, "main.py") == []
    found = lint_project({"modes.py": MODES, "main.py": script.replace(
        "{call}", "print(model)")}, [rule("ML306")])
    assert codes(found, "main.py") == [("ML306", 11)]


# -- parameters from call sites ----------------------------------------------------------------

NET = '''\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.out = nn.Softmax(dim=1)

    def forward(self, x):
        return self.out(self.fc(x))
'''

FIT = '''\
import torch
import torch.nn.functional as F


def fit(model, loader, epochs=1):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
'''

MAIN = '''\
import torch
from models import Net
from fit import fit


def main(loader):
    model = {model}
    fit(model, loader)
'''


def kind_of(files, path, function, name):
    """The kind the semantic model gives `name` at the end of `function` of `path`."""
    import libcst as cst

    from modellint.static.context import FileContext
    from modellint.static.scope import scope_of

    index = build(files.items())
    context = FileContext(path, files[path], {}, index)
    module = cst.parse_module(files[path])
    context.module_node = module
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == function:
            return context.semantic.kind_of_name(name, scope_of(context, statement))
    raise AssertionError(function)


def test_a_parameter_holds_what_every_call_site_passes():
    files = {"models.py": NET, "fit.py": FIT, "main.py": MAIN.format(model="Net().to('cpu')")}
    kind = kind_of(files, "fit.py", "fit", "model")
    assert kind is not None and kind.cls == "models.py:Net" and kind.outputs == "softmax"
    found = lint_project(files, [rule("ML308")])
    assert codes(found, "fit.py") == [("ML308", 10)]


def test_a_parameter_is_unknown_when_a_site_is_unknown_or_they_disagree():
    files = {"models.py": NET, "fit.py": FIT, "main.py": MAIN.format(model="load()")}
    assert kind_of(files, "fit.py", "fit", "model") is None
    assert codes(lint_project(files, [rule("ML308")]), "fit.py") == []
    other = "import torch\nfrom fit import fit\n\n\ndef again(loader):\n" \
            "    fit(torch.nn.Linear(8, 2), loader)\n"
    files = {"models.py": NET, "fit.py": FIT, "main.py": MAIN.format(model="Net()"),
             "other.py": other}
    kind = kind_of(files, "fit.py", "fit", "model")
    assert kind is not None and kind.kind == "module" and kind.outputs is None
    assert codes(lint_project(files, [rule("ML308")]), "fit.py") == []


def test_no_call_site_a_callback_or_a_nested_call_leaves_a_parameter_unknown():
    files = {"models.py": NET, "fit.py": FIT}
    assert kind_of(files, "fit.py", "fit", "model") is None
    for use in ("handlers = [fit]\n    fit(model, loader)",
                "def later():\n        fit(model, loader)\n    fit(model, loader)",
                "fit(*[model, loader])"):
        main = MAIN.format(model="Net()").replace("fit(model, loader)", use)
        files = {"models.py": NET, "fit.py": FIT, "main.py": main}
        assert kind_of(files, "fit.py", "fit", "model") is None, use
    # a star import: calls by names not followed
    main = MAIN.format(model="Net()").replace("from fit import fit", "from fit import *")
    files = {"models.py": NET, "fit.py": FIT, "main.py": main}
    assert kind_of(files, "fit.py", "fit", "model") is None


def test_keyword_and_default_arguments_and_module_attributes():
    fit = FIT.replace("def fit(model, loader, epochs=1)", "def fit(loader, model=None, epochs=1)")
    main = MAIN.format(model="Net()").replace("fit(model, loader)", "fit(loader, model=model)")
    files = {"models.py": NET, "fit.py": fit, "main.py": main}
    assert kind_of(files, "fit.py", "fit", "model").cls == "models.py:Net"
    # left to its default (None): not a module
    main = MAIN.format(model="Net()").replace("fit(model, loader)", "fit(loader)")
    files = {"models.py": NET, "fit.py": fit, "main.py": main}
    assert kind_of(files, "fit.py", "fit", "model") is None
    main = MAIN.format(model="Net()").replace("from fit import fit", "import fit").replace(
        "    fit(model", "    fit.fit(model")
    files = {"models.py": NET, "fit.py": FIT, "main.py": main}
    assert kind_of(files, "fit.py", "fit", "model").cls == "models.py:Net"


def test_parameters_of_methods_called_on_self_and_of_constructors():
    trainer = '''\
    import torch
    import torch.nn.functional as F
    from models import Net


    class Trainer:
        def __init__(self, model):
            self.model = model

        def run(self, loader):
            self.fit(self.model, loader)

        def fit(self, model, loader):
            for x, y in loader:
                F.cross_entropy(model(x), y).backward()


    def main(loader):
        Trainer(Net()).run(loader)
    '''
    files = {"models.py": NET, "trainer.py": trainer}
    found = lint_project(files, [rule("ML308")])
    assert codes(found, "trainer.py") == [("ML308", 15)]
    # called on another value too: its sites are not all known
    files["trainer.py"] = textwrap.dedent(trainer) + "\n\ndef other(t, m, loader):\n    t.fit(m, loader)\n"
    assert codes(lint_project(files, [rule("ML308")]), "trainer.py") == []


# -- returns and tuples ------------------------------------------------------------------------

DISCRIMINATOR = '''\
import torch.nn as nn


class Discriminator(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.body = nn.Linear(64, 128)
        self.adv_layer = nn.Sequential(nn.Linear(128, 1), nn.Sigmoid())
        self.aux_layer = nn.Sequential(nn.Linear(128, n_classes), nn.Softmax())

    def forward(self, img):
        out = self.body(img)
        validity = self.adv_layer(out)
        label = self.aux_layer(out)
        return validity, label
'''

ACGAN = '''\
import torch
from discriminator import Discriminator

discriminator = Discriminator(10)
adversarial_loss = torch.nn.BCELoss()
auxiliary_loss = torch.nn.CrossEntropyLoss()


def step(real_imgs, valid, labels):
    {line}
    return adversarial_loss(real_pred, valid) + auxiliary_loss({aux}, labels)
'''


def test_ml308_an_element_of_the_tuple_a_module_returns():
    files = {"discriminator.py": DISCRIMINATOR, "acgan.py": ACGAN.format(
        line="real_pred, real_aux = discriminator(real_imgs)", aux="real_aux")}
    found = lint_project(files, [rule("ML308")])
    assert codes(found, "acgan.py") == [("ML308", 11)]
    files["acgan.py"] = ACGAN.format(line="out = discriminator(real_imgs)\n    real_pred = out[0]",
                                     aux="out[1]")
    assert codes(lint_project(files, [rule("ML308")]), "acgan.py") == [("ML308", 12)]
    files["acgan.py"] = ACGAN.format(line="out = discriminator(real_imgs)\n    real_pred = out[0]",
                                     aux="out[-1]")
    assert codes(lint_project(files, [rule("ML308")]), "acgan.py") == [("ML308", 12)]


def test_ml308_silent_on_the_logits_element_or_an_unknown_position():
    logits = DISCRIMINATOR.replace("nn.Linear(128, n_classes), nn.Softmax()",
                                   "nn.Linear(128, n_classes)")
    files = {"discriminator.py": logits, "acgan.py": ACGAN.format(
        line="real_pred, real_aux = discriminator(real_imgs)", aux="real_aux")}
    assert codes(lint_project(files, [rule("ML308")]), "acgan.py") == []
    for line in ("real_aux, real_pred = discriminator(real_imgs)",
                 "*rest, real_aux = discriminator(real_imgs)\n    real_pred = rest",
                 "real_pred, real_aux = discriminator(real_imgs)[0]"):
        files = {"discriminator.py": DISCRIMINATOR,
                 "acgan.py": ACGAN.format(line=line, aux="real_aux")}
        assert codes(lint_project(files, [rule("ML308")]), "acgan.py") == [], line


def test_a_helper_that_returns_a_tuple():
    helper = '''\
    import torch
    import torch.nn.functional as F


    def predict(model, x):
        logits = model(x)
        return logits, F.softmax(logits, dim=1)


    def step(model, x, y):
        logits, probs = predict(model, x)
        return F.cross_entropy({arg}, y)
    '''
    found = lint_project({"h.py": helper.format(arg="probs")}, [rule("ML308")])
    assert codes(found, "h.py") == [("ML308", 12)]
    found = lint_project({"h.py": helper.format(arg="logits")}, [rule("ML308")])
    assert codes(found, "h.py") == []


# -- false alarms that the model now rules out -------------------------------------------------


def test_ml202_the_fix_is_safe_only_on_a_value_known_to_be_a_module():
    from modellint.testing import fix_text

    source = '''\
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head.forward(self.encoder.forward(x))
    '''
    fixed = fix_text(textwrap.dedent(source), [rule("ML202")], unsafe=False)
    assert "self.head(self.encoder.forward(x))" in fixed
    fixed = fix_text(textwrap.dedent(source), [rule("ML202")], unsafe=True)
    assert "self.head(self.encoder(x))" in fixed


def test_ml107_a_stateless_module_of_the_project_built_in_forward():
    source = '''\
    import torch
    import torch.nn as nn


    class Interpolate(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return nn.functional.interpolate(x, scale_factor=self.scale)


    class Stateful(nn.Module):
        def __init__(self):
            super().__init__()
            self.{attr}

        def forward(self, x):
            return x


    class Net(nn.Module):
        def forward(self, x):
            return Stateful()(Interpolate(2)(x))
    '''
    for attr, expected in (("act = nn.ReLU()", []), ("pool = nn.MaxPool2d(2)", []),
                           ("fc = nn.Linear(2, 2)", [("ML107", 25)]),
                           ("drop = nn.Dropout(0.1)", [("ML107", 25)]),
                           ("register_buffer('mean', torch.zeros(3))", [("ML107", 25)]),
                           ("w = nn.Parameter(torch.ones(2))", [("ML107", 25)]),
                           ("inner = make()", [("ML107", 25)])):
        found = lint_project({"net.py": source.replace("{attr}", attr)}, [rule("ML107")])
        assert codes(found, "net.py") == expected, attr


def test_ml101_a_dict_of_models_to_choose_from():
    source = '''\
    import torch.nn as nn
    import torchvision.models as models


    class Encoder(nn.Module):
        def __init__(self, name):
            super().__init__()
            self.zoo = {"resnet18": models.resnet18(), "resnet50": models.resnet50()}
            {use}
    '''
    found = lint_project({"enc.py": source.replace("{use}", "self.backbone = self.zoo[name]")},
                         [rule("ML101")])
    assert codes(found, "enc.py") == []
    found = lint_project({"enc.py": source.replace("{use}", "print(self.zoo[name])")},
                         [rule("ML101")])
    assert codes(found, "enc.py") == [("ML101", 8)]


# -- tensors through chains --------------------------------------------------------------------


def test_ml103_a_tensor_through_variable_and_tensor_attributes():
    source = '''\
    import torch
    import torch.nn as nn
    from torch.autograd import Variable


    class Net(nn.Module):
        def __init__(self, data):
            super().__init__()
            self.w = {value}.cuda()
    '''
    for value in ("Variable(torch.zeros(3))", "torch.ones(3, 4).T", "torch.ones(3).data"):
        found = lint_project({"net.py": source.replace("{value}", value)}, [rule("ML103")])
        assert codes(found, "net.py") == [("ML103", 9)], value
    # what the constructor is given is not known to be a tensor
    for value in ("Variable(data)", "data.T", "Variable(data).data"):
        found = lint_project({"net.py": source.replace("{value}", value)}, [rule("ML103")])
        assert codes(found, "net.py") == [], value


# -- containers --------------------------------------------------------------------------------

HEADS = '''\
from collections import OrderedDict

import torch.nn as nn
import torch.nn.functional as F


def head(n):
    return nn.Sequential(nn.Linear(8, n), nn.Softmax(dim=1))


class MultiHead(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.heads = nn.ModuleList([head(2) for _ in range(n)])
        self.named = nn.ModuleDict({"probs": head(2), "logits": nn.Linear(8, 2)})
        self.seq = nn.Sequential(OrderedDict([("fc", nn.Linear(8, 2)), ("out", nn.Softmax(1))]))
        self.shared = nn.ModuleList([head(3)] * n)

    def forward(self, x):
        return x

    def loss(self, x, y, k):
        return F.cross_entropy({expr}, y)
'''


def test_ml308_an_element_of_a_module_container():
    for expr in ('self.heads[k](x)', 'self.named["probs"](x)', 'self.seq(x)',
                 'self.shared[0](x)', 'self.heads[1:][0](x)'):
        found = lint_project({"heads.py": HEADS.replace("{expr}", expr)}, [rule("ML308")])
        assert codes(found, "heads.py") == [("ML308", 23)], expr
    # the logits head, a key not known, a head that is not all the others' like
    for expr in ('self.named["logits"](x)', 'self.named[k](x)', 'self.named["other"](x)'):
        found = lint_project({"heads.py": HEADS.replace("{expr}", expr)}, [rule("ML308")])
        assert codes(found, "heads.py") == [], expr
    mixed = HEADS.replace("[head(2) for _ in range(n)]", "[head(2), nn.Linear(8, 2)]")
    found = lint_project({"heads.py": mixed.replace("{expr}", "self.heads[k](x)")},
                         [rule("ML308")])
    assert codes(found, "heads.py") == []


def test_ml308_a_module_container_changed_after_it_is_built():
    grown = HEADS.replace("        self.shared =", "        self.heads.append(nn.Linear(8, 2))\n"
                                                   "        self.shared =")
    found = lint_project({"heads.py": grown.replace("{expr}", "self.heads[k](x)")},
                         [rule("ML308")])
    assert codes(found, "heads.py") == []
    found = lint_project({"heads.py": grown.replace("{expr}", "self.shared[k](x)")},
                         [rule("ML308")])
    assert codes(found, "heads.py") == [("ML308", 24)]


LOOPS = '''\
import torch.nn as nn
import torch.nn.functional as F
from heads import head


def train(x, y):
    nets = {"cls": head(2), "enc": nn.Linear(8, 2)}
    models = [head(2), head(4)]
    {more}
    total = F.cross_entropy(nets[{key}](x), y)
    for model in models:
        total = total + F.cross_entropy(model(x), y)
    return total
'''


def test_ml308_elements_of_lists_and_dicts_built_in_the_project():
    files = {"heads.py": HEADS.replace("{expr}", "x")}
    files["train.py"] = LOOPS.replace("{key}", '"cls"').replace("{more}", "")
    found = lint_project(files, [rule("ML308")])
    assert codes(found, "train.py") == [("ML308", 10), ("ML308", 12)]
    files["train.py"] = LOOPS.replace("{key}", '"enc"').replace(
        "{more}", "models.append(nn.Linear(8, 2))")
    assert codes(lint_project(files, [rule("ML308")]), "train.py") == []
    # a list another file's function builds
    factory = "from heads import head\n\n\ndef make():\n    return [head(2) for _ in range(3)]\n"
    files["zoo.py"] = factory
    files["train.py"] = ("import torch.nn.functional as F\nfrom zoo import make\n\n\n"
                         "def train(x, y):\n    return F.cross_entropy(make()[0](x), y)\n")
    assert codes(lint_project(files, [rule("ML308")]), "train.py") == [("ML308", 6)]


def test_kinds_of_containers():
    files = {"c.py": '''\
import torch
import torch.nn as nn

opt_g = torch.optim.Adam([])
opt_d = torch.optim.SGD([])
optimizers = {"G": opt_g, "D": opt_d}
blocks = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
tensors = [torch.zeros(2), torch.ones(2)]
pair = (nn.Linear(2, 2), torch.zeros(2))
grown = [nn.Linear(2, 2)]
grown.append(nn.Dropout())


def main(k):
    g = optimizers["G"]
    any_opt = optimizers[k]
    first = blocks[0]
    part = blocks[:1]
    t = tensors[k]
    mixed = pair[k]
    g2 = grown[0]
    return g
'''}
    kinds = {name: kind_of(files, "c.py", "main", name)
             for name in ("g", "any_opt", "first", "part", "t", "mixed", "g2")}
    assert kinds["g"].cls == "torch.optim.Adam"
    assert kinds["any_opt"].kind == "optimizer" and kinds["any_opt"].cls is None
    assert kinds["first"].cls == "torch.nn.Linear" and kinds["first"].mode is False
    assert kinds["part"].cls == "torch.nn.Sequential" and kinds["part"].mode is None
    assert kinds["t"].kind == "tensor"
    assert kinds["mixed"] is None and kinds["g2"] is None


# -- control flow that joins -------------------------------------------------------------------

BUILD = '''\
import torch.nn as nn


def build(name):
    if name == "small":
        model = nn.Sequential(nn.Linear(8, 2), nn.Softmax(dim=1))
    else:
        model = {other}
    return model
'''

USE = '''\
import torch.nn.functional as F
from build import build


def step(x, y):
    model = build("small")
    return F.cross_entropy(model(x), y)
'''


def test_ml308_a_name_assigned_on_two_branches_of_another_files_function():
    files = {"build.py": BUILD.replace("{other}", "nn.Sequential(nn.Linear(8, 4), nn.Softmax(1))"),
             "use.py": USE}
    assert codes(lint_project(files, [rule("ML308")]), "use.py") == [("ML308", 7)]
    files["build.py"] = BUILD.replace("{other}", "nn.Linear(8, 4)")
    assert codes(lint_project(files, [rule("ML308")]), "use.py") == []
    # assigned again from itself: the same kind
    files["build.py"] = BUILD.replace("{other}", "nn.Sequential(nn.Linear(8, 4), nn.Softmax(1))"
                                      ).replace("    return model", "    model = model.to('cpu')\n"
                                                                     "    return model")
    assert codes(lint_project(files, [rule("ML308")]), "use.py") == [("ML308", 7)]


def test_a_conditional_expression_is_the_join_of_its_values():
    source = ("import torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
              "def step(x, y, a):\n    model = nn.Softmax(1) if a else {other}\n"
              "    return F.cross_entropy(model(x), y)\n")
    found = lint_project({"s.py": source.replace("{other}", "nn.Softmax(0)")}, [rule("ML308")])
    assert codes(found, "s.py") == [("ML308", 7)]
    for other in ("nn.LogSoftmax(1)", "make()"):
        found = lint_project({"s.py": source.replace("{other}", other)}, [rule("ML308")])
        assert codes(found, "s.py") == [], other


MAIN_BLOCK = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, loader):
    for x, y in loader:
        F.cross_entropy(model(x), y).backward()


if __name__ == "__main__":
    net = nn.Sequential(nn.Linear(8, 2), {last})
    train(net, [])
'''


def test_ml308_a_model_built_under_if_name_main():
    found = lint_project({"m.py": MAIN_BLOCK.replace("{last}", "nn.Softmax(dim=1)")},
                         [rule("ML308")])
    assert codes(found, "m.py") == [("ML308", 8)]
    found = lint_project({"m.py": MAIN_BLOCK.replace("{last}", "nn.ReLU()")}, [rule("ML308")])
    assert codes(found, "m.py") == []


# NET's class, defined in a factory function
NESTED = "import torch.nn as nn\n\n\ndef build():\n" + textwrap.indent(
    NET.split("\n\n\n", 1)[1].replace("self.out(self.fc(x))", "{returned}"), "    "
) + "\n    return Net()\n"

STEP = '''\
import torch.nn.functional as F
from nested import build


def step(x, y):
    model = build()
    return F.cross_entropy(model(x), y)
'''


def test_ml308_a_class_defined_in_a_function():
    files = {"nested.py": NESTED.replace("{returned}", "self.out(self.fc(x))"), "step.py": STEP}
    assert codes(lint_project(files, [rule("ML308")]), "step.py") == [("ML308", 7)]
    files["nested.py"] = NESTED.replace("{returned}", "self.fc(x)")
    assert codes(lint_project(files, [rule("ML308")]), "step.py") == []
    # two functions define a class of that name: which one is built is not followed
    files["nested.py"] = NESTED.replace("{returned}", "self.out(self.fc(x))") + (
        "\n\ndef other():\n    class Net(nn.Module):\n        pass\n\n    return Net()\n")
    assert codes(lint_project(files, [rule("ML308")]), "step.py") == []


def test_ml308_a_name_bound_by_a_comprehension():
    source = '''\
    import torch.nn as nn
    import torch.nn.functional as F


    def head(n):
        return nn.Sequential(nn.Linear(8, n), nn.Softmax(dim=1))


    def step(x, y):
        models = [head(2), {other}]
        return sum(F.cross_entropy(m(x), y) for m in models)
    '''
    found = lint_project({"c.py": source.replace("{other}", "head(4)")}, [rule("ML308")])
    assert codes(found, "c.py") == [("ML308", 11)]
    found = lint_project({"c.py": source.replace("{other}", "nn.Linear(8, 4)")}, [rule("ML308")])
    assert codes(found, "c.py") == []
    tuple_target = source.replace("{other}", "head(4)").replace(
        "for m in models", "for i, m in enumerate(models)")
    assert codes(lint_project({"c.py": tuple_target}, [rule("ML308")]), "c.py") == [("ML308", 11)]
    # after a starred target: its position is not known
    starred = tuple_target.replace("for i, m in", "for *i, m in")
    assert codes(lint_project({"c.py": starred}, [rule("ML308")]), "c.py") == []


def test_ml308_probabilities_through_methods_that_keep_the_values():
    source = '''\
    import torch.nn as nn
    import torch.nn.functional as F


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            return F.softmax(self.fc(x), dim=1)


    model = Net()
    criterion = nn.CrossEntropyLoss()


    def step(x, y):
        output = model(x)
        output = {chain}
        return criterion(output, y)
    '''
    for chain in ("output.to('cuda')", "output.view(-1, 3)", "output.float().contiguous()",
                  "output.data"):
        found = lint_project({"n.py": source.replace("{chain}", chain)}, [rule("ML308")])
        assert codes(found, "n.py") == [("ML308", 21)], chain
    # what changes the values: no longer the softmax's output
    for chain in ("output.log()", "output * 2", "output.sum(1)", "-output"):
        found = lint_project({"n.py": source.replace("{chain}", chain)}, [rule("ML308")])
        assert codes(found, "n.py") == [], chain


def test_ml308_elements_through_enumerate_zip_and_dict_views():
    source = '''\
    import torch.nn as nn
    import torch.nn.functional as F


    def head(n):
        return nn.Sequential(nn.Linear(8, n), nn.Softmax(dim=1))


    def step(x, y):
        models = {"a": head(2), "b": {other}}
        for name, m in models.items():
            F.cross_entropy(m(x), y)
        for i, m in enumerate(models.values()):
            F.cross_entropy(m(x), y)
        for a, b in zip(list(models.values()), models):
            F.cross_entropy(a(x), y)
        return [F.cross_entropy(m(x), y) for _, m in models.items()]
    '''
    found = lint_project({"e.py": source.replace("{other}", "head(3)")}, [rule("ML308")])
    assert codes(found, "e.py") == [("ML308", 12), ("ML308", 14), ("ML308", 16), ("ML308", 17)]
    found = lint_project({"e.py": source.replace("{other}", "nn.Linear(8, 3)")}, [rule("ML308")])
    assert codes(found, "e.py") == []
