"""ML345 (a gradient-accumulation step on the wrong iterations), ML208 (`/` on integer
tensors) and ML209 (a softmax over a dimension the tensor lacks), on small scripts written for
these tests: the shapes the benchmark's real cases take, and the near misses that must stay
silent."""

from __future__ import annotations

import textwrap

from modellint.rules.numerics import IntegerTensorTrueDivision, SoftmaxDimOutOfRange
from modellint.rules.training_script import AccumulationStepCondition
from modellint.testing import lint_text


def found(source, rule):
    return sorted((f.code, f.line) for f in lint_text(textwrap.dedent(source), [rule]))


def line_of(source, text):
    lines = textwrap.dedent(source).splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


# -- ML345 ------------------------------------------------------------------------------------

ACCUM = """\
import torch.nn.functional as F

def train(model, loader, optimizer, n):
    for {target} in {iterable}:
        F.mse_loss(model(x), y).backward()
{body}"""


def accum(test, target="i, (x, y)", iterable="enumerate(loader)", clear="optimizer.zero_grad()"):
    body = f"        if {test}:\n            optimizer.step()\n            {clear}\n"
    return ACCUM.format(target=target, iterable=iterable, body=body)


def test_inverted_conditions_are_reported():
    for test in ("i % n", "(i + 1) % n != 0", "(i + 1) % n > 0", "0 != (i + 1) % n",
                 "not (i + 1) % n == 0"):
        source = accum(test)
        assert found(source, AccumulationStepCondition) == [
            ("ML345", line_of(source, "if "))], test


def test_once_per_window_is_silent():
    for test in ("(i + 1) % n == 0", "i % n == n - 1", "not (i + 1) % n", "0 == (i + 1) % n",
                 "(i + 1) % n == 0 or i + 1 == len(loader)"):
        assert found(accum(test), AccumulationStepCondition) == [], test


def test_zero_based_index_is_reported_only_when_it_counts_from_zero():
    assert found(accum("i % n == 0"), AccumulationStepCondition) == [("ML345", 6)]
    ranged = accum("i % n == 0", target="i", iterable="range(100)").replace(
        "model(x), y", "model(i), i")
    assert found(ranged, AccumulationStepCondition) == [("ML345", 6)]
    for iterable in ("enumerate(loader, 1)", "enumerate(loader, start=1)"):
        assert found(accum("i % n == 0", iterable=iterable), AccumulationStepCondition) == []
    from_one = accum("i % n == 0", target="i", iterable="range(1, 101)").replace(
        "model(x), y", "model(i), i")
    assert found(from_one, AccumulationStepCondition) == []
    # the counter moved on before the test
    moved = accum("i % n == 0").replace("        F.mse_loss", "        i += 1\n        F.mse_loss")
    assert found(moved, AccumulationStepCondition) == []


def test_through_a_flag_the_finding_is_where_the_flag_is_computed():
    source = """\
    import torch.nn.functional as F

    def train(model, batches, optimizer, accum):
        for it in range(len(batches)):
            stepping = (it + 1) % accum != 0
            F.mse_loss(*model(batches[it])).backward()
            if stepping:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert found(source, AccumulationStepCondition) == [
        ("ML345", line_of(source, "stepping = "))]
    # the flag computed before the loop is not this iteration's
    hoisted = """\
    import torch.nn.functional as F

    def train(model, batches, optimizer, accum):
        stepping = len(batches) % accum != 0
        for it in range(len(batches)):
            F.mse_loss(*model(batches[it])).backward()
            if stepping:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert found(hoisted, AccumulationStepCondition) == []


def test_not_accumulation_is_silent():
    # gradients cleared every iteration: the condition only skips some updates
    every = accum("i % n").replace(
        "        F.mse_loss", "        optimizer.zero_grad()\n        F.mse_loss").replace(
        "            optimizer.zero_grad()\n", "")
    assert found(every, AccumulationStepCondition) == []
    # the step is before the backward in the iteration
    before = """\
    import torch.nn.functional as F

    def train(model, loader, optimizer, n):
        for i, (x, y) in enumerate(loader):
            if i % n:
                optimizer.step()
                optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
    """
    assert found(before, AccumulationStepCondition) == []
    # a guard that skips the rest of the iteration: the step runs on the other branch
    guard = """\
    import torch.nn.functional as F

    def train(model, loader, optimizer, n):
        for i, (x, y) in enumerate(loader):
            F.mse_loss(model(x), y).backward()
            if (i + 1) % n != 0:
                continue
            optimizer.step()
            optimizer.zero_grad()
    """
    assert found(guard, AccumulationStepCondition) == []


def test_changing_window():
    source = """\
    import torch.nn.functional as F

    def train(model, loader, optimizer, warmup, n):
        for i, (x, y) in enumerate(loader):
            accumulate = max(1, round(n * min(1.0, i / warmup)))
            F.mse_loss(model(x), y).backward()
            if (i + 1) % accumulate == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    findings = lint_text(textwrap.dedent(source), [AccumulationStepCondition])
    assert [(f.code, f.line) for f in findings] == [("ML345", line_of(source, "if (i + 1)"))]
    assert "recomputed in this loop from `i`" in findings[0].message
    # set once before the loop
    fixed = textwrap.dedent(source).replace(
        "    for i, (x, y) in enumerate(loader):\n"
        "        accumulate = max(1, round(n * min(1.0, i / warmup)))\n",
        "    accumulate = max(1, round(n / warmup))\n"
        "    for i, (x, y) in enumerate(loader):\n")
    assert found(fixed, AccumulationStepCondition) == []


# -- ML208 ------------------------------------------------------------------------------------


def test_index_tensors_divided_and_used_as_indices():
    shapes = {
        "x.argmax(1) / w": "rows = x.argmax(1) / w\n    return table[rows]",
        "x.max(1)[1] / w": "return table[x.max(1)[1] / w]",
        "x.topk(3).indices / w": "rows = x.topk(3).indices / w\n    return table.index_select(0, rows)",
        "torch.nonzero(x) / w": "return table.view(torch.nonzero(x) / w, -1)",
    }
    for division, body in shapes.items():
        source = f"import torch\n\ndef pick(x, table, w):\n    {body}\n"
        findings = found(source, IntegerTensorTrueDivision)
        assert findings == [("ML208", 4)], division


def test_divisions_that_are_not_integer_indices_are_silent():
    sources = [
        # values, not indices
        "def f(x, table, w):\n    v, i = x.topk(3)\n    return table[v / w]\n",
        # max over the whole tensor: a value
        "def f(x, table, w):\n    return table[x.max() / w]\n",
        # a float wanted, the quotient is not used as an index
        "def f(x, w):\n    return x.argmax(1) / w\n",
        # rounded before use
        "def f(x, table, w):\n    return table[(x.argmax(1) / w).floor().long()]\n",
        "def f(x, table, w):\n    return table[torch.floor(x.argmax(1) / w).long()]\n",
        # the name is reassigned from something else too
        "def f(x, y, table, w):\n    i = x.argmax(1)\n    i = y\n    return table[i / w]\n",
    ]
    for body in sources:
        assert found("import torch\n\n" + body, IntegerTensorTrueDivision) == [], body


def test_conv_length_arithmetic():
    source = """\
    def out_len(length, kernel_size, stride, padding=0, dilation=1):
        return (length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1
    """
    assert found(source, IntegerTensorTrueDivision) == [("ML208", 2)]
    for rounded in ("int((length - kernel_size) / stride + 1)",
                    "math.floor((length - kernel_size) / stride) + 1",
                    "torch.div(length - kernel_size, stride, rounding_mode='floor') + 1",
                    "(length - kernel_size) // stride + 1",
                    "((length - kernel_size) / stride + 1).long()"):
        text = ("import math\nimport torch\n\ndef out_len(length, kernel_size, stride):\n"
                f"    return {rounded}\n")
        assert found(text, IntegerTensorTrueDivision) == [], text
    # box coordinates over a stride: floats wanted
    coords = "def to_grid(box, pad, stride):\n    return (box - pad) / stride\n"
    assert found(coords, IntegerTensorTrueDivision) == []


def test_the_inverted_message_suggests_a_condition_that_is_not_off_by_one():
    zero_based = lint_text(accum("i % n != 0"), [AccumulationStepCondition])
    assert "step when `(i + 1) % n == 0`" in zero_based[0].message
    global_count = accum("step % n").replace(
        "        F.mse_loss", "        step = epoch_start + i\n        F.mse_loss")
    computed = lint_text(global_count, [AccumulationStepCondition])
    assert "step when `step % n == 0`" in computed[0].message


# -- ML209 ------------------------------------------------------------------------------------

HEAD = """\
import torch.nn as nn


class RoIHead(nn.Module):
    def __init__(self, dim_in, classes, act):
        super().__init__()
        for i in range(2):
            self.add_module(f"s{{i}}_pool", nn.MaxPool2d(2))
        self.dropout = nn.Dropout(0.5)
        self.projection = nn.Linear(dim_in, classes)
        if act == "softmax":
            self.act = nn.Softmax(dim={dim})
        else:
            self.act = nn.Sigmoid()

    def forward(self, x):
        x = x.view(x.shape[0], -1)
        x = self.projection(self.dropout(x))
        if not self.training:
            x = self.act(x)
        return x
"""


def test_a_layer_built_with_a_dim_the_input_lacks_is_reported_at_its_dim():
    source = HEAD.format(dim=4)
    findings = lint_text(source, [SoftmaxDimOutOfRange])
    assert [(f.code, f.line) for f in findings] == [("ML209", line_of(source, "Softmax(dim=4)"))]
    assert "has 2 dimensions" in findings[0].message
    for dim in (1, -1, -2):
        assert found(HEAD.format(dim=dim), SoftmaxDimOutOfRange) == []


def test_ranks_the_function_does_not_set_are_not_guessed():
    sources = [
        # the input as it comes
        "def f(x):\n    return x.softmax(3)\n",
        # a shape held in a variable
        "def f(x, shape):\n    return x.view(*shape).softmax(3)\n",
        # a project layer between: its output rank is not known
        "def f(x, block):\n    y = block(x.flatten(1))\n    return y.softmax(3)\n",
        # flattened up to a given end
        "def f(x):\n    return torch.flatten(x, 1, 2).softmax(3)\n",
    ]
    for body in sources:
        assert found("import torch\n\n" + body, SoftmaxDimOutOfRange) == [], body
    reshaped = "import torch\n\ndef f(x, b):\n    y = x.reshape((b, 2, -1))\n    return torch.softmax(y, 3)\n"
    assert found(reshaped, SoftmaxDimOutOfRange) == [("ML209", 5)]
