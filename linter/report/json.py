"""JSON output: an array of findings with a fixed set of keys."""

from __future__ import annotations

import json
import re

from modellint.finding import Finding
from modellint.report import Reporter, Summary, statistics

# a file name's undecodable bytes (surrogateescape); no UTF-8 stream can write them raw
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonReporter(Reporter):
    def report(self, findings: list[Finding], summary: Summary) -> None:
        if summary.statistics:  # ruff's `--statistics --output-format json`: the counts alone
            rows: list[dict] = [{"code": row.code, "name": row.name, "count": row.count,
                                 "fixable": row.fixable} for row in statistics(findings, summary)]
        else:
            rows = [f.to_json() for f in findings]
        text = json.dumps(rows, indent=2, ensure_ascii=False)
        # surrogates occur only inside strings, where `\udcff` is their exact JSON escape
        self.stream.write(_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")
