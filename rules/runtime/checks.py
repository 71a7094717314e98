"""The built-in runtime checks, registered as one plugin: one class per rule code.

`modellint.rules.runtime.forward` (ML701, ML702, ML704, ML705), `.training` (ML703, ML706),
`.memory` (ML707) and `.state` (ML505) hold the rules found only at runtime;
`.registration` the runtime halves of the registration rules (ML101-ML108), documented by
their static classes. Each reads the record of one model run (`modellint.runtime.run`).
"""

from __future__ import annotations

from modellint.hookspecs import hookimpl
from modellint.rules.runtime.forward import (
    DeviceMismatch,
    EvalNondeterministic,
    ForwardFailed,
    NonFiniteOutput,
)
from modellint.rules.runtime.memory import MemoryExceedsTarget
from modellint.rules.runtime.registration import (
    ModuleBuiltInForwardAtRuntime,
    RepeatedModuleAtRuntime,
    SuperInitLateAtRuntime,
    UndefinedAttributeAtRuntime,
    UnregisteredModuleAtRuntime,
    UnregisteredParameterAtRuntime,
    UnregisteredTensorAtRuntime,
)
from modellint.rules.runtime.state import StateNotInStateDict
from modellint.rules.runtime.training import GradientAtInit, UnusedParameters

RULES = [StateNotInStateDict, ForwardFailed, DeviceMismatch, UnusedParameters, NonFiniteOutput,
         EvalNondeterministic, GradientAtInit, MemoryExceedsTarget]
RUNTIME_HALVES = [UnregisteredModuleAtRuntime, UnregisteredParameterAtRuntime,
                  UnregisteredTensorAtRuntime, SuperInitLateAtRuntime,
                  UndefinedAttributeAtRuntime, ModuleBuiltInForwardAtRuntime,
                  RepeatedModuleAtRuntime]


@hookimpl
def modellint_add_rules():
    return [*RULES, *RUNTIME_HALVES]
