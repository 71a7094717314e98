"""Numerics (ML205–ML207): the rewrites are reported, keep the user's torch alias, and the
rewritten code computes the same function more accurately."""

from __future__ import annotations

import pytest

from modellint.testing import fix_text, lint_text
from rules.numerics import ExpMinusOne, LogOnePlus, LogSumExp

NUMERICS = [LogOnePlus, ExpMinusOne, LogSumExp]


def codes(source, rules=NUMERICS):
    return [(f.code, f.line) for f in lint_text(source, rules)]


def run(source, **values):
    torch = pytest.importorskip("torch")
    namespace = {"torch": torch, **values}
    exec(source, namespace)  # noqa: S102 - our own fixture and its fixed form
    return namespace["y"]


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("import torch\n\ny = torch.log(1 + x)\n", "ML205"),
        ("import torch\n\ny = torch.exp(x) - 1\n", "ML206"),
        ("import torch\n\ny = torch.log(torch.sum(torch.exp(x), dim=0))\n", "ML207"),
    ],
)
def test_fixed_code_is_more_accurate(source, code):
    torch = pytest.importorskip("torch")
    assert codes(source) == [(code, 3)]
    fixed = fix_text(source, NUMERICS)
    assert fixed != source and codes(fixed) == []
    if code == "ML207":
        x = torch.tensor([100.0, 100.0])  # exp overflows float32
        exact = 100.0 + torch.log(torch.tensor(2.0))
    else:
        x = torch.tensor([1e-10])  # 1 + x rounds to 1 in float32
        exact = torch.tensor([1e-10])
    before, after = run(source, x=x), run(fixed, x=x)
    assert not torch.allclose(before, exact, rtol=1e-3, atol=0)
    assert torch.allclose(after, exact, rtol=1e-3, atol=0)


def test_from_import_is_reported_but_fixed_only_with_torch_reachable():
    source = "from torch import log\n\ny = log(1 + x)\n"
    assert codes(source) == [("ML205", 3)]
    assert fix_text(source, NUMERICS) == source
    source = "import torch\nfrom torch import exp\n\ny = exp(x) - 1\n"
    assert fix_text(source, NUMERICS) == "import torch\nfrom torch import exp\n\ny = torch.expm1(x)\n"


def test_only_the_exact_patterns_are_reported():
    source = (
        "import math\nimport numpy as np\nimport torch\n\n"
        "a = torch.log(1 + 1)\nb = torch.exp(x) - 1 * y\nc = torch.exp(x) + 1\n"
        "d = math.log(1 + x)\ne = np.log(np.sum(np.exp(x)))\nf = torch.log(torch.sum(x))\n"
        "g = torch.log(1 + x, out=buf)\nh = torch.exp(x, out=buf) - 1\n"
    )
    assert codes(source) == []


def test_logsumexp_without_dim_is_reported_without_fix():
    source = "import torch\n\ny = torch.log(torch.sum(torch.exp(x)))\n"
    assert codes(source) == [("ML207", 3)]
    assert fix_text(source, NUMERICS) == source
    with_dtype = "import torch\n\ny = torch.log(torch.sum(torch.exp(x), 1, dtype=torch.float64))\n"
    assert codes(with_dtype) == [("ML207", 3)]
    assert fix_text(with_dtype, NUMERICS) == with_dtype


def test_parenthesised_operands_stay_valid():
    source = "import torch\n\ny = torch.log(1 + (a - b)) * 2\nz = (torch.exp(-t) - 1) / t\n"
    fixed = fix_text(source, NUMERICS)
    assert fixed == "import torch\n\ny = torch.log1p(a - b) * 2\nz = (torch.expm1(-t)) / t\n"
