"""The cheap numeric tests of the runtime pass give the exact answers of the slow ones."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from modellint.rules.runtime.training import _norm  # noqa: E402
from modellint.runtime.tracer import all_finite, parameter_counts  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_all_finite_is_isfinite_all(dtype):
    big = torch.finfo(dtype).max
    cases = {
        "plain": torch.randn(1000),
        "nan": torch.tensor([1.0, float("nan"), 2.0]),
        "inf": torch.tensor([1.0, float("inf")]),
        "both infinities": torch.tensor([float("inf"), float("-inf")]),
        # finite values whose sum overflows: not an Inf in the tensor
        "overflowing sum": torch.full((8,), big / 2, dtype=dtype),
        "empty": torch.zeros(0),
    }
    for name, tensor in cases.items():
        tensor = tensor.to(dtype)
        assert all_finite(tensor) == bool(torch.isfinite(tensor).all()), name


def test_gradient_norm_keeps_tiny_and_huge_gradients():
    assert _norm(torch.zeros(10)) == 0.0
    # float32 squares of 1e-30 underflow to 0: the norm is not "exactly zero"
    tiny = torch.full((4,), 1e-30)
    assert _norm(tiny) == pytest.approx(2e-30)
    # squares of 1e30 overflow float32: the norm is still finite
    huge = torch.full((4,), 1e30)
    assert _norm(huge) == pytest.approx(2e30)
    assert math.isnan(_norm(torch.tensor([1.0, float("nan")])))
    assert _norm(torch.tensor([3.0, 4.0], dtype=torch.float16)) == 5.0


def test_parameter_counts_count_a_shared_parameter_once():
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    model[1][0].weight = model[0].weight  # tied
    counts = parameter_counts(model)
    for module in model.modules():
        assert counts[id(module)] == sum(p.numel() for p in module.parameters())
