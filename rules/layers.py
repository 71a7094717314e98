"""Layer structure (ML110-ML113): what torch's own layers are built with and answer to:
`dropout=` on a one-layer recurrent layer (ML110), a misspelt attribute of a torch layer
(ML111), attributes read through a `DataParallel`/`DistributedDataParallel` wrapper
(ML112), and a layer class called with tensors instead of being built (ML113). The layers'
attributes are tables in `modellint.static.kinds`."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import ClassVar

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    LAYER_ATTRIBUTES,
    MODULE,
    MODULE_ATTRIBUTES,
    WRAPPER_ATTRIBUTES,
    Invalid,
    Kind,
    LazyPattern,
    Severity,
    Site,
    StaticRule,
    argument,
    canonical,
    child_nodes,
    has_star_args,
    positional_args,
    scope_of,
    snippet,
    source_of,
)

HEADER = "import torch\nimport torch.nn as nn\n\n"

# -- ML110 ------------------------------------------------------------------------------------

RECURRENT_LAYERS = frozenset({"torch.nn.RNN", "torch.nn.LSTM", "torch.nn.GRU"})
# positions of `num_layers` and `dropout` among the positional parameters of RNN/LSTM/GRU
# (input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, ...)
_NUM_LAYERS_AT, _DROPOUT_AT = 2, 5


def _number(expr: cst.BaseExpression) -> float | None:
    """The value of a literal number (`1`, `0.5`, `-0.0`), else None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _number(expr.expression)
        return None if inner is None else -inner
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return float(expr.evaluated_value)
        except (ValueError, OverflowError):
            return None
    return None


class RecurrentDropoutOneLayer(StaticRule):
    """`dropout=` on a one-layer `nn.RNN`/`nn.LSTM`/`nn.GRU`: no dropout is applied.

    ## What it does
    Finds `nn.RNN`, `nn.LSTM` and `nn.GRU` built with a `dropout=` that is not a literal zero
    while `num_layers` is absent or a literal 1.

    ## Why is this bad?
    A recurrent layer applies its `dropout` between stacked layers only, "on the outputs of
    each layer except the last". With one layer there is no such place: the model trains
    without the regularisation its author asked for, and torch only warns once, at
    construction ("dropout option adds dropout after all but last recurrent layer, so
    non-zero dropout expects num_layers greater than 1").

    ## Example
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True, dropout=0.5)

    ## Use instead
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.dropout = nn.Dropout(0.5)  # applied to the LSTM's output in forward
    """

    code = "ML110"
    name = "recurrent-dropout-one-layer"
    needs = frozenset()
    severity = Severity.WARNING
    triggers = ("RNN", "LSTM", "GRU")
    valid: ClassVar = [
        HEADER + "rnn = nn.LSTM(8, 16, num_layers=2, dropout=0.5)\n",
        HEADER + "rnn = nn.GRU(8, 16, 2, dropout=0.5)\n",
        HEADER + "rnn = nn.LSTM(8, 16, dropout=0.0)\n",
        # the number of layers comes from the caller
        HEADER + "def build(n):\n    return nn.LSTM(8, 16, num_layers=n, dropout=0.3)\n",
        HEADER + "rnn = nn.LSTM(8, 16, **config)\n",
        # someone else's LSTM
        "import keras\n\nrnn = keras.layers.LSTM(16, dropout=0.5)\n",
    ]
    invalid: ClassVar = [
        Invalid(HEADER + "rnn = nn.LSTM(8, 16, batch_first=True, dropout=0.5)\n", line=4),
        Invalid(HEADER + "rnn = nn.GRU(8, 16, num_layers=1, dropout=args.dropout)\n", line=4),
        Invalid(HEADER + "rnn = torch.nn.RNN(8, 16, 1, True, True, 0.2)\n", line=4),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.call_name(node)
        if qualified not in RECURRENT_LAYERS or has_star_args(node):
            return
        positional = positional_args(node)
        dropout = argument(node, "dropout")
        dropout_value = dropout.value if dropout is not None else (
            positional[_DROPOUT_AT].value if len(positional) > _DROPOUT_AT else None)
        if dropout_value is None or _number(dropout_value) == 0:
            return
        layers = argument(node, "num_layers")
        layers_value = layers.value if layers is not None else (
            positional[_NUM_LAYERS_AT].value if len(positional) > _NUM_LAYERS_AT else None)
        if layers_value is not None and _number(layers_value) != 1:
            return
        layer = qualified.rsplit(".", 1)[1]
        self.report(
            node,
            f"`{layer}(..., dropout={snippet(dropout_value)})` with one layer applies no "
            "dropout: it acts only between stacked layers; pass `num_layers` > 1 or apply "
            f"`nn.Dropout` to the {layer}'s output",
        )


# -- ML111 ------------------------------------------------------------------------------------

# per-layer parameters of the recurrent layers: `weight_ih_l1`, `bias_hh_l0_reverse`, ...
_RECURRENT_WEIGHT = LazyPattern(r"(weight|bias)_(ih|hh|hr)_l\d+(_reverse)?")


_LAYER_ATTRIBUTE_NAMES = frozenset().union(*LAYER_ATTRIBUTES.values())
# attribute name -> whether it is close to an attribute of some layer other than itself
_NEAR_MISS: dict[str, bool] = {}
# ((letter, how many times it came so far) -> a bit, for the letters of the layers' attribute
# names; each name -> (its length, its bits)): made whole on first use, then only read
_LETTER_TABLES: tuple[dict[tuple[str, int], int], dict[str, tuple[int, int]]] | None = None


def _counted(word: str) -> Iterator[tuple[str, int]]:
    """(letter, how many times it came so far) for each letter of `word`."""
    seen: dict[str, int] = {}
    for letter in word:
        count = seen[letter] = seen.get(letter, 0) + 1
        yield letter, count


def _letters(word: str, positions: dict[tuple[str, int], int]) -> int:
    """The letters of `word` (counted with repeats) that attribute names have, as bits: the
    number of bits two words share is the number of letters they share."""
    bits = 0
    for counted in _counted(word):
        position = positions.get(counted)
        if position is not None:
            bits |= 1 << position
    return bits


def _letter_tables() -> tuple[dict[tuple[str, int], int], dict[str, tuple[int, int]]]:
    global _LETTER_TABLES
    if _LETTER_TABLES is None:
        names = sorted(_LAYER_ATTRIBUTE_NAMES)
        positions: dict[tuple[str, int], int] = {}
        for name in names:
            for counted in _counted(name):
                positions.setdefault(counted, len(positions))
        _LETTER_TABLES = positions, {name: (len(name), _letters(name, positions))
                                     for name in names}
    return _LETTER_TABLES


def _near_miss(attr: str) -> bool:
    """Whether `attr` could be a misspelling of some layer's attribute: when not, no layer
    can make it one, and what the value is need not be asked (most attribute reads).

    The attributes too long or too short for it, or that share too few letters with it, are
    left out before difflib is asked, by the bounds it applies itself (`real_quick_ratio`,
    `quick_ratio`), at a tenth of its cost."""
    near = _NEAR_MISS.get(attr)
    if near is None:
        positions, names = _letter_tables()
        size = len(attr)
        bits = _letters(attr, positions) if size <= 2 * _LONGEST_NAME else 0
        others = [name for name, (length, letters) in names.items()
                  if 2 * (bits & letters).bit_count() >= 0.75 * (size + length) and name != attr]
        near = _NEAR_MISS[attr] = bool(
            others and difflib.get_close_matches(attr, others, n=1, cutoff=0.75))
    return near


# a name more than twice this long is close to none (`real_quick_ratio` < 0.75 beyond 5/3)
_LONGEST_NAME = max(map(len, _LAYER_ATTRIBUTE_NAMES))


def _misspelt(attr: str, layer: str) -> str | None:
    """The attribute of the torch layer `layer` that `attr` is a misspelling of, or None."""
    known = LAYER_ATTRIBUTES[layer]
    if attr in known or _RECURRENT_WEIGHT.fullmatch(attr) or any(
            attr.startswith(f"{name}_") for name in known):
        return None  # `weight_g`, `weight_orig`, `bias_mask`: added by weight_norm, pruning ...
    close = difflib.get_close_matches(attr, sorted(known), n=1, cutoff=0.75)
    return close[0] if close else None


# attribute name -> whether it is a misspelling of an attribute of some layer of the table
_REPORTABLE: dict[str, bool] = {}


def _reportable(attr: str) -> bool:
    """Whether some layer would have `attr` reported: when none would, what the value is
    need not be asked (most attribute reads, `.weight` and `.bias` among them)."""
    found = _REPORTABLE.get(attr)
    if found is None:
        found = _REPORTABLE[attr] = _near_miss(attr) and any(
            _misspelt(attr, layer) is not None for layer in LAYER_ATTRIBUTES)
    return found


def _torch_layer(kind: Kind | None) -> str | None:
    """`Conv2d` when `kind` is an instance of a torch layer of the attribute table."""
    if kind is None or kind.kind != MODULE or not kind.cls:
        return None
    prefix, _, layer = kind.cls.rpartition(".")
    return layer if prefix == "torch.nn" and layer in LAYER_ATTRIBUTES else None


class _SiteTracker(StaticRule):
    """Keeps the innermost call (or assignment) being walked: the site at which the semantic
    model gives a name the value it holds there."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append(node)

    def leave_Call(self, original_node: cst.Call) -> None:
        self._calls.pop()

    def site_node(self) -> cst.CSTNode | None:
        """The innermost call being walked, else the assignment statement; None at neither."""
        if self._calls:
            return self._calls[-1]
        statement = self.context.current_statement
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            if isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                return small
        return None

    def kind_at(self, expr: cst.BaseExpression) -> Kind | None:
        """What `expr` holds where it is read, or None when that is not known (also when the
        read is at no call or assignment the semantic model has a site for)."""
        site = self.site_node()
        return None if site is None else self.context.semantic.kind_here(expr, site)


class LayerAttributeTypo(_SiteTracker):
    """A misspelt attribute of a torch layer (`.weights`, `.bais`, `.kernal_size`).

    ## What it does
    Finds attributes read from, or written to, a value the semantic model knows is a torch
    layer (`nn.Linear`, `nn.Conv2d`, `nn.BatchNorm2d`, `nn.LSTM`, `nn.Embedding`, ...) whose
    name is not one of the layer's attributes (a table read from torch) but is close to one:
    `fc.weights` for `fc.weight`, `conv.bais`, `conv.kernal_size`, `bn.running_variance`.

    ## Why is this bad?
    Read, the misspelt name raises `AttributeError` when the line first runs, often deep into
    a training run or only on the path that exports or re-initialises the model. Written,
    it raises nothing: `layer.weights = nn.Parameter(w)` adds a new attribute (a new
    parameter, even) beside the real `weight`, which keeps its random initialisation, so
    the "loaded" or "initialised" weights are silently not used.

    ## Example
        self.fc = nn.Linear(512, 10)
        nn.init.zeros_(self.fc.weights)

    ## Use instead
        self.fc = nn.Linear(512, 10)
        nn.init.zeros_(self.fc.weight)
    """

    code = "ML111"
    name = "layer-attribute-typo"
    needs = frozenset({"semantic"})
    triggers = ("nn",)
    valid: ClassVar = [
        HEADER + "fc = nn.Linear(2, 3)\nnn.init.zeros_(fc.weight)\nprint(fc.in_features)\n",
        HEADER + "conv = nn.Conv2d(3, 8, 3)\nk = conv.kernel_size\n",
        HEADER + "rnn = nn.LSTM(8, 16, num_layers=2)\nw = rnn.weight_ih_l1\n",
        # attributes that weight_norm and pruning add
        HEADER + "conv = nn.utils.weight_norm(nn.Conv2d(3, 8, 3))\ng = conv.weight_g\n",
        HEADER + "fc = nn.Linear(2, 3)\nprune(fc)\nm = fc.weight_mask\n",
        # a module method, and private attributes
        HEADER + "fc = nn.Linear(2, 3)\nfc.zero_grad()\ns = fc._parameters\n",
        # not a near miss of any attribute: the project's own attribute on the layer
        HEADER + "fc = nn.Linear(2, 3)\nfc.is_head = True\nprint(fc.is_head)\n",
        # what the value holds is not known
        HEADER + "def f(layer):\n    return layer.weights\n",
        # a project class whose own attribute it is
        HEADER + "class Mix(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.weights = nn.Parameter(torch.ones(3))\n\n"
        "m = Mix()\nprint(m.weights)\n",
    ]
    invalid: ClassVar = [
        Invalid(HEADER + "fc = nn.Linear(2, 3)\nnn.init.zeros_(fc.weights)\n", line=5),
        Invalid(HEADER + "class Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.conv = nn.Conv2d(3, 8, 3)\n"
                "        self.conv.bais.data.zero_()\n", line=8),
        Invalid(HEADER + "bn = nn.BatchNorm2d(8)\nbn.running_variance = torch.ones(8)\n", line=5),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._targets: set[int] = set()
        self._set: set[str] | None = None

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets.add(id(node.target))

    def _assigned(self, node: cst.Attribute) -> bool:
        return id(node) in self._targets

    def _set_names(self) -> set[str]:
        """The attribute names this file assigns to (`x.name = ...`, `setattr(x, "name", ...)`)."""
        if self._set is None:
            self._set = set(re.findall(r"\.(\w+)\s*=[^=]", self.context.source))
            self._set.update(re.findall(r"setattr\([^,]+,\s*[\"'](\w+)", self.context.source))
        return self._set

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = node.attr.value
        if attr.startswith("_") or attr in MODULE_ATTRIBUTES or not _reportable(attr):
            return
        value = node.value
        if type(value) is cst.Name and value.value == self.context.semantic.own_instance(
                self.context.current_function):
            return  # the method's own object: an instance of a class of this file, not torch's
        layer = _torch_layer(self.kind_at(value))
        if layer is None:
            return
        meant = _misspelt(attr, layer)
        if meant is None:
            return
        if not self._assigned(node) and attr in self._set_names():
            return  # the project sets an attribute of that name on its objects: its own
        owner = snippet(node.value)
        self.report(
            node,
            f"`{owner}` is an `nn.{layer}`, which has no attribute `{attr}`: did you mean "
            f"`{meant}`? (read, `{attr}` raises AttributeError; assigned, it adds a new "
            f"attribute and `{owner}.{meant}` stays as it was)",
        )


# -- ML112 ------------------------------------------------------------------------------------

_WRAPPER_CLASSES = frozenset({"torch.nn.DataParallel", "torch.nn.DistributedDataParallel"})


def _holds(container: cst.CSTNode, target: cst.CSTNode) -> bool:
    stack = [container]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        stack.extend(child_nodes(node))
    return False


def _apart(first: Site, second: Site) -> bool:
    """The two sites are on different branches of one `if`: never both run."""
    for one, other in ((first, second), (second, first)):
        for ancestor in one.ancestors:
            if (isinstance(ancestor, cst.If) and ancestor.orelse is not None
                    and _holds(ancestor.body, one.node) and _holds(ancestor.orelse, other.node)):
                return True
    return False


class WrappedModelAttribute(_SiteTracker):
    """An attribute of the wrapped model read through `DataParallel`/`DistributedDataParallel`.

    ## What it does
    Finds attributes read from a value the semantic model knows holds an `nn.DataParallel` or
    `DistributedDataParallel` wrapper (`model = nn.DataParallel(model)`, also when the
    wrapping is conditional) that are neither `nn.Module`'s own attributes nor the wrapper's:
    a submodule (`model.fc`), a method of the project's model (`model.generate(...)`), a
    hyper-parameter (`model.num_classes`). A read the function guards with `hasattr(model,
    "fc")` or `getattr(model, "fc", ...)`, and a read on the other branch of the `if` that
    wraps the model (`if n_gpu > 1: ... model.module.fc ... else: ... model.fc`), are not
    reported.

    ## Why is this bad?
    The wrapper holds the model as `model.module`; it forwards `model(x)` but not attribute
    reads, so `model.fc` raises `AttributeError: 'DataParallel' object has no attribute
    'fc'`. When the wrapping depends on the number of GPUs (`if torch.cuda.device_count() >
    1`), the script works on one GPU and fails on the cluster, usually after the first
    epoch, where the attribute is read for evaluation or saving.

    ## Example
        model = nn.DataParallel(model)
        optimizer = torch.optim.SGD(model.classifier.parameters(), lr=0.1)

    ## Use instead
        model = nn.DataParallel(model)
        optimizer = torch.optim.SGD(model.module.classifier.parameters(), lr=0.1)
    """

    code = "ML112"
    name = "wrapped-model-attribute"
    needs = frozenset({"scope", "semantic"})
    triggers = ("DataParallel",)
    valid: ClassVar = [
        HEADER + "def train(model):\n    model = nn.DataParallel(model)\n"
        "    opt = torch.optim.SGD(model.module.fc.parameters(), lr=0.1)\n",
        # nn.Module's own API and the wrapper's answer through it
        HEADER + "def train(model):\n    model = nn.DataParallel(model)\n"
        "    model.train()\n    torch.save(model.state_dict(), 'm.pt')\n"
        "    print(model.device_ids)\n",
        # unwrapped again before the read
        HEADER + "def train(model):\n    model = nn.DataParallel(model)\n    model = model.module\n"
        "    print(model.fc)\n",
        # asked first
        HEADER + "def train(model):\n    model = nn.DataParallel(model)\n"
        "    if hasattr(model, 'embeds'):\n        print(model.embeds)\n",
        # the other branch of the `if` that wraps it
        HEADER + "def train(model, gpus):\n    if len(gpus) > 1:\n"
        "        model = nn.DataParallel(model, device_ids=gpus)\n"
        "        head = model.module.fc\n    else:\n        head = model.fc\n"
        "    return head\n",
        # read before the wrapping
        HEADER + "def train(model):\n    head = list(model.fc.parameters())\n"
        "    model = nn.DataParallel(model)\n    return head\n",
    ]
    invalid: ClassVar = [
        Invalid(HEADER + "def train(model):\n    model = nn.DataParallel(model)\n"
                "    opt = torch.optim.SGD(model.fc.parameters(), lr=0.1)\n", line=6),
        Invalid(HEADER + "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
                "def train(model, rank):\n    model = DDP(model, device_ids=[rank])\n"
                "    out = model.generate(prompt)\n", line=8),
        Invalid(HEADER + "def train(model):\n    if torch.cuda.device_count() > 1:\n"
                "        model = nn.DataParallel(model)\n"
                "    print(model.num_classes)\n", line=7),
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = node.attr.value
        if attr.startswith("__") or attr in MODULE_ATTRIBUTES:
            return
        kind = self.kind_at(node.value)
        if kind is None or kind.kind != MODULE or not kind.cls:
            return
        prefix, _, wrapper = kind.cls.rpartition(".")
        if prefix != "torch.nn" or wrapper not in WRAPPER_ATTRIBUTES:
            return
        if attr in WRAPPER_ATTRIBUTES[wrapper]:
            return
        owner = snippet(node.value)
        if self._guarded(owner, attr) or self._never_wrapped_here(owner):
            return
        self.report(
            node,
            f"`{owner}` holds an `{wrapper}` wrapper, which does not forward attribute reads: "
            f"`{owner}.{attr}` raises AttributeError; read `{owner}.module.{attr}`",
        )


    def _never_wrapped_here(self, owner: str) -> bool:
        """Every wrapping of `owner` in this function is on another branch of an `if` than the
        read (`if n_gpu > 1: model = DataParallel(model) ... else: model.fc`)."""
        site_node = self.site_node()
        root = self.context.current_function or self.context.module_node
        if site_node is None or root is None:
            return False
        scope = scope_of(self.context, root)
        read = scope.site(site_node)
        if read is None:
            return False
        wraps = [
            a.site for a in scope.assigned(owner, read.order)
            if a.value is not None
            and canonical(self.context.call_name(a.value) or "") in _WRAPPER_CLASSES
        ]
        return bool(wraps) and all(_apart(read, wrap) for wrap in wraps)

    def _guarded(self, owner: str, attr: str) -> bool:
        """The function asks first whether the value has the attribute (`hasattr(model,
        "fc")`, `getattr(model, "fc", None)`): the read is then never reached through the
        wrapper."""
        scope = self.context.current_function
        text = source_of(scope) if scope is not None else self.context.source
        return re.search(rf"(has|get)attr\(\s*{re.escape(owner)}\s*,\s*['\"]{re.escape(attr)}['\"]",
                         text) is not None


# -- ML113 ------------------------------------------------------------------------------------

# activations whose constructor takes no positional argument
_NO_ARGUMENT_ACTIVATIONS = frozenset({
    "Sigmoid", "Tanh", "LogSigmoid", "Softsign", "Tanhshrink", "Mish", "SiLU",
})
_LITERALS = (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString,
             cst.FormattedString, cst.UnaryOperation)


def _torch_nn_class(qualified: str | None) -> str | None:
    """`CrossEntropyLoss` for `torch.nn.CrossEntropyLoss` (or `torch.nn.modules...`); else
    None."""
    if not qualified or not qualified.startswith("torch.nn."):
        return None
    parts = qualified.split(".")
    if len(parts) == 3 or (len(parts) == 5 and parts[2] == "modules"):
        return parts[-1] if parts[-1][:1].isupper() else None
    return None


def _value_like(expr: cst.BaseExpression) -> bool:
    """Not a literal, `None`, `True` or `False`: something that may be a tensor."""
    if isinstance(expr, _LITERALS):
        return False
    return not (isinstance(expr, cst.Name) and expr.value in ("None", "True", "False"))


class ModuleClassCalledWithTensors(StaticRule):
    """A `torch.nn` class called with tensors instead of being built, then called.

    ## What it does
    Finds a loss class of `torch.nn` called with two or more positional arguments that are
    not literals (`nn.CrossEntropyLoss(out, y)`, `nn.NLLLoss(log_probs, target)`), and an
    activation class whose constructor takes no positional argument called with one
    (`nn.Sigmoid(x)`, `nn.Tanh(h)`).

    ## Why is this bad?
    `nn.CrossEntropyLoss(out, y)` does not compute a loss: it builds a loss module whose
    `weight` is `out` and whose `size_average` is `y`, and returns the module. The code then
    fails further on (`'CrossEntropyLoss' object has no attribute 'backward'`), or, when the
    module is only logged or compared, silently does nothing. `nn.Sigmoid(x)` raises a
    `TypeError`: the class takes no tensor.

    ## Example
        loss = nn.CrossEntropyLoss(outputs, labels)
        probs = nn.Sigmoid(logits)

    ## Use instead
        criterion = nn.CrossEntropyLoss()
        loss = criterion(outputs, labels)
        probs = torch.sigmoid(logits)
    """

    code = "ML113"
    name = "module-class-called-with-tensors"
    needs = frozenset()
    severity = Severity.ERROR
    triggers = ("Loss", "Sigmoid", "Tanh", "Softsign", "Mish", "SiLU")
    valid: ClassVar = [
        HEADER + "criterion = nn.CrossEntropyLoss()\nloss = criterion(out, y)\n",
        HEADER + "loss = nn.CrossEntropyLoss()(out, y)\n",
        # class weights are the constructor's first argument
        HEADER + "criterion = nn.CrossEntropyLoss(class_weights)\n",
        HEADER + "criterion = nn.CrossEntropyLoss(weights, None, -1)\n",
        HEADER + "criterion = nn.NLLLoss(reduction='sum')\n",
        HEADER + "act = nn.Sigmoid()\nprobs = act(logits)\n",
        HEADER + "probs = torch.sigmoid(logits)\n",
        # ReLU(True) is `inplace=True`
        HEADER + "act = nn.ReLU(True)\n",
        # a class of the project with the same name
        "class CrossEntropyLoss:\n    def __init__(self, out, y):\n        self.v = out, y\n\n"
        "loss = CrossEntropyLoss(out, y)\n",
    ]
    invalid: ClassVar = [
        Invalid(HEADER + "loss = nn.CrossEntropyLoss(outputs, labels)\n", line=4),
        Invalid("from torch.nn import NLLLoss\n\nloss = NLLLoss(model(x), target)\n", line=3),
        Invalid(HEADER + "class Net(nn.Module):\n"
                "    def forward(self, x):\n"
                "        return torch.nn.Sigmoid(self.fc(x))\n", line=6),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        cls = _torch_nn_class(self.context.call_name(node))
        if cls is None or has_star_args(node):
            return
        positional = positional_args(node)
        if cls.endswith("Loss"):
            if len(positional) < 2 or not all(_value_like(a.value) for a in positional[:2]):
                return
            operands = ", ".join(source_of(a.value) for a in positional[:2])
            message = (f"`{cls}(...)` builds a loss module (its positional arguments are "
                       "`weight`, `size_average`...), it does not compute the loss; build it "
                       f"once, then call it: `{cls}()({operands})`")
        elif cls in _NO_ARGUMENT_ACTIVATIONS:
            if not positional:
                return
            function = (f"torch.{cls.lower()}" if cls in ("Sigmoid", "Tanh")
                        else f"torch.nn.functional.{cls.lower()}")
            message = (f"`{cls}` is a module class and takes no tensor; call an instance "
                       f"(`{cls}()(x)`) or the function (`{function}(x)`)")
        else:
            return
        self.report(node, message)


@hookimpl
def modellint_add_rules():
    return [RecurrentDropoutOneLayer, LayerAttributeTypo, WrappedModelAttribute,
            ModuleClassCalledWithTensors]
