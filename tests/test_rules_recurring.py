"""Rules for mistakes that recur in the real-bug benchmark (issue 25, section 2): ML341, on
small training scripts written for these tests; ML342 and ML113 likewise."""

from __future__ import annotations

import textwrap

from modellint.rules.layers import ModuleClassCalledWithTensors
from modellint.rules.training_schedule import GraphCutBeforeLoss, ZeroGradBeforeStep
from modellint.testing import lint_text


def found(source, rules=(ZeroGradBeforeStep,)):
    return sorted((f.code, f.line) for f in lint_text(textwrap.dedent(source), list(rules)))


def line_of(source, text):
    lines = textwrap.dedent(source).splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


# -- ML341 ------------------------------------------------------------------------------------

TWO_OPTIMIZERS = """\
import torch
import torch.nn.functional as F

def train(net, loader, epochs):
    opt_a = torch.optim.Adam(net.head.parameters())
    opt_b = torch.optim.SGD(net.body.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt_a.zero_grad()  # first
            opt_a.step()
            loss2 = F.l1_loss(net(x), y)
            loss2.backward()
            opt_b.zero_grad()  # second
            opt_b.step()
"""


def test_each_optimizer_zeroed_between_its_backward_and_step():
    assert found(TWO_OPTIMIZERS) == [
        ("ML341", line_of(TWO_OPTIMIZERS, "# first")),
        ("ML341", line_of(TWO_OPTIMIZERS, "# second")),
    ]


def test_message_names_the_optimizer_and_the_step():
    [finding] = lint_text(textwrap.dedent("""\
        import torch
        import torch.nn.functional as F

        def train(model, loader, optimizer):
            for x, y in loader:
                F.mse_loss(model(x), y).backward()
                optimizer.zero_grad()
                optimizer.step()
        """), [ZeroGradBeforeStep])
    assert "`optimizer.zero_grad()`" in finding.message
    assert "`optimizer.step()`" in finding.message


def test_amp_scaler_step_of_the_zeroed_optimizer():
    source = """\
        import torch
        import torch.nn.functional as F

        def train(model, loader):
            opt = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler()
            for x, y in loader:
                scaler.scale(F.mse_loss(model(x), y)).backward()
                opt.zero_grad(set_to_none=True)
                scaler.step(opt)
                scaler.update()
        """
    assert found(source) == [("ML341", line_of(source, "opt.zero_grad"))]


def test_zero_grad_of_another_optimizer_is_not_reported():
    # the second optimizer's gradients come from its own backward, after its zero_grad
    source = """\
        import torch
        import torch.nn.functional as F

        def train(enc, dec, loader):
            opt_enc = torch.optim.Adam(enc.parameters())
            opt_dec = torch.optim.Adam(dec.parameters())
            for x in loader:
                opt_enc.zero_grad()
                F.mse_loss(dec(enc(x)), x).backward()
                opt_dec.zero_grad()
                opt_enc.step()
        """
    assert found(source) == []


def test_model_zero_grad_with_two_optimizers_is_not_reported():
    # which optimizer the model's parameters belong to is not known
    source = """\
        import torch
        import torch.nn.functional as F

        def train(G, D, loader, opt_g, opt_d):
            for real in loader:
                D(real).mean().backward()
                G.zero_grad()
                opt_d.step()
                (-D(G(real)).mean()).backward()
                opt_g.step()
        """
    assert found(source) == []


def test_zero_grad_under_try_or_condition_is_not_reported():
    source = """\
        import torch
        import torch.nn.functional as F

        def train(model, loader, optimizer, skip):
            for x, y in loader:
                F.mse_loss(model(x), y).backward()
                if skip(x):
                    optimizer.zero_grad()
                optimizer.step()
        """
    assert found(source) == []


def test_zero_grad_at_the_top_of_the_next_iteration_is_not_reported():
    # the backward of one iteration and the step of the next are not one training step
    source = """\
        import torch
        import torch.nn.functional as F

        def train(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
            F.mse_loss(model(x), y).backward()
        """
    assert found(source) == []


# -- ML342 ------------------------------------------------------------------------------------

GAN_REWRAPPED = """\
import torch
from torch.autograd import Variable

def d_step(D, G, real, z, criterion, opt_d):
    opt_d.zero_grad()
    real_loss = criterion(D(real), torch.ones(real.size(0), 1))
    fake_loss = criterion(D(G(z)), torch.zeros(z.size(0), 1))
    d_loss = Variable((real_loss + fake_loss) / 2, requires_grad=True)  # cut
    d_loss.backward()
    opt_d.step()
    return d_loss.item()
"""


def test_loss_rewrapped_from_losses_of_the_model():
    assert found(GAN_REWRAPPED, [GraphCutBeforeLoss]) == [
        ("ML342", line_of(GAN_REWRAPPED, "# cut"))]


def test_rewrapped_part_reaches_backward_through_a_sum():
    source = """\
        import torch
        import torch.nn.functional as F

        def step(model, x, y, aux_head, optimizer):
            feats, logits = model(x)
            main = F.cross_entropy(logits, y)
            aux = aux_head(feats).mean().detach().requires_grad_()
            total = main + 0.1 * aux
            total.backward()
            optimizer.step()
        """
    assert found(source, [GraphCutBeforeLoss]) == [
        ("ML342", line_of(source, "requires_grad_()"))]


def test_leaf_whose_gradient_is_read_is_not_reported():
    # gradients with respect to a feature map (saliency): the leaf is wanted
    source = """\
        import torch
        import torch.nn.functional as F

        def saliency(backbone, head, x, y):
            feats = backbone(x).detach().requires_grad_()
            F.cross_entropy(head(feats), y).backward()
            return feats.grad.abs()
        """
    assert found(source, [GraphCutBeforeLoss]) == []


def test_value_of_unknown_origin_is_not_reported():
    # a parameter and a tensor built by torch: not known to be the model's output
    source = """\
        import torch
        import torch.nn.functional as F

        def fit(model, target, optimizer):
            noise = torch.tensor(torch.randn(4, 8), requires_grad=True)
            target = torch.tensor(target, requires_grad=True)
            F.mse_loss(model(noise), target).backward()
            optimizer.step()
        """
    assert found(source, [GraphCutBeforeLoss]) == []


# -- ML113 ------------------------------------------------------------------------------------

CLASSIFIER = """\
import torch
import torch.nn as nn
from torch.nn import CrossEntropyLoss


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)
        self.act = nn.Tanh()

    def forward(self, x):
        return nn.Tanh(self.fc(x))  # activation


def train(model, loader, optimizer, weights):
    criterion = nn.CrossEntropyLoss(weights)
    for x, y in loader:
        out = model(x)
        loss = CrossEntropyLoss(out, y)  # loss
        ok = criterion(out, y)
        loss.backward()
"""


def test_loss_and_activation_classes_called_with_tensors():
    assert found(CLASSIFIER, [ModuleClassCalledWithTensors]) == [
        ("ML113", line_of(CLASSIFIER, "# activation")),
        ("ML113", line_of(CLASSIFIER, "# loss")),
    ]


def test_message_shows_the_call_that_computes_the_loss():
    [finding] = lint_text("import torch.nn as nn\n\nloss = nn.NLLLoss(logp, target)\n",
                          [ModuleClassCalledWithTensors])
    assert "`NLLLoss()(logp, target)`" in finding.message


def test_constructor_arguments_are_not_reported():
    source = """\
        import torch.nn as nn

        a = nn.CrossEntropyLoss(None, None, 0)
        b = nn.BCEWithLogitsLoss(pos_weight=w)
        c = nn.MarginRankingLoss(0.5)
        d = nn.Softmax(1)
        """
    assert found(source, [ModuleClassCalledWithTensors]) == []
