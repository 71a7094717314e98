"""The built-in reporters, registered as a plugin."""

from __future__ import annotations

from modellint.hookspecs import hookimpl


@hookimpl
def modellint_add_reporters():
    from modellint.report.github import GithubReporter
    from modellint.report.json import JsonReporter
    from modellint.report.sarif import SarifReporter
    from modellint.report.text import ConciseReporter, TextReporter

    return {
        "text": TextReporter,
        "concise": ConciseReporter,
        "json": JsonReporter,
        "github": GithubReporter,
        "sarif": SarifReporter,
    }
