"""modellint: a static-plus-runtime linter for PyTorch model code."""

from modellint.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["__version__", "check_model", "check_optimizer", "hookimpl", "watch"]


def __getattr__(name: str):
    # the runtime API imports torch: only when it is used, never for the static pass
    if name in ("check_model", "check_optimizer"):
        from modellint.runtime import api

        return getattr(api, name)
    if name == "watch":
        from modellint.watching.session import watch

        return watch
    raise AttributeError(f"module 'modellint' has no attribute {name!r}")
