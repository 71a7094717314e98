"""The pytest plugin (entry point `pytest11`): a `modellint` fixture for a project's own tests.

    def test_model(modellint):
        model = Net()
        modellint.check(model, torch.randn(2, 3, 32, 32))   # fails the test with the findings

`modellint.check(...)` takes the arguments of `modellint.check_model` and returns its report;
it fails the test when any finding is an error or warning (`strict=False` only returns the
report). `modellint.check_optimizer(model, optimizer)` does the same for ML305.
`with modellint.watch(steps=20): train(...)` watches a training run in the test (the checks of
`modellint run`) and fails the test with the findings when the block ends. Nothing is
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


    def watch(self, strict: bool = True, **options):
        """A `modellint.watch()` that fails the test at the end of the block when the run had
        findings (`strict=False`: read them from `.report`)."""
        from modellint.watching.session import Watch

        class _Strict(Watch):
            def __exit__(self, kind, exc, tb):
                swallowed = super().__exit__(kind, exc, tb)
                if strict and (kind is None or swallowed) and not self.report.ok:
                    pytest.fail(f"modellint found problems in the training run:\n"
                                f"{self.report}", pytrace=False)
                return swallowed

        return _Strict(**options)


@pytest.fixture
def modellint() -> ModellintHelper:
    """Runtime checks of modellint; `modellint.check(model, *inputs)` fails the test with
    readable findings."""
    return ModellintHelper()
