"""Rules for mistakes that recur in the real-bug benchmark (issue 25, section 2): ML341, on
small training scripts written for these tests."""

from __future__ import annotations

import textwrap

from modellint.rules.training_schedule import ZeroGradBeforeStep
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
