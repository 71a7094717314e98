"""The runtime pass on real project layouts (issue 27): models in packages with relative
imports are checked, and a run that could not check a model never reads as a clean one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conftest import write  # noqa: E402

MODELLINT = [sys.executable, "-m", "modellint"]

BLOCKS = """\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, channels=32):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv(x)
"""

# the stem makes 16 channels, the block expects 32: ML701 at the line that built the block
MODEL = """\
import torch.nn as nn

from .blocks import Block
from ..common import WIDTH


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, WIDTH, 3, padding=1)
        self.block = Block(32)

    def forward(self, x):
        return self.block(self.stem(x))
"""

NEEDS_ARGS = """\
import torch.nn as nn


class Configurable(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 2)

    def forward(self, x):
        return self.fc(x)
"""


def _check(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*MODELLINT, "check", "--no-cache", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def _src_layout(root: Path) -> None:
    write(root, "src/pkg/__init__.py", "")
    write(root, "src/pkg/common.py", "WIDTH = 16\n")
    write(root, "src/pkg/nets/__init__.py", "")
    write(root, "src/pkg/nets/blocks.py", BLOCKS)
    write(root, "src/pkg/nets/model.py", MODEL)


def test_a_model_in_a_package_with_relative_imports_is_checked(tmp_path):
    _src_layout(tmp_path)
    result = _check("--runtime", "--format", "json", "--", "src", cwd=tmp_path)
    found = [(f["path"], f["code"], f["line"]) for f in json.loads(result.stdout)]
    assert ("src/pkg/nets/model.py", "ML701", 11) in found, result
    assert not [f for f in found if f[1] == "ML002"], result
    assert result.returncode == 1


def test_a_model_in_a_package_named_alone_is_imported_from_its_package_root(tmp_path):
    _src_layout(tmp_path)
    result = _check("--runtime", "--format", "json", "--", "src/pkg/nets/model.py", cwd=tmp_path)
    found = [(f["code"], f["line"]) for f in json.loads(result.stdout)]
    assert found == [("ML701", 11)], result


def test_package_root_is_the_first_folder_above_the_packages(tmp_path):
    from modellint.runtime.build import package_root

    _src_layout(tmp_path)
    write(tmp_path, "scripts/train.py", "x = 1\n")
    assert package_root(str(tmp_path / "src/pkg/nets/model.py")) == (
        str(tmp_path / "src"), "pkg.nets.model")
    assert package_root(str(tmp_path / "src/pkg/nets/__init__.py")) == (
        str(tmp_path / "src"), "pkg.nets")
    assert package_root(str(tmp_path / "scripts/train.py")) == (
        str(tmp_path / "scripts"), "train")


def test_a_device_that_is_not_available_is_a_usage_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    write(tmp_path, "net.py", BLOCKS)
    result = _check("--runtime", "--device", "cuda", "--", "net.py", cwd=tmp_path)
    assert result.returncode == 2, result
    assert "device 'cuda' is not available" in result.stderr
    assert "available: cpu, meta" in result.stderr
    assert "Traceback" not in result.stderr
    trace = subprocess.run([*MODELLINT, "trace", "--device", "cuda:3", "net.py:Block"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert trace.returncode == 2 and "'cuda:3' is not available" in trace.stderr


def test_models_not_checked_are_counted_in_the_last_line_and_can_fail_the_run(tmp_path):
    write(tmp_path, "ok.py", BLOCKS)
    write(tmp_path, "needs_args.py", NEEDS_ARGS)
    write(tmp_path, "broken.py", "import torch.nn as nn\nimport not_installed_anywhere\n\n\n"
                                 "class Broken(nn.Module):\n    pass\n")
    result = _check("--runtime", "--", ".", cwd=tmp_path)
    assert result.returncode == 0, result  # ML002 is info
    assert result.stdout.splitlines()[-1] == (
        "2 of 3 models not checked by the runtime pass: see ML002.")
    # the count does not depend on what is shown
    hidden = _check("--runtime", "--ignore", "ML002", "--", ".", cwd=tmp_path)
    assert hidden.stdout.splitlines()[-2:] == [
        "All checks passed (3 files).",
        "2 of 3 models not checked by the runtime pass: see ML002."], hidden
    assert hidden.returncode == 0
    strict = _check("--runtime", "--ignore", "ML002", "--fail-on-unchecked", "--", ".",
                    cwd=tmp_path)
    assert strict.returncode == 1, strict
    write(tmp_path, "pyproject.toml", "[tool.modellint.runtime]\nfail-on-unchecked = true\n")
    assert _check("--runtime", "-q", "--", ".", cwd=tmp_path).returncode == 1
    # every model checked: no line, exit 0
    (tmp_path / "needs_args.py").unlink()
    (tmp_path / "broken.py").unlink()
    clean = _check("--runtime", "--", ".", cwd=tmp_path)
    assert clean.returncode == 0 and "not checked" not in clean.stdout, clean


def test_fail_on_unchecked_must_be_a_boolean(tmp_path):
    write(tmp_path, "ok.py", BLOCKS)
    write(tmp_path, "pyproject.toml", "[tool.modellint.runtime]\nfail-on-unchecked = 'yes'\n")
    result = _check("--runtime", "--", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "`runtime.fail-on-unchecked` must be true or false" in result.stderr


VISION = """\
import torch.nn as nn
from timm.models.vision_transformer import VisionTransformer
from torchvision.models import resnet18
from torchvision.models.vision_transformer import VisionTransformer as TorchvisionViT


class TimmViT(VisionTransformer):
    def __init__(self):
        super().__init__(img_size=224, patch_size=16, embed_dim=64, depth=1, num_heads=2)


class TorchvisionTinyViT(TorchvisionViT):
    def __init__(self):
        super().__init__(image_size=224, patch_size=16, num_layers=1, num_heads=2,
                         hidden_dim=64, mlp_dim=128)


def zero_init_resnet():
    return resnet18(num_classes=10, zero_init_residual=True)


class AssertsItsSize(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        assert x.shape[-1] == 1000, f"expected width 1000, got {x.shape[-1]}"
        return self.conv(x)
"""


def test_vision_models_get_the_input_size_they_declare_and_deliberate_zero_inits_are_quiet(
        tmp_path):
    write(tmp_path, "vision.py", VISION)
    targets = ("TimmViT", "TorchvisionTinyViT", "zero_init_resnet", "AssertsItsSize")
    write(tmp_path, "pyproject.toml", "[tool.modellint.runtime]\n" + "".join(
        f'[[tool.modellint.runtime.models]]\ntarget = "vision.py:{name}"\n' for name in targets))
    result = _check("--runtime", "--format", "json", "--select", "ML0,ML7", "--", "vision.py",
                    cwd=tmp_path)
    found = [(f["code"], f["message"]) for f in json.loads(result.stdout)]
    # a ViT built for 224x224 is fed 224x224 (it said so), not a 32x32 guess that fails
    assert not [f for f in found if f[0] == "ML701"], found
    # zero_init_residual / a zero-initialised head learn from the first step: no ML706
    assert not [f for f in found if f[0] == "ML706"], found
    # a model that checks its own input size and fits none of the sizes tried: not checked,
    # never reported as a mistake of the model
    assert [code for code, message in found] == ["ML002"], found
    assert "AssertsItsSize" in found[0][1] and "no input size fits" in found[0][1]


PLAIN_LISTS = """\
import torch.nn as nn


def make_blocks(width):
    blocks = []
    blocks.append(nn.Linear(width, width))
    blocks.append(nn.ReLU())
    blocks.append(nn.Linear(width, width))
    return blocks


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.blocks = make_blocks(8)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return x
"""


def test_one_plain_list_is_one_ml101_naming_every_kind_it_holds(tmp_path):
    write(tmp_path, "net.py", PLAIN_LISTS)
    result = _check("--runtime", "--format", "json", "--", "net.py", cwd=tmp_path)
    found = [f for f in json.loads(result.stdout) if f["code"] == "ML101"]
    assert [(f["line"], f["pass"]) for f in found] == [(16, "runtime")], found
    assert "3 module(s) (2 Linear, 1 ReLU)" in found[0]["message"]
