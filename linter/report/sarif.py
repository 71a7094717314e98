"""SARIF 2.1.0 output, as GitHub code scanning reads it (`github/codeql-action/upload-sarif`).

Locations are relative to the repository root (`$GITHUB_WORKSPACE` when set, else the enclosing
git work tree, else the current directory) through the `%SRCROOT%` base id; rules carry their
whole documentation as `help`, so code scanning shows the same text as `modellint rule CODE`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import modellint
from modellint.finding import Finding, Severity, make_finding
from modellint.report import Reporter, Summary

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SEVERITY = {level: severity for severity, level in LEVEL.items()}
# used when the installed distribution declares no project URL
DEFAULT_URI = "https://pypi.org/project/modellint/"
SRCROOT = "%SRCROOT%"
TOPICS = {
    "0": "engine", "1": "registration", "2": "forward", "3": "training", "4": "hooks",
    "5": "serialization", "6": "init", "7": "runtime", "9": "deprecated",
}


def information_uri() -> str:
    try:
        urls = importlib.metadata.metadata("modellint").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("homepage", "documentation", "repository", "source"):
            return url.strip()
    return DEFAULT_URI


def repository_root(environ=None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get("GITHUB_WORKSPACE"):
        return Path(os.path.abspath(environ["GITHUB_WORKSPACE"]))
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def artifact_location(path: str, root: Path) -> dict[str, str]:
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(root).as_posix()
    except ValueError:
        return {"uri": absolute.as_uri()}
    # a file name's undecodable bytes travel as themselves (%FF), like `as_uri` sends them
    return {"uri": urllib.parse.quote(relative, errors="surrogateescape"), "uriBaseId": SRCROOT}


def _tags(rule: Any, code: str) -> list[str]:
    tags = []
    digits = code.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if code.startswith("ML") and digits[:1] in TOPICS:
        tags.append(TOPICS[digits[0]])
    tags += list(getattr(rule, "passes", ()))
    if getattr(rule, "fix", None):
        tags.append("fixable")
    return tags


def rule_descriptor(code: str, rule: Any, finding: Finding) -> dict[str, Any]:
    """A `reportingDescriptor` for a rule that fired. `rule` is the rule class, or None for a
    code no loaded plugin registers (then only what the finding says is known)."""
    if rule is None:
        return {
            "id": code,
            "name": finding.name,
            "shortDescription": {"text": finding.name},
            "defaultConfiguration": {"level": LEVEL[finding.severity]},
        }
    documentation = rule.documentation()
    summary = rule.summary() or rule.name
    what = rule.doc_section("What it does") or summary
    text = documentation or summary
    descriptor: dict[str, Any] = {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": " ".join(what.split())},
        "help": {"text": text, "markdown": help_markdown(rule)},
        "defaultConfiguration": {
            "level": LEVEL[rule.severity],
            "enabled": bool(rule.default_enabled),
        },
        "properties": {"tags": _tags(rule, code)},
    }
    return descriptor


def help_markdown(rule: Any) -> str:
    """The rule's documentation as Markdown: its indented examples become fenced blocks."""
    lines = rule.documentation().splitlines()
    out = [f"**{rule.code} {rule.name}**: {lines[0] if lines else rule.name}"]
    block: list[str] = []

    def flush() -> None:
        while block and not block[-1].strip():
            block.pop()
        if block:
            out.extend(["```python", *(line[4:] for line in block), "```", ""])
        block.clear()

    for line in lines[1:]:
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line)
            continue
        flush()
        out.append(line)
    flush()
    return "\n".join(out)


class SarifReporter(Reporter):
    def report(self, findings: list[Finding], summary: Summary) -> None:
        json.dump(self.document(findings, summary), self.stream, indent=2, ensure_ascii=False)
        self.stream.write("\n")

    def document(self, findings: list[Finding], summary: Summary) -> dict[str, Any]:
        root = repository_root()
        rules: list[dict[str, Any]] = []
        index: dict[str, int] = {}
        results = []
        for finding in findings:
            if finding.code not in index:
                index[finding.code] = len(rules)
                rules.append(
                    rule_descriptor(finding.code, summary.rules.get(finding.code), finding)
                )
            end_line = max(finding.end_line, finding.line)
            end_column = finding.end_column
            if end_line == finding.line:
                end_column = max(end_column, finding.column)
            message = finding.message + (f" (from {finding.target})" if finding.target else "")
            region = {
                "startLine": max(finding.line, 1),
                "startColumn": max(finding.column, 1),
                "endLine": max(end_line, 1),
                "endColumn": max(end_column, 1),
            }
            cell: dict[str, Any] = {}
            if finding.cell is not None:
                # a notebook: viewers open the .ipynb file itself, so the region is the line of
                # its JSON that holds the cell's line; where in the cell is in the properties
                # and the message
                line = max(finding.notebook_line, 1)
                region = {"startLine": line, "endLine": line}
                cell = {"cell": finding.cell, "cellLine": finding.line,
                        "cellColumn": finding.column, "cellEndLine": end_line,
                        "cellEndColumn": end_column}
                message = f"cell {finding.cell}, line {finding.line}: {message}"
            results.append(
                {
                    "ruleId": finding.code,
                    "ruleIndex": index[finding.code],
                    "level": LEVEL[finding.severity],
                    "message": {"text": message},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": artifact_location(finding.path, root),
                                "region": region,
                            }
                        }
                    ],
                    **({"relatedLocations": [
                        {
                            "id": number,
                            "physicalLocation": {
                                "artifactLocation": artifact_location(related.path, root),
                                "region": {"startLine": max(related.line, 1)},
                            },
                            "message": {"text": related.message},
                        }
                        for number, related in enumerate(finding.related)
                    ]} if finding.related else {}),
                    "properties": {
                        "pass": finding.pass_,
                        "fixable": finding.fixable,
                        **({"fix": finding.fix.applicability} if finding.fix else {}),
                        **cell,
                    },
                }
            )
        return {
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "modellint",
                            "version": modellint.__version__,
                            "semanticVersion": modellint.__version__,
                            "informationUri": information_uri(),
                            "rules": rules,
                        }
                    },
                    "originalUriBaseIds": {SRCROOT: {"uri": root.as_uri() + "/"}},
                    "columnKind": "unicodeCodePoints",
                    "results": results,
                    "properties": {"filesChecked": summary.files_checked,
                                   "notebooksChecked": summary.notebooks_checked},
                }
            ],
        }


def files_checked(document: dict[str, Any]) -> int:
    return sum(run.get("properties", {}).get("filesChecked", 0) for run in document.get("runs", []))


def notebooks_checked(document: dict[str, Any]) -> int:
    return sum(run.get("properties", {}).get("notebooksChecked", 0)
               for run in document.get("runs", []))


def findings_from_sarif(document: dict[str, Any]) -> list[Finding]:
    """The findings a SARIF log of this reporter holds (the GitHub Action reads its own SARIF
    file back to annotate without running the checks twice)."""
    findings = []
    for run in document.get("runs", []):
        rules = run["tool"]["driver"].get("rules", [])
        bases = {
            key: urllib.parse.unquote(
                urllib.parse.urlparse(value["uri"]).path, errors="surrogateescape"
            )
            for key, value in run.get("originalUriBaseIds", {}).items()
        }
        for result in run.get("results", []):
            location = result["locations"][0]["physicalLocation"]
            artifact, region = location["artifactLocation"], location["region"]
            uri = urllib.parse.unquote(
                urllib.parse.urlparse(artifact["uri"]).path, errors="surrogateescape"
            )
            base = bases.get(artifact.get("uriBaseId", ""))
            path = os.path.join(base, uri) if base else uri
            rule = rules[result["ruleIndex"]] if "ruleIndex" in result else {}
            properties = result.get("properties", {})
            cell = properties.get("cell")
            message = result["message"]["text"]
            if isinstance(cell, int) and not isinstance(cell, bool):
                # a notebook's finding: back to its cell's line and column
                prefix = f"cell {cell}, line {properties.get('cellLine', 1)}: "
                message = message.removeprefix(prefix)
                notebook_line = region["startLine"]
                region = {
                    "startLine": properties.get("cellLine", 1),
                    "startColumn": properties.get("cellColumn", 1),
                    "endLine": properties.get("cellEndLine", properties.get("cellLine", 1)),
                    "endColumn": properties.get("cellEndColumn", 1),
                }
            else:
                cell, notebook_line = None, 0
            findings.append(make_finding(
                None, result["ruleId"], message, path, region["startLine"],
                region.get("startColumn", 1), region.get("endLine", region["startLine"]),
                region.get("endColumn", region.get("startColumn", 1)),
                name=rule.get("name", result["ruleId"]),
                severity=SEVERITY[result.get("level", "warning")],
                pass_=properties.get("pass", "static"), cell=cell, notebook_line=notebook_line,
            ))
    return findings
