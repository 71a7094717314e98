"""What a value is, for the semantic model: the `Kind` of a value and the tables of torch's own
classes and functions (which layers behave differently in train and eval mode, which output
probabilities, which losses expect logits, which schedulers step per epoch).

These tables are the static pass's knowledge of torch: it never imports torch. A test checks
the scheduler table against the `torch.optim.lr_scheduler` of the installed torch.
"""

from __future__ import annotations

from dataclasses import replace

from modellint.records import record

MODULE = "module"
TENSOR = "tensor"
OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
DATALOADER = "dataloader"
# a plain function that computes a loss (`F.cross_entropy`, a project's `def loss_fn`)
FUNCTION = "function"
# what iterating over `model.parameters()`, `optimizer.param_groups`, `model.modules()` gives
PARAMETERS = "parameters"
PARAM_GROUPS = "param_groups"
PARAM_GROUP = "param_group"
MODULES = "modules"
# a tuple or list of values (`return validity, label`), each known or not
TUPLE = "tuple"
# a dict (`{"G": opt_g, "D": opt_d}`): its values in `items`, their string keys in `keys`
DICT = "dict"


@record(frozen=True)
class Kind:
    """What a value holds, as far as it is known. Fields that do not apply, or are not known,
    are None.

    - `kind`: one of MODULE, TENSOR, OPTIMIZER, SCHEDULER, DATALOADER, FUNCTION, ...
    - `cls`: the qualified class (`torch.nn.Linear`, `models.Net` for a project class).
    - `mode`: a module: True when it (or a layer inside it) behaves differently in train and
      eval mode (dropout, batch norm, instance norm with running statistics), False when known
      not to (a loss, a softmax, a linear layer), None when unknown.
    - `outputs`: a module: its output is already `softmax`, `log_softmax` or `sigmoid`
      output (its last layer, or its `forward`'s return); a tensor: it is that output.
    - `loss`: a loss module or function: the input it expects, named by the torch loss that
      expects it: `cross_entropy` (logits), `nll_loss` (log-probabilities),
      `binary_cross_entropy_with_logits` (logits of a sigmoid), or `other`.
    - `step`: a scheduler: `epoch` (its arguments count epochs: step once per epoch),
      `batch` (meant to step per batch) or `either`.
    - `leaf`: a tensor: a leaf that requires grad (a parameter, `requires_grad=True`).
    - `parameter`: a tensor: an `nn.Parameter`.
    - `items`: a tuple: the kind of each element (None where not known).
    - `result`: a module whose `forward` returns a tuple: that tuple (what calling it gives).
    - `element`: a container (a tuple, list, dict, comprehension, `nn.ModuleList`,
      `nn.ModuleDict`, `nn.Sequential`): what every element (a dict's every value) is, when
      they are all known and agree (`index.join`); None when not known.
    - `keys`: a dict: the string key of each of `items` (None for a key that is not one).
    """

    kind: str
    cls: str | None = None
    mode: bool | None = None
    outputs: str | None = None
    loss: str | None = None
    step: str | None = None
    leaf: bool = False
    parameter: bool = False
    items: tuple[Kind | None, ...] | None = None
    result: Kind | None = None
    element: Kind | None = None
    keys: tuple[str | None, ...] | None = None

    def but(self, **changes) -> Kind:
        return replace(self, **changes)


PARAMETER = Kind(TENSOR, cls="torch.nn.Parameter", leaf=True, parameter=True)
# the classes that build one
PARAMETER_NAMES = frozenset(
    {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.UninitializedParameter"}
)
SOME_MODULE = Kind(MODULE)

# -- torch.nn ---------------------------------------------------------------------------------

NN_NON_MODULES = frozenset({"Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer"})
# layers whose forward differs between train() and eval() whatever their arguments
MODE_LAYERS = frozenset({
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
    "LazyBatchNorm3d", "SyncBatchNorm", "RReLU",
})
# ... only with a non-zero `dropout=` (the default after the name)
DROPOUT_ARGUMENT = {
    "RNN": 0, "LSTM": 0, "GRU": 0, "MultiheadAttention": 0,
    "Transformer": 0.1, "TransformerEncoderLayer": 0.1, "TransformerDecoderLayer": 0.1,
}
# ... only with `track_running_stats=True`
INSTANCE_NORMS = frozenset({
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d",
    "LazyInstanceNorm2d", "LazyInstanceNorm3d",
})
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
# methods that change what a container holds (a list's, a dict's, an `nn.ModuleList`'s)
MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "pop",
                      "remove", "clear", "add_module", "register_module", "__setitem__"})
# layers with weights, running statistics or train/eval behaviour (every other public layer:
# activations, pooling, padding, upsampling, losses, holds no state)
STATEFUL_LAYERS = frozenset({
    "Linear", "LazyLinear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
    "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
    "LazyBatchNorm3d", "SyncBatchNorm", "LayerNorm", "GroupNorm",
    "RMSNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d",
    "LazyInstanceNorm2d", "LazyInstanceNorm3d", "Embedding",
    "EmbeddingBag", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "RNNBase",
    "RNNCellBase", "MultiheadAttention", "Transformer", "TransformerEncoder",
    "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer", "PReLU",
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "RReLU", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "AdaptiveLogSoftmaxWithLoss",
})
# the public torch.nn classes that derive from another public torch.nn class (other than
# Module): `isinstance(nn.LazyLinear(3), nn.Linear)` is True. Every other public layer is an
# instance of no other public layer. A test checks this against the installed torch.
NN_BASES = {
    "GRU": ("RNNBase",), "LSTM": ("RNNBase",), "RNN": ("RNNBase",),
    "GRUCell": ("RNNCellBase",), "LSTMCell": ("RNNCellBase",), "RNNCell": ("RNNCellBase",),
    "LazyConv1d": ("Conv1d",), "LazyConv2d": ("Conv2d",), "LazyConv3d": ("Conv3d",),
    "LazyConvTranspose1d": ("ConvTranspose1d",), "LazyConvTranspose2d": ("ConvTranspose2d",),
    "LazyConvTranspose3d": ("ConvTranspose3d",), "LazyLinear": ("Linear",),
    "NLLLoss2d": ("NLLLoss",), "ReLU6": ("Hardtanh",),
    "UpsamplingBilinear2d": ("Upsample",), "UpsamplingNearest2d": ("Upsample",),
    "ZeroPad1d": ("ConstantPad1d",), "ZeroPad2d": ("ConstantPad2d",),
    "ZeroPad3d": ("ConstantPad3d",),
}
# take layers built elsewhere: their mode is that of the layer, unknown here
WRAPPERS = frozenset({"TransformerEncoder", "TransformerDecoder", "DataParallel",
                      "DistributedDataParallel"})
ACTIVATION_MODULES = {"Softmax": "softmax", "Softmax2d": "softmax", "LogSoftmax": "log_softmax",
                      "Sigmoid": "sigmoid"}
LOSS_MODULES = {"CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss",
                "BCEWithLogitsLoss": "binary_cross_entropy_with_logits"}
LOSS_FUNCTIONS = {
    "torch.nn.functional.cross_entropy": "cross_entropy",
    "torch.nn.functional.nll_loss": "nll_loss",
    "torch.nn.functional.binary_cross_entropy_with_logits": "binary_cross_entropy_with_logits",
}
ACTIVATION_FUNCTIONS = {
    "torch.softmax": "softmax", "torch.nn.functional.softmax": "softmax",
    "torch.special.softmax": "softmax", "torch.log_softmax": "log_softmax",
    "torch.nn.functional.log_softmax": "log_softmax", "torch.special.log_softmax": "log_softmax",
    "torch.sigmoid": "sigmoid", "torch.nn.functional.sigmoid": "sigmoid",
    "torch.special.expit": "sigmoid",
}
# tensor methods that give an activation's output
ACTIVATION_METHODS = {"softmax": "softmax", "log_softmax": "log_softmax", "sigmoid": "sigmoid"}
# the layers that normalize along a `dim` (softmax-like)
SOFTMAX_MODULES = frozenset(f"torch.nn.{name}" for name in ("Softmax", "LogSoftmax", "Softmin"))

# -- torch.optim.lr_scheduler -----------------------------------------------------------------

# Every scheduler class of torch.optim.lr_scheduler (torch 2.1 and later): how often it is
# meant to step. `epoch`: its arguments count epochs in the documented use (stepping it per
# batch decays the learning rate len(loader) times too fast, unless the arguments are computed
# from iteration counts); `batch`: meant per batch; `either`: both are common (warm-ups, lambda
# schedules, `step(epoch + i / n)`), or it depends on the schedulers it chains.
SCHEDULERS = {
    "LambdaLR": "either",
    "MultiplicativeLR": "epoch",
    "StepLR": "epoch",
    "MultiStepLR": "epoch",
    "ConstantLR": "either",
    "LinearLR": "either",
    "ExponentialLR": "epoch",
    "SequentialLR": "either",
    "PolynomialLR": "epoch",
    "CosineAnnealingLR": "epoch",
    "ChainedScheduler": "either",
    "ReduceLROnPlateau": "epoch",
    "CyclicLR": "batch",
    "CosineAnnealingWarmRestarts": "either",
    "OneCycleLR": "batch",
    # base classes
    "LRScheduler": "either",
    "_LRScheduler": "either",
}
# every scheduler whose arguments count epochs
EPOCH_SCHEDULERS = frozenset(name for name, step in SCHEDULERS.items() if step == "epoch")
# epoch schedulers whose period argument is often computed in iterations: they count as
# per-epoch only when that argument names epochs (`CosineAnnealingLR(opt, args.epochs)`)
PERIOD_ARGUMENT = {"CosineAnnealingLR": (1, "T_max"), "PolynomialLR": (1, "total_iters")}

# -- autograd ---------------------------------------------------------------------------------

# the context managers (and decorators) that turn gradients off
NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
INFERENCE_MODE = frozenset(
    {"torch.inference_mode", "torch.autograd.inference_mode",
     "torch.autograd.grad_mode.inference_mode"}
)

# -- tensors ----------------------------------------------------------------------------------

# torch functions that return a new tensor
TENSOR_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
    "randint", "randperm", "arange", "linspace", "logspace", "eye", "zeros_like",
    "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
    "Tensor", "FloatTensor", "LongTensor", "DoubleTensor", "IntTensor", "BoolTensor",
    "ByteTensor", "HalfTensor", "triu", "tril", "stack", "cat", "normal", "bernoulli",
})
# torch functions of tensors that return a tensor
TENSOR_FUNCTIONS = frozenset({
    "sqrt", "rsqrt", "exp", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh",
    "abs", "clamp", "clip", "matmul", "mm", "bmm", "outer", "pow", "square", "mean", "sum",
    "prod", "cumsum", "cumprod", "flip", "roll", "reshape", "transpose", "permute",
    "unsqueeze", "squeeze", "diag", "einsum", "where", "maximum", "minimum", "erf", "floor",
    "ceil", "round", "reciprocal", "neg", "sign", "kron", "cdist", "meshgrid",
})
# tensor methods that return a tensor (no longer a leaf)
TENSOR_METHODS = frozenset({
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "long", "int", "bool",
    "view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "permute", "transpose",
    "contiguous", "clone", "sqrt", "exp", "log", "abs", "clamp", "pow", "mean", "sum", "t",
    "flatten", "type_as", "mul", "add", "div", "sub", "detach", "narrow", "select",
    "index_select", "masked_fill", "argmax", "argmin", "norm", "cumsum",
    "expand_as", "view_as", "reshape_as", "squeeze_", "unsqueeze_",
})
# ... of which those that keep the values (a device, a dtype, a shape: a softmax's output stays
# probabilities)
VALUE_METHODS = frozenset({
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "contiguous", "clone",
    "detach", "view", "reshape", "squeeze", "unsqueeze", "view_as", "reshape_as", "flatten",
    "permute", "transpose", "type_as", "t", "squeeze_", "unsqueeze_",
})
# tensor attributes that are tensors
TENSOR_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
# the deprecated wrapper that returns the tensor it is given
VARIABLES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# module methods that return the module itself (`model.to(device).train()` sets the mode of
# `model`); a test checks them against the installed torch
RETURNS_SELF = frozenset({
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "type", "train", "eval",
    "requires_grad_", "apply", "to_empty", "share_memory", "xpu", "ipu", "mtia",
})
# nn.Module's own methods that torch itself calls (through `module(x)`, `state_dict()`,
# `load_state_dict()`, `to()`, `repr()`): a project module's override of one is called by
# torch too, not only where the project calls it
MODULE_CALLS = frozenset({
    "forward", "extra_repr", "_load_from_state_dict", "_save_to_state_dict", "_apply",
    "_get_name", "_named_members", "state_dict", "load_state_dict", "train", "eval",
    "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "register_buffer", "register_parameter",
    "add_module", "to", "cuda", "cpu", "zero_grad", "apply", "__call__", "_call_impl",
    "_conv_forward", "reset_parameters", "_reset_parameters", "get_extra_state",
    "set_extra_state", "_register_state_dict_hook",
})
OPTIMIZER_NOT = ("torch.optim.lr_scheduler", "torch.optim.swa_utils", "torch.optim.Optimizer",
                 "torch.optim.optimizer")
DATALOADERS = frozenset({"torch.utils.data.DataLoader",
                         "torch.utils.data.dataloader.DataLoader"})


def combine_modes(modes) -> bool | None:
    """Any True -> True; else any unknown -> None; else False."""
    unknown = False
    for mode in modes:
        if mode:
            return True
        if mode is None:
            unknown = True
    return None if unknown else False

# -- layer attributes ---------------------------------------------------------------------------

# the public attributes of every `nn.Module` (methods and `training`), and those each of these
# layers adds (its parameters, buffers, constructor arguments and methods; recurrent layers
# also have `weight_ih_l<k>`, `bias_hh_l<k>_reverse`, ... per layer and direction). ML111 reads
# them; a test checks them against the installed torch.
MODULE_ATTRIBUTES = frozenset({
    "T_destination", "add_module", "apply", "bfloat16", "buffers", "call_super_init",
    "children", "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr",
    "float", "forward", "get_buffer", "get_extra_state", "get_parameter", "get_submodule",
    "half", "ipu", "load_state_dict", "modules", "mtia", "named_buffers", "named_children",
    "named_modules", "named_parameters", "parameters", "register_backward_hook",
    "register_buffer", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook",
    "register_module", "register_parameter", "register_state_dict_post_hook",
    "register_state_dict_pre_hook", "requires_grad_", "set_extra_state", "set_submodule",
    "share_memory", "state_dict", "to", "to_empty", "train", "training", "type", "xpu",
    "zero_grad"
})
# the attributes that several of the layers below have alike
_CONVOLUTION = frozenset({
    "bias", "dilation", "groups", "in_channels", "kernel_size", "out_channels",
    "output_padding", "padding", "padding_mode", "reset_parameters", "stride", "transposed",
    "weight"
})
_NORMALIZATION = frozenset({
    "affine", "bias", "eps", "momentum", "num_batches_tracked", "num_features",
    "reset_parameters", "reset_running_stats", "running_mean", "running_var",
    "track_running_stats", "weight"
})
_RECURRENT_CELL = frozenset({
    "bias", "bias_hh", "bias_ih", "hidden_size", "input_size", "reset_parameters",
    "weight_hh", "weight_ih"
})
LAYER_ATTRIBUTES = {
    "Linear": frozenset({
        "bias", "in_features", "out_features", "reset_parameters", "weight"
    }),
    "Bilinear": frozenset({
        "bias", "in1_features", "in2_features", "out_features", "reset_parameters", "weight"
    }),
    "Conv1d": _CONVOLUTION,
    "Conv2d": _CONVOLUTION,
    "Conv3d": _CONVOLUTION,
    "ConvTranspose1d": _CONVOLUTION,
    "ConvTranspose2d": _CONVOLUTION,
    "ConvTranspose3d": _CONVOLUTION,
    "BatchNorm1d": _NORMALIZATION,
    "BatchNorm2d": _NORMALIZATION,
    "BatchNorm3d": _NORMALIZATION,
    "SyncBatchNorm": frozenset({
        "affine", "bias", "convert_sync_batchnorm", "eps", "momentum", "num_batches_tracked",
        "num_features", "process_group", "reset_parameters", "reset_running_stats",
        "running_mean", "running_var", "track_running_stats", "weight"
    }),
    "LayerNorm": frozenset({
        "bias", "elementwise_affine", "eps", "normalized_shape", "reset_parameters", "weight"
    }),
    "GroupNorm": frozenset({
        "affine", "bias", "eps", "num_channels", "num_groups", "reset_parameters", "weight"
    }),
    "InstanceNorm1d": _NORMALIZATION,
    "InstanceNorm2d": _NORMALIZATION,
    "InstanceNorm3d": _NORMALIZATION,
    "Embedding": frozenset({
        "embedding_dim", "from_pretrained", "max_norm", "norm_type", "num_embeddings",
        "padding_idx", "reset_parameters", "scale_grad_by_freq", "sparse", "weight"
    }),
    "EmbeddingBag": frozenset({
        "embedding_dim", "from_pretrained", "include_last_offset", "max_norm", "mode",
        "norm_type", "num_embeddings", "padding_idx", "reset_parameters", "scale_grad_by_freq",
        "sparse", "weight"
    }),
    "RNN": frozenset({
        "all_weights", "batch_first", "bias", "bias_hh_l0", "bias_ih_l0", "bidirectional",
        "check_forward_args", "check_hidden_size", "check_input", "dropout",
        "flatten_parameters", "get_expected_hidden_size", "hidden_size", "input_size", "mode",
        "nonlinearity", "num_layers", "permute_hidden", "proj_size", "reset_parameters",
        "weight_hh_l0", "weight_ih_l0"
    }),
    "LSTM": frozenset({
        "all_weights", "batch_first", "bias", "bias_hh_l0", "bias_ih_l0", "bidirectional",
        "check_forward_args", "check_hidden_size", "check_input", "dropout",
        "flatten_parameters", "get_expected_cell_size", "get_expected_hidden_size",
        "hidden_size", "input_size", "mode", "num_layers", "permute_hidden", "proj_size",
        "reset_parameters", "weight_hh_l0", "weight_ih_l0"
    }),
    "GRU": frozenset({
        "all_weights", "batch_first", "bias", "bias_hh_l0", "bias_ih_l0", "bidirectional",
        "check_forward_args", "check_hidden_size", "check_input", "dropout",
        "flatten_parameters", "get_expected_hidden_size", "hidden_size", "input_size", "mode",
        "num_layers", "permute_hidden", "proj_size", "reset_parameters", "weight_hh_l0",
        "weight_ih_l0"
    }),
    "RNNCell": frozenset({
        "bias", "bias_hh", "bias_ih", "hidden_size", "input_size", "nonlinearity",
        "reset_parameters", "weight_hh", "weight_ih"
    }),
    "LSTMCell": _RECURRENT_CELL,
    "GRUCell": _RECURRENT_CELL,
    "MultiheadAttention": frozenset({
        "add_zero_attn", "batch_first", "bias_k", "bias_v", "dropout", "embed_dim", "head_dim",
        "in_proj_bias", "in_proj_weight", "k_proj_weight", "kdim", "merge_masks", "num_heads",
        "out_proj", "q_proj_weight", "v_proj_weight", "vdim"
    }),
    "PReLU": frozenset({
        "init", "num_parameters", "reset_parameters", "weight"
    }),
}
# ... and of the data-parallel wrappers (ML112): what they answer themselves; anything else
# read through them (a submodule, a method of the wrapped model) raises AttributeError
WRAPPER_ATTRIBUTES = {
    "DataParallel": frozenset({
        "device_ids", "dim", "gather", "module", "output_device", "parallel_apply", "replicate",
        "scatter", "src_device_obj"
    }),
    "DistributedDataParallel": frozenset({
        "batched_grad_copy", "broadcast_bucket_size", "broadcast_buffers", "bucket_bytes_cap",
        "bucket_bytes_cap_default", "bucket_bytes_cap_list", "buffer_hook", "device",
        "device_ids", "device_mesh", "device_type", "dim", "find_unused_parameters",
        "forward_sync_buffers", "gather", "gradient_as_bucket_view", "is_multi_device_module",
        "join", "join_device", "join_hook", "join_process_group", "logger", "mixed_precision",
        "module", "modules_buffers", "named_module_buffers", "no_sync", "output_device",
        "parameters_to_ignore", "process_group", "reducer", "register_comm_hook",
        "require_backward_grad_sync", "require_forward_param_sync", "scatter",
        "skip_all_reduce_unused_params", "static_graph", "to_kwargs",
        "use_side_stream_for_tensor_copies", "will_sync_module_buffers"
    }),
}
