"""modellint: a static-plus-runtime linter for PyTorch model code."""

__version__ = "0.1.0"
__all__ = ["__version__", "check_model", "check_optimizer", "hookimpl", "watch"]


def __getattr__(name: str):
    # pluggy too only when a plugin asks for it (a warm `check` reads the plugin manifest)
    if name == "hookimpl":
        from modellint.hookspecs import hookimpl

        return hookimpl
    # the runtime API imports torch: only when it is used, never for the static pass
    if name in ("check_model", "check_optimizer"):
        from modellint.runtime import api

        return getattr(api, name)
    if name == "watch":
        from modellint.watching.session import watch

        return watch
    raise AttributeError(f"module 'modellint' has no attribute {name!r}")
