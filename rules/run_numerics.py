"""Rules of `modellint run` outside the static catalogue, each seen at once in a watched run:
gradients clipped before the backward that makes them (ML324), a warm-up `LambdaLR` /
`LinearLR` sized in steps but stepped per epoch (ML325), a (log-)softmax over the batch
dimension fed to a classification loss (ML326), a regression loss whose input and target
broadcast to a larger shape (ML327).

They read the record of the run (`modellint.watching.record.Recorder`, its `numerics` part
from `modellint.watching.numerics`). Off by default: the real training scripts of
`bench/run_corpus.py` give none of them, but exercise only ML324 and ML326 (`--extend-select
ML324` turns one on).
This module imports no torch at load time: the static pass loads it.
"""

from __future__ import annotations

import math

from modellint.hookspecs import hookimpl
from modellint.rule import RunRule, Severity
from modellint.rules.run import _invalid, _lr_text, _script

_DATA = ("import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, "
         "TensorDataset\n\ntorch.manual_seed(0)\n")


def _shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class GradientsClippedBeforeBackward(RunRule):
    """Gradients clipped before the `backward()` that computes them.

    ## What it does
    Watching a training run, reports `clip_grad_norm_` / `clip_grad_value_` calls after which,
    before the optimizer stepped, a `backward()` changed the gradients of the clipped
    parameters, and no clip followed it: the step applied gradients that were never clipped.
    Reported when that happens in two or more steps, and in at least half of the steps after
    a clip.

    ## Why is this bad?
    Clipping works on the `.grad` that is there when it runs. Before `loss.backward()`, that is
    the previous step's gradient, or nothing after `zero_grad()`: the clip changes nothing the
    step uses, and the run trains without the clipping it was written with (which RNNs and
    large learning rates rely on to avoid exploding updates).

    ## Example
        optimizer.zero_grad()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        loss.backward()
        optimizer.step()

    ## Use instead
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    """

    code = "ML324"
    name = "gradients-clipped-before-backward"
    severity = Severity.WARNING
    default_enabled = False
    _MODEL = ("model = nn.Linear(8, 1)\n"
              "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n")
    _CLIP = "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0){mark}\n"
    _BACKWARD = "        nn.functional.mse_loss(model(x), y).backward()\n"
    _HEAD = "for epoch in range(4):\n    for x, y in loader:\n        optimizer.zero_grad()\n"
    _STEP = "        optimizer.step()\n"
    # a clip of the generator, then a backward of the discriminator alone: nothing it clipped
    # changes before the generator's step
    _GAN = ("generator, critic = nn.Linear(8, 8), nn.Linear(8, 1)\n"
            "opt_g = torch.optim.SGD(generator.parameters(), lr=0.01)\n"
            "opt_d = torch.optim.SGD(critic.parameters(), lr=0.01)\n")
    _GAN_LOOP = ("for x, y in loader:\n    opt_g.zero_grad()\n"
                 "    critic(generator(x)).mean().backward()\n"
                 "    torch.nn.utils.clip_grad_norm_(generator.parameters(), 1.0)\n"
                 "    opt_d.zero_grad()\n"
                 "    (critic(generator(x).detach()) - y).pow(2).mean().backward()\n"
                 "    opt_d.step()\n    opt_g.step()\n")
    valid = [_script(_MODEL, _HEAD + _BACKWARD + _CLIP.format(mark="") + _STEP),
             _script(_GAN, _GAN_LOOP)]
    invalid = [_invalid(_script(_MODEL, _HEAD + _CLIP.format(mark="  # <-") + _BACKWARD
                                + _STEP))]

    def check(self, record) -> None:
        for rec in record.numerics.clips.values():
            late = rec.late
            if len(late) < 2 or len(late) * 2 < rec.checked:
                continue
            clip, backward = late[0]
            record.report(self.code, f"`{clip.function}` ran before `backward()` in "
                          f"{len(late)} of {rec.checked} steps: the `backward()` after it "
                          f"then wrote the gradients the step applied, "
                          f"so they were never clipped (the clip saw the previous step's "
                          f"gradients, or none); clip after `backward()`, just before "
                          f"`optimizer.step()`", clip.site, [(backward, "the `backward()`")])


# a warm-up is sized in epochs when it is shorter than this many scheduler steps and than an
# epoch of batches (at most 100): longer, it was sized in optimizer steps
_WARMUP_EPOCHS = 20
_PROBES = sorted({*range(33), *(2 ** j for j in range(6, 21))})


def _factor(scheduler, group: int):
    """The schedule's factor of the base learning rate of `group` at a position, or None
    for a scheduler that is not a warm-up ML325 knows."""
    name = type(scheduler).__name__
    if name == "LambdaLR":
        lambdas = getattr(scheduler, "lr_lambdas", None) or []
        return lambdas[group] if group < len(lambdas) and callable(lambdas[group]) else None
    if name == "LinearLR":
        start = float(getattr(scheduler, "start_factor", 1.0))
        end = float(getattr(scheduler, "end_factor", 1.0))
        total = int(getattr(scheduler, "total_iters", 0) or 0)
        if total <= 0 or start >= end:
            return None
        return lambda k: start + (end - start) * min(k, total) / total
    return None


def _warmup_length(factor) -> tuple[int, float] | None:
    """(the first position where the warm-up reaches its top, the top) when the factor rises
    from near zero to its top (at most 1) within 2**20 positions."""
    values = []
    for k in _PROBES:
        value = float(factor(k))
        if not math.isfinite(value):
            return None
        values.append(value)
    top = min(max(values), 1.0)
    if top <= 0:
        return None
    first = next((k for k, v in zip(_PROBES, values, strict=True) if v >= top * (1 - 1e-6)),
                 None)
    if first is None:
        return None
    low = max((k for k in _PROBES if k < first), default=0)
    while low + 1 < first:  # the probes are sparse past 32: find the position between them
        middle = (low + first) // 2
        if float(factor(middle)) >= top * (1 - 1e-6):
            first = middle
        else:
            low = middle
    return first, max(top, min(float(factor(first)), 1.0))


class WarmupSteppedPerEpoch(RunRule):
    """A warm-up schedule sized in optimizer steps, stepped once per epoch.

    ## What it does
    Watching a training run, reports a `LambdaLR` (or a rising `LinearLR`) stepped once per
    epoch whose factor rises from near zero to its top over more positions than a warm-up
    sized in epochs takes (at least 20, and at least an epoch of batches or 100): a warm-up
    written for one `scheduler.step()` per batch. Reported when the factor stayed under a
    tenth of its top for the whole run.

    ## Why is this bad?
    `LambdaLR(optimizer, lambda step: min(1.0, step / 1000))` reaches the full learning rate
    after 1000 scheduler steps. Stepped after each epoch, that is 1000 epochs: the whole run
    trains at a learning rate near zero, and the loss barely moves.

    ## Example
        scheduler = LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 1000))
        for epoch in range(epochs):
            for x, y in loader:
                ...
                optimizer.step()
            scheduler.step()

    ## Use instead
        for epoch in range(epochs):
            for x, y in loader:
                ...
                optimizer.step()
                scheduler.step()
    """

    code = "ML325"
    name = "warmup-stepped-per-epoch"
    severity = Severity.WARNING
    default_enabled = False
    _MIDDLE = ("model = nn.Linear(8, 1)\n"
               "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
               "scheduler = torch.optim.lr_scheduler.LambdaLR(\n"
               "    optimizer, lambda step: min(1.0, (step + 1) / {warmup}))\n")
    _LOOP = ("for epoch in range(4):\n    for x, y in loader:\n"
             "        optimizer.zero_grad()\n"
             "        nn.functional.mse_loss(model(x), y).backward()\n"
             "        optimizer.step()\n{indent}scheduler.step(){mark}\n")
    valid = [_script(_MIDDLE.format(warmup=5), _LOOP.format(indent="    ", mark="")),
             _script(_MIDDLE.format(warmup=1000), _LOOP.format(indent="        ", mark=""))]
    _LINEAR = ("model = nn.Linear(8, 1)\n"
               "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
               "scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.001, "
               "total_iters=500)\n")
    invalid = [_invalid(_script(_MIDDLE.format(warmup=1000),
                                _LOOP.format(indent="    ", mark="  # <-"))),
               _invalid(_script(_LINEAR, _LOOP.format(indent="    ", mark="  # <-")))]

    def check(self, record) -> None:
        for rec in record.schedulers.values():
            if rec.explicit or len(rec.steps) < 2:
                continue
            found = self._per_epoch(record, rec)
            if found is None:
                continue
            batches, opt_steps = found
            scheduler = rec.scheduler
            for group in range(len(getattr(scheduler, "base_lrs", []) or [])):
                factor = _factor(scheduler, group)
                if factor is None:
                    continue
                try:
                    warmup = _warmup_length(factor)
                    seen = [float(factor(k)) for k in range(len(rec.steps) + 1)]
                except Exception:  # noqa: BLE001 - the user's lambda failed: no finding
                    continue
                if warmup is None:
                    continue
                length, top = warmup
                if length < max(_WARMUP_EPOCHS, min(batches, 100)) or length <= len(seen) \
                        or max(seen) > 0.1 * top:
                    continue
                record.report(self.code, f"`{rec.name}` was stepped once per epoch "
                              f"({len(rec.steps)} times in {opt_steps} optimizer steps), but "
                              f"its warm-up reaches its top factor ({top:.3g}) only after "
                              f"{length} steps: at one step per epoch the learning rate stays "
                              f"near zero for {length} epochs (factors in this run: "
                              f"{_lr_text(seen)}); an epoch has {batches} batches: call "
                              f"`scheduler.step()` after each `optimizer.step()`, or size the "
                              f"warm-up in epochs", rec.steps[0][0])
                break

    @staticmethod
    def _per_epoch(record, rec) -> tuple[int, int] | None:
        """(batches in an epoch of the training loader, optimizer steps by the last
        scheduler step) when the scheduler stepped at most once per epoch, with at least
        two optimizer steps between its steps."""
        epochs = [epoch for _, _, epoch in rec.steps]
        if None in epochs or len(set(epochs)) != len(epochs):
            return None
        opt_steps = rec.steps[-1][1]
        if opt_steps < 2 * len(rec.steps):
            return None
        loader = record.loaders.get(epochs[0][0])
        if loader is None or not loader.length:
            return None
        return loader.length, opt_steps


class SoftmaxOverBatch(RunRule):
    """A softmax or log-softmax over the batch dimension fed to a classification loss.

    ## What it does
    Watching a training run, reports a call of `nll_loss` or `cross_entropy` (or
    `nn.NLLLoss` / `nn.CrossEntropyLoss`) whose input, of shape `(N, C, ...)`, was made by a
    `log_softmax` or `softmax` over dim 0: the batch (or, through a `view`, the time steps),
    not the classes. Seen from the input's autograd node, so on forwards with autograd on. A
    square input (as many classes as samples: a contrastive loss's similarity matrix, where a
    softmax over dim 0 is the other direction of the loss) is left alone.

    ## Why is this bad?
    The loss expects each sample's scores normalized over its classes. Normalized over the
    batch, every class's column sums to one across the samples instead: the probabilities of
    a sample depend on the other samples in its batch, and the model trains on a different
    objective. `F.log_softmax(x)` without `dim` picks dim 0 for 1-, 3- and 4-D inputs.

    ## Example
        loss = F.nll_loss(F.log_softmax(logits, dim=0), target)

    ## Use instead
        loss = F.nll_loss(F.log_softmax(logits, dim=1), target)
    """

    code = "ML326"
    name = "softmax-over-batch"
    severity = Severity.ERROR
    default_enabled = False
    _MIDDLE = ("data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))\n"
               "loader = DataLoader(data, batch_size=8)\n"
               "model = nn.Linear(8, 3)\n"
               "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
               "for x, y in loader:\n    optimizer.zero_grad()\n"
               "    log_probs = nn.functional.log_softmax(model(x), dim={dim})\n"
               "    nn.functional.nll_loss(log_probs, y).backward(){mark}\n"
               "    optimizer.step()\n")
    # a language model's (time, batch, vocabulary) scores flattened to (time * batch, vocab)
    _SEQUENCE = ("data = TensorDataset(torch.randn(64, 5, 8), torch.randint(0, 6, (64, 5)))\n"
                 "loader = DataLoader(data, batch_size=8)\n"
                 "model = nn.Linear(8, 6)\n"
                 "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                 "for x, y in loader:\n    optimizer.zero_grad()\n"
                 "    scores = model(x.transpose(0, 1)).log_softmax({dim})\n"
                 "    loss = nn.NLLLoss()(scores.view(-1, 6), y.t().reshape(-1)){mark}\n"
                 "    loss.backward()\n    optimizer.step()\n")
    _CONTRASTIVE = ("data = TensorDataset(torch.randn(64, 8), torch.randn(64, 8))\n"
                    "loader = DataLoader(data, batch_size=8)\n"
                    "model = nn.Linear(8, 8)\n"
                    "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                    "for x, y in loader:\n    optimizer.zero_grad()\n"
                    "    similarity = model(x) @ y.t()\n"
                    "    labels = torch.arange(len(x))\n"
                    "    loss = nn.functional.nll_loss(similarity.log_softmax(0), labels)\n"
                    "    loss.backward()\n    optimizer.step()\n")
    valid = [_DATA + _MIDDLE.format(dim=1, mark=""), _DATA + _SEQUENCE.format(dim=-1, mark=""),
             _DATA + _CONTRASTIVE]
    invalid = [_invalid(_DATA + _MIDDLE.format(dim=0, mark="  # <-")),
               _invalid(_DATA + _SEQUENCE.format(dim=0, mark="  # <-"))]

    def check(self, record) -> None:
        for (code, _), misuse in record.numerics.losses.items():
            if code != self.code:
                continue
            detail = misuse.detail
            shape = detail["shape"]
            record.report(self.code, f"the input of `{misuse.function}` is a "
                          f"`{detail['kind']}` over dim 0 of a {_shape(shape)} tensor "
                          f"({misuse.calls} call(s)): each class is normalized across the "
                          f"{shape[0]} samples of the batch, not each sample across its "
                          f"{detail['classes']} classes; use `dim=1` (or `dim=-1` for "
                          f"`(N, C)` scores)", misuse.site)


class LossTargetBroadcast(RunRule):
    """A regression loss whose input and target broadcast to a larger shape.

    ## What it does
    Watching a training run, reports a call of `mse_loss`, `l1_loss`, `smooth_l1_loss` or
    `huber_loss` (or their `nn` modules) whose input and target have different shapes that
    broadcast to more elements than either: `(N, 1)` against `(N,)` becomes `(N, N)`.

    ## Why is this bad?
    torch only warns. The loss then compares every prediction with every target of the batch,
    an average that barely depends on which target belongs to which sample: the model learns
    to predict the batch mean and the run looks healthy.

    ## Example
        loss = F.mse_loss(model(x), y)  # model(x): (N, 1), y: (N,)

    ## Use instead
        loss = F.mse_loss(model(x).squeeze(1), y)
    """

    code = "ML327"
    name = "loss-target-broadcast"
    severity = Severity.ERROR
    default_enabled = False
    _MIDDLE = ("data = TensorDataset(torch.randn(64, 8), torch.randn(64))\n"
               "loader = DataLoader(data, batch_size=8)\n"
               "model = nn.Linear(8, 1)\n"
               "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
               "for x, y in loader:\n    optimizer.zero_grad()\n"
               "    nn.functional.mse_loss(model(x){squeeze}, y).backward(){mark}\n"
               "    optimizer.step()\n")
    valid = [_DATA + _MIDDLE.format(squeeze=".squeeze(1)", mark="")]
    invalid = [_invalid(_DATA + _MIDDLE.format(squeeze="", mark="  # <-"))]

    def check(self, record) -> None:
        for (code, _), misuse in record.numerics.losses.items():
            if code != self.code:
                continue
            detail = misuse.detail
            record.report(self.code, f"`{misuse.function}` got an input of shape "
                          f"{_shape(detail['input'])} and a target of shape "
                          f"{_shape(detail['target'])} ({misuse.calls} call(s)): they "
                          f"broadcast to {_shape(detail['broadcast'])}, so each prediction "
                          f"is compared with every target of the batch (torch only warns); "
                          f"give both the same shape (`.squeeze(1)` the input or "
                          f"`.unsqueeze(1)` the target)", misuse.site)


RUN_NUMERICS_RULES = [GradientsClippedBeforeBackward, WarmupSteppedPerEpoch, SoftmaxOverBatch,
                      LossTargetBroadcast]


@hookimpl
def modellint_add_rules():
    return RUN_NUMERICS_RULES
