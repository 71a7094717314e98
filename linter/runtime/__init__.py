"""The runtime pass: build each model, inspect its registration, trace it with hooks.

Nothing here is imported by the static pass; torch is imported only by the modules that build
and trace models (`build`, `tracer`, `checks`, `worker`, `api`), and only when they run.
"""
