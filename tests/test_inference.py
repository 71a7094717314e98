"""What the semantic model follows across calls (issue 24): the effects of project functions
and methods where they are called, on small multi-file projects; both the finding and the
silence for each pattern."""

from __future__ import annotations

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
