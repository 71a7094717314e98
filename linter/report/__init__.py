"""Reporters turn findings into output. Built-in ones register through the plugin contract
(`modellint_add_reporters`) like any third-party reporter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

from modellint.finding import Finding


@dataclass
class Summary:
    files_checked: int = 0
    fixed: int = 0
    # rule code -> rule class, for reporters that describe rules (SARIF, GitHub summary)
    rules: dict[str, Any] = field(default_factory=dict)
    statistics: bool = False
    quiet: bool = False
    color: bool = False
    fix_mode: bool = False
    unsafe_fixes: bool = False


class Reporter:
    """Subclass and register under a format name with `modellint_add_reporters`."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def report(self, findings: list[Finding], summary: Summary) -> None:
        raise NotImplementedError
