"""modellint: a static-plus-runtime linter for PyTorch model code."""

from modellint.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl"]
