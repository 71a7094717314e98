"""The codes modellint reports about its own work rather than about the code it reads: the
`code` of the engine's rule classes (`modellint.rules.core`: ML000-ML002; `modellint.rules.run`:
ML003), which document them, and what the passes report them with. Kept apart from the rule
classes so that the passes need not import the rules (nor LibCST) to name them."""

# a file that does not parse (a statement, the notebook's JSON)
SYNTAX_ERROR = "ML000"
# modellint failed on a file or a model (a rule, a worker, a run check)
INTERNAL_ERROR = "ML001"
# the runtime pass could not check a model (its import, build or input failed)
NOT_CHECKED = "ML002"
# the script `modellint run` watched failed
SCRIPT_FAILED = "ML003"
