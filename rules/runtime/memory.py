"""Runtime check of the memory a training step needs: ML707."""

from __future__ import annotations

from modellint.rule import MEMORY, Invalid, RuntimeRule, Valid

HEADER = "import torch.nn as nn\n\n\n"
WIDE = (HEADER + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(1024, 1024)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n")


class MemoryExceedsTarget(RuntimeRule):
    """Training the model would need more device memory than `target-gpu-memory`.

    ## What it does
    When `target-gpu-memory` is configured (for example `"80GB"`), runs one train-mode forward
    on the model's input (on `meta` too, where nothing is allocated) and measures every tensor
    autograd saves for the backward pass. Parameters and buffers, their gradients, AdamW's two
    state tensors per trainable parameter and those traced activations are added up; when the
    sum exceeds the target, it reports the parts and the module with the largest activations.
    `modellint trace TARGET --memory` prints the same breakdown for another optimizer, dtype or
    batch size.

    ## Why is this bad?
    The training run will fail with an out-of-memory error on the target device, usually
    after the data pipeline, the launcher and the first checkpoint have already cost time.
    The sum is a lower bound: temporary buffers and the allocator come on top.

    ## Example
        # pyproject.toml: target-gpu-memory = "80GB"
        [[tool.modellint.runtime.models]]
        target = "model.py:Transformer"
        inputs = [{ shape = [64, 4096], dtype = "int64", low = 0, high = 32000 }]

    ## Use instead
        # a batch that fits (accumulate gradients to keep the effective batch size)
        inputs = [{ shape = [8, 4096], dtype = "int64", low = 0, high = 32000 }]
    """

    code = "ML707"
    name = "memory-exceeds-target"
    needs = frozenset({MEMORY})
    valid = [Valid(WIDE, {"target_gpu_memory": "1GB"})]
    invalid = [Invalid(WIDE, line=4, options={"target_gpu_memory": "1MB"})]

    def check(self, run) -> None:
        found, target = run.memory, run.memory_target
        if found is None or target is None or found.total <= target:
            return
        from modellint.rule import size_text

        batch = f" at batch {found.batch}" if found.batch is not None else ""
        top = [(p, b) for p, b in found.by_module if p and b > 0][:1]
        largest = (f"; the largest activations are `{top[0][0]}`'s ({size_text(top[0][1])})"
                   if top else "")
        run.report(self.code, f"training `{run.display_name}`{batch} (input "
                   f"{run.inputs}) needs about {size_text(found.total)} "
                   f"({found.parts_text()}, the activations traced), more than "
                   f"target-gpu-memory {size_text(target)}{largest}; lower the "
                   f"batch size, train in bfloat16, checkpoint activations or shard the "
                   f"optimizer state", run.root_location)
