"""A rule's documentation as `modellint rules`, `modellint rule` and the language server's
hover show it."""

from __future__ import annotations

import io


def rule_row(rule) -> dict[str, str]:
    """A rule's line in `modellint rules` and the README's table."""
    return {
        "code": rule.code,
        "name": rule.name,
        "pass": "+".join(rule.passes),
        "default": "on" if rule.default_enabled else "off",
        "fix": rule.fix or "",
        "fix_availability": rule.fix_availability if rule.fix else "",
        "summary": rule.summary(),
    }


def rule_metadata(rule) -> dict:
    """Everything `modellint rule` knows of a rule, for documentation sites and editors."""
    from modellint.rule import Valid

    return {
        **rule_row(rule),
        "passes": list(rule.passes),
        "severity": rule.severity.value,
        "default_enabled": bool(rule.default_enabled),
        "fix": rule.fix or None,
        "fix_availability": rule.fix_availability if rule.fix else None,
        "documentation": rule.documentation(),
        "invalid": [{"code": e.code, "line": e.line} for e in rule.invalid],
        "valid": [e.code if isinstance(e, Valid) else e for e in rule.valid],
    }


def rules_table(rules) -> str:
    """`modellint rules`: one line per rule."""
    rows = [rule_row(rule) for rule in rules]
    widths = {key: max(len(key), *(len(r[key]) for r in rows)) for key in ("code", "name", "pass")}
    header = (
        f"{'code':<{widths['code']}}  {'name':<{widths['name']}}  {'pass':<{widths['pass']}}"
        "  default  fix"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['code']:<{widths['code']}}  {r['name']:<{widths['name']}}  "
            f"{r['pass']:<{widths['pass']}}  {r['default']:<7}  {r['fix']}"
            f"{' (sometimes)' if r['fix_availability'] == 'sometimes' else ''}"
        )
    return "\n".join(lines)


def render_rule_doc(rule) -> str:
    from modellint.rule import Valid

    out = io.StringIO()
    out.write(f"# {rule.code} {rule.name}\n\n")
    out.write(
        f"Pass: {'+'.join(rule.passes)}. Severity: {rule.severity.value}. "
        f"Default: {'on' if rule.default_enabled else 'off'}. "
        f"Fix: {rule.fix_description()}.\n\n"
    )
    out.write(rule.documentation() + "\n")
    if rule.invalid:
        out.write("\n## Flagged examples\n")
        for example in rule.invalid:
            out.write(f"\n```python\n{example.code.strip()}\n```\n(line {example.line})\n")
    if rule.valid:
        out.write("\n## Not flagged\n")
        for example in rule.valid:
            code = example.code if isinstance(example, Valid) else example
            out.write(f"\n```python\n{code.strip()}\n```\n")
    return out.getvalue()
