"""The runtime pass over torchvision's classification models and a few timm models finds no
error (slow; CI runs it).

All models are checked in this one process (torch and the libraries are imported once) with
the smallest inputs each architecture accepts, so the sweep fits in a few minutes on two cores.
Only info and warning findings (ML703 unused parameters, ML706 gradients at initialisation)
may appear; /work/notes/runtime-notes.md says which ones come up and why.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from modellint.finding import Severity  # noqa: E402
from modellint.plugins import load_registry  # noqa: E402
from modellint.runtime.build import resolve  # noqa: E402
from modellint.runtime.engine import ModelCheck  # noqa: E402

# name -> (input [N, C, H, W], constructor kwargs); batch 2 because train-mode BatchNorm needs
# more than one value per channel
TORCHVISION = {
    "resnet34": ([2, 3, 32, 32], {}),
    "vgg11": ([2, 3, 32, 32], {}),
    # 299×299 is the smallest input that still runs the auxiliary classifier (its outputs come
    # back as a namedtuple in train mode: the aux-output case of ML703)
    "inception_v3": ([2, 3, 299, 299], {"init_weights": False}),
    "googlenet": ([2, 3, 64, 64], {"init_weights": False}),
    "densenet121": ([2, 3, 32, 32], {}),
    "mobilenet_v3_small": ([2, 3, 32, 32], {}),
    "efficientnet_b0": ([2, 3, 32, 32], {}),
    "vit_b_16": ([2, 3, 32, 32], {"image_size": 32}),
    "swin_t": ([2, 3, 32, 32], {}),
    "convnext_tiny": ([2, 3, 32, 32], {}),
    "regnet_y_400mf": ([2, 3, 32, 32], {}),
    "squeezenet1_0": ([2, 3, 64, 64], {}),
    "shufflenet_v2_x0_5": ([2, 3, 32, 32], {}),
}
TIMM = {
    "deit_tiny_patch16_224": ([2, 3, 32, 32], {"img_size": 32}),
    "convnextv2_atto": ([2, 3, 32, 32], {}),
    "mobilevitv2_050": ([2, 3, 64, 64], {}),
    "mobilenetv4_conv_small": ([2, 3, 64, 64], {}),
}


def _check(factory, roots, label: str, shape, kwargs):
    spec = {"shape": shape, "dtype": "float32", "low": 0, "high": 2, "name": None}
    check = ModelCheck(factory=factory, kwargs=kwargs, specs=[spec], user_roots=roots,
                       label=label)
    outcome = check.run()
    assert outcome.built, outcome.findings
    rules = load_registry().rules
    errors = [f for f in outcome.findings if rules[f.code].severity is Severity.ERROR]
    assert errors == [], errors


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_torchvision_model_has_no_error_findings(name):
    shape, kwargs = TORCHVISION[name]
    factory, roots = resolve({"module": "torchvision.models", "file": None, "name": name})
    _check(factory, roots, f"torchvision.models:{name}", shape, kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TIMM))
def test_timm_model_has_no_error_findings(name):
    timm = pytest.importorskip("timm")
    shape, kwargs = TIMM[name]

    def factory(**options):
        return timm.create_model(name, pretrained=False, **options)

    factory.__name__ = name
    roots = [os.path.dirname(os.path.abspath(timm.__file__))]
    _check(factory, roots, f"timm:{name}", shape, kwargs)
