"""The pytest plugin (entry point `pytest11`): a `modellint` fixture for a project's own tests.

    def test_model(modellint):
        model = Net()
        modellint.check(model, torch.randn(2, 3, 32, 32))   # fails the test with the findings

`modellint.check(...)` takes the arguments of `modellint.check_model` and returns its report;
it fails the test when any finding is an error or warning (`strict=False` only returns the
report). `modellint.check_optimizer(model, optimizer)` does the same for ML305. Nothing is
global, so it works under pytest-xdist (`-n`). torch is imported only when a check runs.
"""

from __future__ import annotations

import pytest


class ModellintHelper:
    def check(self, model_or_factory, *example_inputs, strict: bool = True, **options):
        from modellint.runtime.api import check_model

        report = check_model(model_or_factory, *example_inputs, **options)
        if strict and not report.ok:
            pytest.fail(f"modellint found problems in the model:\n{report}", pytrace=False)
        return report

    def check_optimizer(self, model, optimizer, strict: bool = True):
        from modellint.runtime.api import check_optimizer

        report = check_optimizer(model, optimizer)
        if strict and not report.ok:
            pytest.fail(f"modellint found problems in the optimizer:\n{report}", pytrace=False)
        return report


@pytest.fixture
def modellint() -> ModellintHelper:
    """Runtime checks of modellint; `modellint.check(model, *inputs)` fails the test with
    readable findings."""
    return ModellintHelper()
