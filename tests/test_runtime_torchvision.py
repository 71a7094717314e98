"""The runtime pass over torchvision's classification models finds no error (slow; CI runs it)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from modellint.runtime.build import resolve  # noqa: E402
from modellint.runtime.engine import ModelCheck  # noqa: E402

# small inputs keep the sweep quick; the sizes are the smallest each architecture accepts
MODELS = {
    "resnet34": [2, 3, 64, 64],
    "vgg11": [2, 3, 32, 32],
    "inception_v3": [2, 3, 299, 299],
    "googlenet": [2, 3, 64, 64],
    "densenet121": [2, 3, 32, 32],
    "mobilenet_v3_small": [2, 3, 64, 64],
    "efficientnet_b0": [2, 3, 64, 64],
    "vit_b_16": [2, 3, 64, 64],  # built with image_size=64
    "swin_t": [2, 3, 64, 64],
    "convnext_tiny": [2, 3, 64, 64],
    "regnet_y_400mf": [2, 3, 64, 64],
    "squeezenet1_0": [2, 3, 64, 64],
    "shufflenet_v2_x0_5": [2, 3, 64, 64],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_torchvision_model_has_no_error_findings(name):
    factory, roots = resolve({"module": "torchvision.models", "file": None, "name": name})
    spec = {"shape": MODELS[name], "dtype": "float32", "low": 0, "high": 2, "name": None}
    kwargs = {"image_size": 64} if name == "vit_b_16" else {}
    check = ModelCheck(factory=factory, kwargs=kwargs, specs=[spec], user_roots=roots,
                       label=f"torchvision.models:{name}")
    outcome = check.run()
    assert outcome.built
    errors = [f for f in outcome.findings if f.code not in ("ML703", "ML706")]
    assert errors == [], errors
