"""Running a runtime rule's own `valid`/`invalid` examples: each is the source of a file whose
model (its last top-level module class that no other class of the file uses) is built and
checked in this process, by that rule's check alone."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from modellint.runtime.run import Raw

if TYPE_CHECKING:
    from modellint.rule import RuntimeCheck


def check_example(source: str, check: type[RuntimeCheck], options: Mapping[str, Any] | None = None) -> list[Raw]:
    """The findings of `check` (a runtime check class) on the model `source` defines.
    `options`: `inputs` (specs as in `[[tool.modellint.runtime.models]]`), `kwargs`,
    `target_gpu_memory` ("80GB"), `device`."""
    from torch import nn

    from modellint.runtime.build import import_file
    from modellint.runtime.engine import ModelCheck
    from modellint.runtime.specs import candidate_classes, normalise_inputs

    options = dict(options or {})
    folder = tempfile.mkdtemp(prefix="modellint-example-")
    path = os.path.join(folder, f"example_{check.code.lower()}.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(source)
    module = import_file(path)
    models = [getattr(module, name) for name in candidate_classes(source)
              if isinstance(getattr(module, name, None), type)
              and issubclass(getattr(module, name), nn.Module)]
    if not models:
        raise ValueError(f"the example of {check.code} defines no module class")
    model = models[-1]
    memory = options.get("target_gpu_memory")
    if memory is not None:
        from modellint.runtime.memory import parse_size

        memory = parse_size(memory)
    inputs = options.get("inputs")
    outcome = ModelCheck(
        factory=model, checks=[check()], enabled=[check.code], user_roots=[folder],
        label=model.__name__, kwargs=dict(options.get("kwargs") or {}),
        specs=normalise_inputs(inputs, "inputs") if inputs is not None else None,
        device=options.get("device", "cpu"), memory_target=memory,
    ).run()
    return [f for f in outcome.findings if f.code == check.code]
