"""Layer structure (ML110-ML112): one-layer recurrent dropout, misspelt layer attributes,
attributes read through data-parallel wrappers; and the attribute tables against torch."""

from __future__ import annotations

import inspect
import re

import pytest

from modellint.rules.layers import (
    LayerAttributeTypo,
    RecurrentDropoutOneLayer,
    WrappedModelAttribute,
)
from modellint.static.kinds import LAYER_ATTRIBUTES, MODULE_ATTRIBUTES, WRAPPER_ATTRIBUTES
from modellint.testing import lint_text

HEADER = "import torch\nimport torch.nn as nn\n\n"


def lines(source, rule):
    return [f.line for f in lint_text(source, [rule])]


# -- ML110 ------------------------------------------------------------------------------------


def test_one_layer_recurrent_dropout_is_reported_where_the_layer_is_built():
    source = HEADER + (
        "class Tagger(nn.Module):\n"
        "    def __init__(self, vocab, dim):\n"
        "        super().__init__()\n"
        "        self.embed = nn.Embedding(vocab, dim)\n"
        "        self.lstm = nn.LSTM(dim, dim, bidirectional=True, dropout=0.3)\n"
        "        self.deep = nn.LSTM(dim, dim, num_layers=3, dropout=0.3)\n"
    )
    [finding] = lint_text(source, [RecurrentDropoutOneLayer])
    assert finding.line == 8
    assert "LSTM(..., dropout=0.3)" in finding.message and "one layer" in finding.message


def test_a_computed_layer_count_or_a_zero_dropout_is_not_reported():
    assert lines(HEADER + "rnn = nn.GRU(4, 4, num_layers=layers, dropout=0.5)\n",
                 RecurrentDropoutOneLayer) == []
    assert lines(HEADER + "rnn = nn.GRU(4, 4, dropout=0)\n", RecurrentDropoutOneLayer) == []
    assert lines(HEADER + "rnn = nn.GRU(4, 4, num_layers=2.0, dropout=0.5)\n",
                 RecurrentDropoutOneLayer) == []


# -- ML111 ------------------------------------------------------------------------------------


def test_a_misspelt_weight_names_the_real_attribute():
    source = HEADER + "fc = nn.Linear(2, 3)\nw = fc.weights\nk = nn.Conv2d(1, 1, 3).kernal_size\n"
    weights, kernel = lint_text(source, [LayerAttributeTypo])
    assert (weights.line, kernel.line) == (5, 6)
    assert "`nn.Linear`" in weights.message and "did you mean `weight`" in weights.message
    assert "did you mean `kernel_size`" in kernel.message


def test_an_assignment_to_a_misspelt_attribute_is_reported_and_its_later_reads_are_not():
    source = HEADER + (
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(2, 3)\n"
        "        self.fc.weights = nn.Parameter(torch.ones(3, 2))\n"
        "\n"
        "    def forward(self, x):\n"
        "        return x @ self.fc.weights.t()\n"
    )
    assert lines(source, LayerAttributeTypo) == [8]


def test_attributes_of_stacked_and_bidirectional_recurrent_layers_are_known():
    source = HEADER + ("rnn = nn.LSTM(4, 4, num_layers=3, bidirectional=True)\n"
                       "a = rnn.weight_ih_l2_reverse\nb = rnn.bias_hh_l1\n")
    assert lines(source, LayerAttributeTypo) == []


def test_the_layer_attribute_tables_match_the_installed_torch():
    nn = pytest.importorskip("torch.nn")
    module = nn.Module()
    public = {name for name in dir(module) if not name.startswith("_")}
    assert public == MODULE_ATTRIBUTES, sorted(public ^ MODULE_ATTRIBUTES)
    samples = {
        "Linear": (2, 3), "Bilinear": (2, 2, 3), "Conv1d": (2, 3, 3), "Conv2d": (2, 3, 3),
        "Conv3d": (2, 3, 3), "ConvTranspose1d": (2, 3, 3), "ConvTranspose2d": (2, 3, 3),
        "ConvTranspose3d": (2, 3, 3), "BatchNorm1d": (3,), "BatchNorm2d": (3,),
        "BatchNorm3d": (3,), "SyncBatchNorm": (3,), "LayerNorm": (3,), "GroupNorm": (1, 3),
        "InstanceNorm1d": (3,), "InstanceNorm2d": (3,), "InstanceNorm3d": (3,),
        "Embedding": (3, 2), "EmbeddingBag": (3, 2), "RNN": (2, 3), "LSTM": (2, 3),
        "GRU": (2, 3), "RNNCell": (2, 3), "LSTMCell": (2, 3), "GRUCell": (2, 3),
        "MultiheadAttention": (4, 2), "PReLU": (),
    }
    assert set(samples) == set(LAYER_ATTRIBUTES)
    for name, args in samples.items():
        layer = getattr(nn, name)(*args)
        found = {a for a in dir(layer) if not a.startswith("_")} - public
        assert found == LAYER_ATTRIBUTES[name], (name, sorted(found ^ LAYER_ATTRIBUTES[name]))


def test_the_wrapper_attribute_tables_cover_what_the_wrappers_set():
    nn = pytest.importorskip("torch.nn")
    from torch.nn.parallel import DistributedDataParallel

    public = set(MODULE_ATTRIBUTES)
    for name, cls in (("DataParallel", nn.DataParallel),
                      ("DistributedDataParallel", DistributedDataParallel)):
        own = set(dir(cls)) | set(re.findall(r"self\.(\w+)\s*(?::[^=\n]*)?=", inspect.getsource(cls)))
        expected = {a for a in own if not a.startswith("_")} - public
        assert expected <= WRAPPER_ATTRIBUTES[name], (name, sorted(expected - WRAPPER_ATTRIBUTES[name]))


# -- ML112 ------------------------------------------------------------------------------------


def test_a_submodule_read_through_data_parallel_is_reported_with_the_module_path():
    source = HEADER + (
        "def main(model, args):\n"
        "    if args.n_gpu > 1:\n"
        "        model = torch.nn.DataParallel(model)\n"
        "    head = model.classifier\n"
        "    model.train()\n"
        "    torch.save(model.module.state_dict(), 'm.pt')\n"
    )
    [finding] = lint_text(source, [WrappedModelAttribute])
    assert finding.line == 7
    assert "`model.module.classifier`" in finding.message


def test_distributed_data_parallel_from_its_public_path_is_known():
    source = HEADER + (
        "import torch.nn.parallel\n\n"
        "def main(model, rank):\n"
        "    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])\n"
        "    with model.no_sync():\n"
        "        pass\n"
        "    model.module.fc.reset_parameters()\n"
        "    model.fc.reset_parameters()\n"
    )
    assert lines(source, WrappedModelAttribute) == [11]


def test_a_model_never_wrapped_is_not_reported():
    source = HEADER + "def main(model):\n    model = model.cuda()\n    print(model.fc)\n"
    assert lines(source, WrappedModelAttribute) == []


def test_reads_on_the_other_branch_of_the_wrapping_if_are_not_reported():
    # layumi/Person_reID_baseline_pytorch's train.py shape: `.module` under the wrapping
    # branch, the plain model under `else`; also through an elif chain
    source = HEADER + (
        "def main(model, gpus, distributed):\n"
        "    if distributed:\n"
        "        model = nn.parallel.DistributedDataParallel(model)\n"
        "        params = model.module.head.parameters()\n"
        "    elif len(gpus) > 1:\n"
        "        model = nn.DataParallel(model)\n"
        "        params = model.module.head.parameters()\n"
        "    else:\n"
        "        params = model.head.parameters()\n"
        "    last = model.head\n"
        "    return params, last\n"
    )
    assert lines(source, WrappedModelAttribute) == [13]
