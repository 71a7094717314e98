"""The runtime pass: build each model, inspect its registration, trace it with hooks.

The static pass imports only `phases` and `sources` (the public rule API, `modellint.rule`,
re-exports them for runtime rules); torch is imported only by the modules that build
and trace models (`build`, `tracer`, `checks`, `worker`, `api`), and only when they run.
"""
