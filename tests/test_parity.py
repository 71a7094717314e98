"""docs/parity.md stays true: every TorchFix and torch-preflight code has a row, every
modellint code a row names exists, and modellint reports the covering code on the row's
fixture (fixtures/parity/<peer>_<code>.py, a file of our own that the peer flags too).

A fixture's first line may hold the modellint settings of its row:
`# parity-config: extend-select=ML309; target-torch-version=2.4` (select, extend-select,
target-torch-version, target-gpu-memory; `runtime` and `device=...` for runtime rows).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from modellint.config import Config, enabled_codes
from modellint.rule import StaticRule
from modellint.static.engine import lint_source
from modellint.testing import registry

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "parity.md"
FIXTURES = ROOT / "fixtures" / "parity"

# `torchfix --help` of TorchFix 0.7.0 ("Available rules: ...")
TORCHFIX_CODES = (
    "TOR001", "TOR002", "TOR003", "TOR004", "TOR101", "TOR102", "TOR103", "TOR104", "TOR105",
    "TOR106", "TOR107", "TOR201", "TOR202", "TOR203", "TOR401", "TOR901",
)
# `torch-preflight rules` of torch-preflight 0.5.0 (it has no TG009)
PREFLIGHT_CODES = (
    "TG001", "TG002", "TG003", "TG004", "TG005", "TG006", "TG007", "TG008", "TG010", "TG011",
    "TG012", "TG013", "TG014",
)
PEER_CODES = {"torchfix": TORCHFIX_CODES, "torch-preflight": PREFLIGHT_CODES}
NOT_COVERED = "not covered"
ML_CODE = re.compile(r"^ML\d{3}$")


def read_table(path: Path = TABLE) -> list[dict[str, str]]:
    """The rows of the parity table whose first cell names a peer."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in PEER_CODES:
            peer, code, flags, modellint, config, differs = cells
            rows.append({"peer": peer, "code": code, "flags": flags, "modellint": modellint,
                         "config": config, "differs": differs})
    return rows


ROWS = read_table()


def covering(row: dict[str, str]) -> list[str]:
    return [code.strip() for code in row["modellint"].split(",")]


def fixture_path(row: dict[str, str]) -> Path:
    return FIXTURES / f"{row['peer'].replace('-', '_')}_{row['code']}.py"


def fixture_config(path: Path) -> dict[str, str]:
    """The `# parity-config:` settings on the fixture's first line (`runtime` -> "")."""
    first = path.read_text(encoding="utf-8").splitlines()[0]
    match = re.match(r"#\s*parity-config:\s*(.*)$", first)
    settings: dict[str, str] = {}
    if match:
        for item in match.group(1).split(";"):
            key, _, value = item.strip().partition("=")
            settings[key.strip()] = value.strip()
    return settings


def _codes(value: str) -> list[str]:
    return [code.strip() for code in value.split(",") if code.strip()]


def config_for(settings: dict[str, str]) -> Config:
    config = Config()
    if "select" in settings:
        config.select = _codes(settings["select"])
    config.extend_select = _codes(settings.get("extend-select", ""))
    if "target-torch-version" in settings:
        config.target_torch_version = tuple(
            int(part) for part in settings["target-torch-version"].split(".")
        )
    config.target_gpu_memory = settings.get("target-gpu-memory")
    return config


COVERED = [row for row in ROWS if row["modellint"] != NOT_COVERED]
STATIC_ROWS = [row for row in COVERED if "runtime" not in fixture_config(fixture_path(row))]
RUNTIME_ROWS = [row for row in COVERED if "runtime" in fixture_config(fixture_path(row))]


def _id(row: dict[str, str]) -> str:
    return row["code"]


def test_every_peer_code_has_exactly_one_row():
    found = [(row["peer"], row["code"]) for row in ROWS]
    expected = [(peer, code) for peer, codes in PEER_CODES.items() for code in codes]
    assert sorted(found) == sorted(expected)


def test_covering_codes_are_registered():
    rules = registry().rules
    for row in COVERED:
        for code in covering(row):
            assert ML_CODE.match(code), f"{row['code']}: {code!r} is not a modellint code"
            assert code in rules, f"{row['code']}: {code} is not a registered modellint rule"


def test_uncovered_rows_state_a_reason_and_have_no_fixture():
    uncovered = [row for row in ROWS if row["modellint"] == NOT_COVERED]
    for row in uncovered:
        assert len(row["differs"].split()) >= 8, f"{row['code']}: no reason given"
        assert not fixture_path(row).exists(), f"{row['code']} is not covered but has a fixture"


def test_every_fixture_belongs_to_a_covered_row():
    expected = {fixture_path(row).name for row in COVERED}
    present = {path.name for path in FIXTURES.glob("*.py")}
    assert present == expected


def test_config_column_matches_the_rules_defaults():
    """A row whose rule is off by default says so (`extend-select`), and its fixture enables it."""
    rules = registry().rules
    for row in STATIC_ROWS:
        settings = fixture_config(fixture_path(row))
        off = [code for code in covering(row)
               if code in rules and not rules[code].default_enabled]
        if off:
            assert "extend-select" in row["config"], row["code"]
            assert set(off) <= set(_codes(settings.get("extend-select", ""))), row["code"]
        else:
            assert "extend-select" not in row["config"], row["code"]


@pytest.mark.parametrize("row", STATIC_ROWS, ids=_id)
def test_modellint_reports_the_fixture(row):
    path = fixture_path(row)
    config = config_for(fixture_config(path))
    rules = registry().rules
    enabled = enabled_codes(config, rules)
    static = [rules[code] for code in sorted(enabled)
              if isinstance(rules[code], type) and issubclass(rules[code], StaticRule)]
    result = lint_source(str(path), path.read_bytes(), static, config.rule_options())
    found = {finding.code for finding in result.findings}
    assert found & set(covering(row)), (
        f"{path.name}: expected {row['modellint']} (covering {row['peer']} {row['code']}), "
        f"got {sorted(found) or 'nothing'}"
    )


@pytest.mark.parametrize("row", RUNTIME_ROWS, ids=_id)
def test_modellint_reports_the_runtime_fixture(row, tmp_path):
    path = fixture_path(row)
    settings = fixture_config(path)
    lines = ["[tool.modellint]"]
    if settings.get("target-gpu-memory"):
        lines.append(f'target-gpu-memory = "{settings["target-gpu-memory"]}"')
    if settings.get("target-torch-version"):
        lines.append(f'target-torch-version = "{settings["target-torch-version"]}"')
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "modellint", "check", "--runtime", "--no-cache",
               "--exit-zero", "--format", "json", "--config", str(tmp_path / "pyproject.toml"),
               "--select", settings.get("select") or ",".join(covering(row))]
    if settings.get("device"):
        command += ["--device", settings["device"]]
    proc = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = {finding["code"] for finding in json.loads(proc.stdout)}
    assert found & set(covering(row)), (
        f"{path.name}: expected {row['modellint']} (covering {row['peer']} {row['code']}), "
        f"got {sorted(found) or 'nothing'}"
    )
