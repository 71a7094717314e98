"""Print the README's rule table (Markdown) from the registered rules:
`python scripts/rules_table.py`."""

from modellint.testing import registry


def main() -> None:
    print("| code | name | pass | default | fix | what it finds |")
    print("|---|---|---|---|---|---|")
    for code, rule in sorted(registry().rules.items()):
        print(
            f"| {code} | {rule.name} | {'+'.join(rule.passes)} | "
            f"{'on' if rule.default_enabled else 'off'} | {rule.fix or ''} | "
            f"{rule.summary().replace('|', '/')} |"
        )


if __name__ == "__main__":
    main()
