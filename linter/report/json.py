"""JSON output: an array of findings with a fixed set of keys."""

from __future__ import annotations

import json

from modellint.finding import Finding
from modellint.report import Reporter, Summary


class JsonReporter(Reporter):
    def report(self, findings: list[Finding], summary: Summary) -> None:
        json.dump([f.to_json() for f in findings], self.stream, indent=2, ensure_ascii=False)
        self.stream.write("\n")
